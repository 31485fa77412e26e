"""The vector p-norm over some dims (torch.linalg.vector_norm, Tensor.norm, what F.normalize divides
by), with PyTorch's gradient: zero where the norm is zero, split evenly among ties for p = inf."""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OpDef, Save, register


def _vector_norm(x, out=None, ord=2.0, dim=None, keepdim=False):
    axis = dim if dim is None else tuple(dim)
    if ord == 2:
        result = np.sqrt(np.sum(np.multiply(x, x), axis=axis, keepdims=keepdim))
    elif ord == 1:
        result = np.sum(np.abs(x), axis=axis, keepdims=keepdim)
    elif math.isinf(ord):
        reduce = np.amax if ord > 0 else np.amin
        result = reduce(np.abs(x), axis=axis, keepdims=keepdim) if x.size else np.zeros(())
    elif ord == 0:
        result = np.sum(x != 0, axis=axis, keepdims=keepdim).astype(x.dtype)
    else:
        T = x.dtype.type
        result = np.power(np.sum(np.power(np.abs(x), T(ord)), axis=axis, keepdims=keepdim), T(1.0 / ord))
    return into(np.asarray(result, dtype=x.dtype), out)


def _kept(F, t, dim, ndim: int, keepdim: bool):
    """``t`` with the reduced dims put back as size 1 (what keepdim=True would have given)."""
    if keepdim:
        return t
    for d in sorted(range(ndim) if dim is None else dim):
        t = F.unsqueeze(t, dim=d)
    return t


def _vector_norm_backward(F, g, s, at, need):
    x, ord, dim = s["self"], at["ord"], at["dim"]
    ndim = len(x.shape)
    g = _kept(F, g, dim, ndim, at["keepdim"])
    norm = _kept(F, s["result"], dim, ndim, at["keepdim"])
    if ord == 0:
        return (F.zeros_like(x),)
    if ord == 1:
        return (g * F.sign(x),)
    zero_norm = F.eq_scalar(norm, other=0)
    if math.isinf(ord):
        magnitude = F.abs(x)
        mask = F.to_dtype(F.eq(magnitude, norm), dtype=g.dtype)
        count = F.sum(mask, dim=tuple(range(ndim)) if dim is None else tuple(dim), keepdim=True)
        return (F.sign(x) * ((g / count) * mask),)
    safe_norm = F.masked_fill(norm, zero_norm, value=1.0)
    if ord == 2:
        return (g * F.masked_fill(x / safe_norm, zero_norm, value=0.0),)
    scaled = F.sign(x) * F.pow_scalar(F.abs(x), exponent=ord - 1)
    if ord < 1:
        scaled = F.masked_fill(scaled, F.eq_scalar(x, other=0), value=0.0)
        return (scaled * g * F.pow_scalar(norm, exponent=1 - ord),)
    return (scaled * F.masked_fill(g / F.pow_scalar(safe_norm, exponent=ord - 1), zero_norm, value=0.0),)


register(OpDef("vector_norm", _vector_norm, "reduction", "LinalgVectorNormBackward0", _vector_norm_backward,
               (Save("self", 0), Save("result", "result"), Save("ord", "attr:ord", freed=False),
                Save("dim", "attr:dim", freed=False), Save("keepdim", "attr:keepdim", freed=False)), "same"))
