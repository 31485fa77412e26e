"""Elementwise math beyond arithmetic: trigonometric and hyperbolic functions, exp2/log2/log10/
log1p/expm1/erf, rounding (round, floor, ceil, trunc), copysign, atan2, logaddexp, lerp, and
clamp with tensor bounds.

Transcendentals stay NumPy calls (no scalar expression: NumPy's SIMD loops differ from libm in
the last bit); rounding, copysign, lerp and clamp have exact scalar expressions, so they join
fused kernels. Forwards write ``out`` only in their last NumPy call.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.elementwise import broadcast_error, loop_operands, loop_output, loop_result
from staticgrad.ops.registry import OPS, OpDef, Save, jit_loops, lit, register, with_emit

LN2 = math.log(2.0)
LN10 = math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def kernel_not_implemented(kernel: str, np_dtype) -> NotImplementedError:
    """PyTorch's error for a kernel that has no loop for a dtype (``"silu_cpu" not implemented for 'Long'``)."""
    name = _dtypes.from_numpy_dtype(np_dtype).tensor_type[:-6]
    return NotImplementedError(f'"{kernel}" not implemented for \'{name}\'')


def into(result, out):
    """``result`` written into ``out`` when one is given."""
    if out is None:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


def _ufunc_emit(ufunc: str, arity: int = 1):
    def emit(ins, out, at, shapes):
        return f"np.{ufunc}({', '.join(ins[:arity])}, out={out})"
    return emit


# ---- transcendental unary ops: integer and bool inputs give the default float --------------------

def _one_plus_square(F, x):
    return F.add_scalar(x * x, other=1.0)


def _one_minus_square(F, x):
    return F.rsub_scalar(x * x, other=1.0)


# name, NumPy ufunc, node name, saved slot ("self" or "result"), gradient(F, grad, saved)
_TRANSCENDENTALS = (
    ("sin", "sin", "SinBackward0", "self", lambda F, g, x: g * F.cos(x)),
    ("cos", "cos", "CosBackward0", "self", lambda F, g, x: g * F.neg(F.sin(x))),
    ("tan", "tan", "TanBackward0", "result", lambda F, g, y: g * _one_plus_square(F, y)),
    ("asin", "arcsin", "AsinBackward0", "self", lambda F, g, x: g * F.rsqrt(_one_minus_square(F, x))),
    ("acos", "arccos", "AcosBackward0", "self", lambda F, g, x: F.neg(g) * F.rsqrt(_one_minus_square(F, x))),
    ("atan", "arctan", "AtanBackward0", "self", lambda F, g, x: g / _one_plus_square(F, x)),
    ("sinh", "sinh", "SinhBackward0", "self", lambda F, g, x: g * F.cosh(x)),
    ("cosh", "cosh", "CoshBackward0", "self", lambda F, g, x: g * F.sinh(x)),
    ("asinh", "arcsinh", "AsinhBackward0", "self", lambda F, g, x: g * F.rsqrt(_one_plus_square(F, x))),
    ("acosh", "arccosh", "AcoshBackward0", "self",
     lambda F, g, x: g * F.rsqrt(F.add_scalar(x * x, other=-1.0))),
    ("atanh", "arctanh", "AtanhBackward0", "self", lambda F, g, x: g / _one_minus_square(F, x)),
    ("exp2", "exp2", "Exp2Backward0", "result", lambda F, g, y: g * F.mul_scalar(y, other=LN2)),
    ("log2", "log2", "Log2Backward0", "self", lambda F, g, x: g / F.mul_scalar(x, other=LN2)),
    ("log10", "log10", "Log10Backward0", "self", lambda F, g, x: g / F.mul_scalar(x, other=LN10)),
    ("log1p", "log1p", "Log1PBackward0", "self", lambda F, g, x: g / F.add_scalar(x, other=1.0)),
    ("expm1", "expm1", "Expm1Backward0", "result", lambda F, g, y: g * F.add_scalar(y, other=1.0)),
)


def _transcendental(name, ufunc, node_name, saved, gradient):
    function = getattr(np, ufunc)
    save = Save("result", "result") if saved == "result" else Save("self", 0)
    register(OpDef(name, lambda a, out=None: function(a, out=out), "elementwise", node_name,
                   lambda F, g, s, at, need: (gradient(F, g, s[saved]),), (save,), "float"))
    with_emit(name, _ufunc_emit(ufunc))


for _spec in _TRANSCENDENTALS:
    _transcendental(*_spec)


def _no_inplace_derivative(name: str, node_name: str) -> None:
    """``<name>_inplace``: the in-place form, which PyTorch records with a node whose backward refuses."""
    def backward(F, g, s, at, need):
        raise NotImplementedError(f"the derivative for 'inplace version of {name}' is not implemented.")

    register(replace(OPS[name], name=name + "_inplace", node_name=node_name, backward=backward, saves=()))


for _name in ("asinh", "acosh", "atanh"):
    _no_inplace_derivative(_name, _name.capitalize() + "Backward1")


def _erf(a, out=None):
    """erf through staticgrad's Numba loop (libm's erf in float64; a correctly-rounding fit in
    float32; float16 computed in float32 and rounded once)."""
    (flat_a,), shape, dtype, work = loop_operands(a)
    flat = loop_output(flat_a.size, work, out, (a,))
    jit_loops().erf_array(flat_a, flat)
    return loop_result(flat, shape, dtype, out)


register(OpDef("erf", _erf, "elementwise", "ErfBackward0",
               lambda F, g, s, at, need: (
                   g * F.mul_scalar(F.exp(F.neg(s["self"] * s["self"])), other=TWO_OVER_SQRT_PI),),
               (Save("self", 0),), "float"))


# ---- rounding: integer inputs are returned as they are; the gradient is zero -----------------------

def _rounding(name, ufunc, node_name):
    function = getattr(np, ufunc)

    def forward(a, out=None):
        if a.dtype.kind != "f":
            return into(a.copy() if out is None else a, out)
        return function(a, out=out)

    register(OpDef(name, forward, "elementwise", node_name, lambda F, g, s, at, need: (F.zeros_like(g),), (),
                   "same", lambda x, at: f"np.{ufunc}({x[0]})"))


for _name, _ufunc, _node in (("floor", "floor", "FloorBackward0"), ("ceil", "ceil", "CeilBackward0"),
                             ("trunc", "trunc", "TruncBackward0"), ("round", "rint", "RoundBackward0")):
    _rounding(_name, _ufunc, _node)


def _round_decimals(a, out=None, decimals=0):
    """PyTorch's round to ``decimals`` places: rint(a * 10^d) / 10^d, or rint(a / 10^-d) * 10^-d
    for negative d, the power of ten in the tensor's dtype."""
    T = a.dtype.type
    if decimals >= 0:
        scale = T(10.0 ** decimals)
        return np.true_divide(np.rint(np.multiply(a, scale)), scale, out=out)
    scale = T(10.0 ** -decimals)
    return np.multiply(np.rint(np.true_divide(a, scale)), scale, out=out)


def _round_decimals_expr(x, at):
    decimals = at["decimals"]
    if decimals >= 0:
        scale = lit(10.0 ** decimals)
        return f"(np.rint({x[0]} * {scale}) / {scale})"
    scale = lit(10.0 ** -decimals)
    return f"(np.rint({x[0]} / {scale}) * {scale})"


register(OpDef("round_decimals", _round_decimals, "elementwise", "RoundBackward1",
               lambda F, g, s, at, need: (F.zeros_like(g),), (), "same", _round_decimals_expr))


# ---- copysign, atan2, logaddexp ----------------------------------------------------------------------

def _copysign_backward(F, g, s, at, need):
    """d copysign(x, y) / dx = result / x, 0 where x == 0: sign(x) * sign(result), with no division."""
    grad = g * (F.sign(s["self"]) * F.sign(s["result"])) if need[0] else None
    return (grad,) + ((F.zeros_like(g) if need[1] else None,) if len(need) > 1 else ())


register(OpDef("copysign", lambda a, b, out=None: np.copysign(a, b, out=out), "elementwise", "CopysignBackward0",
               _copysign_backward, (Save("self", 0), Save("result", "result")), "float",
               lambda x, at: f"np.copysign({x[0]}, {x[1]})", broadcast_error))

register(OpDef("copysign_scalar", lambda a, out=None, other=1.0: np.copysign(a, a.dtype.type(other), out=out),
               "elementwise", "CopysignBackward1", _copysign_backward, (Save("self", 0), Save("result", "result")),
               "float", lambda x, at: f"np.copysign({x[0]}, {lit(at['other'])})"))


def _atan2_backward(F, g, s, at, need):
    a, b = s["self"], s["other"]
    scale = g * F.reciprocal(a * a + b * b)
    return (scale * b if need[0] else None, F.neg(scale) * a if need[1] else None)


register(OpDef("atan2", lambda a, b, out=None: np.arctan2(a, b, out=out), "elementwise", "Atan2Backward0",
               _atan2_backward, (Save("self", 0), Save("other", 1)), "float", None, broadcast_error))
with_emit("atan2", _ufunc_emit("arctan2", 2))


def _logaddexp(a, b, out=None):
    if a.dtype.kind != "f":
        raise kernel_not_implemented("logaddexp_cpu", a.dtype)
    return np.logaddexp(a, b, out=out)


def _logaddexp_backward(F, g, s, at, need):
    a, b = s["self"], s["other"]
    grad_a = g / F.add_scalar(F.exp(b - a), other=1.0) if need[0] else None
    grad_b = g / F.add_scalar(F.exp(a - b), other=1.0) if need[1] else None
    return grad_a, grad_b


register(OpDef("logaddexp", _logaddexp, "elementwise", "LogaddexpBackward0", _logaddexp_backward,
               (Save("self", 0), Save("other", 1)), "promote", None, broadcast_error))


# ---- lerp: start + weight * (end - start), in PyTorch's two forms by the weight's size ---------------

def _lerp_scalar(a, b, out=None, weight=0.5):
    """PyTorch's rounding: one fused multiply-add per element (see loops.lerp_scalar_array)."""
    (flat_a, flat_b), shape, dtype, work = loop_operands(a, b)
    flat = loop_output(flat_a.size, work, out, (a, b), elementwise=True)
    T = work.type
    jit_loops().lerp_scalar_array(flat_a, flat_b, T(weight), T(1.0) - T(weight), bool(abs(weight) < 0.5), flat)
    return loop_result(flat, shape, dtype, out)


def _lerp_scalar_expr(x, at):
    weight = at["weight"]
    if not isinstance(weight, (int, float)):   # read at replay time: the branch is taken in the kernel
        w = lit(weight)
        return (f"(fma({w}, ({x[1]} - {x[0]}), {x[0]}) if abs({w}) < T(0.5) "
                f"else fma(-({x[1]} - {x[0]}), (T(1.0) - {w}), {x[1]}))")
    if abs(weight) < 0.5:
        return f"fma({lit(weight)}, ({x[1]} - {x[0]}), {x[0]})"
    return f"fma(-({x[1]} - {x[0]}), (T(1.0) - {lit(weight)}), {x[1]})"


register(OpDef("lerp_scalar_weight", _lerp_scalar, "elementwise", "LerpBackward0",
               lambda F, g, s, at, need: (F.mul_scalar(g, other=1.0 - s["weight"]) if need[0] else None,
                                          F.mul_scalar(g, other=s["weight"]) if need[1] else None),
               (Save("weight", "attr:weight", freed=False),), "same", _lerp_scalar_expr, broadcast_error))


def _lerp(a, b, w, out=None):
    """lerp with a weight tensor, each element rounded as loops.lerp_array says."""
    (flat_a, flat_b, flat_w), shape, dtype, work = loop_operands(a, b, w)
    flat = loop_output(flat_a.size, work, out, (a, b, w), elementwise=True)
    jit_loops().lerp_array(flat_a, flat_b, flat_w, work.type(1.0), work.type(0.5), flat)
    return loop_result(flat, shape, dtype, out)


def _lerp_backward(F, g, s, at, need):
    w = s["weight"]
    return (g * F.rsub_scalar(w, other=1.0) if need[0] else None,
            g * w if need[1] else None,
            g * (s["end"] - s["self"]) if need[2] else None)


register(OpDef("lerp", _lerp, "elementwise", "LerpBackward1", _lerp_backward,
               (Save("weight", 2, when=(0, 1)), Save("self", 0, when=(2,)), Save("end", 1, when=(2,))), "same",
               lambda x, at: (f"(fma({x[2]}, ({x[1]} - {x[0]}), {x[0]}) if abs({x[2]}) < T(0.5) "
                              f"else fma(-({x[1]} - {x[0]}), (T(1.0) - {x[2]}), {x[1]}))"),
               broadcast_error))


# ---- clamp with tensor bounds: max(x, min) then min(., max), NaN in x kept --------------------------

def _clamp_tensor(a, *bounds, out=None, has_min=True, has_max=True):
    if has_min and has_max:
        if a.dtype.kind == "b":  # one bound alone is a maximum or minimum, which bool has
            raise NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'")
        return np.minimum(np.maximum(a, bounds[0]), bounds[1], out=out)
    if has_min:
        return np.maximum(a, bounds[0], out=out)
    return np.minimum(a, bounds[0], out=out)


def _clamp_tensor_backward(F, g, s, at, need):
    """PyTorch's clamp gradients: to x inside the bounds; to min where x < min (and min < max),
    to max where x > max (or max < min, where max wins)."""
    x, zero = s["self"], F.zeros_like(g)
    has_min, has_max = at["has_min"], at["has_max"]
    lo = s["min"] if has_min else None
    hi = s["max"] if has_max else None
    grads = [None]
    if need[0]:
        if has_min and has_max:
            inside = F.logical_and(F.ge(x, lo), F.le(x, hi))
        else:
            inside = F.ge(x, lo) if has_min else F.le(x, hi)
        grads[0] = F.where(inside, g, zero)
    if has_min:
        below = F.lt(x, lo)
        grads.append(F.where(F.logical_and(below, F.lt(lo, hi)) if has_max else below, g, zero) if need[1] else None)
    if has_max:
        above = F.gt(x, hi)
        if has_min:
            above = F.logical_not(F.logical_and(F.logical_not(above), F.logical_not(F.lt(hi, lo))))
        grads.append(F.where(above, g, zero) if need[-1] else None)
    return tuple(grads)


def _maximum_expr(a: str, b: str) -> str:
    """NumPy's maximum on scalars: b on ties, a NaN in either side kept."""
    return f"({a} if ({a} > {b} or {a} != {a}) else {b})"


def _minimum_expr(a: str, b: str) -> str:
    return f"({a} if ({a} < {b} or {a} != {a}) else {b})"


def _clamp_tensor_expr(x, at):
    if at["has_min"] and at["has_max"]:
        return _minimum_expr(_maximum_expr(x[0], x[1]), x[2])
    return _maximum_expr(x[0], x[1]) if at["has_min"] else _minimum_expr(x[0], x[1])


register(OpDef("clamp_tensor", _clamp_tensor, "elementwise", "ClampBackward0", _clamp_tensor_backward,
               (Save("self", 0), Save("min", 1), Save("max", -1)), "promote", _clamp_tensor_expr, broadcast_error))


# ---- clamp_min / clamp_max: clamp with one bound, under PyTorch's own node names -------------------

register(replace(OPS["clamp"], name="clamp_min", node_name="ClampMinBackward0",
                 saves=(Save("self", 0), Save("min", "attr:min", freed=False))))
register(replace(OPS["clamp"], name="clamp_max", node_name="ClampMaxBackward0",
                 saves=(Save("self", 0), Save("max", "attr:max", freed=False))))
register(replace(OPS["clamp_tensor"], name="clamp_min_tensor", node_name="ClampMinBackward1",
                 saves=(Save("self", 0), Save("min", 1))))
register(replace(OPS["clamp_tensor"], name="clamp_max_tensor", node_name="ClampMaxBackward1",
                 saves=(Save("self", 0), Save("max", 1))))
