"""torch.unique, unique_consecutive, bincount, histc, searchsorted and bucketize over the op table
(staticgrad.ops.counting): PyTorch's signatures, result tuples, dtypes and errors.

unique, unique_consecutive and bincount return tensors whose sizes depend on the input's values: a
compiled function cannot replay them, so under tracing they raise TraceError (move them out of the
compiled function). histc, searchsorted and bucketize have shapes fixed by their inputs' shapes and are
recorded like any op (histc's range, when read from the values, is read inside the op)."""

from __future__ import annotations

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.tensor import Tensor, _normalize_dim, _read_guard
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _type_name(t: Tensor) -> str:
    return _dtypes.from_numpy_dtype(t._data.dtype).tensor_type[:-6]


def _unique_results(results, return_inverse, return_counts):
    values, inverse, counts = results
    if not return_inverse and not return_counts:
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted, as PyTorch's CPU unique always returns them), with the index of each
    element's value (return_inverse) and how often each occurs (return_counts); ``dim``: distinct slices."""
    fn.require_tensor(input, "unique")
    _read_guard(input, "unique() (its result's size depends on the values)")
    d = None if dim is None else _normalize_dim(dim, input._data.ndim)
    results = dispatch(OPS["unique"], (input,), {"dim": d})
    return _unique_results(results, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The first of each run of equal consecutive values (or slices along ``dim``)."""
    fn.require_tensor(input, "unique_consecutive")
    _read_guard(input, "unique_consecutive() (its result's size depends on the values)")
    d = None if dim is None else _normalize_dim(dim, input._data.ndim)
    results = dispatch(OPS["unique_consecutive"], (input,), {"dim": d})
    return _unique_results(results, return_inverse, return_counts)


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max(input) occurs (summing ``weights`` instead of ones when given)."""
    fn.require_tensor(input, "bincount")
    if input._data.dtype.kind not in "iub" or input._data.dtype in _dtypes.WIDE_UNSIGNED:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_type_name(input)}'")
    _read_guard(input, "bincount() (its result's size depends on the values)")
    data = input._data
    if data.ndim != 1 or (data.size and data.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return dispatch(OPS["bincount"], (input,), {"minlength": int(minlength), "dtype": np.dtype(np.int64)})
    if weights._data.ndim != 1 or weights._data.shape[0] != data.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dtype = weights._data.dtype if weights._data.dtype.kind == "f" else np.dtype(np.float64)
    return dispatch(OPS["bincount"], (input, weights), {"minlength": int(minlength), "dtype": dtype})


def histc(input, bins=100, min=0, max=0):
    """Counts in ``bins`` equal bins between min and max (the data's range when both are 0)."""
    fn.require_tensor(input, "histc")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_type_name(input)}'")
    if bins <= 0:
        raise RuntimeError(f"staticgrad.histc: bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("histc: max must be larger than min")
    return dispatch(OPS["histc"], (input,), {"bins": int(bins), "min": float(min), "max": float(max)})


def _as_tensor_like(value, like: Tensor) -> Tensor:
    return value if isinstance(value, Tensor) else fn.full_like_scalar(like, value)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``input`` in the sorted innermost rows of ``sorted_sequence`` (int64, or
    int32 with out_int32); ``right``/side='right' places equal values after their match."""
    fn.require_tensor(sorted_sequence, "searchsorted", "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"staticgrad.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("staticgrad.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    values = _as_tensor_like(input, sorted_sequence)
    seq_shape, value_shape = sorted_sequence._data.shape, values._data.shape
    if len(seq_shape) != 1 and (len(seq_shape) != len(value_shape) or seq_shape[:-1] != value_shape[:-1]):
        raise RuntimeError("staticgrad.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq_shape)} and input value tensor {list(value_shape)}")
    if scalar and len(seq_shape) != 1:
        raise RuntimeError("staticgrad.searchsorted(): input value can be a scalar only when boundaries tensor "
                           f"dimension is 1, but we got boundaries tensor dim({len(seq_shape)}) and input "
                           "value's dim(0) numel(1)")
    inputs = (sorted_sequence, values) + ((sorter,) if sorter is not None else ())
    dtype = np.dtype(np.int32 if out_int32 else np.int64)
    return dispatch(OPS["searchsorted"], inputs, {"right": bool(right), "dtype": dtype})


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among 1-D ``boundaries``: searchsorted(boundaries, input, right=right)."""
    fn.require_tensor(boundaries, "bucketize", "boundaries", 2)
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


FUNCTIONS = {"unique": unique, "unique_consecutive": unique_consecutive, "bincount": bincount, "histc": histc}
METHODS = dict(FUNCTIONS)
