"""The margin, embedding and likelihood losses: margin_ranking_loss, hinge_embedding_loss,
soft_margin_loss, multilabel_soft_margin_loss, multilabel_margin_loss, multi_margin_loss,
triplet_margin_loss (with pairwise_distance), triplet_margin_with_distance_loss, cosine_embedding_loss,
poisson_nll_loss, gaussian_nll_loss and their modules: one op where PyTorch has one kernel
(staticgrad.ops.loss_margin), PyTorch's own composition (same nodes) elsewhere."""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import zeros_like
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.grad_mode import GradMode, no_grad
from staticgrad._eager.math_functions import clamp_min
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.activations import logsigmoid
from staticgrad.nn.loss_more import _reduce
from staticgrad.nn.module import Module
from staticgrad.nn.reduction import _Loss, _WeightedLoss, legacy_reduction
from staticgrad.ops import OPS
from staticgrad.ops.loss import reduction_code


def _code(size_average, reduce, reduction):
    return reduction_code(legacy_reduction(size_average, reduce, reduction, stacklevel=4))


def _add_number(t, number):
    """``t + number`` as PyTorch's C++ losses add it (at::add(Tensor, Scalar): AddBackward1)."""
    return dispatch(OPS["add_scalar_cpp"], (t,), {"other": fn.fit_scalar(t, number), "alpha": 1})


def _number_minus(number, t):
    """``number - t`` as PyTorch's C++ losses write it: a sub whose first operand is the number
    wrapped in a 0-dim tensor (SubBackward0, an edge to nothing first)."""
    return fn.sub(fn.full_like_scalar(t, number), t)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin)."""
    code = _code(size_average, reduce, reduction)
    shapes = [t._data.ndim for t in (input1, input2, target)]
    if len(set(shapes)) != 1:
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape!r}, input2: {input2.shape!r}, target: {target.shape!r} ")
    output = clamp_min(_add_number(fn.mul(fn.neg(target), fn.sub(input1, input2)), margin), 0)
    return _reduce(output, code)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y == 1, max(0, margin - x) where y == -1."""
    code = _code(size_average, reduce, reduction)
    zeros = zeros_like(input)
    margin_clamp = clamp_min(_number_minus(margin, input), 0)
    output_margin = fn.where(fn.ne(target, 1), margin_clamp, zeros)
    output_self = fn.where(fn.ne(target, -1), input, zeros)
    return _reduce(fn.add(output_margin, output_self), code)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x)) (SoftMarginLossBackward0)."""
    code = _code(size_average, reduce, reduction)
    fn.require_tensor(input, "soft_margin_loss")
    fn.require_tensor(target, "soft_margin_loss", "target", 2)
    return dispatch(OPS["soft_margin_loss"], (input, target), {"reduction": code})


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), averaged over the classes."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input._data.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    loss = fn.neg(fn.add(fn.mul(target, logsigmoid(input)), fn.mul(fn.rsub(target, 1), logsigmoid(fn.neg(input)))))
    if weight is not None:
        loss = fn.mul(loss, weight)
    class_dim = input._data.ndim - 1
    loss = fn.div(fn.sum(loss, class_dim), input._data.shape[class_dim])
    if reduction == "none":
        return loss
    if reduction == "mean":
        return fn.mean(loss)
    if reduction == "sum":
        return fn.sum(loss)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _one_class_if_zero_dim(input, target):
    """A 0-dim input is one sample of one class, as PyTorch reads it."""
    if input._data.ndim == 0:
        return fn.reshape(input, (1,)), fn.reshape(target, (1,))
    return input, target


def _check_class_target(name, input, target):
    ndim = input._data.ndim
    if ndim > 2 or (ndim == 2 and target._data.shape[:1] != input._data.shape[:1]) or (
            ndim < 2 and target._data.ndim > 1):
        raise RuntimeError(f"inconsistent target size: {list(target._data.shape)} for input of size: "
                           f"{list(input._data.shape)}")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over listed classes j (target up to its first -1) and unlisted i of
    max(0, 1 - x_j + x_i) / C (MultilabelMarginLossBackward0)."""
    code = _code(size_average, reduce, reduction)
    input, target = _one_class_if_zero_dim(input, target)
    if target._data.shape != input._data.shape:
        raise RuntimeError(f"inconsistent target size: {list(target._data.shape)} for input of size: "
                           f"{list(input._data.shape)}")
    return dispatch(OPS["multilabel_margin_loss"], (input, target), {"reduction": code})


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample, sum over i != y of w_y max(0, margin - x_y + x_i)^p / C (MultiMarginLossBackward0)."""
    code = _code(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight._data.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    if weight is not None and weight.requires_grad and GradMode.enabled:
        raise RuntimeError("The function 'multi_margin_loss' is not differentiable with respect to argument 'weight'. "
                           "This input cannot have requires_grad True.")
    input, target = _one_class_if_zero_dim(input, target)
    _check_class_target("multi_margin_loss", input, target)
    attrs = {"p": int(p), "margin": float(margin), "reduction": code}
    if weight is None:
        return dispatch(OPS["multi_margin_loss"], (input, target), attrs)
    return dispatch(OPS["multi_margin_loss_weighted"], (input, target, weight), attrs)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (NormBackward1), the two broadcast."""
    fn.require_tensor(x1, "pairwise_distance", "x1")
    fn.require_tensor(x2, "pairwise_distance", "x2", 2)
    ndim = max(x1._data.ndim, x2._data.ndim)
    difference = fn.add(fn.sub(x1, x2), eps)
    dims = (ndim - 1,) if ndim else ()
    return dispatch(OPS["norm_dims"], (difference,), {"ord": float(p), "dim": dims, "keepdim": bool(keepdim)})


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d the pairwise distance; ``swap`` takes the smaller of
    d(a, n) and d(p, n)."""
    code = _code(size_average, reduce, reduction)
    dims = {t._data.ndim for t in (anchor, positive, negative)}
    if len(dims) != 1:
        a, pos, neg = (t._data.ndim for t in (anchor, positive, negative))
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {pos}D, and negative {neg}D inputs")
    distance_positive = pairwise_distance(anchor, positive, p, eps)
    distance_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        distance_negative = fn.minimum(distance_negative, pairwise_distance(positive, negative, p, eps))
    output = clamp_min(fn.sub(fn.add(distance_positive, margin), distance_negative), 0)
    return _reduce(output, code)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) for any distance function d (pairwise_distance by default)."""
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    dims = [t._data.ndim for t in (anchor, positive, negative)]
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           "inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    distance_positive = distance(anchor, positive)
    distance_negative = distance(anchor, negative)
    if swap:
        distance_negative = fn.minimum(distance_negative, distance(positive, negative))
    loss = clamp_min(fn.sub(fn.add(distance_positive, margin), distance_negative), 0)
    if reduction == "sum":
        return fn.sum(loss)
    if reduction == "mean":
        return fn.mean(loss)
    return loss


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y == 1, max(0, cos(x1, x2) - margin) where y == -1."""
    code = _code(size_average, reduce, reduction)
    dim = input1._data.ndim - 1
    if dim not in (0, 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1._data.shape)} and {list(input2._data.shape)}.")
    epsilon = 1e-12
    product_sum = fn.sum(fn.mul(input1, input2), dim)
    square1 = _add_number(fn.sum(fn.mul(input1, input1), dim), epsilon)
    square2 = _add_number(fn.sum(fn.mul(input2, input2), dim), epsilon)
    cosine = fn.div(product_sum, fn.sqrt(fn.mul(square1, square2)))
    zeros = zeros_like(cosine)
    positive = _number_minus(1, cosine)
    less = dispatch(OPS["sub_scalar_cpp"], (cosine,), {"other": fn.fit_scalar(cosine, margin), "alpha": 1})
    negative = clamp_min(less, 0)
    output = fn.add(fn.where(fn.eq(target, 1), positive, zeros), fn.where(fn.eq(target, -1), negative, zeros))
    return _reduce(output, code)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - y x (log_input) or x - y log(x + eps), plus Stirling's term for y > 1 when ``full``."""
    code = _code(size_average, reduce, reduction)
    if log_input:
        loss = fn.sub(fn.exp(input), fn.mul(target, input))
    else:
        loss = fn.sub(input, fn.mul(target, fn.log(fn.add(input, eps))))
    if full:
        stirling = fn.add(fn.sub(fn.mul(target, fn.log(target)), target),
                          fn.mul(fn.log(fn.mul(target, 2 * math.pi)), 0.5))
        loss = fn.add(loss, fn.masked_fill(stirling, fn.le(target, 1), 0))
    return _reduce(loss, code)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(var) + (x - y)^2 / var), var clamped below at eps (without a gradient through the
    clamp), plus 0.5 log(2 pi) when ``full``; var may lack the last dim or have size 1 there."""
    if isinstance(var, Tensor):
        if var._data.shape != input._data.shape:
            if input._data.shape[:-1] == var._data.shape:
                var = fn.unsqueeze(var, -1)
            elif not (input._data.shape[:-1] == var._data.shape[:-1] and var._data.shape[-1:] == (1,)):
                raise ValueError("var is of incorrect size")
    else:
        var = fn.full_like_scalar(input, float(var))
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = dispatch(OPS["checked_clone"], (var,), {"low": 0.0, "error": "ValueError",  # the clone, checked
                                                  "message": "var has negative entry/entries"})
    with no_grad():
        fn.clamp_(var, min=eps)
    loss = fn.mul(fn.add(fn.log(var), fn.div(fn.pow(fn.sub(input, target), 2), var)), 0.5)
    if full:
        loss = fn.add(loss, 0.5 * math.log(2 * math.pi))
    if reduction == "mean":
        return fn.mean(loss)
    if reduction == "sum":
        return fn.sum(loss)
    return loss


# ---- modules -----------------------------------------------------------------------------------------

class MarginRankingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input, target):
        return multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.dim()}D instead")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                 reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                   swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                 margin=self.margin, swap=self.swap, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
