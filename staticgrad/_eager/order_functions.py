"""torch.median, nanmedian, kthvalue, mode, aminmax, nansum, nanmean, quantile, nanquantile, dist, cdist,
pdist and renorm over the op table (staticgrad.ops.order_stats and staticgrad.ops.distances): PyTorch's
signatures, result tuples, argument checks and errors; quantile, nanmean and cdist's matrix-product
form composed from other ops as PyTorch composes them, so their graphs show PyTorch's nodes."""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import ones_like
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.math_functions import ceil, floor, lerp
from staticgrad._eager.math_functions import round as round_half_even
from staticgrad._eager.movement import sort
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes

MedianResult = namedtuple("median", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])
AminmaxResult = namedtuple("aminmax", ["min", "max"])


def _type_name(t: Tensor) -> str:
    return _dtypes.from_numpy_dtype(t._data.dtype).tensor_type[:-6]


def _dim_of(input, dim) -> int:
    return _normalize_dim(dim, input._data.ndim) if input._data.ndim else 0


def _select(input, kind: str, dim, keepdim: bool, k: int = 1):
    d = _dim_of(input, dim)
    size = input._data.shape[d] if input._data.ndim else 1
    if size == 0:
        raise IndexError(f"{kind}(): Expected reduction dim {d} to have non-zero size.")
    return dispatch(OPS["select_along"], (input,), {"kind": kind, "k": int(k), "dim": d, "keepdim": bool(keepdim)})


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (MedianBackward0), or (values, indices) along ``dim`` (MedianBackward1);
    NaN wherever a NaN is present."""
    fn.require_tensor(input, "median")
    if dim is None:
        return dispatch(OPS["median_all"], (input,), {"ignore_nan": False})
    return MedianResult(*_select(input, "median", dim, keepdim))


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaN (NanmedianBackward0/1): NaN only where every element is NaN."""
    fn.require_tensor(input, "nanmedian")
    if dim is None:
        return dispatch(OPS["median_all"], (input,), {"ignore_nan": True})
    return NanmedianResult(*_select(input, "nanmedian", dim, keepdim))


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along ``dim`` and its index (KthvalueBackward0)."""
    fn.require_tensor(input, "kthvalue")
    d = _dim_of(input, dim)
    size = input._data.shape[d] if input._data.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return KthvalueResult(*_select(input, "kthvalue", d, keepdim, k))


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the index of its
    last occurrence (ModeBackward0)."""
    fn.require_tensor(input, "mode")
    return ModeResult(*_select(input, "mode", dim, keepdim))


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over everything or along ``dim`` (AminmaxBackward0)."""
    fn.require_tensor(input, "aminmax")
    if dim is None and input._data.size == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    d = None if dim is None else _dim_of(input, dim)
    low, high = dispatch(OPS["aminmax"], (input,), {"dim": d, "keepdim": bool(keepdim)})
    return AminmaxResult(low, high)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum treating NaN as zero (NansumBackward0); integer tensors sum as torch.sum does."""
    fn.require_tensor(input, "nansum")
    input, np_dtype = fn.reduction_input(input, dtype, "sum_cpu")
    if input._data.dtype.kind != "f":   # (no NaN to skip)
        return fn.sum(input, dim, keepdim, dtype=dtype)
    return dispatch(OPS["nansum"], (input,), {"dim": fn.reduction_dims(dim, input._data.ndim),
                                              "keepdim": bool(keepdim)}, cast_to=np_dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """nansum divided by the count of non-NaN elements, composed as PyTorch's (DivBackward0)."""
    fn.require_tensor(input, "nanmean")
    if dtype is not None:
        np_dtype = _dtypes.to_numpy_dtype(dtype)
        if np_dtype.kind != "f":
            raise RuntimeError("nanmean(): could not infer output dtype. Optional dtype must be either a floating "
                               f"point or complex dtype. Got: {_dtypes.scalar_type_name(np_dtype)}")
        if input._data.dtype.kind != "f":
            input = fn.to_dtype(input, dtype)
    if input._data.dtype.kind != "f":
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_type_name(input)}")
    count = input.isnan().logical_not().sum(dim, keepdim)
    return fn.div(nansum(input, dim, keepdim, dtype=dtype), count)   # (computed in dtype: no ToCopyBackward0)


# ---- quantile, composed as PyTorch's: sort, ranks, gather, lerp -------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_checks(name, input, q, interpolation):
    fn.require_tensor(input, name)
    if input._data.dtype.kind != "f" or input._data.dtype == np.float16:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if isinstance(q, Tensor):
        if q._data.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q._data.dtype != input._data.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        return dispatch(OPS["checked_clone"], (q,), {"low": 0.0, "high": 1.0, "nan_ok": False,
                                                     "message": f"{name}() q values must be in the range [0, 1]"})
    q = float(q)
    if not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    return fn.full_like_scalar(input, q)


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    q = _quantile_checks(name, input, q, interpolation)
    if input._data.size == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    ndim = input._data.ndim
    if dim is None or ndim == 0:  # a 0-dim input: its one element, whatever the dim
        ordered = sort(fn.flatten(input)).values
        if keepdim:
            ordered = fn.reshape(ordered, (1,) * ndim + (-1,))
    else:
        d = _dim_of(input, dim)
        ordered = sort(fn.transpose(fn.unsqueeze(input, -1), d, -1)).values
        if not keepdim:
            ordered = fn.squeeze(ordered, d)
    n = ordered._data.shape[-1]
    ranks_shape = ordered._data.shape[:-1] + ((q._data.shape[0],) if q._data.ndim else (1,))
    ranks = fn.expand(q, ranks_shape)
    if ignore_nan:
        valid = ordered.isnan().logical_not().sum(-1, keepdim=True)
        ranks = fn.mul(ranks, fn.sub(valid, 1))
        ranks = fn.masked_fill(ranks, fn.lt(ranks, 0), 0)
    else:
        ranks = fn.mul(ranks, n - 1)
        ranks = fn.masked_fill(ranks, ordered.isnan().any(-1, keepdim=True), n - 1)
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": floor, "higher": ceil, "nearest": round_half_even}[interpolation](ranks)
    below = fn.to_dtype(ranks, _dtypes.int64)
    values = fn.gather(ordered, -1, below)
    if interpolation in ("linear", "midpoint"):
        weights = fn.full_like_scalar(ranks, 0.5) if interpolation == "midpoint" else fn.sub(ranks, below)
        weights = fn.expand(weights, ranks._data.shape)
        above = fn.gather(ordered, -1, fn.to_dtype(ceil(ranks), _dtypes.int64))
        values = lerp(values, above, weights)
    if q._data.ndim:  # q's values to the front
        values = fn.transpose(fn.unsqueeze(values, 0), 0, -1)
    return fn.squeeze(values, -1, inplace_name=True)  # PyTorch's squeeze_(-1): SqueezeBackward4


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D tensor) over everything or along ``dim``; NaN where a NaN is."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaN."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# ---- distances -------------------------------------------------------------------------------------------

def dist(input, other, p=2):
    """||input - other||_p over every element, the two broadcast (DistBackward0)."""
    fn.require_tensor(input, "dist")
    fn.require_tensor(other, "dist", "other", 2)
    return dispatch(OPS["dist"], (input, other), {"p": float(p)})


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M), batch dims broadcast. For
    p = 2 with more than 25 rows on either side (or compute_mode='use_mm_for_euclid_dist'), PyTorch's
    matrix-product form sqrt(|a|^2 + |b|^2 - 2 a.b), composed from matmul as PyTorch composes it."""
    fn.require_tensor(x1, "cdist", "x1")
    fn.require_tensor(x2, "cdist", "x2", 2)
    d1, d2 = x1._data.ndim, x2._data.ndim
    if d1 < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {d1}D")
    if d2 < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {d2}D")
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1._data.shape[-1]} X2: "
                           f"{x2._data.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if t._data.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_type_name(t)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    rows1, rows2 = x1._data.shape[-2], x2._data.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist"
                         or (compute_mode == _COMPUTE_MODES[0] and (rows1 > 25 or rows2 > 25)))
    if not use_mm:
        return dispatch(OPS["cdist"], (x1, x2), {"p": float(p)})
    batch = tuple(np.broadcast_shapes(x1._data.shape[:-2], x2._data.shape[:-2]))
    count = math.prod(batch)
    columns = x1._data.shape[-1]
    a = fn.reshape(fn.expand(x1, batch + (rows1, columns)), (count, rows1, columns))
    b = fn.reshape(fn.expand(x2, batch + (rows2, columns)), (count, rows2, columns))
    return fn.view(_euclidean(a, b), batch + (rows1, rows2))


def _euclidean(a, b):
    """sqrt(max(|a|^2 + |b|^2 - 2 a.b, 1e-30)) as one matmul of padded operands (PyTorch's _euclidean_dist)."""
    a_norm = fn.sum(fn.pow(a, 2), -1, keepdim=True)
    b_norm = fn.sum(fn.pow(b, 2), -1, keepdim=True)
    a_padded = fn.cat([fn.mul(a, -2), a_norm, ones_like(a_norm)], -1)
    b_padded = fn.cat([b, ones_like(b_norm), b_norm], -1)
    result = fn.matmul(a_padded, fn.transpose(b_padded, -2, -1))
    return fn.sqrt(result.clamp_min(1e-30))  # PyTorch clamps and roots in place; the result is a view here


def pdist(input, p=2):
    """p-norm distances between the rows of a matrix, pairs i < j in row-major order (PdistBackward0)."""
    fn.require_tensor(input, "pdist")
    if input._data.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input._data.ndim}D")
    if input._data.dtype.kind != "f":
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    return dispatch(OPS["pdist"], (input,), {"p": float(p)})


def renorm(input, p, dim, maxnorm):
    """Each sub-tensor along ``dim`` whose p-norm exceeds maxnorm scaled to norm maxnorm (RenormBackward0)."""
    fn.require_tensor(input, "renorm")
    if input._data.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input._data.ndim} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    return dispatch(OPS["renorm"], (input,), {"p": float(p), "dim": _dim_of(input, dim), "maxnorm": float(maxnorm)})


def renorm_(input, p, dim, maxnorm):
    renorm(input.detach(), p, dim, maxnorm)  # the argument checks
    return dispatch_inplace(OPS["renorm"], input, (), {"p": float(p), "dim": _dim_of(input, dim),
                                                       "maxnorm": float(maxnorm)})


FUNCTIONS = {"median": median, "nanmedian": nanmedian, "kthvalue": kthvalue, "mode": mode, "aminmax": aminmax,
             "nansum": nansum, "nanmean": nanmean, "quantile": quantile, "nanquantile": nanquantile, "dist": dist,
             "renorm": renorm}
METHODS = {**FUNCTIONS, "renorm_": renorm_}
