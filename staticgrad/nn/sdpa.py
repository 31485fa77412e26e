"""scaled_dot_product_attention as PyTorch picks it on CPU: 4-D query, key and value without
dropout (and a 2-D or 4-D mask that needs no gradient) run the fused op of staticgrad.ops.attention
under ScaledDotProductFlashAttentionForCpuBackward0, which keeps the output and the rows'
logsumexp rather than the weights; anything else runs PyTorch's math path written with staticgrad
ops: q and k each scaled by sqrt(scale), masks added as -inf, a softmax that gives 0 (not nan) on
rows with every key masked, dropout, then the product with v. (Kept apart from nn.attention:
nn.functional exports it, and the modules there import nn.functional.)"""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import arange, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.functions import _CPP_TYPE_NAMES
from staticgrad.nn.dropout import dropout
from staticgrad.ops import OPS


def _additive_mask(mask, dtype, keep_where_true: bool):
    """A boolean mask as an additive float mask (-inf where attention is not allowed); a float mask
    as it is. ``keep_where_true``: SDPA's convention (True = attend); MHA's is the opposite."""
    if mask is None or mask._data.dtype.kind != "b":
        return mask
    blocked = fn.logical_not(mask) if keep_where_true else mask
    return fn.masked_fill(zeros(*mask.shape, dtype=dtype), blocked, -math.inf)


def _causal_mask(length: int, source_length: int, dtype):
    """-inf above the diagonal (a query attends to keys at its position and before)."""
    rows = fn.unsqueeze(arange(length), 1)
    cols = fn.unsqueeze(arange(source_length), 0)
    return fn.masked_fill(zeros(length, source_length, dtype=dtype), fn.gt(cols, rows), -math.inf)


def _repeat_heads(x, times: int):
    """``x.repeat_interleave(times, -3)``: each key/value head shared by ``times`` query heads."""
    if times == 1:
        return x
    shape = tuple(x.shape)
    expanded = fn.expand(fn.unsqueeze(x, -3), shape[:-2] + (times,) + shape[-2:])
    return fn.reshape(expanded, shape[:-3] + (shape[-3] * times,) + shape[-2:])


def _safe_softmax(scores):
    """softmax over the last dim, 0 on rows where every score is -inf (PyTorch's _safe_softmax)."""
    all_masked = fn.eq(fn.amax(scores, -1, keepdim=True), -math.inf)
    return fn.masked_fill(fn.softmax(fn.masked_fill(scores, all_masked, 0.0), -1), all_masked, 0.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale=None, enable_gqa: bool = False):
    """softmax(q k^T * scale + mask) v over the last two dims, with optional dropout on the weights."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        fn.require_tensor(t, "scaled_dot_product_attention", name)
    if not (query.dtype == key.dtype == value.dtype):
        q, k, v = (_CPP_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name) for t in (query, key, value))
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: {q} "
                           f"key.dtype: {k} and value.dtype: {v} instead.")
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    length, source_length = query.shape[-2], key.shape[-2]
    if _flash_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
        return _flash(query, key, value, attn_mask, is_causal, scale)
    if enable_gqa and query.dim() >= 3:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads or heads % value.shape[-3]:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
        key, value = _repeat_heads(key, heads // kv_heads), _repeat_heads(value, heads // value.shape[-3])
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    root = math.sqrt(scale_factor)
    scores = fn.matmul(fn.mul(query, root), fn.mul(fn.transpose(key, -2, -1), root))
    mask = _causal_mask(length, source_length, query.dtype) if is_causal else \
        _additive_mask(attn_mask, query.dtype, keep_where_true=True)
    if mask is not None:
        scores = fn.add(scores, mask)
        weights = _safe_softmax(scores)
    else:
        weights = fn.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return fn.matmul(weights, value)


_FLASH_DTYPES = frozenset(("float16", "float32", "float64"))


def _flash_applies(query, key, value, attn_mask, dropout_p: float, enable_gqa: bool) -> bool:
    """PyTorch's CPU choice of its fused kernel, on shapes, strides and dtypes only: 4-D inputs of one
    float dtype with one head size, innermost dim contiguous, no dropout, equal batch sizes, key and
    value heads equal to the query's (or dividing them, with enable_gqa), non-empty sequences, and
    no mask or a 2-D or 4-D one that needs no gradient."""
    q, k, v = query._data, key._data, value._data
    if dropout_p > 0.0 or not (q.ndim == k.ndim == v.ndim == 4) or q.dtype.name not in _FLASH_DTYPES:
        return False
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1]) or 0 in (q.shape[-2], k.shape[-2]):
        return False
    if any(a.shape[-1] > 1 and a.strides[-1] != a.itemsize for a in (q, k, v)):
        return False
    if not (q.shape[0] == k.shape[0] == v.shape[0]) or k.shape[1] != v.shape[1]:
        return False
    if q.shape[1] != k.shape[1] and not (enable_gqa and q.shape[1] % k.shape[1] == 0):
        return False
    return attn_mask is None or (attn_mask._data.ndim in (2, 4) and not attn_mask.requires_grad)


def _flash(query, key, value, attn_mask, is_causal: bool, scale):
    """The fused op's output; a boolean mask enters as PyTorch passes it, an additive float mask."""
    attrs = {"scale": 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale),
             "is_causal": bool(is_causal), "groups": query.shape[1] // key.shape[1],
             "given_scale": None if scale is None else float(scale)}
    if attn_mask is None:
        output, _ = dispatch(OPS["sdpa_flash"], (query, key, value), attrs)
    else:
        mask = _additive_mask(attn_mask, query.dtype, keep_where_true=True)
        output, _ = dispatch(OPS["sdpa_flash_masked"], (query, key, value, mask), attrs)
    return output
