"""Pooling layers: max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d and max_unpool2d, and
their modules, with PyTorch's argument handling and messages in front of the ops in
staticgrad.ops.conv (max pooling) and staticgrad.ops.pooling.

The 1-D poolings are their 2-D ops over an unsqueezed axis, as PyTorch computes them (their nodes
are SqueezeBackward1).
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad.nn.module import Module
from staticgrad.ops import OPS
from staticgrad.ops.conv import pool_output_size


def _pair(value) -> tuple[int, int] | None:
    if isinstance(value, int):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[0]) if len(value) == 1 else tuple(value)
    return None


def _pool_pair(value, where: str, name: str, what: str) -> tuple[int, int]:
    pair = _pair(value)
    if pair is None:
        raise RuntimeError(f"{where}: {name} must {what}")
    return pair


def _half(value: int) -> int:
    """C++ integer division by two (truncating toward zero), as PyTorch's checks compute it."""
    return int(value / 2)


def _check_pool_shape(shape, kernel_size, stride, padding, dilation, ceil_mode, *, plain_half: bool):
    """PyTorch's pooling_output_shape and pool2d_shape_check, in their order; returns (OH, OW)."""
    if 0 in stride:
        raise RuntimeError("stride should not be zero")
    for pad, kernel, dil in zip(padding, kernel_size, dilation):
        if pad < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
        if pad > _half((kernel - 1) * dil + 1):
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, "
                               f"kernel_size={kernel} and dilation={dil}")
    if min(kernel_size) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel_size[0]} "
                           f"kW: {kernel_size[1]}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    if plain_half and (_half(kernel_size[1]) < padding[1] or _half(kernel_size[0]) < padding[0]):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {padding[1]}, "
                           f"padH = {padding[0]}, kW = {kernel_size[1]}, kH = {kernel_size[0]}")
    out = [pool_output_size(n, k, s, p, d, ceil_mode)
           for n, k, s, p, d in zip(shape[-2:], kernel_size, stride, padding, dilation)]
    if min(out) < 1:
        channels, h, w = shape[-3:]
        raise RuntimeError(f"Given input size: ({channels}x{h}x{w}). Calculated output size: "
                           f"({channels}x{out[0]}x{out[1]}). Output size is too small")
    return tuple(out)


def _default_stride(stride, kernel_size):
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel_size
    return stride


# ---- max pooling --------------------------------------------------------------------------------

def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W) input, as torch's max_pool2d."""
    where = "max_pool2d"
    kernel_size = _pool_pair(kernel_size, where, "kernel_size", "either be a single int, or a tuple of two ints")
    stride = _pool_pair(_default_stride(stride, kernel_size), where, "stride",
                        "either be omitted, a single int, or a tuple of two ints")
    padding = _pool_pair(padding, where, "padding", "either be a single int, or a tuple of two ints")
    dilation = _pool_pair(dilation, where, "dilation", "be either a single int, or a tuple of two ints")
    shape = input._data.shape
    if len(shape) not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if 0 in shape[-3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(shape)}")
    _check_pool_shape(shape, kernel_size, stride, padding, dilation, bool(ceil_mode), plain_half=True)
    values, indices = dispatch(OPS["max_pool2d"], (input,),
                               {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                                "dilation": dilation, "ceil_mode": bool(ceil_mode)})
    return (values, indices) if return_indices else values


def _single(value, where: str, name: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 1 and isinstance(value[0], int):
        return value[0]
    size = len(value) if isinstance(value, (tuple, list)) else value
    raise RuntimeError(f"{where} {name} must be an int, list of ints or tuple of ints of size 1 but got size {size}")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L): max_pool2d over a unit height, as PyTorch."""
    where = "max_pool1d()"
    shape = list(input._data.shape)
    if len(shape) not in (2, 3) or 0 in shape[-2:]:
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{shape}")
    kernel = _single(kernel_size, where, "kernel_size")
    step = _single(_default_stride(stride, kernel), where, "stride")
    pad = _single(padding, where, "padding")
    dil = _single(dilation, where, "dilation")
    if kernel <= 0:
        raise RuntimeError(f"{where} kernel_size must be greater than zero, but got {kernel}")
    if step <= 0:
        raise RuntimeError(f"{where} stride must be greater than zero, but got {step}")
    if pad < 0:
        raise RuntimeError(f"{where} padding must be non-negative, but got {pad}")
    if pad > _half(kernel):
        raise RuntimeError(f"{where} padding should be at most half of kernel size, but got padding={pad} and "
                           f"kernel_size={kernel}")
    if dil <= 0:
        raise RuntimeError(f"{where} dilation must be greater than zero, but got {dil}")
    out = pool_output_size(shape[-1], kernel, step, pad, dil, bool(ceil_mode))
    if out < 1:
        raise RuntimeError(f"{where} Invalid computed output size: {out}")
    values, indices = dispatch(OPS["max_pool2d"], (fn.unsqueeze(input, -2),),
                               {"kernel_size": (1, kernel), "stride": (1, step), "padding": (0, pad),
                                "dilation": (1, dil), "ceil_mode": bool(ceil_mode)})
    values, indices = fn.squeeze(values, -2), fn.squeeze(indices, -2)
    return (values, indices) if return_indices else values


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling; ``stride`` defaults to ``kernel_size``, as in PyTorch."""

    def forward(self, input):
        return max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                          self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling; ``stride`` defaults to ``kernel_size``, as in PyTorch."""

    def forward(self, input):
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                          self.return_indices)


# ---- average pooling ----------------------------------------------------------------------------

def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W) input, as torch's avg_pool2d."""
    where = "avg_pool2d"
    kernel_size = _pool_pair(kernel_size, where, "kernel_size", "either be a single int, or a tuple of two ints")
    stride = _pool_pair(_default_stride(stride, kernel_size), where, "stride",
                        "either be omitted, a single int, or a tuple of two ints")
    padding = _pool_pair(padding, where, "padding", "either be a single int, or a tuple of two ints")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    shape = input._data.shape
    if not shape:
        raise IndexError("Dimension specified as -3 but tensor has no dimensions")
    if len(shape) < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                         f"but got -3)")
    if len(shape) > 4 or 0 in shape[-3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(shape)}")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f"staticgrad's avg_pool2d does not support integer input (got "
                                  f"{input.dtype}); convert the input to a floating dtype first")
    _check_pool_shape(shape, kernel_size, stride, padding, (1, 1), bool(ceil_mode), plain_half=False)
    return dispatch(OPS["avg_pool2d"], (input,),
                    {"kernel_size": kernel_size, "stride": stride, "padding": padding, "ceil_mode": bool(ceil_mode),
                     "count_include_pad": bool(count_include_pad), "divisor_override": divisor_override})


def _one_int(value, where: str, name: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 1 and isinstance(value[0], int):
        return value[0]
    size = len(value) if isinstance(value, (tuple, list)) else value
    raise RuntimeError(f"{where}() argument '{name}' should contain one int (got {size})")


def _check_rank(input, where: str):
    ndim = input._data.ndim
    if ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {ndim}-dimensional tensor for argument #1 'self' "
                           f"(while checking arguments for {where})")


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-D average pooling: avg_pool2d over a unit height, as PyTorch."""
    _check_rank(input, "avg_pool1d")
    kernel = _one_int(kernel_size, "avg_pool1d", "kernel_size")
    step = kernel if stride is None or stride == () or stride == [] else _one_int(stride, "avg_pool1d", "stride")
    pad = _one_int(padding, "avg_pool1d", "padding")
    out = avg_pool2d(fn.unsqueeze(input, -2), (1, kernel), (1, step), (0, pad), ceil_mode, count_include_pad)
    return fn.squeeze(out, -2)


class AvgPool1d(Module):
    """1-D average pooling."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__()
        single = lambda v: (v,) if isinstance(v, int) else tuple(v)
        self.kernel_size = single(kernel_size)
        self.stride = single(stride if stride is not None else kernel_size)
        self.padding = single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """2-D average pooling; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# ---- adaptive average pooling ---------------------------------------------------------------------

def adaptive_avg_pool2d(input, output_size):
    """Average over output_size windows that tile the plane, as torch's adaptive_avg_pool2d (a mean
    when the output is 1x1, as PyTorch computes it)."""
    shape = list(input._data.shape)
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size, output_size)
    if len(output_size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if len(shape) not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {shape}")
    for axis in range(len(shape) - 3, len(shape)):
        if shape[axis] == 0:
            raise RuntimeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {shape} with dimension {axis} being empty")
    output_size = tuple(n if m is None else m for n, m in zip(shape[-2:], output_size))
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f"staticgrad's adaptive_avg_pool2d does not support integer input (got "
                                  f"{input.dtype}); convert the input to a floating dtype first")
    if output_size == (1, 1):
        return fn.mean(input, (-1, -2), keepdim=True)
    return dispatch(OPS["adaptive_avg_pool2d"], (input,), {"output_size": output_size})


def adaptive_avg_pool1d(input, output_size):
    """adaptive_avg_pool2d over a unit height, as PyTorch."""
    _check_rank(input, "adaptive_avg_pool1d")
    size = _one_int(output_size, "adaptive_avg_pool1d", "output_size")
    return fn.squeeze(adaptive_avg_pool2d(fn.unsqueeze(input, -2), (1, size)), -2)


class AdaptiveAvgPool1d(Module):
    """1-D adaptive average pooling."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """2-D adaptive average pooling."""

    def forward(self, input):
        return adaptive_avg_pool2d(input, self.output_size)


# ---- max unpooling ------------------------------------------------------------------------------

def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Scatter max_pool2d's values back to their indices, zeros elsewhere, as torch's max_unpool2d."""
    kernel = _pair(kernel_size)
    step = _pair(_default_stride(stride, kernel_size))
    pad = _pair(padding)
    shape = list(input._data.shape)
    if len(shape) < 2:  # PyTorch reads the last two sizes before it checks the rank
        raise IndexError("tuple index out of range")
    default = [(n - 1) * s + k - 2 * p for n, s, k, p in zip(shape[-2:], step, kernel, pad)]
    if output_size is None:
        size = default
    else:
        size = list(output_size)[-2:] if len(output_size) in (len(shape), 2) else None
        if size is None:
            raise ValueError(f"output_size should be a sequence containing 2 or {len(shape)} elements, but it has "
                             f"a length of '{len(output_size)}'")
        for d, (want, low, s) in enumerate(zip(size, default, step)):
            if not low - s < want < low + s:
                raise ValueError(f'invalid output_size "{tuple(size)}" (dim {d} must be between {low - s} and '
                                 f'{low + s})')
    if len(shape) not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with "
                           f"{len(shape)} dimensions.")
    if indices._data.dtype.name != "int64":
        raise RuntimeError(f"elements in indices should be type int64 but got: {_scalar_name(indices)}")
    if list(indices._data.shape) != shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({shape}) but got "
                           f"indices tensor with shape: {list(indices._data.shape)}")
    return dispatch(OPS["max_unpool2d"], (input, indices), {"output_size": tuple(size)})


def _scalar_name(tensor) -> str:
    names = {"int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "float32": "Float",
             "float64": "Double", "bool": "Bool", "float16": "Half"}
    return names.get(tensor._data.dtype.name, tensor._data.dtype.name)


class MaxUnpool2d(Module):
    """The partial inverse of MaxPool2d: values back at their indices, zeros elsewhere."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride if stride is not None else kernel_size)
        self.padding = _pair(padding)

    def forward(self, input, indices, output_size=None):
        return max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
