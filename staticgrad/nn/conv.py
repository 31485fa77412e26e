"""The plain conv2d (no dilation, no groups): PyTorch's argument handling and shape checks (with
PyTorch's messages) in front of the ``conv2d`` op (staticgrad.ops.conv). Pooling lives in
staticgrad.nn.pooling.

Supported: stride, zero padding (ints, pairs, "valid", "same" for odd kernels); unbatched
(C, H, W) inputs. staticgrad.nn.conv_more's conv2d (the public one) and Conv2d send dilated,
grouped and even-kernel "same" convolutions to the general ``convolution`` op instead.
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad.ops import OPS
from staticgrad.ops.dtypes import from_numpy_dtype

_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half"}  # as PyTorch's messages


def _pair(value) -> tuple[int, int] | None:
    """An int or a 1- or 2-sequence of ints as (height, width); None if it is neither."""
    if isinstance(value, int):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[0]) if len(value) == 1 else tuple(value)
    return None


def _unsupported(where: str, what: str, value, fix: str) -> NotImplementedError:
    return NotImplementedError(f"staticgrad's {where} does not support {what} (got {value}); {fix}")


def _same_padding(kernel_size, stride):
    """padding='same' as symmetric zero padding; even kernels would need one extra row/column."""
    if stride != (1, 1):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    if any(k % 2 == 0 for k in kernel_size):
        raise _unsupported("conv2d", "padding='same' with an even kernel size", kernel_size,
                           "use an odd kernel size or pass explicit integer padding")
    return kernel_size[0] // 2, kernel_size[1] // 2


# ---- conv2d -------------------------------------------------------------------------------------

def _conv_pair(value, name: str) -> tuple[int, int]:
    pair = _pair(value)
    if pair is None:
        shown = list(value) if isinstance(value, (tuple, list)) else value
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 values to match the "
                           f"convolution dimensions, but got {name}={shown}")
    return pair


def _check_conv_shapes(x, weight, bias, padding):
    xs, ws = list(x._data.shape), list(weight._data.shape)
    if x._data.dtype != weight._data.dtype:
        raise RuntimeError(f"Input type ({from_numpy_dtype(x._data.dtype).tensor_type}) and weight type "
                           f"({from_numpy_dtype(weight._data.dtype).tensor_type}) should be the same")
    if xs[1] != ws[1]:
        raise RuntimeError(f"Given groups=1, weight of size {ws}, expected input{xs} to have {ws[1]} channels, "
                           f"but got {xs[1]} channels instead")
    if bias is not None:
        if list(bias._data.shape) != [ws[0]]:
            raise RuntimeError(f"Given weight of size {ws}, expected bias to be 1-dimensional with {ws[0]} "
                               f"elements, but got bias of size {list(bias._data.shape)} instead")
        if bias._data.dtype != x._data.dtype:
            names = [_C_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name) for t in (x, bias)]
            raise RuntimeError(f"Input type ({names[0]}) and bias type ({names[1]}) should be the same")
    padded = (xs[2] + 2 * padding[0], xs[3] + 2 * padding[1])
    if ws[2] > padded[0] or ws[3] > padded[1]:
        raise RuntimeError(f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel size: "
                           f"({ws[2]} x {ws[3]}). Kernel size can't be greater than actual input size")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation over (N, C, H, W) or unbatched (C, H, W) input, as torch's conv2d."""
    if _pair(dilation) != (1, 1):
        raise _unsupported("conv2d", "dilation", dilation, "call staticgrad.nn.functional.conv2d, which sends "
                                                           "dilated convolutions to the convolution op")
    if groups != 1:
        raise _unsupported("conv2d", "groups", groups, "call staticgrad.nn.functional.conv2d, which sends "
                                                       "grouped convolutions to the convolution op")
    ndim = input._data.ndim
    if ndim not in (3, 4):
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
                           f"{list(input._data.shape)}")
    if weight._data.ndim != 4:
        raise RuntimeError(f"Expected 4D weight (out_channels, in_channels, kH, kW) for conv2d, but got weight "
                           f"of size {list(weight._data.shape)}")
    stride = _conv_pair(stride, "stride")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        padding = (0, 0) if padding == "valid" else _same_padding(weight._data.shape[2:], stride)
    padding = _conv_pair(padding, "padding")
    if min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    batched = input if ndim == 4 else fn.unsqueeze(input, 0)
    _check_conv_shapes(batched, weight, bias, padding)
    inputs = (batched, weight) if bias is None else (batched, weight, bias)
    out = dispatch(OPS["conv2d"], inputs, {"stride": stride, "padding": padding})
    return out if ndim == 4 else fn.squeeze(out, 0)
