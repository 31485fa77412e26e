"""torch.nn.functional: layers and losses as functions over the op table."""

from __future__ import annotations

import warnings

from staticgrad import functional as fn
from staticgrad.dispatch import dispatch
from staticgrad.ops import OPS
from staticgrad.ops.loss import REDUCTIONS
from staticgrad.tensor import Tensor

relu = fn.relu
tanh = fn.tanh
sigmoid = fn.sigmoid
softmax = fn.softmax
log_softmax = fn.log_softmax


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """PyTorch's linear: ``addmm`` for 2-D input with a bias (AddmmBackward0), flattened to 2-D
    and viewed back for other ranks, plain ``matmul`` without a bias."""
    if bias is None:
        return fn.matmul(input, fn.t(weight))
    if input._data.ndim == 2:
        return fn.addmm(bias, input, fn.t(weight))
    out_shape = input._data.shape[:-1] + (weight._data.shape[0],)
    flat = fn.reshape(input, (-1, input._data.shape[-1])) if input._data.ndim != 1 else fn.view(input, (1, -1))
    return fn.view(fn.addmm(bias, flat, fn.t(weight)), out_shape)


def _reduction_code(reduction: str) -> int:
    try:
        return REDUCTIONS[reduction]
    except KeyError:
        raise ValueError(f"{reduction} is not a valid value for reduction") from None


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    if tuple(target._data.shape) != tuple(input._data.shape):
        warnings.warn(
            f"Using a target size ({target.shape!r}) that is different to the input size ({input.shape!r}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=2)
    return dispatch(OPS["mse_loss"], (input, target), {"reduction": _reduction_code(reduction)})


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return fn.where(fn.gt(input, 0), input, fn.mul(input, negative_slope))


# Layers defined next to their modules (imported last: those modules import this one's helpers).
from staticgrad.nn.activation import gelu  # noqa: E402
from staticgrad.nn.conv import conv2d, max_pool2d  # noqa: E402
from staticgrad.nn.dropout import dropout  # noqa: E402
from staticgrad.nn.loss import cross_entropy, nll_loss  # noqa: E402
from staticgrad.nn.normalization import layer_norm  # noqa: E402
from staticgrad.nn.sparse import embedding  # noqa: E402
