"""Integer-aware division and casts: floor_divide, remainder, fmod, div with a rounding mode, the
bitcast view(dtype), and PyTorch's integer power. Division by an integer zero raises PyTorch's
"ZeroDivisionError"; float ones follow IEEE. The float forms have exact scalar expressions (the
NumPy loops compute fmod/floor the same way, Python's float floordiv algorithm), so they fuse."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.elementwise import broadcast_error
from staticgrad.ops.registry import OPS, OpDef, Save, amend, lit, register

NOT_IMPLEMENTED_NODE = "torch::autograd::NotImplemented"
_CPU_NAMES = {"floor": "div_floor_cpu", "trunc": "div_trunc_cpu", "remainder": "remainder_cpu", "fmod": "fmod_cpu"}


def _integer_operands(kind: str, a, b):
    """Refuse bool (PyTorch has no such kernel) and an integer zero divisor."""
    if a.dtype.kind == "b":
        raise NotImplementedError(f"\"{_CPU_NAMES[kind]}\" not implemented for 'Bool'")
    if a.dtype.kind in "iu" and np.any(np.asarray(b) == 0):
        raise RuntimeError("ZeroDivisionError")


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def floor_quotient(a, b, out=None):
    """floor(a / b) as PyTorch's div_floor: NumPy's floor_divide (Python's algorithm for floats;
    integer overflow, INT_MIN // -1, wraps as in C)."""
    _integer_operands("floor", a, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.floor_divide(a, b, out=out)


def trunc_quotient(a, b, out=None):
    """a / b rounded toward zero: trunc(a / b) for floats, C division for integers."""
    _integer_operands("trunc", a, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if a.dtype.kind == "f":
            return np.trunc(np.true_divide(a, b), out=out)
        quotient = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return _into(quotient + inexact.astype(quotient.dtype), out)


def remainder(a, b, out=None):
    """a - floor(a / b) * b with PyTorch's sign rule: the result takes b's sign, and a zero keeps
    fmod's sign (NumPy's remainder would give a zero b's sign)."""
    _integer_operands("remainder", a, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if a.dtype.kind != "f":
            return np.remainder(a, b, out=out)
        mod = np.fmod(a, b)
        wrong_sign = (mod != 0) & ((np.asarray(b) < 0) != (mod < 0))
        return _into(np.where(wrong_sign, mod + b, mod), out)


def fmod(a, b, out=None):
    _integer_operands("fmod", a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b, out=out)


def _remainder_expr(a: str, b: str) -> str:
    mod = f"np.fmod({a}, {b})"
    return f"(({mod} + {b}) if ({mod} != T(0.0) and (({b} < T(0.0)) != ({mod} < T(0.0)))) else {mod})"


def _not_implemented(name: str):
    def backward(F, g, s, at, need):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return backward


def _pair(name, forward, node, backward, saves, expr):
    """``name`` on two tensors and ``name_scalar`` with a Python number as ``other``."""
    register(OpDef(name, lambda a, b, out=None: forward(a, b, out), "elementwise", node[0], backward[0],
                   saves, "promote", expr and (lambda x, at: expr(x[0], x[1])), broadcast_error))
    register(OpDef(name + "_scalar", lambda a, out=None, other=1: forward(a, np.asarray(other, a.dtype), out),
                   "elementwise", node[1], backward[1], (), "promote",
                   expr and (lambda x, at: expr(x[0], lit(at["other"]))), wrapped_scalar=True))


_pair("floor_divide", floor_quotient, (NOT_IMPLEMENTED_NODE,) * 2, (_not_implemented("floor_divide"),) * 2, (),
      lambda a, b: f"({a} // {b})")


def _rounded_backward(F, g, s, at, need):
    """div with a rounding mode is flat almost everywhere: zero gradients (PyTorch's DivBackward2)."""
    zero = F.zeros_like(g)
    return tuple(zero if n else None for n in need)


register(OpDef("div_mode", lambda a, b, out=None, rounding_mode="floor": (
    floor_quotient if rounding_mode == "floor" else trunc_quotient)(a, b, out),
    "elementwise", "DivBackward2", _rounded_backward, (), "promote",
    lambda x, at: f"({x[0]} // {x[1]})" if at["rounding_mode"] == "floor" else f"np.trunc({x[0]} / {x[1]})",
    broadcast_error))
register(OpDef("div_mode_scalar", lambda a, out=None, other=1, rounding_mode="floor": (
    floor_quotient if rounding_mode == "floor" else trunc_quotient)(a, np.asarray(other, a.dtype), out),
    "elementwise", "DivBackward2", _rounded_backward, (), "promote",
    lambda x, at: (f"({x[0]} // {lit(at['other'])})" if at["rounding_mode"] == "floor"
                   else f"np.trunc({x[0]} / {lit(at['other'])})"), wrapped_scalar=True))


def _quotient_backward(mode: str):
    """remainder/fmod: d/da = g, d/db = -g * (a / b rounded by ``mode``)."""
    def backward(F, g, s, at, need):
        grad_other = None
        if need[1]:
            grad_other = F.neg(g) * F.div_mode(s["self"], s["other"], rounding_mode=mode)
        return (g if need[0] else None), grad_other
    return backward


_SAVES = (Save("self", 0, when=(1,)), Save("other", 1, when=(1,)))

# A number first (2.5 % x): PyTorch's remainder.Scalar_Tensor, which has no derivative.
register(OpDef("rremainder_scalar", lambda a, out=None, other=1: remainder(np.asarray(other, a.dtype), a, out),
               "elementwise", NOT_IMPLEMENTED_NODE, _not_implemented("remainder"), (), "promote",
               lambda x, at: _remainder_expr(lit(at["other"]), x[0])))
_pair("remainder", remainder, ("RemainderBackward1", "RemainderBackward0"),
      (_quotient_backward("floor"), lambda F, g, s, at, need: (g,)), _SAVES, _remainder_expr)
_pair("fmod", fmod, ("FmodBackward1", "FmodBackward0"),
      (_quotient_backward("trunc"), lambda F, g, s, at, need: (g,)), _SAVES, lambda a, b: f"np.fmod({a}, {b})")


# ---- integer powers ----------------------------------------------------------------------------------

NEGATIVE_POWER = "Integers to negative integer powers are not allowed."


def integer_power(base, exponent, out=None):
    """base ** exponent on integers as PyTorch's powi: wrapping like C, and a negative exponent
    gives 1 for base 1, +-1 for base -1 (by the exponent's parity) and 0 otherwise."""
    base, exponent = np.asarray(base), np.asarray(exponent)
    dtype = np.result_type(base, exponent)
    negative = exponent < 0
    with np.errstate(over="ignore"):
        result = np.power(base.astype(dtype), np.where(negative, 0, exponent).astype(dtype))
    if np.any(negative):
        odd = (exponent % 2) != 0
        small = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0)).astype(dtype)
        result = np.where(negative, small, result)
    return _into(result, out)


def _pow(a, b, out=None):
    if a.dtype.kind in "biu":  # both: dispatch cast them to their promoted dtype
        return integer_power(a, b, out)
    return np.power(a, b, out=out)


def _pow_scalar_checked(float_forward):
    def forward(a, out=None, exponent=1):
        if a.dtype == np.bool_ and isinstance(exponent, (bool, np.bool_)):   # bool ** bool stays bool:
            return np.logical_or(a, not exponent, out=out)   # a ** True is a, a ** False is True
        if a.dtype.kind in "biu":
            if exponent < 0:
                raise RuntimeError(NEGATIVE_POWER)
            with np.errstate(over="ignore"):
                return np.power(a, a.dtype.type(exponent), out=out)
        return float_forward(a, out=out, exponent=exponent)
    return forward


def _rpow_scalar(a, out=None, base=1):
    if a.dtype.kind in "biu":
        return integer_power(np.asarray(base, a.dtype), a, out)
    return np.power(base, a, out=out)


# The pow family (staticgrad.ops.elementwise) with PyTorch's integer rules: these forwards take
# integers apart, and an integer base to a tensor exponent stays an integer (promotion, not float).
amend("pow", forward=_pow)
amend("pow_scalar", forward=_pow_scalar_checked(OPS["pow_scalar"].forward))
amend("rpow_scalar", forward=_rpow_scalar, dtype_rule="promote")


# ---- bitcast ---------------------------------------------------------------------------------------

def _view_dtype(a, out=None, dtype=None):
    return a.view(dtype)


register(OpDef("view_dtype", _view_dtype, "view", dtype_rule="attr"))
