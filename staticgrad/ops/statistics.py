"""Statistics over dims: var, std, var_mean, std_mean, prod, any, all; and the value tests isnan,
isinf, isfinite, isposinf, isneginf and isclose (no gradient, as in PyTorch)."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad.ops.dtypes import default_float
from staticgrad.ops.reductions import axis_error, keepdim_shape
from staticgrad.ops.registry import OpDef, Save, register


def _axes(a, dim):
    """``dim`` as NumPy's axis: None (all) stays None; () on a 0-dim array reduces its one element."""
    return None if dim is None or a.ndim == 0 else dim


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def reduced_count(shape, dim) -> int:
    """How many elements each output element of a reduction over ``dim`` reads."""
    if dim is None or not shape:
        return int(np.prod(shape, dtype=np.int64))
    return int(np.prod([shape[d] for d in dim], dtype=np.int64))


# ---- var, std and their mean pairs -----------------------------------------------------------

def _variance(a, dim, correction, keepdim):
    with warnings.catch_warnings():  # the public function warns with PyTorch's words
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.var(a, axis=_axes(a, dim), ddof=correction, keepdims=keepdim)


def _var(a, out=None, dim=None, correction=1, keepdim=False):
    return _into(_variance(a, dim, correction, keepdim), out)


def _std(a, out=None, dim=None, correction=1, keepdim=False):
    return _into(np.sqrt(_variance(a, dim, correction, keepdim)), out)


def _var_mean(a, out=None, dim=None, correction=1, keepdim=False):
    return np.asarray(_variance(a, dim, correction, keepdim)), np.asarray(np.mean(a, axis=_axes(a, dim),
                                                                                   keepdims=keepdim))


def _std_mean(a, out=None, dim=None, correction=1, keepdim=False):
    variance, mean = _var_mean(a, dim=dim, correction=correction, keepdim=keepdim)
    return np.sqrt(variance), mean


def _kept(F, t, shape, dim, keepdim):
    """A reduction's result or gradient reshaped to broadcast against the input."""
    return t if keepdim or dim is None else F.view(t, shape=keepdim_shape(shape, dim))


def _var_grad(F, g, x, dim, correction, keepdim):
    """d var: (2 / dof) * g * (x - mean(x)), as PyTorch's var_backward."""
    dof = reduced_count(x.shape, dim) - correction
    centered = x - F.mean(x, dim=dim, keepdim=True)
    scale = 2.0 / dof if dof > 0 else float("inf")  # PyTorch divides by max(0, dof)
    return F.mul_scalar(_kept(F, g, x.shape, dim, keepdim) * centered, other=scale)


def _std_grad(F, g, x, result, dim, correction, keepdim):
    """d std: var's gradient of g / (2 std), zero where std is zero (PyTorch's std_backward)."""
    zero = F.eq_scalar(result, other=0)
    safe = F.masked_fill(result, zero, value=1.0)  # no division by zero (nor its warning) where it is masked
    halved = F.masked_fill(F.div(g, F.mul_scalar(safe, other=2.0)), zero, value=0.0)
    return _var_grad(F, halved, x, dim, correction, keepdim)


def _mean_grad(F, g, x, dim, keepdim):
    count = reduced_count(x.shape, dim)
    return F.div_scalar(F.expand(_kept(F, g, x.shape, dim, keepdim), shape=tuple(x.shape)), other=count)


def _var_backward(F, g, s, at, need):
    return (_var_grad(F, g, s["self"], at.get("dim"), at["correction"], at.get("keepdim", False)),)


def _std_backward(F, g, s, at, need):
    return (_std_grad(F, g, s["self"], s["result"], at.get("dim"), at["correction"], at.get("keepdim", False)),)


def _pair_backward(first_grad):
    def backward(F, grads, s, at, need):
        x, dim, keepdim = s["self"], at.get("dim"), at.get("keepdim", False)
        g_first, g_mean = grads
        total = None
        if g_first is not None:
            total = first_grad(F, g_first, s, x, dim, at["correction"], keepdim)
        if g_mean is not None:
            part = _mean_grad(F, g_mean, x, dim, keepdim)
            total = part if total is None else total + part
        return (total,)
    return backward


_STAT_SAVES = (Save("self", 0), Save("dim", "attr:dim", freed=False),
               Save("correction", "attr:correction", freed=False), Save("keepdim", "attr:keepdim", freed=False))

register(OpDef("var", _var, "reduction", "VarBackward0", _var_backward, _STAT_SAVES, "same", explain=axis_error))
register(OpDef("std", _std, "reduction", "StdBackward0", _std_backward, _STAT_SAVES + (Save("result", "result"),),
               "same", explain=axis_error))
register(OpDef("var_mean", _var_mean, "reduction", "VarMeanBackward0",
               _pair_backward(lambda F, g, s, x, dim, c, k: _var_grad(F, g, x, dim, c, k)),
               _STAT_SAVES, "same", explain=axis_error))
register(OpDef("std_mean", _std_mean, "reduction", "StdMeanBackward0",
               _pair_backward(lambda F, g, s, x, dim, c, k: _std_grad(F, g, x, s["result0"], dim, c, k)),
               _STAT_SAVES + (Save("result0", "result:0"),), "same", explain=axis_error))


# ---- prod -------------------------------------------------------------------------------------

def _prod(a, out=None, dim=None, keepdim=False, dtype=None):
    if dtype is None and a.dtype.kind in "biu":
        dtype = np.int64
    axis = None if dim is None or a.ndim == 0 else (dim,)
    return _into(np.prod(a, axis=axis, keepdims=keepdim, dtype=dtype), out)


def _prod_backward(F, g, s, at, need):
    """g times the product of every other element along the dim: exclusive products from both
    ends (a reverse scan), exact with zeros in the input and differentiable again."""
    x, dim, keepdim = s["self"], at.get("dim"), at.get("keepdim", False)
    shape = tuple(x.shape)
    if not shape:
        return (g,)
    if dim is None:
        flat = F.view(x, shape=(int(np.prod(shape)),))
        others = F.view(_others_product(F, flat, 0), shape=shape)
        return (F.mul(g, others),)
    gk = _kept(F, g, shape, (dim,), keepdim)
    return (F.mul(gk, _others_product(F, x, dim)),)


def _others_product(F, x, dim):
    """prod_{i != k} x_i along ``dim``, for every k."""
    n = x.shape[dim]
    if n == 0:
        return x
    before = F.exclusive_cumprod(x, dim=dim, reverse=False)
    after = F.exclusive_cumprod(x, dim=dim, reverse=True)
    return F.mul(before, after)


register(OpDef("prod", _prod, "reduction", lambda at: "ProdBackward0" if at.get("dim") is None else "ProdBackward1",
               _prod_backward, (Save("self", 0), Save("dim", "attr:dim", freed=False),
                                Save("keepdim", "attr:keepdim", freed=False)), "same", explain=axis_error))


# ---- any, all -----------------------------------------------------------------------------------

def _logical_reduction(function):
    def forward(a, out=None, dim=None, keepdim=False):
        result = function(a, axis=_axes(a, dim), keepdims=keepdim)
        if a.dtype == np.uint8:  # PyTorch keeps uint8 for uint8 input
            result = np.asarray(result, dtype=np.uint8)
        return _into(result, out)
    return forward


register(OpDef("any", _logical_reduction(np.any), "reduction", dtype_rule="same", explain=axis_error))
register(OpDef("all", _logical_reduction(np.all), "reduction", dtype_rule="same", explain=axis_error))


# ---- value tests --------------------------------------------------------------------------------

def _value_test(name, test):
    def forward(a, out=None):
        if a.dtype.kind != "f":
            return _into(np.zeros(a.shape, np.bool_) if name != "isfinite" else np.ones(a.shape, np.bool_), out)
        return test(a, out=out) if out is not None else np.asarray(test(a))
    register(OpDef(name, forward, "elementwise", dtype_rule="bool"))


_value_test("isnan", np.isnan)
_value_test("isinf", np.isinf)
_value_test("isfinite", np.isfinite)
_value_test("isposinf", np.isposinf)
_value_test("isneginf", np.isneginf)


def _isclose(a, b, out=None, rtol=1e-5, atol=1e-8, equal_nan=False):
    """PyTorch's isclose: equal, or both NaN (with equal_nan), or a finite |a - b| within
    atol + |rtol * b|, computed in the default float type for integer inputs."""
    close = np.equal(a, b)
    if a.dtype.kind == "f" and equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    if rtol != 0 or atol != 0:
        if a.dtype.kind != "f":
            a, b = a.astype(default_float().np), b.astype(default_float().np)
        with np.errstate(invalid="ignore", over="ignore"):
            allowed = np.abs(b * a.dtype.type(rtol)) + a.dtype.type(atol)
            actual = np.abs(a - b)
            close |= np.isfinite(actual) & (actual <= allowed)
    return _into(close, out)


register(OpDef("isclose", _isclose, "elementwise", dtype_rule="bool"))
