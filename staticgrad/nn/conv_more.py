"""conv1d, conv3d, conv_transpose1d/2d/3d, the dilated and grouped conv2d, and their modules
(Conv1d, Conv2d, Conv3d, ConvTranspose1d/2d/3d): PyTorch's argument handling and shape checks
(with PyTorch's messages) in front of the ``convolution`` op (staticgrad.ops.conv_more).

A plain conv2d (no dilation, no groups) keeps its own op, ``conv2d`` (staticgrad.nn.conv).
padding="same" with an even effective kernel pads the input's far side by one more zero first,
as PyTorch does. padding_mode "reflect", "replicate" or "circular" pads the input with F.pad and
convolves with no padding, as PyTorch's modules do.
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import empty, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.movement import pad
from staticgrad.nn import conv as plain
from staticgrad.nn import init
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS
from staticgrad.ops.conv_more import transposed_size
from staticgrad.ops.dtypes import from_numpy_dtype

# The message prints this set, as PyTorch prints its own (the order varies between processes).
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _expand(value, dims: int, name: str) -> tuple:
    """An int or a sequence of ``dims`` ints (or one) as a tuple of ``dims`` ints, as F.conv*d."""
    if isinstance(value, int):
        return (value,) * dims
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        if len(value) == dims:
            return tuple(value)
        if len(value) == 1:
            return (value[0],) * dims
    shown = list(value) if isinstance(value, (tuple, list)) else value
    raise RuntimeError(f"expected {name} to be a single integer value or a list of {dims} values to match the "
                       f"convolution dimensions, but got {name}={shown}")


def _module_tuple(value, dims: int, name: str) -> tuple:
    if isinstance(value, int):
        return (value,) * dims
    if isinstance(value, (tuple, list)) and len(value) == dims and all(isinstance(v, int) for v in value):
        return tuple(value)
    raise TypeError(f"{name} must be an int or a tuple of {dims} ints, but got {value!r}")


def _check_shapes(x, weight, bias, geometry, transposed, name):
    xs, ws = list(x._data.shape), list(weight._data.shape)
    groups = geometry["groups"]
    if x._data.dtype != weight._data.dtype:
        raise RuntimeError(f"Input type ({from_numpy_dtype(x._data.dtype).tensor_type}) and weight type "
                           f"({from_numpy_dtype(weight._data.dtype).tensor_type}) should be the same")
    if len(ws) != len(xs):
        raise RuntimeError(f"Expected {len(ws)}-dimensional input for {len(ws)}-dimensional weight {ws}, but got "
                           f"{len(xs)}-dimensional input of size {xs} instead")
    if ws[0] < groups or ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size [{ws}] instead")
    channels, outputs = (ws[0], ws[1] * groups) if transposed else (ws[1] * groups, ws[0])
    if xs[1] != channels:
        given = "transposed=1" if transposed else f"groups={groups}"
        raise RuntimeError(f"Given {given}, weight of size {ws}, expected input{xs} to have {channels} channels, "
                           f"but got {xs[1]} channels instead")
    if bias is not None:
        if list(bias._data.shape) != [outputs]:
            given = "transposed=1, " if transposed else ""
            raise RuntimeError(f"Given {given}weight of size {ws}, expected bias to be 1-dimensional with {outputs} "
                               f"elements, but got bias of size {list(bias._data.shape)} instead")
        if bias._data.dtype != x._data.dtype:  # PyTorch names C types here, tensor types when transposed
            if transposed:
                names = [from_numpy_dtype(t._data.dtype).tensor_type for t in (x, bias)]
            else:
                names = [plain._C_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name) for t in (x, bias)]
            raise RuntimeError(f"Input type ({names[0]}) and bias type ({names[1]}) should be the same")
    kernel = [d * (k - 1) + 1 for k, d in zip(ws[2:], geometry["dilation"])]
    if transposed:
        size = transposed_size(xs[2:], ws[2:], geometry["stride"], geometry["padding"], geometry["dilation"],
                               geometry["output_padding"])
        if min(size) < 1:
            raise RuntimeError(f"{name}: the output size {list(size)} computed from input size {xs[2:]}, kernel "
                               f"{ws[2:]}, stride, padding, dilation and output_padding is not positive")
        return
    padded = [n + 2 * p for n, p in zip(xs[2:], geometry["padding"])]
    if any(k > n for k, n in zip(kernel, padded)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual "
                           f"input size")


def _same_padding(x, weight, dilation, stride, dims):
    """padding='same': symmetric padding, and the input padded by one more zero on the far side of
    each axis whose effective kernel is even (as PyTorch does)."""
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    padding = []
    for axis, (k, d) in enumerate(zip(weight._data.shape[2:], dilation)):
        total = d * (k - 1)
        padding.append(total // 2)
        if total % 2:
            shape = list(x._data.shape)
            shape[2 + axis] = 1
            x = fn.cat([x, zeros(*shape, dtype=x.dtype)], 2 + axis)
    return x, tuple(padding)


def convolution(input, weight, bias, stride, padding, dilation, groups, *, dims: int, name: str,
                transposed: bool = False, output_padding=0):
    """A dims-D (transposed) convolution over batched or unbatched input, as torch's conv*d."""
    ndim = input._data.ndim
    if ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(input._data.shape)}")
    stride = _expand(stride, dims, "stride")
    dilation = _expand(dilation, dims, "dilation")
    output_padding = _expand(output_padding, dims, "output_padding")
    batched = input if ndim == dims + 2 else fn.unsqueeze(input, 0)
    if isinstance(padding, str):
        if transposed:
            raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "valid":
            padding = (0,) * dims
        else:
            batched, padding = _same_padding(batched, weight, dilation, stride, dims)
    padding = _expand(padding, dims, "padding")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(output_padding) < 0:
        raise RuntimeError("negative output_padding is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if transposed and any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        axes = ("height", "width") if dims == 2 else ("depth", "height", "width") if dims == 3 else ("width",)
        parts = [f"{kind}_{axis}: {value}" for kind, values in (("output_padding", output_padding),
                 ("stride", stride), ("dilation", dilation)) for axis, value in zip(axes, values)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(parts))
    geometry = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
                "transposed": transposed, "output_padding": output_padding}
    _check_shapes(batched, weight, bias, geometry, transposed, name)
    inputs = (batched, weight) if bias is None else (batched, weight, bias)
    out = dispatch(OPS["convolution"], inputs, geometry)
    return out if ndim == dims + 2 else fn.squeeze(out, 0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation over (N, C, L) or unbatched (C, L) input, as torch's conv1d."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, dims=1, name="conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation over (N, C, H, W) or unbatched (C, H, W) input, as torch's conv2d: the
    ``conv2d`` op without dilation or groups, the ``convolution`` op with them."""
    even_same = padding == "same" and weight._data.ndim == 4 and any(k % 2 == 0 for k in weight._data.shape[2:])
    if groups == 1 and dilation in (1, (1, 1), [1, 1], (1,), [1]) and not even_same:
        return plain.conv2d(input, weight, bias, stride, padding)
    return convolution(input, weight, bias, stride, padding, dilation, groups, dims=2, name="conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation over (N, C, D, H, W) or unbatched (C, D, H, W) input, as torch's conv3d."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, dims=3, name="conv3d")


def _transpose(dims):
    def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return convolution(input, weight, bias, stride, padding, dilation, groups, dims=dims,
                           name=f"conv_transpose{dims}d", transposed=True, output_padding=output_padding)

    conv_transpose.__name__ = conv_transpose.__qualname__ = f"conv_transpose{dims}d"
    conv_transpose.__doc__ = f"{dims}-D transposed convolution (the gradient of conv{dims}d in its input), as torch's."
    return conv_transpose


conv_transpose1d, conv_transpose2d, conv_transpose3d = _transpose(1), _transpose(2), _transpose(3)


# ---- modules ------------------------------------------------------------------------------------

class _ConvNd(Module):
    """What every convolution layer holds, initialised as PyTorch does (Kaiming-uniform weight,
    uniform bias within 1/sqrt(fan_in))."""

    dims = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        dims, kind = self.dims, type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {kind}')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _module_tuple(kernel_size, dims, "kernel_size")
        self.stride = _module_tuple(stride, dims, "stride")
        self.dilation = _module_tuple(dilation, dims, "dilation")
        if isinstance(padding, str) and not self.transposed:
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _module_tuple(padding, dims, "padding")
        self.output_padding = _module_tuple(output_padding, dims, "output_padding")
        self.groups, self.padding_mode = groups, padding_mode
        self._reversed_padding_repeated_twice = self._pad_sides()
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(*shape, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _pad_sides(self) -> tuple:
        """F.pad's (left, right) pairs, last dim first, that padding_mode pads with ("same": the total
        padding each dim needs, the extra one on the right)."""
        if self.padding == "valid":
            return (0, 0) * self.dims
        sides = []
        for k in reversed(range(self.dims)):
            if self.padding == "same":
                total = self.dilation[k] * (self.kernel_size[k] - 1)
                sides += [total // 2, total - total // 2]
            else:
                sides += [self.padding[k], self.padding[k]]
        return tuple(sides)

    def _convolve(self, function, input):
        """``function`` (conv1d/2d/3d) on the input, padded first by padding_mode when it is not zeros."""
        if self.padding_mode != "zeros":
            padded = pad(input, self._reversed_padding_repeated_twice, self.padding_mode)
            return function(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return function(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def reset_parameters(self) -> None:
        init.reset_weight_and_bias(self.weight, self.bias)

    def extra_repr(self) -> str:
        dims = self.dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """A 1-D convolution layer over (N, C, L) or (C, L)."""

    dims = 1

    def forward(self, input):
        return self._convolve(conv1d, input)


class Conv2d(_ConvNd):
    """A 2-D convolution layer over (N, C, H, W) or (C, H, W)."""

    dims = 2

    def forward(self, input):
        return self._convolve(conv2d, input)


class Conv3d(_ConvNd):
    """A 3-D convolution layer over (N, C, D, H, W) or (C, D, H, W)."""

    dims = 3

    def forward(self, input):
        return self._convolve(conv3d, input)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """The output_padding that gives ``output_size`` (forward's optional argument), as PyTorch."""
        if output_size is None:
            return self.output_padding
        dims = self.dims
        output_size = list(output_size)[-dims:]
        if len(output_size) != dims:
            raise ValueError(f"ConvTranspose{dims}D: for {input.dim()}D input, output_size must have {dims} or "
                             f"{dims + 2} elements (got {len(output_size)})")
        zero = (0,) * dims
        smallest = transposed_size(input.shape[-dims:], self.kernel_size, self.stride, self.padding, self.dilation,
                                   zero)
        extra = []
        for size, low, stride in zip(output_size, smallest, self.stride):
            if not low <= size < low + stride:
                largest = [m + s - 1 for m, s in zip(smallest, self.stride)]
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from "
                                 f"{list(smallest)} to {largest} (for an input of {list(input.shape[2:])})")
            extra.append(size - low)
        return tuple(extra)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return convolution(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                           dims=self.dims, name=f"conv_transpose{self.dims}d", transposed=True,
                           output_padding=output_padding)


class ConvTranspose1d(_ConvTransposeNd):
    """A 1-D transposed convolution layer."""

    dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """A 2-D transposed convolution layer."""

    dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """A 3-D transposed convolution layer."""

    dims = 3
