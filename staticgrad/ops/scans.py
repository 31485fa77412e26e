"""Scans along one dim: cumsum, cumprod, cummax, cummin, logcumsumexp, and the scans their
gradients are written with (a reverse cumsum, exclusive products, a first-order linear
recurrence, a shift by one). Every gradient is made of these ops again, so create_graph works,
and none branches on the data (products with zeros included), so a replay stays exact."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.reductions import axis_error
from staticgrad.ops.registry import OpDef, Save, register


def _into(result, out):
    if out is None:
        return np.asarray(result, order="C")  # not ascontiguousarray, which makes a 0-dim result 1-dim
    np.copyto(out, result, casting="unsafe")
    return out


def _flipped(function, a, dim, reverse, **kwargs):
    """``function`` along ``dim``, run from the last element back when ``reverse``."""
    if not reverse:
        return function(a, axis=dim, **kwargs)
    return np.flip(function(np.flip(a, dim), axis=dim, **kwargs), dim)


def _dim_of(a, dim):
    """A 0-dim tensor scans as one element (PyTorch takes dim 0 or -1 for it)."""
    return a.reshape(1) if a.ndim == 0 else a, 0 if a.ndim == 0 else dim


# ---- cumsum -------------------------------------------------------------------------------------

def _cumsum(a, out=None, dim=0, reverse=False, dtype=None):
    if dtype is None and a.dtype.kind in "biu":
        dtype = np.int64
    flat, d = _dim_of(a, dim)
    return _into(_flipped(np.cumsum, flat, d, reverse, dtype=dtype).reshape(a.shape), out)


register(OpDef("cumsum", _cumsum, "other", "CumsumBackward0",
               lambda F, g, s, at, need: (F.cumsum(g, dim=at["dim"], reverse=not at.get("reverse", False)),),
               (Save("dim", "attr:dim", freed=False),), "same", explain=axis_error))


# ---- shift by one, and the first-order linear recurrence ------------------------------------------

def _shift(a, out=None, dim=0, offset=1, fill=0.0):
    """``a`` moved ``offset`` (+1 or -1) places along ``dim``, the freed place holding ``fill``."""
    result = np.full(a.shape, fill, dtype=a.dtype) if out is None else out
    n = a.shape[dim]
    lead = (slice(None),) * dim
    if offset > 0:
        result[lead + (slice(1, n),)] = a[lead + (slice(0, n - 1),)]
        result[lead + (slice(0, 1),)] = fill
    else:
        result[lead + (slice(0, n - 1),)] = a[lead + (slice(1, n),)]
        result[lead + (slice(n - 1, n),)] = fill
    return result


register(OpDef("shift", _shift, "other", "ShiftBackward0",
               lambda F, g, s, at, need: (F.shift(g, dim=at["dim"], offset=-at["offset"], fill=0.0),),
               (), "same"))


def _linear_scan(g, a, out=None, dim=0, reverse=False):
    """y_k = g_k + a_k * y_(k-1), from y_0 = g_0 (with ``reverse``, y_k = g_k + a_k * y_(k+1))."""
    shape = np.broadcast_shapes(g.shape, a.shape)
    dtype = np.result_type(g, a)
    gm = np.moveaxis(np.broadcast_to(g, shape), dim, 0)
    am = np.moveaxis(np.broadcast_to(a, shape), dim, 0)
    result = np.empty(shape, dtype) if out is None else out
    ym = np.moveaxis(result, dim, 0)
    n = gm.shape[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    previous = None
    for k in order:
        here = slice(k, k + 1)  # slices, not items: a vector's items are scalars, which out= cannot take
        if previous is None:
            ym[here] = gm[here]
        else:
            np.multiply(am[here], ym[previous], out=ym[here])
            np.add(gm[here], ym[here], out=ym[here])
        previous = here
    return result


def _linear_scan_backward(F, gg, s, at, need):
    """The adjoint scan runs the other way with the multipliers shifted by one; a's gradient is
    the adjoint times the previous y."""
    a, dim, reverse = s["a"], at["dim"], at.get("reverse", False)
    step = -1 if reverse else 1
    z = F.linear_scan(gg, F.shift(a, dim=dim, offset=-step, fill=0.0), dim=dim, reverse=not reverse)
    grad_a = F.mul(z, F.shift(s["result"], dim=dim, offset=step, fill=0.0)) if need[1] else None
    return (z if need[0] else None), grad_a


register(OpDef("linear_scan", _linear_scan, "other", "LinearScanBackward0", _linear_scan_backward,
               (Save("a", 1), Save("result", "result", when=(1,))), "promote"))


# ---- products: exclusive cumprod and cumprod ------------------------------------------------------

def _exclusive_cumprod(a, out=None, dim=0, reverse=False):
    """prod_(i<k) a_i at k (prod_(i>k) with ``reverse``): the product of the elements before k."""
    step = -1 if reverse else 1
    shifted = _shift(a, dim=dim, offset=step, fill=1)
    return _into(_flipped(np.cumprod, shifted, dim, reverse), out)


def _exclusive_cumprod_backward(F, gg, s, at, need):
    """d/dx_m sum_k gg_k prod_(i<k) x_i = before_m * T_m, T_m = gg_(m+1) + x_(m+1) T_(m+1)."""
    x, dim, reverse = s["self"], at["dim"], at.get("reverse", False)
    step = -1 if reverse else 1
    tail = F.linear_scan(F.shift(gg, dim=dim, offset=-step, fill=0.0), F.shift(x, dim=dim, offset=-step, fill=0.0),
                         dim=dim, reverse=not reverse)
    return (F.mul(s["result"], tail),)


register(OpDef("exclusive_cumprod", _exclusive_cumprod, "other", "CumprodBackward0", _exclusive_cumprod_backward,
               (Save("self", 0), Save("result", "result")), "same"))


def _cumprod(a, out=None, dim=0, dtype=None):
    if dtype is None and a.dtype.kind in "biu":
        dtype = np.int64
    flat, d = _dim_of(a, dim)
    return _into(np.cumprod(flat, axis=d, dtype=dtype).reshape(a.shape), out)


def _cumprod_backward(F, g, s, at, need):
    """d/dx_k sum_j g_j prod_(i<=j) x_i = prod_(i<k) x_i * S_k, S_k = g_k + x_(k+1) S_(k+1): exact
    with zeros in x (PyTorch's cumprod_backward, without its branch on the data)."""
    x, result = s["self"], s["result"]
    if not x.shape:
        return (g,)
    dim = at["dim"]
    before = F.shift(result, dim=dim, offset=1, fill=1.0)
    tail = F.linear_scan(g, F.shift(x, dim=dim, offset=-1, fill=0.0), dim=dim, reverse=True)
    return (F.mul(before, tail),)


register(OpDef("cumprod", _cumprod, "other", "CumprodBackward0", _cumprod_backward,
               (Save("self", 0), Save("dim", "attr:dim", freed=False), Save("result", "result")),
               "same", explain=axis_error))


# ---- cummax, cummin -------------------------------------------------------------------------------

def _cumulative_extreme(takes):
    """(values, int64 indices) of the running max or min: a NaN takes over and stays, ties take the
    later index (PyTorch's cummax_helper)."""
    def forward(a, out=None, dim=0):
        flat, d = _dim_of(a, dim)
        xs = np.moveaxis(flat, d, 0)
        values = np.empty(xs.shape, a.dtype)
        indices = np.empty(xs.shape, np.int64)
        nan_aware = a.dtype.kind == "f"
        for k in range(xs.shape[0]):
            if k == 0:
                values[0], indices[0] = xs[0], 0
                continue
            take = takes(xs[k], values[k - 1])
            if nan_aware:
                take = np.isnan(xs[k]) | (~np.isnan(values[k - 1]) & take)
            values[k] = np.where(take, xs[k], values[k - 1])
            indices[k] = np.where(take, k, indices[k - 1])
        back = (lambda t: np.ascontiguousarray(np.moveaxis(t, 0, d)).reshape(a.shape))
        return back(values), back(indices)
    return forward


def _cumulative_extreme_backward(F, g, s, at, need):
    """The gradient goes to the element each position's value came from."""
    grad_values = g[0]
    if grad_values is None:
        return (None,)
    shape = tuple(s["self_sym_sizes"])
    if not shape:
        return (grad_values,)
    return (F.scatter_add_zeros(grad_values, s["indices"], dim=at["dim"], sizes=shape),)


for _name, _node, _takes in (("cummax", "CummaxBackward0", np.greater_equal),
                             ("cummin", "CumminBackward0", np.less_equal)):
    register(OpDef(_name, _cumulative_extreme(_takes), "other", _node, _cumulative_extreme_backward,
                   (Save("indices", "result:1"), Save("self_sym_sizes", "shape:0", freed=False),
                    Save("dim", "attr:dim", freed=False)), "same", explain=axis_error))


# ---- logcumsumexp ---------------------------------------------------------------------------------

def _logcumsumexp(a, out=None, dim=0, reverse=False):
    flat, d = _dim_of(a, dim)
    with np.errstate(invalid="ignore"):
        return _into(_flipped(np.logaddexp.accumulate, flat, d, reverse).reshape(a.shape), out)


def _logcumsumexp_backward(F, g, s, at, need):
    """PyTorch's formula: the positive and negative parts of g go through reverse log-cum-sum-exps
    apart, so nothing overflows: exp(rlcse(log g+ - out) + x) - exp(rlcse(log g- - out) + x)."""
    x, result, dim = s["self"], s["result"], at["dim"]  # a reverse scan's gradient runs forward
    if not x.shape or g.numel() == 0:
        return (g,)
    lowest = F.full(shape=(), value=float(np.finfo(g._data.dtype).min), dtype=g._data.dtype)
    log_abs = F.log(F.abs(g))
    parts = []
    for test in (F.gt_scalar, F.lt_scalar):
        log_part = F.where(test(g, other=0), log_abs, lowest)
        reverse_total = F.logcumsumexp(log_part - result, dim=dim, reverse=not at.get("reverse", False))
        parts.append(F.exp(reverse_total + x))
    return (parts[0] - parts[1],)


register(OpDef("logcumsumexp", _logcumsumexp, "other", "LogcumsumexpBackward0", _logcumsumexp_backward,
               (Save("self", 0), Save("dim", "attr:dim", freed=False), Save("result", "result")),
               "same", explain=axis_error))
