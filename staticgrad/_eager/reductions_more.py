"""torch.var, std, var_mean, std_mean, prod, any, all, the scans (cumsum, cumprod, cummax, cummin,
logcumsumexp), isclose, allclose and the value tests, with PyTorch's argument forms: ``dim`` or
its alias ``axis``, ``unbiased`` or ``correction``, and PyTorch's errors and warnings."""

from __future__ import annotations

import warnings
from collections import namedtuple

from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.functions import reduce_as, reduction_dims, reduction_input, require_tensor, to_dtype
from staticgrad._eager.tensor import _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.statistics import reduced_count

_UNSET = object()


def _type_name(np_dtype) -> str:
    """PyTorch's short name for a dtype in messages: Float, Double, Long, Bool..."""
    return _dtypes.from_numpy_dtype(np_dtype).tensor_type[:-6]


def _dim_or_axis(dim, axis, fn: str):
    """``dim``, or its alias ``axis`` (PyTorch takes either, not both)."""
    if axis is _UNSET:
        return dim
    if dim is not _UNSET and dim is not None:
        raise TypeError(f"{fn}() received an invalid combination of arguments - got both 'dim' and 'axis'")
    return axis


def _statistic(name: str, input, dim, unbiased, keepdim, correction, axis):
    require_tensor(input, name)
    if isinstance(dim, bool) and unbiased is None:  # var(x, True): the unbiased flag, no dim
        dim, unbiased = None, dim
    dim = _dim_or_axis(None if dim is _UNSET else dim, axis, name)
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, "
                        f"correction={type(correction).__name__}, unbiased=bool), but expected one of:")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if input._data.dtype.kind != "f":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    dims = reduction_dims(dim, input._data.ndim)
    numel = reduced_count(input._data.shape, dims)
    if numel - correction <= 0 and input._data.size:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    return dispatch(OPS[name], (input,), {"dim": dims, "correction": correction, "keepdim": bool(keepdim)})


def var(input, dim=_UNSET, unbiased=None, keepdim=False, *, correction=None, axis=_UNSET):
    return _statistic("var", input, dim, unbiased, keepdim, correction, axis)


def std(input, dim=_UNSET, unbiased=None, keepdim=False, *, correction=None, axis=_UNSET):
    return _statistic("std", input, dim, unbiased, keepdim, correction, axis)


def var_mean(input, dim=_UNSET, unbiased=None, keepdim=False, *, correction=None, axis=_UNSET):
    return tuple(_statistic("var_mean", input, dim, unbiased, keepdim, correction, axis))


def std_mean(input, dim=_UNSET, unbiased=None, keepdim=False, *, correction=None, axis=_UNSET):
    return tuple(_statistic("std_mean", input, dim, unbiased, keepdim, correction, axis))


def prod(input, dim=_UNSET, keepdim=False, *, dtype=None, axis=_UNSET):
    require_tensor(input, "prod")
    dim = _dim_or_axis(None if dim is _UNSET else dim, axis, "prod")
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod() received an invalid combination of arguments - got (Tensor, "
                        f"{type(dim).__name__}), but expected one of:")
    input, np_dtype = reduction_input(input, dtype, "prod_out_cpu")
    attrs = {"dim": None if dim is None else _normalize_dim(dim, input._data.ndim), "keepdim": bool(keepdim)}
    if dim is None:
        attrs["keepdim"] = False
    return reduce_as(OPS["prod"], input, attrs, np_dtype)


def _logical(name: str):
    op = OPS[name]

    def fn(input, dim=_UNSET, keepdim=False, *, axis=_UNSET):
        require_tensor(input, name)
        dim = _dim_or_axis(None if dim is _UNSET else dim, axis, name)
        data = input._data
        if data.dtype.kind not in "b" and data.dtype.name != "uint8":
            input = to_dtype(input, _dtypes.bool_)
        return dispatch(op, (input,), {"dim": reduction_dims(dim, data.ndim), "keepdim": bool(keepdim)})

    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: a bool (uint8 for uint8 input) reduction over dim (all dims when None)."
    return fn


any = _logical("any")
all = _logical("all")


# ---- scans ---------------------------------------------------------------------------------------

def _scan_dim(input, dim, axis, fn: str) -> int:
    dim = _dim_or_axis(dim, axis, fn)
    if dim is _UNSET:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "dim"')
    return _normalize_dim(dim, input._data.ndim)


def cumsum(input, dim=_UNSET, *, dtype=None, axis=_UNSET):
    require_tensor(input, "cumsum")
    d = _scan_dim(input, dim, axis, "cumsum")
    input, np_dtype = reduction_input(input, dtype, "cumsum_out_cpu", bool_ok=False)
    return reduce_as(OPS["cumsum"], input, {"dim": d}, np_dtype)


def cumprod(input, dim=_UNSET, *, dtype=None, axis=_UNSET):
    require_tensor(input, "cumprod")
    d = _scan_dim(input, dim, axis, "cumprod")
    input, np_dtype = reduction_input(input, dtype, "cumprod_out_cpu", bool_ok=False)
    return reduce_as(OPS["cumprod"], input, {"dim": d}, np_dtype)


CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


def cummax(input, dim=_UNSET, *, axis=_UNSET):
    require_tensor(input, "cummax")
    values, indices = dispatch(OPS["cummax"], (input,), {"dim": _scan_dim(input, dim, axis, "cummax")})
    return CummaxResult(values, indices)


def cummin(input, dim=_UNSET, *, axis=_UNSET):
    require_tensor(input, "cummin")
    values, indices = dispatch(OPS["cummin"], (input,), {"dim": _scan_dim(input, dim, axis, "cummin")})
    return CumminResult(values, indices)


def logcumsumexp(input, dim=_UNSET, *, axis=_UNSET):
    require_tensor(input, "logcumsumexp")
    d = _scan_dim(input, dim, axis, "logcumsumexp")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_type_name(input._data.dtype)}'")
    return dispatch(OPS["logcumsumexp"], (input,), {"dim": d})


# ---- value tests -----------------------------------------------------------------------------------

def _value_test(name: str):
    op = OPS[name]

    def fn(input):
        require_tensor(input, name)
        return dispatch(op, (input,), {})

    fn.__name__ = name
    return fn


isnan, isinf, isfinite, isposinf, isneginf = (_value_test(n) for n in ("isnan", "isinf", "isfinite", "isposinf",
                                                                        "isneginf"))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    require_tensor(input, "isclose")
    require_tensor(other, "isclose", "other", 2)
    a, b = input._data.dtype, other._data.dtype
    if a != b:
        raise RuntimeError(f"{_type_name(a)} did not match {_type_name(b)}")
    for label, value in (("rtol", rtol), ("atol", atol)):
        if value < 0:
            raise RuntimeError(f"{label} must be greater than or equal to zero, but got {value:g}")
    return dispatch(OPS["isclose"], (input, other), {"rtol": float(rtol), "atol": float(atol),
                                                     "equal_nan": bool(equal_nan)})


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    require_tensor(input, "allclose")
    require_tensor(other, "allclose", "other", 2)
    return bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


# ---- Tensor methods -----------------------------------------------------------------------------------

def _method(function):
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)
    method.__name__ = function.__name__
    method.__wrapped__ = function  # its signature is the function's (read when NumPy's names are added)
    return method


METHODS = {name: _method(f) for name, f in (
    ("var", var), ("std", std), ("prod", prod), ("any", any), ("all", all), ("cumsum", cumsum),
    ("cumprod", cumprod), ("cummax", cummax), ("cummin", cummin), ("logcumsumexp", logcumsumexp),
    ("isnan", isnan), ("isinf", isinf), ("isfinite", isfinite), ("isposinf", isposinf),
    ("isneginf", isneginf), ("isclose", isclose), ("allclose", allclose))}

__all__ = ["all", "allclose", "any", "cummax", "cummin", "cumprod", "cumsum", "isclose", "isfinite", "isinf",
           "isnan", "isneginf", "isposinf", "logcumsumexp", "prod", "std", "std_mean", "var", "var_mean"]
