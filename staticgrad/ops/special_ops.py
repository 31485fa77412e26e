"""Special functions: erfc, erfinv, lgamma, digamma, polygamma, mvlgamma, zeta, the Bessel functions
i0/i1 (and their exp-scaled forms), erfcx, log_ndtr, ndtri, entr, sinc, logit.

The gamma family, the inverses of erf and the Bessel functions run the float64 Numba loops of
``special_loops`` (NumPy has none of them); sinc, logit and entr are NumPy expressions of the
operations PyTorch's kernels perform. None has a scalar expression: their transcendentals are NumPy's
or libm's, so they stay unfused. Backward formulas are PyTorch's (derivatives.yaml), written with
staticgrad ops so that they differentiate again.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from staticgrad.ops.elementwise import broadcast_error, loop_operands, loop_output, loop_result
from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OPS, OpDef, Save, register

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
SQRT_2PI = math.sqrt(2.0 * math.pi)

_LOOPS = None


def special_loops():
    """``staticgrad.ops.special_loops``, imported on first use (it loads Numba)."""
    global _LOOPS
    if _LOOPS is None:
        from staticgrad.ops import special_loops as loops  # here, not at the top: it loads Numba

        _LOOPS = loops
    return _LOOPS


def _loop_unary(name: str):
    """A forward running ``special_loops.unary`` with the function ``name`` on every element."""
    def forward(a, out=None):
        loops = special_loops()
        (flat_a,), shape, dtype, work = loop_operands(a)
        flat = loop_output(flat_a.size, work, out, (a,))
        loops.unary(loops.UNARY_KINDS[name], flat_a, flat)
        return loop_result(flat, shape, dtype, out)
    forward.__name__ = f"_{name}"
    return forward


def _unary(name, node_name, backward, saves, forward=None):
    register(OpDef(name, forward or _loop_unary(name), "elementwise", node_name, backward, saves, "float"))


def _square(F, x):
    return x * x


_unary("erfc", "ErfcBackward0",
       lambda F, g, s, at, need: (g * F.mul_scalar(F.exp(F.neg(_square(F, s["self"]))), other=-TWO_OVER_SQRT_PI),),
       (Save("self", 0),))
_unary("erfinv", "ErfinvBackward0",
       lambda F, g, s, at, need: (
           g * F.mul_scalar(F.exp(_square(F, F.erfinv(s["self"]))), other=0.5 * math.sqrt(math.pi)),),
       (Save("self", 0),))
_unary("lgamma", "LgammaBackward0", lambda F, g, s, at, need: (g * F.digamma(s["self"]),), (Save("self", 0),))
_unary("digamma", "DigammaBackward0", lambda F, g, s, at, need: (g * F.polygamma(s["self"], n=1),),
       (Save("self", 0),))
_unary("erfcx", "SpecialErfcxBackward0",
       lambda F, g, s, at, need: (
           g * F.add_scalar(F.mul_scalar(s["self"] * s["result"], other=2.0), other=-TWO_OVER_SQRT_PI),),
       (Save("self", 0), Save("result", "result")))
_unary("log_ndtr", "SpecialLogNdtrBackward0",
       lambda F, g, s, at, need: (
           F.div_scalar(g, other=SQRT_2PI)
           * F.exp(F.neg(s["result"] + F.div_scalar(_square(F, s["self"]), other=2.0))),),
       (Save("self", 0), Save("result", "result")))
_unary("ndtri", "SpecialNdtriBackward0",
       lambda F, g, s, at, need: (
           F.mul_scalar(g, other=SQRT_2PI) * F.exp(F.div_scalar(_square(F, s["result"]), other=2.0)),),
       (Save("result", "result"),))


# ---- Bessel functions: i0' = i1, i1' = i0 - i1 / x (1/2 at 0), and their exp(-|x|)-scaled forms -----

def _at_zero(F, x, g, value, elsewhere):
    """``elsewhere`` times g, with ``value`` times g where x == 0 (PyTorch's i1/i1e backward)."""
    return g * F.where(F.eq_scalar(x, other=0.0), F.add_scalar(F.zeros_like(x), other=value), elsewhere)


_unary("i0", "I0Backward0", lambda F, g, s, at, need: (g * F.special_i1(s["self"]),), (Save("self", 0),))
_unary("special_i0e", "SpecialI0EBackward0",
       lambda F, g, s, at, need: (g * (F.special_i1e(s["self"]) - F.sign(s["self"]) * s["result"]),),
       (Save("self", 0), Save("result", "result")))
_unary("special_i1", "SpecialI1Backward0",
       lambda F, g, s, at, need: (_at_zero(F, s["self"], g, 0.5, F.i0(s["self"]) - s["result"] / s["self"]),),
       (Save("self", 0), Save("result", "result")))
_unary("special_i1e", "SpecialI1EBackward0",
       lambda F, g, s, at, need: (_at_zero(F, s["self"], g, 0.5, F.special_i0e(s["self"])
                                           - s["result"] * (F.sign(s["self"]) + F.reciprocal(s["self"]))),),
       (Save("self", 0), Save("result", "result")))


# ---- polygamma(n, x) and zeta(x, q) -------------------------------------------------------------------

def _polygamma(a, out=None, n=0):
    loops = special_loops()
    (flat_a,), shape, dtype, work = loop_operands(a)
    flat = loop_output(flat_a.size, work, out, (a,))
    loops.polygamma_array(int(n), flat_a, flat)
    return loop_result(flat, shape, dtype, out)


register(OpDef("polygamma", _polygamma, "elementwise", "PolygammaBackward0",
               lambda F, g, s, at, need: (g * F.polygamma(s["self"], n=s["n"] + 1),),
               (Save("n", "attr:n", freed=False), Save("self", 0)), "float"))
# Tensor.polygamma_: PyTorch records the in-place form under its own node name.
register(replace(OPS["polygamma"], name="polygamma_inplace", node_name="PolygammaBackward1"))


def _zeta(s, q, out=None):
    loops = special_loops()
    (flat_s, flat_q), shape, dtype, work = loop_operands(s, q)
    flat = loop_output(flat_s.size, work, out, (s, q))
    loops.zeta_array(flat_s, flat_q, flat)
    return loop_result(flat, shape, dtype, out)


def _zeta_backward(F, g, s, at, need):
    if need[0]:
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    x = s["self"]
    return None, g * F.neg(x) * F.zeta(F.add_scalar(x, other=1.0), s["other"])


# scalar: 1 when x was a number, 2 when q was (PyTorch's SpecialZetaBackward1 / 2); the values are the same.
register(OpDef("zeta", lambda s, q, out=None, scalar=0: _zeta(s, q, out), "elementwise",
               lambda at: f"SpecialZetaBackward{at.get('scalar', 0)}", _zeta_backward,
               (Save("self", 0), Save("other", 1)), "float", None, broadcast_error))


# ---- entr, sinc, logit: NumPy expressions ---------------------------------------------------------------

def _entr(a, out=None):
    """-x log x for x > 0, 0 at 0, -inf below 0, NaN kept."""
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.negative(a) * np.log(a)
    value = np.where(a == 0, a.dtype.type(0), value)
    return into(np.where(a < 0, a.dtype.type(-np.inf), value), out)


_unary("entr", "SpecialEntrBackward0",
       lambda F, g, s, at, need: (g * F.neg(F.add_scalar(F.log(s["self"]), other=1.0)),), (Save("self", 0),),
       _entr)


def _sinc(a, out=None):
    """sin(pi x) / (pi x), 1 at 0 (the product in the tensor's dtype, as PyTorch's kernel)."""
    product = np.multiply(a.dtype.type(math.pi), a)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.sin(product) / product
    return into(np.where(a == 0, a.dtype.type(1), value), out)


def _sinc_backward(F, g, s, at, need):
    x = s["self"]
    product = F.mul_scalar(x, other=math.pi)
    slope = (product * F.cos(product) - F.sin(product)) / (product * x)
    return (F.where(F.eq_scalar(x, other=0.0), F.zeros_like(g), slope * g),)


_unary("sinc", "SincBackward0", _sinc_backward, (Save("self", 0),), _sinc)


def _logit(a, out=None, eps=None):
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given."""
    T = a.dtype.type
    if eps is not None:
        a = np.minimum(np.maximum(a, T(eps)), T(1) - T(eps))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.true_divide(a, np.subtract(T(1), a)), out=out)


def _logit_backward(F, g, s, at, need):
    """g / (x (1 - x)) inside the range; outside it 0 (with eps) or NaN (without)."""
    x, eps = s["self"], s["eps"]
    slope = g / (x * F.rsub_scalar(x, other=1.0))
    low, high = (0.0, 1.0) if eps is None else (eps, 1.0 - eps)
    outside = F.logical_or(F.lt_scalar(x, other=low), F.gt_scalar(x, other=high))
    fill = F.add_scalar(F.zeros_like(g), other=math.nan if eps is None else 0.0)
    return (F.where(outside, fill, slope),)


register(OpDef("logit", _logit, "elementwise", "LogitBackward0", _logit_backward,
               (Save("self", 0), Save("eps", "attr:eps", freed=False)), "float"))


# ---- mvlgamma: the multivariate log-gamma, as PyTorch composes it --------------------------------------------

def _mvlgamma_args(F, x, p):
    """x + (-(p-1)/2, ..., -1/2, 0) along a new last axis, in x's dtype (PyTorch's arange and add)."""
    steps = F.arange(start=-p * 0.5 + 0.5, end=0.5, step=0.5, dtype=x.dtype)
    return F.unsqueeze(x, dim=len(x.shape)) + steps


def _mvlgamma(a, out=None, p=1):
    T = a.dtype.type
    args = np.arange(T(-p * 0.5 + 0.5), T(0.5), T(0.5), dtype=a.dtype) + a[..., None]
    total = np.sum(_loop_unary("lgamma")(args), axis=-1)
    return np.add(total, T(p * (p - 1) * math.log(math.pi) / 4), out=out)


register(OpDef("mvlgamma", _mvlgamma, "other", "MvlgammaBackward0",
               lambda F, g, s, at, need: (g * F.sum(F.digamma(_mvlgamma_args(F, s["self"], s["p"])),
                                                    dim=(len(s["self"].shape),)),),
               (Save("self", 0), Save("p", "attr:p", freed=False)), "float"))
