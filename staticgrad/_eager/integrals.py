"""torch.cov, corrcoef, trapezoid (trapz) and cumulative_trapezoid, composed from other ops exactly as
PyTorch composes them (Correlation.cpp, Integration.cpp), so their graphs show PyTorch's nodes and their
gradients follow. cov with weights reads the weights' values for its checks, as PyTorch does, so a
compiled function refuses it (cov without weights reads nothing)."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.composites import select
from staticgrad._eager.creation import zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.math_functions import clamp
from staticgrad._eager.movement import diagonal
from staticgrad._eager.reductions_more import cumsum
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes

DEGREES_OF_FREEDOM_WARNING = ("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                              "of observations.")


# ---- cov, corrcoef -----------------------------------------------------------------------------------

def _check_weights(name: str, w: Tensor, observations: int, integral: bool) -> None:
    if w._data.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{w._data.ndim} dimensions")
    kind_ok = w._data.dtype.kind in "iu" if integral else w._data.dtype.kind == "f"
    if not kind_ok:
        wanted = "integral" if integral else "floating point"
        raise RuntimeError(f"cov(): expected {name} to have {wanted} dtype but got {name} with "
                           f"{fn._scalar_type(w)} dtype")
    if w._data.size != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {w._data.size} != {observations}")
    if observations and not bool(fn.ge(fn.min(w), 0)):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows (variables) over the columns (observations), optionally weighted."""
    fn.require_tensor(input, "cov")
    if input._data.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input._data.ndim} dimensions")
    if input._data.dtype == np.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = fn.view(input, (1, -1)) if input._data.ndim < 2 else input
    observations = x._data.shape[1]
    w = None
    if fweights is not None:
        _check_weights("fweights", fweights, observations, integral=True)
        w = fweights
    if aweights is not None:
        _check_weights("aweights", aweights, observations, integral=False)
        w = aweights if w is None else fn.mul(w, aweights)
    if w is None:  # PyTorch's scalar_tensor(observations, dtype=long)
        w_sum = dispatch(OPS["full"], (), {"shape": (), "value": observations, "dtype": np.dtype(np.int64)})
    else:
        w_sum = fn.sum(w)
        if not bool(fn.ne(w_sum, 0)):
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
    average = fn.div(fn.sum(fn.mul(x, w) if w is not None else x, 1), w_sum)
    if w is not None and aweights is not None and correction != 0:
        weighted = dispatch(OPS["mul_scalar_cpp"], (fn.sum(fn.mul(w, aweights)),), {"other": correction})
        norm_factor = fn.sub(w_sum, fn.div(weighted, w_sum))
    else:
        norm_factor = fn.sub(w_sum, correction)
    no_freedom = observations - correction <= 0 if w is None else bool(fn.le(norm_factor, 0))
    if no_freedom:
        warnings.warn(DEGREES_OF_FREEDOM_WARNING, UserWarning, stacklevel=2)
        norm_factor = fn.mul(norm_factor, 0)
    x = fn.sub(x, fn.unsqueeze(average, 1))
    product = fn.mm(x, fn.t(fn.mul(x, w) if w is not None else x))
    return fn.squeeze(fn.div(product, norm_factor))


def corrcoef(input):
    """Pearson correlation coefficients of the rows: cov normalised by the standard deviations, clipped
    to [-1, 1] (ClampBackward1)."""
    fn.require_tensor(input, "corrcoef")
    if input._data.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input._data.ndim} dimensions")
    c = cov(input)
    if c._data.ndim == 0:
        return fn.div(c, c)
    stddev = fn.sqrt(diagonal(c))
    c = fn.div(c, fn.view(stddev, (-1, 1)))
    c = fn.div(c, fn.view(stddev, (1, -1)))
    return clamp(c, -1, 1)


# ---- trapezoid, cumulative_trapezoid -------------------------------------------------------------------

def _slice(t: Tensor, dim: int, start: int, end: int) -> Tensor:
    return dispatch(OPS["slice"], (t,), {"dim": dim, "start": start, "end": end, "step": 1})


def _times(t: Tensor, number: float) -> Tensor:
    """at::mul(Tensor, Scalar): MulBackward1."""
    return dispatch(OPS["mul_scalar_cpp"], (t,), {"other": number})


def _halved(t: Tensor) -> Tensor:
    """at::div(Tensor, 2.): DivBackward1."""
    return dispatch(OPS["div_scalar_cpp"], (t,), {"other": 2.0})


def _sample_dim(name: str, y: Tensor, dim: int) -> int:
    if y._data.ndim == 0:
        raise fn._no_dims(dim)
    return _normalize_dim(dim, y._data.ndim)


def _spacing(name: str, y: Tensor, x: Tensor, dim: int) -> Tensor:
    """dx: the differences of x along ``dim``, x first viewed to broadcast against y (PyTorch's rules)."""
    if y._data.dtype == np.bool_ or x._data.dtype == np.bool_:
        raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not supported")
    ndim = y._data.ndim
    if x._data.ndim == 1:
        if x._data.shape[0] != y._data.shape[dim]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        shape = [1] * ndim
        shape[dim] = x._data.shape[0]
        x = fn.view(x, tuple(shape))
    elif x._data.ndim < ndim:
        x = fn.view(x, (1,) * (ndim - x._data.ndim) + x._data.shape)
    n = x._data.shape[dim]
    return fn.sub(_slice(x, dim, 1, max(n, 1)), _slice(x, dim, 0, max(n - 1, 0)))


def _pairs_sum(y: Tensor, dim: int) -> Tensor:
    """y[1:] + y[:-1] along ``dim`` (left + right, in PyTorch's order)."""
    n = y._data.shape[dim]
    return fn.add(_slice(y, dim, 0, max(n - 1, 0)), _slice(y, dim, 1, max(n, 1)))


def _number_dx(name: str, y: Tensor, dx) -> float:
    if y._data.dtype == np.bool_:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported")
    if isinstance(dx, (bool, np.bool_, complex)):
        raise RuntimeError(f"{name}: Currently, we only support dx as a real number.")
    return float(dx)


def _check_form(name: str, x, dx) -> None:
    """PyTorch's overloads: (y, x: Tensor) or (y, *, dx: number); x a number, or both given, match none."""
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, "
                        f"{fn._type_name(x)}), but expected one of:")
    if x is not None and dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, Tensor, "
                        f"dx={fn._type_name(dx)}), but expected one of:")


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along ``dim``: with sample points x (a tensor), or a constant spacing dx (1)."""
    fn.require_tensor(y, "trapezoid", "y")
    _check_form("trapezoid", x, dx)
    d = _sample_dim("trapezoid", y, dim)
    if y._data.shape[d] == 0:
        shape = y._data.shape[:d] + y._data.shape[d + 1:]
        return zeros(shape, dtype=_dtypes.from_numpy_dtype(y._data.dtype))
    if isinstance(x, Tensor):
        spacing = _spacing("trapezoid", y, x, d)
        return _halved(fn.sum(fn.mul(_pairs_sum(y, d), spacing), d))
    step = _number_dx("trapezoid", y, 1.0 if dx is None else dx)
    n = y._data.shape[d]
    ends = fn.add(select(y, d, 0), select(y, d, n - 1))
    return _times(fn.sub(fn.sum(y, d), _times(ends, 0.5)), step)


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: trapezoid under its older name."""
    _check_form("trapz", x, dx)
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along ``dim`` (one fewer element than y there)."""
    fn.require_tensor(y, "cumulative_trapezoid", "y")
    _check_form("cumulative_trapezoid", x, dx)
    d = _sample_dim("cumulative_trapezoid", y, dim)
    if isinstance(x, Tensor):
        spacing = _spacing("cumulative_trapezoid", y, x, d)
        return _halved(cumsum(fn.mul(_pairs_sum(y, d), spacing), d))
    step = _number_dx("cumulative_trapezoid", y, 1.0 if dx is None else dx)
    return cumsum(_times(_pairs_sum(y, d), step / 2.0), d)


FUNCTIONS = {"cov": cov, "corrcoef": corrcoef}
METHODS = dict(FUNCTIONS)
