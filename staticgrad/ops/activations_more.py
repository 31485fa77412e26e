"""More activation ops: threshold, hardshrink, softshrink (exact piecewise forms that fuse) and
prelu, whose weight is per channel (dim 1) or one shared value. Backward formulas are PyTorch's,
written with table ops."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OPS, OpDef, Save, lit, register


def _threshold(x, out=None, threshold=0.0, value=0.0):
    """x where x > threshold, else value (NaN stays NaN, as in PyTorch)."""
    return into(np.where(x <= x.dtype.type(threshold), x.dtype.type(value), x), out)


register(OpDef("threshold", _threshold, "elementwise", "ThresholdBackward0",
               lambda F, g, s, at, need: (F.threshold_backward(g, s["self"], threshold=s["threshold"]),),
               (Save("self", 0), Save("threshold", "attr:threshold", freed=False)), "same",
               lambda x, at: f"({lit(at['value'])} if {x[0]} <= {lit(at['threshold'])} else {x[0]})"))


# In place PyTorch names it ThresholdBackward1 and keeps a copy of the input from before the write.
register(replace(OPS["threshold"], name="threshold_inplace", node_name="ThresholdBackward1"))


def _shrunk_mask(F, x, lambd):
    """Where a shrink passes its gradient: |x| > lambd (as ``x < -lambd or x > lambd``)."""
    return F.logical_or(F.lt_scalar(x, other=-lambd), F.gt_scalar(x, other=lambd))


def _shrink_backward(F, g, s, at, need):
    return (F.where(_shrunk_mask(F, s["self"], s["lambd"]), g, F.zeros_like(g)),)


def _hardshrink(x, out=None, lambd=0.5):
    t = x.dtype.type(lambd)
    return into(np.where((x < -t) | (x > t), x, x.dtype.type(0)), out)


def _softshrink(x, out=None, lambd=0.5):
    t = x.dtype.type(lambd)
    return into(np.where(x > t, x - t, np.where(x < -t, x + t, x.dtype.type(0))), out)


_LAMBD = (Save("lambd", "attr:lambd", freed=False), Save("self", 0))
register(OpDef("hardshrink", _hardshrink, "elementwise", "HardshrinkBackward0", _shrink_backward, _LAMBD, "same",
               lambda x, at: (f"({x[0]} if ({x[0]} < -{lit(at['lambd'])} or {x[0]} > {lit(at['lambd'])}) "
                              "else T(0.0))")))
register(OpDef("softshrink", _softshrink, "elementwise", "SoftshrinkBackward0", _shrink_backward, _LAMBD, "same",
               lambda x, at: (f"(({x[0]} - {lit(at['lambd'])}) if {x[0]} > {lit(at['lambd'])} else "
                              f"(({x[0]} + {lit(at['lambd'])}) if {x[0]} < -{lit(at['lambd'])} else T(0.0)))")))


def _per_channel(w, ndim: int):
    """The weight shaped to broadcast against an input of ``ndim`` dims: (C,) along dim 1."""
    if w.size == 1 or ndim < 2:
        return w.reshape(())
    return w.reshape((1, w.size) + (1,) * (ndim - 2))


def _prelu(x, w, out=None):
    return into(np.where(x > 0, x, _per_channel(w, x.ndim) * x), out)


def _prelu_backward(F, g, s, at, need):
    """x's gradient: g where x > 0, else w * g; w's: the sum of x * g where x <= 0, per channel."""
    x, w = s["self"], s["weight"]
    ndim, channels = x._data.ndim, w._data.size
    positive = F.gt_scalar(x, other=0.0)
    zero = F.zeros_like(g)
    shaped = w if channels == 1 and w._data.ndim == 0 else F.view(w, shape=_broadcast_shape(w, ndim))
    grad_x = F.where(positive, g, F.mul(shaped, g)) if need[0] else None
    grad_w = None
    if need[1]:
        contribution = F.where(positive, zero, F.mul(x, g))
        if channels == 1 or ndim < 2:
            grad_w = F.view(F.sum(contribution), shape=w._data.shape)
        else:
            others = tuple(d for d in range(ndim) if d != 1)
            grad_w = F.view(F.sum(contribution, dim=others, keepdim=False), shape=w._data.shape)
    return grad_x, grad_w


def _broadcast_shape(w, ndim: int) -> tuple:
    return (1, w._data.size) + (1,) * (ndim - 2) if w._data.size > 1 and ndim >= 2 else ()


register(OpDef("prelu", _prelu, "elementwise", "PreluKernelBackward0", _prelu_backward,
               (Save("self", 0), Save("weight", 1)), "same"))
