"""Fused attention, as PyTorch runs it on CPU for 4-D query/key/value without dropout: one op
(ScaledDotProductFlashAttentionForCpuBackward0) that keeps the output and the rows' logsumexp
instead of the attention weights, and a backward op that recomputes the weights from them.

Forward: scores = (q k^T) * scale + mask (causal: -inf above the diagonal); out = exp(scores - max)
v / rowsum, logsumexp = max + log(rowsum). A row with every key masked gives out 0 and logsumexp 0,
as PyTorch's kernel does. float16 computes in float32 and rounds once; logsumexp stays float32.
With ``groups`` > 1 (grouped-query heads) each key/value head serves ``groups`` query heads.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


def _shared_heads(x, groups: int):
    """Key or value heads repeated so each query head has its own (grouped-query attention)."""
    return x if groups == 1 else np.repeat(x, groups, axis=1)


def _summed_groups(grad, groups: int):
    """A repeated head's gradient summed back onto the key/value head it came from."""
    if groups == 1:
        return grad
    batch, heads, length, dim = grad.shape
    return grad.reshape(batch, heads // groups, groups, length, dim).sum(axis=2)


def _scores(q, k, mask, scale: float, is_causal: bool):
    """(q k^T) * scale with the mask added (or the causal -inf above the diagonal)."""
    work = q.dtype.type
    scores = np.matmul(q, np.swapaxes(k, -1, -2))
    scores *= work(scale)
    if is_causal:
        length, source = scores.shape[-2:]
        above = np.triu(np.ones((length, source), bool), 1)
        scores[..., above] = -np.inf
    elif mask is not None:
        scores += mask.astype(scores.dtype, copy=False)
    return scores


def _work(*arrays):
    """The arrays in the dtype the kernel computes in (float32 for float16)."""
    return [None if a is None else (a.astype(_FLOAT32) if a.dtype == _FLOAT16 else a) for a in arrays]


def _flash_forward(q, k, v, mask=None, out=None, scale=1.0, is_causal=False, groups=1, given_scale=None):
    dtype = q.dtype
    q, k, v, mask = _work(q, k, v, mask)
    scores = _scores(q, _shared_heads(k, groups), mask, scale, is_causal)
    top = scores.max(axis=-1, keepdims=True)
    empty = np.isneginf(top)                  # every key masked: PyTorch gives 0 out and 0 logsumexp
    top[empty] = 0
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    output = np.matmul(weights, _shared_heads(v, groups))
    total[empty] = 1
    output /= total
    logsumexp = (top + np.log(total))[..., 0]
    return output.astype(dtype, copy=False), logsumexp


def _flash_backward(g, q, k, v, output, logsumexp, mask=None, out=None, scale=1.0, is_causal=False, groups=1):
    dtypes = (q.dtype, k.dtype, v.dtype)
    g, q, k, v, output, mask = _work(g, q, k, v, output, mask)
    keys, values = _shared_heads(k, groups), _shared_heads(v, groups)
    weights = np.exp(_scores(q, keys, mask, scale, is_causal) - logsumexp[..., None])
    grad_v = np.matmul(np.swapaxes(weights, -1, -2), g)
    grad_weights = np.matmul(g, np.swapaxes(values, -1, -2))
    grad_weights -= (g * output).sum(axis=-1, keepdims=True)
    grad_scores = weights * grad_weights
    work = q.dtype.type
    grad_q = np.matmul(grad_scores, keys)
    grad_q *= work(scale)
    grad_k = np.matmul(np.swapaxes(grad_scores, -1, -2), q)
    grad_k *= work(scale)
    grads = (grad_q, _summed_groups(grad_k, groups), _summed_groups(grad_v, groups))
    return tuple(grad.astype(dtype, copy=False) for grad, dtype in zip(grads, dtypes))


def _flash_attention_backward_formula(F, grads, s, at, need):
    g = grads[0]
    if g is None:
        return (None,) * len(need)
    masked = "attn_mask" in s
    inputs = (g, s["query"], s["key"], s["value"], s["output"], s["logsumexp"]) + ((s["attn_mask"],) if masked else ())
    op = F.sdpa_flash_backward_masked if masked else F.sdpa_flash_backward
    grad_q, grad_k, grad_v = op(*inputs, scale=at["scale"], is_causal=at["is_causal"], groups=at["groups"])
    return tuple(grad if n else None for grad, n in zip((grad_q, grad_k, grad_v), need))


def _not_differentiable(F, grads, s, at, need):
    raise RuntimeError("derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented")


_SAVES = (Save("query", 0), Save("key", 1), Save("value", 2), Save("output", "result:0"),
          Save("logsumexp", "result:1"), Save("scale", "attr:given_scale", freed=False),
          Save("is_causal", "attr:is_causal", freed=False))
register(OpDef("sdpa_flash", _flash_forward, "other", "ScaledDotProductFlashAttentionForCpuBackward0",
               _flash_attention_backward_formula, _SAVES, "same", grad_inputs=(0, 1, 2)))
register(OpDef("sdpa_flash_masked", _flash_forward, "other", "ScaledDotProductFlashAttentionForCpuBackward0",
               _flash_attention_backward_formula, _SAVES + (Save("attn_mask", 3),), "same", grad_inputs=(0, 1, 2)))
for _name in ("sdpa_flash_backward", "sdpa_flash_backward_masked"):
    register(OpDef(_name, _flash_backward, "other", "torch::autograd::NotImplemented", _not_differentiable, (),
                   "same", grad_inputs=(0, 1, 2, 3, 4)))
