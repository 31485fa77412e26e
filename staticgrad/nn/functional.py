"""torch.nn.functional: layers and losses as functions over the op table."""

from __future__ import annotations

import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.movement import one_hot, pad
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.reduction import legacy_reduction as _legacy_reduction
from staticgrad.ops import OPS
from staticgrad.ops.loss import REDUCTIONS, reduction_code


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """F.relu: max(input, 0), in place with ``inplace=True`` (ReluBackward0)."""
    return fn.relu_(input) if inplace else fn.relu(input)


def relu_(input: Tensor) -> Tensor:
    return fn.relu_(input)


tanh = fn.tanh
sigmoid = fn.sigmoid
# Python-level functions in PyTorch, so without torch.softmax's NumPy keyword names (axis=).
softmax = getattr(fn.softmax, "__wrapped__", fn.softmax)
log_softmax = getattr(fn.log_softmax, "__wrapped__", fn.log_softmax)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """PyTorch's linear: ``addmm`` for 2-D input with a bias (AddmmBackward0); for other ranks with a
    bias that is a row (1-D, or squeezes to 1-D) and a contiguous input, ``addmm`` on the input
    flattened to 2-D, viewed back; otherwise ``matmul``, then the bias added (AddBackward0)."""
    fn.require_tensor(input, "linear")
    fn.require_tensor(weight, "linear", "weight", 2)
    if bias is not None:
        fn.require_tensor(bias, "linear", "bias", 3)
    ndim, weight_ndim = input._data.ndim, weight._data.ndim
    if ndim == 0 or weight_ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {ndim}D and {weight_ndim}D")
    if bias is None:
        return fn.matmul(input, fn.t(weight))
    if ndim == 2:
        return fn.addmm(bias, input, fn.t(weight))
    if not (_is_row(bias) and input.is_contiguous()):
        return _add_bias(fn.matmul(input, fn.t(weight)), bias)
    out_shape = input._data.shape[:-1] + (weight._data.shape[0],)
    flat = fn.reshape(input, (-1, input._data.shape[-1])) if ndim != 1 else fn.view(input, (1, -1))
    return fn.view(fn.addmm(bias, flat, fn.t(weight)), out_shape)


def _is_row(bias: Tensor) -> bool:
    """A bias PyTorch fuses into addmm for inputs of other ranks: contiguous and 1-D, or 1-D once
    its size-1 dims are squeezed."""
    shape = bias._data.shape
    return (len(shape) == 1 or len([d for d in shape if d != 1]) == 1) and bias.is_contiguous()


def _add_bias(output: Tensor, bias: Tensor) -> Tensor:
    """``output + bias`` where PyTorch runs ``output.add_(bias)``: same node, and the same error when
    the bias would broadcast the output to a bigger shape."""
    result = fn.add(output, bias)
    if result._data.shape != output._data.shape:
        raise RuntimeError(f"output with shape {list(output._data.shape)} doesn't match the broadcast shape "
                           f"{list(result._data.shape)}")
    return result


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    fn.require_tensor(input, "mse_loss")
    fn.require_tensor(target, "mse_loss", "target", 2)
    if tuple(target._data.shape) != tuple(input._data.shape):
        warnings.warn(
            f"Using a target size ({target.shape!r}) that is different to the input size ({input.shape!r}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=2)
    return dispatch(OPS["mse_loss"], (input, target), {"reduction": reduction_code(reduction)})


# Layers defined next to their modules (imported last: those modules import this one's helpers).
from staticgrad._eager.order_functions import pdist  # noqa: E402
from staticgrad.nn.activation import gelu  # noqa: E402
from staticgrad.nn.activations import (  # noqa: E402
    celu,
    celu_,
    elu,
    elu_,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    logsigmoid,
    mish,
    normalize,
    relu6,
    selu,
    selu_,
    silu,
    softplus,
    softsign,
)
from staticgrad.nn.activations_more import (  # noqa: E402
    hardshrink,
    prelu,
    softmin,
    softshrink,
    tanhshrink,
    threshold,
    threshold_,
)
from staticgrad.nn.alpha_dropout import alpha_dropout, feature_alpha_dropout  # noqa: E402
from staticgrad.nn.batchnorm import batch_norm  # noqa: E402
from staticgrad.nn.channel_dropout import dropout1d, dropout2d, dropout3d  # noqa: E402
from staticgrad.nn.conv_more import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: E402
from staticgrad.nn.ctc_loss import ctc_loss  # noqa: E402
from staticgrad.nn.dropout import dropout  # noqa: E402
from staticgrad.nn.grid_sampling import affine_grid, grid_sample  # noqa: E402
from staticgrad.nn.group_norm import group_norm  # noqa: E402
from staticgrad.nn.instance_norm import instance_norm  # noqa: E402
from staticgrad.nn.layers_more import bilinear, embedding_bag, rrelu, rrelu_  # noqa: E402
from staticgrad.nn.local_response_norm import local_response_norm  # noqa: E402
from staticgrad.nn.loss import cross_entropy, nll_loss  # noqa: E402
from staticgrad.nn.loss_more import (  # noqa: E402
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_similarity,
    huber_loss,
    kl_div,
    l1_loss,
    smooth_l1_loss,
)
from staticgrad.nn.margin_losses import (  # noqa: E402
    cosine_embedding_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    pairwise_distance,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from staticgrad.nn.max_unpool import max_unpool1d, max_unpool3d  # noqa: E402
from staticgrad.nn.normalization import layer_norm  # noqa: E402
from staticgrad.nn.pooling import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
    max_unpool2d,
)
from staticgrad.nn.pooling_more import (  # noqa: E402
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool3d,
    channel_shuffle,
    fold,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool3d,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
)
from staticgrad.nn.rms_norm import rms_norm  # noqa: E402
from staticgrad.nn.sdpa import scaled_dot_product_attention  # noqa: E402
from staticgrad.nn.sparse import embedding  # noqa: E402
from staticgrad.nn.upsampling import interpolate, upsample, upsample_bilinear, upsample_nearest  # noqa: E402
