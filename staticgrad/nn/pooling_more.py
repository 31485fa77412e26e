"""More pooling and rearranging layers: max_pool3d, avg_pool3d, adaptive_max_pool1d/2d/3d,
adaptive_avg_pool3d, lp_pool1d/2d/3d, pixel_shuffle / pixel_unshuffle, channel_shuffle, unfold / fold, and
their modules,
with PyTorch's argument handling in front of the ops in staticgrad.ops.pooling_nd. adaptive_max_pool1d
is the 2-D op over an unsqueezed axis and lp_pool PyTorch's composition of avg_pool, as PyTorch
computes them."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad.nn.module import Module
from staticgrad.nn.pooling import _check_rank, _default_stride, _half, avg_pool1d, avg_pool2d
from staticgrad.ops import OPS
from staticgrad.ops.conv import pool_output_size


def _triple(value, where: str, name: str) -> tuple:
    if isinstance(value, int):
        return (value,) * 3
    if isinstance(value, (tuple, list)) and len(value) in (1, 3) and all(isinstance(v, int) for v in value):
        return tuple(value) * 3 if len(value) == 1 else tuple(value)
    raise RuntimeError(f"{where}: {name} must either be a single int, or a tuple of three ints")


def _tuple(value, count: int) -> tuple:
    return (value,) * count if isinstance(value, int) else tuple(value)


def _check_3d(input, where: str, kernel, stride, padding, dilation, ceil_mode):
    shape = list(input._data.shape)
    if len(shape) not in (4, 5) or 0 in shape[-4:]:
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    for pad, k in zip(padding, kernel):
        if pad > _half(k):
            raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got kT: {kernel[0]} "
                               f"kW: {kernel[2]} kH: {kernel[1]} padT: {padding[0]} padW: {padding[2]} "
                               f"padH: {padding[1]}")
    out = [pool_output_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(shape[-3:], kernel, stride, padding,
                                                                                dilation)]
    if min(out) < 1:
        raise RuntimeError(f"Given input size: ({'x'.join(str(n) for n in shape[-4:])}). Calculated output size: "
                           f"({shape[-4]}x{'x'.join(str(o) for o in out)}). Output size is too small")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """3-D max pooling over (N, C, D, H, W) or (C, D, H, W) (MaxPool3DWithIndicesBackward0)."""
    where = "max_pool3d"
    kernel = _triple(kernel_size, where, "kernel_size")
    stride = _triple(_default_stride(stride, kernel), where, "stride")
    padding, dilation = _triple(padding, where, "padding"), _triple(dilation, where, "dilation")
    _check_3d(input, "max_pool3d_with_indices()", kernel, stride, padding, dilation, bool(ceil_mode))
    values, indices = dispatch(OPS["max_pool3d"], (input,), {"kernel_size": kernel, "stride": stride,
                                                             "padding": padding, "dilation": dilation,
                                                             "ceil_mode": bool(ceil_mode)})
    return (values, indices) if return_indices else values


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-D average pooling (AvgPool3DBackward0)."""
    where = "avg_pool3d"
    kernel = _triple(kernel_size, where, "kernel_size")
    stride = _triple(_default_stride(stride, kernel), where, "stride")
    padding = _triple(padding, where, "padding")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _check_3d(input, "avg_pool3d()", kernel, stride, padding, (1, 1, 1), bool(ceil_mode))
    return dispatch(OPS["avg_pool3d"], (input,), {"kernel_size": kernel, "stride": stride, "padding": padding,
                                                  "ceil_mode": bool(ceil_mode),
                                                  "count_include_pad": bool(count_include_pad),
                                                  "divisor_override": divisor_override})


def _output_size(output_size, shape, count: int, where: str) -> tuple:
    sizes = (output_size,) * count if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != count:
        raise RuntimeError(f"{where}: internal error: output_size.size() must be {count}")
    return tuple(n if m is None else m for n, m in zip(shape[-count:], sizes))


def _check_nonempty(input, where: str, dims: int):
    shape = list(input._data.shape)
    if where == "adaptive_avg_pool3d" and len(shape) < 3:  # PyTorch reads the sizes first
        ndim = len(shape)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], "
                         f"but got {-2 if ndim == 0 else -3})")
    if len(shape) not in (dims + 1, dims + 2):
        raise RuntimeError(f"{where}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {shape}")
    for axis in range(len(shape) - dims, len(shape)):
        if shape[axis] == 0:
            raise RuntimeError(f"{where}(): Expected input to have non-zero size for non-batch dimensions, but "
                               f"input has sizes {shape} with dimension {axis} being empty")


def adaptive_avg_pool3d(input, output_size):
    """Average over output_size windows tiling the last three axes (AdaptiveAvgPool3DBackward0)."""
    _check_nonempty(input, "adaptive_avg_pool3d", 3)
    size = _output_size(output_size, input._data.shape, 3, "adaptive_avg_pool3d")
    return dispatch(OPS["adaptive_avg_pool3d"], (input,), {"output_size": size})


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum over output_size windows tiling the plane, with flat indices (AdaptiveMaxPool2DBackward0)."""
    _check_nonempty(input, "adaptive_max_pool2d", 2)
    size = _output_size(output_size, input._data.shape, 2, "adaptive_max_pool2d")
    values, indices = dispatch(OPS["adaptive_max_pool2d"], (input,), {"output_size": size})
    return (values, indices) if return_indices else values


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """The maximum over output_size windows tiling the last three axes, with flat indices
    (AdaptiveMaxPool3DBackward0)."""
    _check_nonempty(input, "adaptive_max_pool3d", 3)
    size = _output_size(output_size, input._data.shape, 3, "adaptive_max_pool3d")
    values, indices = dispatch(OPS["adaptive_max_pool3d"], (input,), {"output_size": size})
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """adaptive_max_pool2d over a unit height, as PyTorch (SqueezeBackward1)."""
    _check_rank(input, "adaptive_max_pool1d")
    size = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    values, indices = adaptive_max_pool2d(fn.unsqueeze(input, -2), (1, size), return_indices=True)
    values, indices = fn.squeeze(values, -2), fn.squeeze(indices, -2)
    return (values, indices) if return_indices else values


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p), composed as PyTorch's from avg_pool2d."""
    kw, kh = _tuple(kernel_size, 2)
    powered = fn.pow(input, norm_type)
    if stride is not None:
        out = avg_pool2d(powered, kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool2d(powered, kernel_size, padding=0, ceil_mode=ceil_mode)
    return fn.pow(fn.mul(fn.mul(fn.sign(out), fn.relu(fn.abs(out))), kw * kh), 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p), composed as PyTorch's from avg_pool1d."""
    powered = fn.pow(input, norm_type)
    if stride is not None:
        out = avg_pool1d(powered, kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool1d(powered, kernel_size, padding=0, ceil_mode=ceil_mode)
    return fn.pow(fn.mul(fn.mul(fn.sign(out), fn.relu(fn.abs(out))), kernel_size), 1.0 / norm_type)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p), composed as PyTorch's from avg_pool3d."""
    kd, kw, kh = _tuple(kernel_size, 3)
    powered = fn.pow(input, norm_type)
    if stride is not None:
        out = avg_pool3d(powered, kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool3d(powered, kernel_size, padding=0, ceil_mode=ceil_mode)
    return fn.pow(fn.mul(fn.mul(fn.sign(out), fn.relu(fn.abs(out))), kd * kw * kh), 1.0 / norm_type)


def channel_shuffle(input, groups):
    """(N, g c, *) -> (N, c g, *): the channels of the g groups interleaved (ChannelShuffleBackward0)."""
    fn.require_tensor(input, "channel_shuffle")
    shape = input._data.shape
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if len(shape) < 3:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(shape)}")
    if shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {shape[1]} channels and {groups} "
                           "groups.")
    return dispatch(OPS["channel_shuffle"], (input,), {"groups": int(groups)})


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r) (PixelShuffleBackward0)."""
    fn.require_tensor(input, "pixel_shuffle")
    shape = input._data.shape
    if len(shape) < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{len(shape)} dimension(s)")
    if upscale_factor <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {upscale_factor}")
    if shape[-3] % (upscale_factor * upscale_factor):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={shape[-3]} is not divisible by "
                           f"{upscale_factor * upscale_factor}")
    return dispatch(OPS["pixel_shuffle"], (input,), {"upscale_factor": int(upscale_factor)})


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W) (PixelUnshuffleBackward0)."""
    fn.require_tensor(input, "pixel_unshuffle")
    shape = input._data.shape
    if len(shape) < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{len(shape)} dimension(s)")
    if downscale_factor <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {downscale_factor}")
    if shape[-2] % downscale_factor:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)="
                           f"{shape[-2]} is not divisible by {downscale_factor}")
    if shape[-1] % downscale_factor:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)="
                           f"{shape[-1]} is not divisible by {downscale_factor}")
    return dispatch(OPS["pixel_unshuffle"], (input,), {"downscale_factor": int(downscale_factor)})


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of (N, C, H, W) as columns (N, C kh kw, L) (Im2ColBackward0)."""
    ndim = input._data.ndim
    if ndim == 0:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    if ndim < 3:  # PyTorch reads the channel dim first
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], "
                         f"but got {ndim})")
    if ndim > 4:
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {ndim}D)")
    attrs = {"kernel_size": _tuple(kernel_size, 2), "dilation": _tuple(dilation, 2), "padding": _tuple(padding, 2),
             "stride": _tuple(stride, 2)}
    return dispatch(OPS["im2col"], (input,), attrs)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Columns (N, C kh kw, L) summed back into (N, C, H, W), overlaps added (Col2ImBackward0)."""
    if input._data.ndim not in (2, 3) or 0 in input._data.shape[-2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input._data.shape)}")
    kernel = _tuple(kernel_size, 2)
    if input._data.shape[-2] % (kernel[0] * kernel[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={input._data.shape[-2]} and kernel_size=({kernel[0]}, {kernel[1]}).")
    attrs = {"output_size": _tuple(output_size, 2), "kernel_size": kernel, "dilation": _tuple(dilation, 2),
             "padding": _tuple(padding, 2), "stride": _tuple(stride, 2)}
    return dispatch(OPS["col2im"], (input,), attrs)


# ---- modules -----------------------------------------------------------------------------------------

class MaxPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation, self.return_indices, self.ceil_mode = padding, dilation, return_indices, ceil_mode

    def forward(self, input):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                          self.return_indices)


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices


class AdaptiveMaxPool1d(_AdaptivePool):
    def forward(self, input):
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    def forward(self, input):
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    def forward(self, input):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool3d(input, self.output_size)


class _LPPool(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode


class LPPool1d(_LPPool):
    def forward(self, input):
        return lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPool):
    def forward(self, input):
        return lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPool):
    def forward(self, input):
        return lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)
