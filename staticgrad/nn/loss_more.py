"""binary_cross_entropy (and with logits), smooth_l1_loss, huber_loss, l1_loss, kl_div,
cosine_similarity and their modules, as PyTorch 2.13 defines them: fused ops where PyTorch has a
fused node, PyTorch's own decomposition (same nodes) where it has none."""

from __future__ import annotations

import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.special_functions import xlogy
from staticgrad.nn.module import Module
from staticgrad.nn.reduction import _Loss, _WeightedLoss, legacy_reduction
from staticgrad.ops import OPS
from staticgrad.ops.loss import REDUCTIONS, reduction_code


def _broadcast_pair(input, target, name: str):
    """PyTorch's ``broadcast_tensors`` after a size warning: both expanded to the common shape."""
    shape_in, shape_t = input._data.shape, target._data.shape
    if shape_in == shape_t:
        return input, target
    warnings.warn(f"Using a target size ({target.shape!r}) that is different to the input size ({input.shape!r}). "
                  "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same "
                  "size.", UserWarning, stacklevel=3)
    shape = _broadcast_shape(shape_in, shape_t)
    return fn.expand(input, shape), fn.expand(target, shape)


def _broadcast_shape(a: tuple, b: tuple) -> tuple:
    ndim = max(len(a), len(b))
    a, b = (1,) * (ndim - len(a)) + tuple(a), (1,) * (ndim - len(b)) + tuple(b)
    shape = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                               f"non-singleton dimension {i}")
        shape.append(y if x == 1 else x)
    return tuple(shape)


def _reduce(loss, reduction: int):
    """PyTorch's apply_loss_reduction: mean() (MeanBackward0), sum() (SumBackward0) or as is."""
    if reduction == REDUCTIONS["mean"]:
        return fn.mean(loss)
    if reduction == REDUCTIONS["sum"]:
        return fn.sum(loss)
    return loss


def _expand_weight(weight, shape: tuple, target):
    if weight is None or weight._data.shape == tuple(shape):
        return weight
    return fn.expand(weight, _broadcast_shape(shape, weight._data.shape)) if len(weight._data.shape) <= len(shape) \
        else fn.expand(weight, target._data.shape)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
    """-w (t log x + (1 - t) log(1 - x)), each log clamped at -100 (BinaryCrossEntropyBackward0)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "binary_cross_entropy")
    fn.require_tensor(target, "binary_cross_entropy", "target", 2)
    code = reduction_code(reduction)
    if target._data.shape != input._data.shape:
        raise ValueError(f"Using a target size ({target.shape!r}) that is different to the input size "
                         f"({input.shape!r}) is deprecated. Please ensure they have the same size.")
    inputs = (input, target)
    if weight is not None:
        inputs += (_expand_weight(weight, target._data.shape, target),)
    name = "binary_cross_entropy" + ("_weight" if weight is not None else "")
    return dispatch(OPS[name], inputs, {"reduction": code})


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """Binary cross entropy on sigmoid(input), computed from log-sigmoid for stability; pos_weight
    scales the positive term (BinaryCrossEntropyWithLogitsBackward0)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "binary_cross_entropy_with_logits")
    fn.require_tensor(target, "binary_cross_entropy_with_logits", "target", 2)
    code = reduction_code(reduction)
    if target._data.shape != input._data.shape:
        raise ValueError(f"Target size ({target.shape!r}) must be the same as input size ({input.shape!r})")
    inputs, name = (input, target), "binary_cross_entropy_with_logits"
    if weight is not None:
        inputs, name = inputs + (weight,), name + "_weight"
    if pos_weight is not None:
        inputs, name = inputs + (pos_weight,), name + "_pos_weight"
    return dispatch(OPS[name], inputs, {"reduction": code})


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """|input - target|, reduced (AbsBackward0 over SubBackward0, as PyTorch decomposes it)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "l1_loss")
    fn.require_tensor(target, "l1_loss", "target", 2)
    code = reduction_code(reduction)
    input, target = _broadcast_pair(input, target, "l1_loss")
    return _reduce(fn.abs(fn.sub(input, target)), code)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere; beta = 0 is l1_loss."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "smooth_l1_loss")
    fn.require_tensor(target, "smooth_l1_loss", "target", 2)
    code = reduction_code(reduction)
    input, target = _broadcast_pair(input, target, "smooth_l1_loss")
    if beta == 0.0:
        return _reduce(fn.abs(fn.sub(input, target)), code)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return dispatch(OPS["smooth_l1_loss"], (input, target), {"reduction": code, "beta": float(beta)})


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (HuberLossBackward0)."""
    fn.require_tensor(input, "huber_loss")
    fn.require_tensor(target, "huber_loss", "target", 2)
    code = reduction_code(reduction)
    if weight is not None:
        raise NotImplementedError("staticgrad's huber_loss takes no weight; use reduction='none' and weight "
                                  "the per-element losses yourself")
    input, target = _broadcast_pair(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return dispatch(OPS["huber_loss"], (input, target), {"reduction": code, "delta": float(delta)})


_KL_MEAN_WARNING = ("reduction: 'mean' divides the total loss by both the batch size and the support size."
                    "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                    "'mean' will be changed to behave the same as 'batchmean' in the next major release.")


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
    """Pointwise KL divergence with input as log-probabilities: target (log target - input), or
    exp(target) (target - input) with log_target; 'batchmean' divides the sum by the batch size."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "kl_div")
    fn.require_tensor(target, "kl_div", "target", 2)
    if reduction == "mean":
        warnings.warn(_KL_MEAN_WARNING, UserWarning, stacklevel=2)
    code = REDUCTIONS["sum"] if reduction == "batchmean" else reduction_code(reduction)
    if log_target:
        pointwise = fn.mul(fn.exp(target), fn.sub(target, input))
    else:  # xlogy(target, target): 0 where the target is 0 (XlogyBackward0, as PyTorch composes it)
        pointwise = fn.sub(xlogy(target, target), fn.mul(target, input))
    reduced = _reduce(pointwise, code)
    if reduction == "batchmean" and input._data.ndim != 0:
        reduced = fn.div(reduced, input._data.shape[0])
    return reduced


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """sum over ``dim`` of (x1 / |x1|) (x2 / |x2|), each norm clamped below at eps without a
    gradient through the clamp, as PyTorch computes it."""
    fn.require_tensor(x1, "cosine_similarity", "x1")
    fn.require_tensor(x2, "cosine_similarity", "x2", 2)
    shape = _broadcast_shape(x1._data.shape, x2._data.shape)
    ndim = len(shape)
    if ndim == 0:  # a 0-dim pair is one 1-element vector each, as PyTorch takes it
        fn.normalize_dims(dim, 0)
        shape, ndim, dim = (1,), 1, 0
        x1, x2 = fn.reshape(x1, (1,)), fn.reshape(x2, (1,))
    (axis,) = fn.normalize_dims(dim, ndim)
    if x1._data.shape != shape:
        x1 = fn.expand(x1, shape)
    if x2._data.shape != shape:
        x2 = fn.expand(x2, shape)
    norms = []
    for x in (x1, x2):
        norm = fn.clone(dispatch(OPS["vector_norm2"], (x,), {"dim": (axis,), "keepdim": True}))
        with no_grad():
            fn.clamp_(norm, min=eps)
        norms.append(norm)
    return fn.sum(fn.mul(fn.div(x1, norms[0]), fn.div(x2, norms[1])), axis)


# ---- modules -----------------------------------------------------------------------------------

class BCELoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input, target):
        return binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                reduction=self.reduction)


class L1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)

    def forward(self, input, target):
        return l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)
