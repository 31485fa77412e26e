"""The Numba loop of an untraced SGD step with momentum: one pass over a parameter does, per
element, exactly the IEEE operations the recorded ops do (mul_scalar, add with alpha, add with
-lr), in their order and in the parameter's dtype, so an eager step and a replay of the traced ops
give the same bits; the multiply-adds are fused where PyTorch's add with an alpha fuses them.

Loaded on the first untraced step, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

from staticgrad.ops.loops import fused_multiply_add
from staticgrad.ops.numba_cache import njit_cached


def _jit(function):
    return njit_cached(function, nogil=True, error_model="numpy")


@_jit
def momentum_update(param, grad, buf, momentum, one_minus_dampening, plain_add, negative_lr):
    """buf = buf * momentum + (1 - dampening) * grad (a plain add when that factor is 1, as the op
    with alpha 1 is), then param = param - lr * buf; flat arrays of one dtype, numbers of it."""
    for i in range(param.size):
        b = buf[i] * momentum
        if plain_add:
            b = b + grad[i]
        else:
            b = fused_multiply_add(grad[i], one_minus_dampening, b)
        buf[i] = b
        param[i] = fused_multiply_add(b, negative_lr, param[i])
