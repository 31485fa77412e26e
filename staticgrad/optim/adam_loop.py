"""The Numba loop of an untraced Adam/AdamW step: one pass over a parameter does, per element,
exactly the IEEE operations the recorded ops do (neg, mul_scalar, add with alpha, lerp, addcmul,
sqrt, div, add_scalar), in their order and in the parameter's dtype, so an eager step and a replay
of the traced ops give the same bits. No fastmath: LLVM neither reassociates nor contracts into
FMAs; the fused multiply-adds are written as such, where PyTorch's kernels have them (add with
alpha, lerp, addcmul).

Loaded on the first untraced step, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.loops import fused_multiply_add
from staticgrad.ops.numba_cache import njit_cached


def _jit(function):
    return njit_cached(function, nogil=True, error_model="numpy")


# Where each constant sits in ``constants`` (an array of the parameter's dtype: NumPy's weak-scalar
# rule turns a Python number into that dtype before the op computes).
DECAY, ONE_MINUS_BETA1, BETA2, ONE_MINUS_BETA2, NEGATIVE_STEP_SIZE, BIAS_CORRECTION2_SQRT, EPS, ONE, HALF = range(9)


@_jit
def adam_update(param, grad, exp_avg, exp_avg_sq, constants, maximize, decoupled, l2):
    """One Adam step over flat arrays of one dtype, in place. ``constants[DECAY]`` is
    ``1 - lr * weight_decay`` when ``decoupled`` (AdamW), ``weight_decay`` when ``l2``."""
    decay, one_minus_beta1, beta2 = constants[DECAY], constants[ONE_MINUS_BETA1], constants[BETA2]
    one_minus_beta2, eps = constants[ONE_MINUS_BETA2], constants[EPS]
    negative_step_size, bias_correction2_sqrt = constants[NEGATIVE_STEP_SIZE], constants[BIAS_CORRECTION2_SQRT]
    one, half = constants[ONE], constants[HALF]
    for i in range(param.size):
        g = grad[i]
        if maximize:
            g = -g                                   # grad = -grad
        p = param[i]
        if decoupled:
            p = p * decay                            # p.mul_(1 - lr * weight_decay)
        elif l2:
            g = fused_multiply_add(p, decay, g)      # grad.add(p, alpha=weight_decay)
        m = exp_avg[i]
        d = g - m                                    # exp_avg.lerp_(grad, 1 - beta1)
        if abs(one_minus_beta1) < half:
            m = fused_multiply_add(one_minus_beta1, d, m)
        else:
            m = fused_multiply_add(-d, one - one_minus_beta1, g)
        v = exp_avg_sq[i] * beta2                    # exp_avg_sq.mul_(beta2)
        v = fused_multiply_add(one_minus_beta2 * g, g, v)   # .addcmul_(grad, grad, value=1 - beta2)
        exp_avg[i] = m
        exp_avg_sq[i] = v
        denom = np.sqrt(v) / bias_correction2_sqrt + eps
        param[i] = p + (m * negative_step_size) / denom
