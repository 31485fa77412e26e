"""Order statistics and NaN-aware reductions: median and nanmedian (of everything, or along a dim with
indices), kthvalue, mode, aminmax, nansum.

Values along a dim come from one stable sort (NaN last, as PyTorch orders it): median takes the lower
middle value (NaN when the row holds one), nanmedian the lower middle of the non-NaN values, mode the
smallest of the most frequent values with the index of its last occurrence. kthvalue runs PyTorch's own
quickselect (``ops.select_loops``), so among equal values its index is PyTorch's. Gradients are
PyTorch's: to the selected index, or shared evenly among the elements equal to a whole-tensor median.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.reductions import _extreme_backward, _indexed_extreme_backward, axis_error, keepdim_shape
from staticgrad.ops.registry import OpDef, Save, register

_SIZES = Save("self_sym_sizes", "shape:0", freed=False)


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


# ---- along a dim: (values, int64 indices) ---------------------------------------------------------------

def _positions(ordered, kind: str, k: int):
    """Where, in each sorted row (last axis), the selected value sits."""
    n = ordered.shape[-1]
    nans = np.isnan(ordered) if ordered.dtype.kind == "f" else np.zeros(ordered.shape, bool)
    count = n - nans.sum(axis=-1)
    if kind == "kthvalue":
        return np.full(ordered.shape[:-1], k - 1, np.int64)
    if kind == "median":  # a row holding NaN: its first NaN
        return np.where(count < n, count, (n - 1) // 2)
    if kind == "nanmedian":
        return np.maximum((count - 1) // 2, 0)
    # mode: runs of equal values; the longest wins, the first (smallest) among equally long ones
    equal = ordered[..., 1:] == ordered[..., :-1]
    starts = np.concatenate([np.ones(ordered.shape[:-1] + (1,), bool), ~equal], axis=-1)
    ends = np.concatenate([~equal, np.ones(ordered.shape[:-1] + (1,), bool)], axis=-1)
    position = np.arange(n)
    run_start = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    lengths = np.where(ends, position - run_start + 1, 0)
    return np.argmax(lengths, axis=-1)


_QUICKSELECT_DTYPES = frozenset(("float32", "float64", "int8", "int16", "int32", "int64", "uint8"))


def _kthvalue_rows(moved, k: int) -> tuple:
    """(values, indices) of the k-th smallest along the last axis, by PyTorch's own quickselect, so that
    among equal values the index is the one PyTorch reports (``ops.select_loops``)."""
    from staticgrad.ops.select_loops import kth_smallest  # here, not at the top: it loads Numba

    lead = moved.shape[:-1]
    rows = np.array(moved.reshape(-1, moved.shape[-1]), dtype=moved.dtype, order="C", copy=True)
    values = np.empty(rows.shape[0], moved.dtype)
    positions = np.empty(rows.shape[0], np.int64)
    if rows.shape[0]:
        kth_smallest(rows, k - 1, values, positions)
    return values.reshape(lead), positions.reshape(lead)


def _select_along(a, out=None, kind="median", k=1, dim=0, keepdim=False):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    moved = np.moveaxis(a, dim, -1)
    if kind == "kthvalue" and moved.shape[-1] and a.dtype.name in _QUICKSELECT_DTYPES:
        values, indices = _kthvalue_rows(moved, k)
        if keepdim:
            values, indices = np.expand_dims(values, dim), np.expand_dims(indices, dim)
        return values, indices
    order = np.argsort(moved, axis=-1, kind="stable")
    ordered = np.take_along_axis(moved, order, axis=-1)
    where = _positions(ordered, kind, k)[..., None]
    values = np.take_along_axis(ordered, where, axis=-1)[..., 0]
    indices = np.take_along_axis(order, where, axis=-1)[..., 0].astype(np.int64)
    if keepdim:
        values, indices = np.expand_dims(values, dim), np.expand_dims(indices, dim)
    return values, indices


_NODE_NAMES = {"median": "MedianBackward1", "nanmedian": "NanmedianBackward1", "kthvalue": "KthvalueBackward0",
               "mode": "ModeBackward0"}

register(OpDef("select_along", _select_along, "reduction", lambda at: _NODE_NAMES[at["kind"]],
               lambda F, g, s, at, need: _indexed_extreme_backward(F, g, s, at, need),
               (Save("indices", "result:1"), _SIZES), "same", explain=axis_error))


# ---- median of everything: one value, its gradient shared among the elements equal to it ---------------

def _median_all(a, out=None, ignore_nan=False):
    flat = np.sort(a.reshape(-1), kind="stable")
    if flat.size == 0:
        return _into(np.full((), np.nan, a.dtype), out)
    values, _ = _select_along(flat, kind="nanmedian" if ignore_nan else "median", dim=0)
    return _into(values, out)


def _median_all_backward(F, g, s, at, need):
    x, result = s["self"], s["result"]
    equal = F.logical_or(F.eq(x, result), F.logical_and(F.isnan(x), F.isnan(result)))
    mask = F.to_dtype(equal, dtype=g.dtype)
    return (g * mask / F.sum(mask, dim=tuple(range(len(x.shape))), keepdim=True),)


register(OpDef("median_all", _median_all, "reduction",
               lambda at: "NanmedianBackward0" if at.get("ignore_nan") else "MedianBackward0", _median_all_backward,
               (Save("self", 0), Save("result", "result")), "same"))


# ---- aminmax: (min, max), each gradient shared evenly among ties ---------------------------------------

def _aminmax(a, out=None, dim=None, keepdim=False):
    axis = None if dim is None or a.ndim == 0 else dim
    low = np.amin(a, axis=axis, keepdims=keepdim)
    high = np.amax(a, axis=axis, keepdims=keepdim)
    if dim is None and keepdim:
        low, high = low.reshape(keepdim_shape(a.shape, None)), high.reshape(keepdim_shape(a.shape, None))
    return np.asarray(low), np.asarray(high)


def _aminmax_backward(F, grads, s, at, need):
    dims = None if at.get("dim") is None else (at["dim"],)
    attrs = {"dim": dims, "keepdim": at.get("keepdim", False) or at.get("dim") is None}
    total = None
    for grad, result in zip(grads, (s["min"], s["max"])):
        if grad is None:
            continue
        if at.get("dim") is None and at.get("keepdim", False):
            grad, result = F.view(grad, shape=()), F.view(result, shape=())
        part = _extreme_backward(F, grad, {"self": s["self"], "result": result}, attrs, need)[0]
        total = part if total is None else total + part
    return (total,)


register(OpDef("aminmax", _aminmax, "reduction", "AminmaxBackward0", _aminmax_backward,
               (Save("self", 0), Save("min", "result:0"), Save("max", "result:1")), "same", explain=axis_error))


# ---- nansum ------------------------------------------------------------------------------------------

def _nansum(a, out=None, dim=None, keepdim=False):
    axis = None if dim is None or a.ndim == 0 else dim
    result = np.nansum(a, axis=axis, keepdims=keepdim)
    if dim is None and keepdim:
        result = result.reshape(keepdim_shape(a.shape, None))
    return _into(np.asarray(result, a.dtype), out)


def _nansum_backward(F, g, s, at, need):
    x, dim, keepdim = s["self"], at.get("dim"), at.get("keepdim", False)
    shape = tuple(x.shape)
    if not keepdim and shape:
        g = F.view(g, shape=keepdim_shape(shape, dim))
    # PyTorch multiplies by the mask (an inf or NaN gradient stays NaN where x is NaN), not where()
    return (F.expand(g, shape=shape) * F.to_dtype(F.logical_not(F.isnan(x)), dtype=g.dtype),)


register(OpDef("nansum", _nansum, "reduction", "NansumBackward0", _nansum_backward, (Save("self", 0),), "same",
               explain=axis_error))
