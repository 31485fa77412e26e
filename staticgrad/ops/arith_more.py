"""More elementwise arithmetic: addcmul, addcdiv, hypot, xlogy and xlog1py (tensor or number on either
side), fmax, fmin, frac, sgn, deg2rad, rad2deg, nextafter, heaviside.

addcdiv, frac and the degree conversions have exact scalar expressions (the IEEE operations of
their NumPy forwards, in order), so they join fused kernels; the rest (addcmul among them: its FMA
is a Numba loop) stay calls of their forwards.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from staticgrad.ops.elementwise import broadcast_error, loop_operands, loop_output, loop_result
from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OPS, OpDef, Save, jit_loops, lit, register

DEGREES_TO_RADIANS = math.pi / 180.0
RADIANS_TO_DEGREES = 180.0 / math.pi


# ---- addcmul / addcdiv: self + value * t1 (* or /) t2, the value in the tensors' dtype --------------
#
# PyTorch's CPU loops round value * t1 first; addcmul then adds self and the product with t2 as one
# fused multiply-add (rounded once: a Numba loop, as NumPy has no FMA, and ``fma`` in fused kernels);
# addcdiv divides by t2, then adds self. float16 works in float32 and is rounded once at the end.

def _addcmul(a, b, c, out=None, value=1):
    if np.result_type(a, b, c).kind != "f":   # integers are exact either way; complex has no FMA here
        return np.add(a, np.multiply(np.multiply(np.result_type(a, b, c).type(value), b), c), out=out)
    (flat_a, flat_b, flat_c), shape, dtype, work = loop_operands(a, b, c)
    flat = loop_output(flat_a.size, work, out, (a, b, c))
    jit_loops().addcmul_array(flat_a, flat_b, flat_c, work.type(value), flat)
    return loop_result(flat, shape, dtype, out)


def _addcdiv(a, b, c, out=None, value=1):
    dtype = np.result_type(a, b, c)
    if dtype == np.float16:
        return into(_addcdiv(a.astype(np.float32), b.astype(np.float32), c.astype(np.float32), value=value)
                    .astype(np.float16), out)
    return np.add(a, np.true_divide(np.multiply(dtype.type(value), b), c), out=out)


def _addcmul_backward(F, g, s, at, need):
    """PyTorch's formulas: grad * (t2 * value), grad * (t1 * value), the value a C++ Scalar (MulBackward1)."""
    value = s["value"]
    return (g if need[0] else None,
            g * F.mul_scalar_cpp(s["tensor2"], other=value) if need[1] else None,
            g * F.mul_scalar_cpp(s["tensor1"], other=value) if need[2] else None)


def _addcdiv_backward(F, g, s, at, need):
    """PyTorch's formulas and their rounding: grad * (value / t2) (the value a wrapped 0-dim tensor of
    t2's dtype, DivBackward0), -grad * ((value * t1) / (t2 * t2))."""
    value, t1, t2 = s["value"], s.get("tensor1"), s["tensor2"]
    grad_t1 = grad_t2 = None
    if need[1]:
        grad_t1 = g * F.div(F.full(shape=(), value=value, dtype=t2._data.dtype), t2)
    if need[2]:
        grad_t2 = F.neg(g) * F.div(F.mul_scalar_cpp(t1, other=value), t2 * t2)
    return g if need[0] else None, grad_t1, grad_t2


register(OpDef("addcmul", _addcmul, "elementwise", "AddcmulBackward0", _addcmul_backward,
               (Save("value", "attr:value", freed=False), Save("tensor1", 1, when=(2,)), Save("tensor2", 2, when=(1,))),
               "promote", lambda x, at: f"fma(({lit(at['value'])} * {x[1]}), {x[2]}, {x[0]})", broadcast_error))
register(OpDef("addcdiv", _addcdiv, "elementwise", "AddcdivBackward0", _addcdiv_backward,
               (Save("value", "attr:value", freed=False), Save("tensor1", 1, when=(2,)),
                Save("tensor2", 2, when=(1, 2))),
               "promote", lambda x, at: f"({x[0]} + (({lit(at['value'])} * {x[1]}) / {x[2]}))", broadcast_error))

# ---- hypot --------------------------------------------------------------------------------------------

def _hypot_backward(F, g, s, at, need):
    result = s["result"]
    return (g * s["self"] / result if need[0] else None, g * s["other"] / result if need[1] else None)


register(OpDef("hypot", lambda a, b, out=None: np.hypot(a, b, out=out), "elementwise", "HypotBackward0",
               _hypot_backward, (Save("self", 0), Save("other", 1), Save("result", "result")), "promote", None,
               broadcast_error))


# ---- xlogy / xlog1py: x * log(y) (log1p), 0 where x == 0 unless y is NaN ------------------------------

def _xlog(log):
    def value(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            product = np.multiply(x, log(y))
        return np.where((x == 0) & ~np.isnan(y), np.zeros((), product.dtype), product)
    return value


_XLOGY, _XLOG1PY = _xlog(np.log), _xlog(np.log1p)


def _pair(a, out, other, scalar_first, function):
    """function(a, other) or function(other, a): ``other`` a number in ``a``'s dtype."""
    number = np.asarray(other, a.dtype)
    return into(function(number, a) if scalar_first else function(a, number), out)


def _nonzero(F, x, like):
    return F.to_dtype(F.ne_scalar(x, other=0.0), dtype=like.dtype)


def _xlog_backward(name: str, one_plus: bool):
    """d/dx x log(y) = log(y) where x != 0 (the op itself on (x != 0, y)); d/dy = x / y (x / (1 + y))."""
    def denominator(F, y):
        return F.add_scalar(y, other=1.0) if one_plus else y

    def backward(F, g, s, at, need):
        x, y = s["self"], s["other"]
        return (g * getattr(F, name)(_nonzero(F, x, g), y) if need[0] else None,
                g * x / denominator(F, y) if need[1] else None)

    def backward_scalar(F, g, s, at, need):
        tensor, number = s["self"], s["number"]
        if at["scalar_first"]:  # number * log(tensor)
            return (F.mul_scalar(g, other=number) / denominator(F, tensor),)
        return (g * getattr(F, name + "_scalar")(_nonzero(F, tensor, g), other=number, scalar_first=False),)

    return backward, backward_scalar


for _name, _node, _function, _one_plus in (("xlogy", "XlogyBackward", _XLOGY, False),
                                           ("xlog1py", "SpecialXlog1PyBackward", _XLOG1PY, True)):
    _backward, _backward_scalar = _xlog_backward(_name, _one_plus)
    register(OpDef(_name, lambda a, b, out=None, _f=_function: into(_f(a, b), out), "elementwise", _node + "0",
                   _backward, (Save("self", 0), Save("other", 1)), "float", None, broadcast_error))
    register(OpDef(_name + "_scalar",
                   lambda a, out=None, other=0.0, scalar_first=False, _f=_function:
                       _pair(a, out, other, scalar_first, _f),
                   "elementwise", lambda at, _n=_node: _n + ("1" if at["scalar_first"] else "2"), _backward_scalar,
                   (Save("self", 0), Save("number", "attr:other", freed=False)), "float", None))


# ---- fmax / fmin: maximum and minimum that ignore a NaN ------------------------------------------------

def _fextreme_backward(compare: str):
    """The gradient goes to self where self wins (compare) or other is NaN, to other elsewhere."""
    def backward(F, g, s, at, need):
        x, y = s["self"], s["other"]
        self_wins = F.logical_or(getattr(F, compare)(x, y), F.isnan(y))
        zero = F.zeros_like(g)
        return (F.where(self_wins, g, zero) if need[0] else None, F.where(self_wins, zero, g) if need[1] else None)
    return backward


register(OpDef("fmax", lambda a, b, out=None: np.fmax(a, b, out=out), "elementwise", "FmaxBackward0",
               _fextreme_backward("ge"), (Save("self", 0), Save("other", 1)), "promote", None, broadcast_error))
register(OpDef("fmin", lambda a, b, out=None: np.fmin(a, b, out=out), "elementwise", "FminBackward0",
               _fextreme_backward("le"), (Save("self", 0), Save("other", 1)), "promote", None, broadcast_error))


# ---- frac, sgn, deg2rad, rad2deg ------------------------------------------------------------------------

register(OpDef("frac", lambda a, out=None: np.subtract(a, np.trunc(a), out=out), "elementwise", "FracBackward0",
               lambda F, g, s, at, need: (g,), (), "same", lambda x, at: f"({x[0]} - np.trunc({x[0]}))"))
register(OpDef("sgn", lambda a, out=None: np.sign(a, out=out), "elementwise", "SgnBackward0",
               lambda F, g, s, at, need: (F.zeros_like(g),), (), "same"))


def _scale(factor):
    def forward(a, out=None):
        return np.multiply(a, a.dtype.type(factor), out=out)
    return forward


register(OpDef("deg2rad", _scale(DEGREES_TO_RADIANS), "elementwise", "Deg2RadBackward0",
               lambda F, g, s, at, need: (F.mul_scalar(g, other=DEGREES_TO_RADIANS),), (), "float",
               lambda x, at: f"({x[0]} * {lit(DEGREES_TO_RADIANS)})"))
register(OpDef("rad2deg", _scale(RADIANS_TO_DEGREES), "elementwise", "Rad2DegBackward0",
               lambda F, g, s, at, need: (F.mul_scalar(g, other=RADIANS_TO_DEGREES),), (), "float",
               lambda x, at: f"({x[0]} * {lit(RADIANS_TO_DEGREES)})"))


# ---- nextafter, heaviside -------------------------------------------------------------------------------

register(OpDef("nextafter", lambda a, b, out=None: np.nextafter(a, b, out=out), "elementwise",
               "NextafterBackward0",
               lambda F, g, s, at, need: (g if need[0] else None, F.zeros_like(g) if need[1] else None),
               (), "promote", None, broadcast_error))


def _heaviside(a, values, out=None):
    """values where a == 0, else a > 0 (as the tensors' dtype)."""
    return into(np.where(a == 0, values, (a > 0).astype(a.dtype)), out)


def _heaviside_backward(F, g, s, at, need):
    raise RuntimeError("derivative for aten::heaviside is not implemented")


register(OpDef("heaviside", _heaviside, "elementwise", "torch::autograd::NotImplemented", _heaviside_backward,
               (), "promote", None, broadcast_error))


# A tensor times a number in PyTorch's C++ composites (at::mul(Tensor, Scalar)): MulBackward1, no
# wrapped-number edge.
register(replace(OPS["mul_scalar"], name="mul_scalar_cpp", node_name="MulBackward1", wrapped_scalar=False))
# and a tensor plus or minus one (at::add / at::sub (Tensor, Scalar)): AddBackward1, SubBackward1
register(replace(OPS["add_scalar"], name="add_scalar_cpp", node_name="AddBackward1", wrapped_scalar=False))
register(replace(OPS["sub_scalar"], name="sub_scalar_cpp", node_name="SubBackward1", wrapped_scalar=False))
