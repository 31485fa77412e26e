"""embedding_bag (sum, mean or max of the looked-up rows of each bag, with per-sample weights for sum),
embedding's max_norm renormalisation, and rrelu with its noise.

embedding_bag's bags come from offsets (each index's bag is the last offset at or before it), computed
inside the op, so its result's shape depends only on the input shapes and it records and replays like
any op. Its backward gathers the output gradient back to each index (staticgrad ops, so it
differentiates again); max mode sends each output element's gradient to the row that won it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.ops.registry import OPS, OpDef, Save, register

SUM, MEAN, MAX = 0, 1, 2


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def _bags(offsets, count: int, out=None, num_bags=0, padding_idx=-1):
    """(the bag of each of ``count`` indices, as int64)."""
    return _into(np.searchsorted(offsets, np.arange(count), side="right").astype(np.int64) - 1, out)


def _bag_of(indices, offsets, out=None, num_bags=0):
    """The bag of each index."""
    return _bags(offsets, indices.size, out)


def _bag_counts(indices, offsets, out=None, num_bags=0, padding_idx=-1, dtype=None):
    """How many indices (other than padding_idx) each bag holds, as ``dtype``."""
    bag = _bags(offsets, indices.size)
    valid = (indices != padding_idx) & (bag < num_bags)
    return _into(np.bincount(bag[valid], minlength=num_bags)[:num_bags].astype(dtype), out)


register(OpDef("bag_of", _bag_of, "other", dtype_rule="index"))
register(OpDef("bag_counts", _bag_counts, "other", dtype_rule="attr"))


def _embedding_bag(weight, indices, offsets, *per_sample_weights, out=None, mode=SUM, num_bags=0, padding_idx=-1):
    """(num_bags, D) bag values and, for max, the (num_bags, D) winning row of each (0 elsewhere)."""
    bag = _bags(offsets, indices.size)
    valid = (indices != padding_idx) & (bag < num_bags)
    rows = np.take(weight, indices, axis=0)
    if per_sample_weights:
        rows = rows * per_sample_weights[0][:, None]
    width = weight.shape[1]
    winners = np.zeros((num_bags, width), np.int64)
    if mode == MAX:
        result = np.full((num_bags, width), -np.inf, weight.dtype)
        np.maximum.at(result, bag[valid], rows[valid])
        empty = np.isneginf(result) & (np.bincount(bag[valid], minlength=num_bags)[:num_bags, None] == 0)
        result[empty] = 0
        # the first index of each bag whose row holds the maximum
        hits = (rows == result[np.minimum(bag, num_bags - 1)]) & valid[:, None] & (bag < num_bags)[:, None]
        order = np.where(hits, np.arange(indices.size)[:, None], indices.size)
        first = np.full((num_bags, width), indices.size, np.int64)
        np.minimum.at(first, bag[valid], order[valid])
        winners = np.where(first < indices.size, indices[np.minimum(first, max(indices.size - 1, 0))], 0)
        return result, winners.astype(np.int64)
    result = np.zeros((num_bags, width), weight.dtype)
    np.add.at(result, bag[valid], rows[valid])
    if mode == MEAN:
        counts = np.bincount(bag[valid], minlength=num_bags)[:num_bags]
        result = result / np.maximum(counts, 1)[:, None].astype(weight.dtype)
    return result.astype(weight.dtype, copy=False), winners


def _embedding_bag_backward(F, grads, s, at, need):
    g = grads[0]
    weight, indices, offsets = s["weight"], s["indices"], s["offsets"]
    mode, num_bags, padding_idx = at["mode"], at["num_bags"], at["padding_idx"]
    num_weights = weight.shape[0]
    grad_weight = grad_weights_per_sample = None
    if mode == MAX:
        counts = F.bag_counts(indices, offsets, num_bags=num_bags, padding_idx=padding_idx, dtype=g.dtype)
        g = g * F.unsqueeze(F.to_dtype(F.gt_scalar(counts, other=0.0), dtype=g.dtype), dim=1)
        if need[0]:
            grad_weight = F.scatter_add_zeros(g, s["winners"], dim=0, sizes=tuple(weight.shape))
        return grad_weight, None, None
    bag = F.bag_of(indices, offsets, num_bags=num_bags)
    per_index = F.embedding(g, bag, num_weights=num_bags, padding_idx=-1)  # each index's bag gradient
    if mode == MEAN:
        counts = F.bag_counts(indices, offsets, num_bags=num_bags, padding_idx=padding_idx, dtype=g.dtype)
        per_index = per_index / F.unsqueeze(F.embedding(F.clamp_min(counts, min=1.0, max=None), bag,
                                                        num_weights=num_bags, padding_idx=-1), dim=1)
    has_weights = "per_sample_weights" in s
    if need[0]:
        scaled = per_index * F.unsqueeze(s["per_sample_weights"], dim=1) if has_weights else per_index
        grad_weight = F.embedding_backward(scaled, indices, num_weights=num_weights, padding_idx=padding_idx)
    if has_weights and need[3]:
        rows = F.embedding(weight, indices, num_weights=num_weights, padding_idx=padding_idx)
        products = F.sum(per_index * rows, dim=(1,))
        if padding_idx >= 0:
            products = F.masked_fill(products, F.eq_scalar(indices, other=padding_idx), value=0.0)
        grad_weights_per_sample = products
    return (grad_weight, None, None) + ((grad_weights_per_sample,) if has_weights else ())


_BAG_SAVES = (Save("weight", 0), Save("indices", 1), Save("offsets", 2), Save("winners", "result:1"))
register(OpDef("embedding_bag", _embedding_bag, "other", "EmbeddingBagBackward0", _embedding_bag_backward,
               _BAG_SAVES, "same", grad_inputs=(0, 3)))   # (per_sample_weights: an edge to nothing, as in PyTorch)
register(OpDef("embedding_bag_weighted", _embedding_bag, "other", "EmbeddingBagBackward0", _embedding_bag_backward,
               _BAG_SAVES + (Save("per_sample_weights", 3),), "same", grad_inputs=(0, 3)))


# ---- embedding's max_norm: the looked-up rows rescaled in place -----------------------------------------

def _embedding_renorm(weight, indices, out=None, max_norm=1.0, norm_type=2.0):
    """Each row named in ``indices`` whose p-norm exceeds max_norm scaled by max_norm / (norm + 1e-7), the
    norm taken in the weight's dtype and the scale in float64 (then the weight's dtype), as PyTorch's."""
    rows = np.unique(indices.reshape(-1))
    picked = np.abs(weight[rows])
    T = weight.dtype.type
    if norm_type == 2:
        norms = np.sqrt(np.sum(picked * picked, axis=1))
    elif norm_type == 1:
        norms = np.sum(picked, axis=1)
    elif np.isinf(norm_type):
        norms = np.max(picked, axis=1)
    else:
        norms = np.power(np.sum(np.power(picked, T(norm_type)), axis=1), T(1.0 / norm_type))
    norms = norms.astype(np.float64)
    scale = max_norm / (norms + 1e-7)
    result = weight.copy()
    big = norms > max_norm
    result[rows[big]] = weight[rows[big]] * scale[big, None].astype(weight.dtype)
    return _into(result, out)


register(OpDef("embedding_renorm", _embedding_renorm, "other", dtype_rule="same"))


# ---- rrelu: x where x > 0, x * noise elsewhere (noise the slope: drawn in training, their mean in eval) ----

def _rrelu(x, noise, out=None):
    return _into(np.where(x > 0, x, np.multiply(x, noise)), out)


register(OpDef("rrelu_with_noise", _rrelu, "elementwise", "RreluWithNoiseBackward0",
               lambda F, g, s, at, need: (F.where(F.gt_scalar(s["self"], other=0.0), g, g * s["noise"]), None),
               (Save("self", 0), Save("noise", 1)), "same", grad_inputs=(0,)))
register(replace(OPS["rrelu_with_noise"], name="rrelu_with_noise_inplace", node_name="RreluWithNoiseBackward1"))
