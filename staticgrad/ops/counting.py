"""Ops whose results count or locate values: unique, unique_consecutive and bincount (result sizes that
depend on the values: the eager functions refuse them under tracing), histc, searchsorted and
bucketize (result shapes fixed by the input shapes: recorded and replayed like any op).

None has a gradient: unique records PyTorch's node whose backward refuses, the others record none.
All are vectorised NumPy (sorting, cumulative sums, broadcast comparisons), no Python loops.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.movement import _linspace
from staticgrad.ops.registry import OpDef, register


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


# ---- unique, unique_consecutive: (values, inverse, counts) ---------------------------------------------

def _unique(a, out=None, dim=None):
    """Sorted distinct values (NaNs kept apart, as PyTorch's), the inverse mapping and the counts."""
    if dim is None:
        values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True,
                                            equal_nan=False)
        return values, inverse.reshape(a.shape).astype(np.int64), counts.astype(np.int64)
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=dim)
    return values, inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


def _unique_consecutive(a, out=None, dim=None):
    """The first of each run of equal values (or slices along ``dim``), the run number of every
    element (slice) and the run lengths."""
    if dim is None:
        flat = a.reshape(-1)
        starts = np.concatenate([[True], flat[1:] != flat[:-1]]) if flat.size else np.zeros(0, bool)
        values = flat[starts]
        inverse = (np.cumsum(starts) - 1).reshape(a.shape)
    else:
        moved = np.moveaxis(a, dim, 0)
        differs = (moved[1:] != moved[:-1]).reshape(max(moved.shape[0] - 1, 0), -1).any(axis=1)
        starts = np.concatenate([[True], differs]) if moved.shape[0] else np.zeros(0, bool)
        values = np.moveaxis(moved[starts], 0, dim)
        inverse = np.cumsum(starts) - 1
    positions = np.flatnonzero(starts)
    counts = np.diff(np.append(positions, starts.size))
    return values, inverse.astype(np.int64), counts.astype(np.int64)


def _no_derivative(name: str):
    def backward(F, g, s, at, need):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")
    return backward


register(OpDef("unique", _unique, "other", lambda at: "Unique2Backward0" if at.get("dim") is None
               else "UniqueDimBackward0", _no_derivative("_unique2"), (), "same"))
register(OpDef("unique_consecutive", _unique_consecutive, "other", lambda at: "UniqueConsecutiveBackward0"
               if at.get("dim") is None else "UniqueDimConsecutiveBackward0",
               _no_derivative("unique_consecutive"), (), "same"))


# ---- bincount ------------------------------------------------------------------------------------------

def _bincount(a, *weights, out=None, minlength=0, dtype=None):
    length = max(int(a.max()) + 1 if a.size else 0, minlength)
    result = np.bincount(a, weights=weights[0] if weights else None, minlength=length)
    return _into(result.astype(dtype), out)


register(OpDef("bincount", _bincount, "other", dtype_rule="attr"))


# ---- histc ---------------------------------------------------------------------------------------------

def _histc(a, out=None, bins=100, min=0.0, max=0.0):
    """Counts in ``bins`` equal bins over [min, max] (the data's range when both are 0; widened by 1 each
    way when empty), values outside ignored, the top edge counted in the last bin. A value's bin is found
    against PyTorch's linspace edges, as PyTorch corrects its estimate against them."""
    T = a.dtype.type
    low, high = T(min), T(max)
    if low == high and a.size:
        low, high = a.min(), a.max()
    if low == high:
        low, high = low - T(1), high + T(1)
    edges = _linspace(start=low, end=high, steps=bins + 1, dtype=a.dtype)
    flat = a.reshape(-1)
    inside = flat[(flat >= low) & (flat <= high)]
    position = np.minimum(np.searchsorted(edges, inside, side="right") - 1, bins - 1)
    return _into(np.bincount(position, minlength=bins).astype(a.dtype), out)


register(OpDef("histc", _histc, "other", dtype_rule="same"))


# ---- searchsorted / bucketize -------------------------------------------------------------------------

def _searchsorted(sequence, values, *sorter, out=None, right=False, dtype=np.int64):
    """Where each value would be inserted into the sorted innermost rows of ``sequence`` (after the
    first equal entry when ``right``). A 1-D sequence serves every value; an N-D one pairs its rows with
    the rows of ``values`` and counts by one broadcast comparison."""
    if sorter:
        sequence = np.take_along_axis(sequence, sorter[0], axis=-1)
    if sequence.ndim == 1:
        result = np.searchsorted(sequence, values, side="right" if right else "left")
    else:
        before = np.less_equal if right else np.less
        result = before(sequence[..., None, :], values[..., :, None]).sum(axis=-1)
    return _into(np.asarray(result).astype(dtype), out)


register(OpDef("searchsorted", _searchsorted, "other", dtype_rule="attr"))
