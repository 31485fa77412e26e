"""The margin losses PyTorch computes in one kernel: soft_margin_loss, multi_margin_loss and
multilabel_margin_loss, with their reduction (0 none, 1 mean, 2 sum) as an attribute.

Forwards are vectorised NumPy over (N, C) or (N, C, C) arrays; backward formulas are staticgrad ops
(the masks that pick which margins are active come from a helper op without a gradient), so they
differentiate again. A 1-D input is one sample.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.ops.registry import OPS, OpDef, Save, register
from staticgrad.ops.vector_norm import _vector_norm  # noqa: F401  (registers vector_norm first)

NONE, MEAN, SUM = 0, 1, 2


def _reduce(loss, reduction: int):
    if reduction == MEAN:
        return np.asarray(loss.mean(), loss.dtype)
    if reduction == SUM:
        return np.asarray(loss.sum(), loss.dtype)
    return loss


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def _grad_scale(F, g, reduction: int, count: int, shape: tuple):
    """The incoming gradient spread back over the unreduced loss of ``shape`` (divided by its size for mean)."""
    if reduction == NONE:
        return g
    if reduction == MEAN:
        g = F.div_scalar(g, other=count)
    return F.expand(g, shape=shape)


# ---- soft_margin_loss: log(1 + exp(-y x)) --------------------------------------------------------------

def _soft_margin(x, y, out=None, reduction=MEAN):
    y = y.astype(x.dtype, copy=False)  # the result takes the input's dtype, as PyTorch's
    return _into(_reduce(np.log1p(np.exp(np.negative(x) * y)), reduction), out)


def _soft_margin_backward(F, g, s, at, need):
    x, y = s["self"], s["target"]
    e = F.exp(F.neg(x) * y)
    slope = F.neg(y) * e / F.add_scalar(e, other=1.0)
    return (slope * _grad_scale(F, g, at["reduction"], int(np.prod(x.shape)), tuple(x.shape)), None)


register(OpDef("soft_margin_loss", _soft_margin, "other", "SoftMarginLossBackward0", _soft_margin_backward,
               (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False)), "same",
               grad_inputs=(0,), nondifferentiable=((1, "soft_margin_loss", "target"),)))


# ---- multi_margin_loss: sum over i != y of w_y max(0, margin - x_y + x_i)^p / C ------------------------

def _as_matrix(x, target):
    return (x[None], target.reshape(1)) if x.ndim == 1 else (x, target)


def _multi_margin_terms(x, target, p, margin, weight):
    x2, t = _as_matrix(x, target)
    chosen = np.take_along_axis(x2, t[:, None], axis=1)
    margins = np.maximum(x.dtype.type(margin) - chosen + x2, 0)
    if p == 2:
        margins = margins * margins
    if weight is not None:
        margins = margins * weight[t][:, None]
    margins[np.arange(x2.shape[0]), t] = 0
    return margins.sum(axis=1) / x.dtype.type(x2.shape[1])


def _multi_margin(x, target, *weight, out=None, p=1, margin=1.0, reduction=MEAN):
    loss = _multi_margin_terms(x, target, p, margin, weight[0] if weight else None)
    if x.ndim == 1:
        loss = loss.reshape(())
    return _into(_reduce(loss, reduction), out)


def _margin_masks(target, out=None, classes=1, kind="multi", dtype=None):
    """(active class weights, other class weights) per sample, as float (N, C) masks: for multi_margin
    the target's one-hot and its complement; for multilabel_margin how often each class is listed
    before the first -1, and whether it is listed at all (complemented)."""
    t = target.reshape(1, -1) if target.ndim == 1 else target
    if kind == "multi":
        one_hot = np.arange(classes)[None, :] == t.reshape(-1, 1)
        return one_hot.astype(dtype), (~one_hot).astype(dtype)
    valid = np.cumprod(t != -1, axis=1).astype(bool)
    listed = (t[:, :, None] == np.arange(classes)[None, None, :]) & valid[:, :, None]
    count = listed.sum(axis=1)
    return count.astype(dtype), (count == 0).astype(dtype)


register(OpDef("margin_masks", _margin_masks, "other", dtype_rule="attr"))


def _multi_margin_backward(F, g, s, at, need):
    x, target, p, margin = s["self"], s["target"], at["p"], at["margin"]
    x2 = F.unsqueeze(x, dim=0) if len(x.shape) == 1 else x
    classes = x2.shape[1]
    one_hot, others = F.margin_masks(target, classes=classes, kind="multi", dtype=x.dtype)
    chosen = F.sum(x2 * one_hot, dim=(1,), keepdim=True)
    d = F.add_scalar(x2 - chosen, other=margin)
    active = F.to_dtype(F.gt_scalar(d, other=0.0), dtype=x.dtype) * others
    slope = F.mul_scalar(d * active, other=2.0) if p == 2 else active
    if "weight" in s:
        slope = slope * F.unsqueeze(F.sum(one_hot * F.unsqueeze(s["weight"], dim=0), dim=(1,)), dim=1)
    scale = _grad_scale(F, g, at["reduction"], x2.shape[0], (x2.shape[0],))
    scale = F.div_scalar(F.view(scale, shape=(x2.shape[0], 1)), other=classes)
    slope = slope * scale
    grad = slope - one_hot * F.sum(slope, dim=(1,), keepdim=True)
    return (F.view(grad, shape=tuple(x.shape)), None) + ((None,) if "weight" in s else ())


_MULTI_SAVES = (Save("self", 0), Save("target", 1), Save("p", "attr:p", freed=False),
                Save("margin", "attr:margin", freed=False), Save("reduction", "attr:reduction", freed=False))
register(OpDef("multi_margin_loss", _multi_margin, "other", "MultiMarginLossBackward0", _multi_margin_backward,
               _MULTI_SAVES, "same", grad_inputs=(0,)))
register(OpDef("multi_margin_loss_weighted", _multi_margin, "other", "MultiMarginLossBackward0",
               _multi_margin_backward, _MULTI_SAVES + (Save("weight", 2),), "same", grad_inputs=(0,),
               nondifferentiable=((2, "multi_margin_loss", "weight"),)))


# ---- multilabel_margin_loss: sum over listed j, unlisted i of max(0, 1 - x_j + x_i) / C ----------------

def _multilabel_margin(x, target, out=None, reduction=MEAN):
    x2, t = (x[None], target[None]) if x.ndim == 1 else (x, target)
    count, others = _margin_masks(t, classes=x2.shape[1], kind="multilabel", dtype=x.dtype)
    margins = np.maximum(x.dtype.type(1) - x2[:, :, None] + x2[:, None, :], 0)  # [n, j, i]
    loss = np.einsum("nji,nj,ni->n", margins, count, others) / x.dtype.type(x2.shape[1])
    if x.ndim == 1:
        loss = loss.reshape(())
    return _into(_reduce(np.asarray(loss, x.dtype), reduction), out)


def _multilabel_margin_backward(F, g, s, at, need):
    x, target = s["self"], s["target"]
    x2 = F.unsqueeze(x, dim=0) if len(x.shape) == 1 else x
    rows, classes = x2.shape
    count, others = F.margin_masks(target, classes=classes, kind="multilabel", dtype=x.dtype)
    d = F.rsub_scalar(F.unsqueeze(x2, dim=2) - F.unsqueeze(x2, dim=1), other=1.0)
    active = F.to_dtype(F.gt_scalar(d, other=0.0), dtype=x.dtype) * F.unsqueeze(count, dim=2) \
        * F.unsqueeze(others, dim=1)
    scale = _grad_scale(F, g, at["reduction"], rows, (rows,))
    scale = F.div_scalar(F.view(scale, shape=(rows, 1)), other=classes)
    grad = (F.sum(active, dim=(1,)) - F.sum(active, dim=(2,))) * scale
    return (F.view(grad, shape=tuple(x.shape)), None)


register(OpDef("multilabel_margin_loss", _multilabel_margin, "other", "MultilabelMarginLossBackward0",
               _multilabel_margin_backward,
               (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False)), "same",
               grad_inputs=(0,), nondifferentiable=((1, "soft_margin_loss", "target"),)))


# at::norm(x, p, dim, keepdim), as pairwise_distance calls it: the vector norm under its own node name.
register(replace(OPS["vector_norm"], name="norm_dims", node_name="NormBackward1"))
