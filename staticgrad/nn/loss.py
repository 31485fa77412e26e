"""cross_entropy / nll_loss over class-index targets (optionally class-weighted) or class
probabilities, and the CrossEntropyLoss / NLLLoss modules.

Inputs are (C,) with a 0-dim target, (N, C) with target (N,), or (N, C, d1, ...) with target
(N, d1, ...), as in PyTorch: 4-D inputs use NllLoss2DBackward0, other ranks above 2 are viewed
to (N, C, 1, d1 * ...) first.
"""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.functions import masked_fill_
from staticgrad.nn.reduction import _WeightedLoss, legacy_reduction
from staticgrad.ops import OPS
from staticgrad.ops.loss import REDUCTIONS, reduction_code


def _check_class_weights(weight, n_classes: int) -> None:
    if weight is not None and (weight._data.ndim != 1 or weight._data.shape[0] != n_classes):
        raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes or no classes "
                           f"but got weight tensor of shape: {list(weight._data.shape)}")


def _check_target(target) -> None:
    if target._data.dtype.name not in ("int64", "uint8"):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype.tensor_type[:-6]}")


def _nll(logp, target, reduction: int, ignore_index: int, weight=None):
    """nll_loss for every input rank, dispatched as PyTorch's nll_loss_nd does; with class weights
    the ``_weighted`` ops (same nodes), whose mean divides by the targets' summed weights."""
    shape, target_shape = logp._data.shape, target._data.shape
    if not shape:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    _check_target(target)
    attrs = {"reduction": reduction, "ignore_index": int(ignore_index)}
    _check_class_weights(weight, shape[0] if len(shape) == 1 else shape[1])
    n = shape[0] if len(shape) > 1 else None
    if n is not None and target_shape[:1] != (n,):
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size "
                         f"({target_shape[0] if target_shape else 0}).")
    suffix, extra = ("_weighted", (weight,)) if weight is not None else ("", ())
    if len(shape) <= 2:
        return dispatch(OPS["nll_loss" + suffix], (logp, target) + extra, attrs)
    if len(shape) == 4:
        if target_shape[1:] != shape[2:]:
            raise RuntimeError(f"size mismatch (got input: {list(shape)} , target: {list(target_shape)}")
        return dispatch(OPS["nll_loss2d" + suffix], (logp, target) + extra, attrs)
    if target_shape[1:] != shape[2:]:
        raise RuntimeError(f"Expected target size {[n] + list(shape[2:])}, got {list(target_shape)}")
    rest = math.prod(shape[2:])  # not -1: with no elements it would be ambiguous
    logp4 = fn.view(logp.contiguous(), (n, shape[1], 1, rest))
    loss = dispatch(OPS["nll_loss2d" + suffix], (logp4, fn.view(target.contiguous(), (n, 1, rest))) + extra, attrs)
    return fn.view(loss, (n,) + shape[2:]) if reduction == REDUCTIONS["none"] else loss


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """Negative log likelihood of the target classes, given log-probabilities over dim 1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "nll_loss_nd")
    fn.require_tensor(target, "nll_loss_nd", "target", 2)
    return _nll(input, target, reduction_code(reduction), ignore_index, weight)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """log_softmax over the class dim (dim 1, or 0 for a (C,) input) followed by nll_loss, or, for a
    float target shaped like the input (class probabilities), -(log p * target [* weight]) summed;
    label_smoothing mixes in the mean over classes of -log p, as PyTorch does."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "cross_entropy_loss")
    fn.require_tensor(target, "cross_entropy_loss", "target", 2)
    code = reduction_code(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input._data.ndim == 1 else 1
    if target._data.shape == input._data.shape:
        if target._data.dtype.kind != "f":
            raise RuntimeError("Expected floating point type for target with class probabilities, got "
                               f"{target.dtype.tensor_type[:-6]}")
        return _cross_entropy_probabilities(input, target, weight, code, label_smoothing, class_dim)
    logp = fn.log_softmax(input, class_dim)
    loss = _nll(logp, target, code, ignore_index, weight)
    if label_smoothing == 0:
        return loss
    smoothing = _smoothing_term(logp, target, code, ignore_index, class_dim, _class_view(weight, logp, class_dim))
    return loss * (1 - label_smoothing) + smoothing * (label_smoothing / input._data.shape[class_dim])


def _class_view(weight, input, class_dim: int):
    """The class weights shaped to broadcast along the input's class dim, or None."""
    if weight is None:
        return None
    _check_class_weights(weight, input._data.shape[class_dim])
    shape = [1] * input._data.ndim
    shape[class_dim] = weight._data.shape[0]
    return fn.view(weight, tuple(shape))


def _cross_entropy_probabilities(input, target, weight, reduction: int, label_smoothing: float, class_dim: int):
    logp = fn.log_softmax(input, class_dim)
    n_classes = input._data.shape[class_dim]
    if label_smoothing > 0:
        target = fn.add(fn.mul(target, 1 - label_smoothing), label_smoothing / n_classes)
    products = fn.mul(logp, target)
    weight_view = _class_view(weight, logp, class_dim)
    if weight_view is not None:
        products = fn.mul(products, weight_view)
    if reduction == REDUCTIONS["mean"]:
        if not input._data.size:
            return fn.fill_(fn.neg(fn.sum(products)), math.nan)
        return dispatch(OPS["div_count"], (fn.neg(fn.sum(products)),), {"other": input._data.size // n_classes})
    if reduction == REDUCTIONS["sum"]:
        return fn.neg(fn.sum(products))
    return fn.neg(fn.sum(products, class_dim))


def _smoothing_term(logp, target, reduction: int, ignore_index: int, class_dim: int, weight_view=None):
    """-(sum of [weighted] log-probabilities over classes), zero at ignored targets, reduced as the
    loss is: the weighted mean divides by the targets' summed weights, as nll_loss does."""
    ignored = fn.eq(target, ignore_index)
    scores = logp if weight_view is None else fn.mul(logp, weight_view)
    smooth = masked_fill_(fn.neg(fn.sum(scores, class_dim)), ignored, 0.0)
    if reduction == REDUCTIONS["mean"]:
        if not target._data.size:  # the mean of no terms: nan, as PyTorch gives, without dividing 0 by 0
            return fn.mul(fn.sum(smooth), math.nan)
        if weight_view is None:
            counted = fn.to_dtype(fn.sum(fn.logical_not(ignored)), smooth.dtype)
        else:
            classes = fn.masked_fill(target, ignored, 0)
            counted = fn.sum(fn.masked_fill(fn.flatten(weight_view)[classes], ignored, 0.0))
        return fn.div(fn.sum(smooth), counted)
    if reduction == REDUCTIONS["sum"]:
        return fn.sum(smooth)
    return smooth


class _ClassIndexLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index


class NLLLoss(_ClassIndexLoss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, ignore_index, reduce, reduction)

    def forward(self, input, target):
        return nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(_ClassIndexLoss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)
