"""More elementwise math with PyTorch's own nodes: logaddexp2, gcd and lcm (integers only, no
gradient), ldexp (x * 2**e), frexp (mantissa and int32 exponent), isin (membership, a bool mask),
and torch.normal with tensor arguments (random: re-drawn on every replay, zero gradients as PyTorch).

None has an exact scalar expression (NumPy's loops for these are not plain IEEE chains), so they stay
NumPy calls in replay.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from staticgrad.ops.elementwise import broadcast_error
from staticgrad.ops.factory import generator
from staticgrad.ops.math_ops import into, kernel_not_implemented
from staticgrad.ops.registry import OPS, OpDef, Save, register

LN2 = math.log(2.0)


# ---- logaddexp2: log2(2**a + 2**b) ---------------------------------------------------------------

def _logaddexp2(a, b, out=None):
    if a.dtype.kind != "f":
        raise kernel_not_implemented("logaddexp2_cpu", a.dtype)
    return np.logaddexp2(a, b, out=out)


def _logaddexp2_backward(F, g, s, at, need):
    """d/da = 1 / (1 + 2**(b - a)), and the same with a and b swapped."""
    a, b = s["self"], s["other"]
    return (g / F.add_scalar(F.exp2(b - a), other=1.0) if need[0] else None,
            g / F.add_scalar(F.exp2(a - b), other=1.0) if need[1] else None)


register(OpDef("logaddexp2", _logaddexp2, "elementwise", "Logaddexp2Backward0", _logaddexp2_backward,
               (Save("self", 0), Save("other", 1)), "promote", None, broadcast_error))


# ---- gcd, lcm: integer tensors only; no gradient ---------------------------------------------------

def _integer_pair(kernel: str, ufunc):
    def forward(a, b, out=None):
        if a.dtype.kind not in "iu":
            raise kernel_not_implemented(kernel, a.dtype)
        return ufunc(a, b, out=out)
    return forward


register(OpDef("gcd", _integer_pair("gcd_cpu", np.gcd), "elementwise", dtype_rule="promote", explain=broadcast_error))
register(OpDef("lcm", _integer_pair("lcm_cpu", np.lcm), "elementwise", dtype_rule="promote", explain=broadcast_error))


# ---- ldexp: input * 2**other (exact for integer exponents, as PyTorch's: no overflow of 2**other alone) ----

def _ldexp(a, e, out=None, dtype=None, power_dtype=None):
    x = a.astype(dtype, copy=False)
    if e.dtype.kind in "iub":
        return np.ldexp(x, e.astype(np.int64, copy=False), out=out)
    power = np.exp2(e.astype(power_dtype, copy=False))
    return np.multiply(x, power.astype(dtype, copy=False), out=out)


def _integer_power_of_two(e, out=None):
    """2**e in e's integer dtype, as PyTorch's integer pow computes it: 0 for a negative e."""
    return into(np.where(e < 0, 0, np.left_shift(np.ones_like(e), np.clip(e, 0, 8 * e.itemsize - 2))), out)


register(OpDef("integer_power_of_two", _integer_power_of_two, "elementwise", dtype_rule="same"))


def _ldexp_backward(F, g, s, at, need):
    """d/dx = 2**e (PyTorch computes it in e's dtype: an integer power, 0 for negative e); d/de = result * ln 2."""
    other = s["other"]
    power = F.exp2(other) if other._data.dtype.kind == "f" else F.integer_power_of_two(other)
    return (g * power if need[0] else None,
            F.mul_scalar_cpp(g * s["result"], other=LN2) if need[1] else None)


register(OpDef("ldexp", _ldexp, "elementwise", "LdexpBackward0", _ldexp_backward,
               (Save("other", 1, when=(0,)), Save("result", "result", when=(1,))), "attr", explain=broadcast_error))


# ---- frexp: mantissa in [0.5, 1) (sign kept) and an int32 exponent ---------------------------------

def _frexp(a, out=None):
    mantissa, exponent = np.frexp(a)
    return mantissa, exponent.astype(np.int32, copy=False)


register(OpDef("frexp", _frexp, "other", "FrexpBackward0",
               lambda F, g, s, at, need: (g[0] / F.exp2(s["exponent"]),),
               (Save("exponent", "result:1"),), "same"))


# ---- isin: whether each element occurs in test_elements --------------------------------------------

def _isin(elements, test, out=None, invert=False):
    return into(np.isin(elements, test, invert=invert), out)


register(OpDef("isin", _isin, "other", dtype_rule="bool"))


# ---- torch.normal with tensor mean and/or std: mean + std * N(0, 1), in the result's dtype ---------

STD_TENSOR_ERROR = "normal expects all elements of std >= 0.0"


def _draw(shape, dtype, source):
    return generator(source).standard_normal(shape).astype(dtype, copy=False)


def _check_std(std) -> None:
    if np.any(std < 0):
        raise RuntimeError(STD_TENSOR_ERROR)


def _normal_tensors(mean, std, out=None, source=None):
    _check_std(std)
    shape = np.broadcast_shapes(mean.shape, std.shape)
    draw = _draw(shape, mean.dtype, source)
    return into(np.add(np.multiply(draw, std.astype(mean.dtype, copy=False)), mean), out)


def _normal_mean_tensor(mean, out=None, std=1.0, source=None):
    draw = _draw(mean.shape, mean.dtype, source)
    return into(np.add(np.multiply(draw, mean.dtype.type(std)), mean), out)


def _normal_std_tensor(std, out=None, mean=0.0, source=None):
    _check_std(std)
    draw = _draw(std.shape, std.dtype, source)
    return into(np.add(np.multiply(draw, std), std.dtype.type(mean)), out)


def _zero_grads(F, g, s, at, need):
    """PyTorch's normal is not reparameterised: zero gradients to mean and std."""
    return tuple(F.zeros_like(g) if n else None for n in need)


register(OpDef("normal_tensors", _normal_tensors, "random", "NormalBackward3", _zero_grads, (), "same"))
register(OpDef("normal_mean_tensor", _normal_mean_tensor, "random", "NormalBackward1", _zero_grads, (), "same"))
register(OpDef("normal_std_tensor", _normal_std_tensor, "random", "NormalBackward2", _zero_grads, (), "same"))


# A tensor divided by a number in PyTorch's C++ composites (at::div(Tensor, Scalar)): DivBackward1, no
# wrapped-number edge (trapezoid's ``/ 2.``).
register(replace(OPS["div_scalar"], name="div_scalar_cpp", node_name="DivBackward1", wrapped_scalar=False))
