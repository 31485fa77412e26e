"""max_unpool1d and max_unpool3d (the partial inverses of max_pool1d / max_pool3d: each value back at
its index, zeros elsewhere) and their modules, with PyTorch's output-size rule and errors.
max_unpool1d is PyTorch's composition: max_unpool2d on the input with a unit last dim, squeezed."""

from __future__ import annotations

from staticgrad._eager.dispatch import dispatch
from staticgrad.nn.module import Module
from staticgrad.nn.pooling import _scalar_name
from staticgrad.ops import OPS


def _tuple(value, n: int) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,) * n


def _unpool_output_size(input, kernel, stride, padding, output_size) -> list:
    """The unpooled spatial size: the pooled size inverted, or ``output_size`` if it is within a stride of that."""
    dims = len(kernel)
    shape = tuple(input.shape)
    default = [(shape[-dims + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(dims)]
    if output_size is None:
        return default
    if len(output_size) == dims + 2:
        output_size = output_size[2:]
    if len(output_size) != dims:
        raise ValueError(f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for d in range(dims):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return list(output_size)


def _check_indices(input, indices, what: str, ranks: tuple, with_type: bool) -> None:
    """PyTorch's checks of max_unpooling{what}: rank, index dtype and shape, then the kernel's dtypes."""
    if input.dim() not in ranks:
        raise RuntimeError(f"Input to max_unpooling{what} should be a {ranks[0]}d or {ranks[1]}d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if indices._data.dtype.name != "int64":
        raise RuntimeError("elements in indices should be type int64" +
                           (f" but got: {_scalar_name(indices)}" if with_type else ""))
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if not input.is_floating_point():
        raise NotImplementedError(f'"max_unpool{what[0]}d" not implemented for '
                                  f"'{input.dtype.tensor_type[:-len('Tensor')]}'")


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Scatter max_pool1d's values back to their indices along the last dim, zeros elsewhere."""
    kernel = _tuple(kernel_size, 1)
    step = _tuple(stride, 1) if stride is not None else kernel
    size = _unpool_output_size(input, kernel, step, _tuple(padding, 1), output_size)
    input, indices = input.unsqueeze(-1), indices.unsqueeze(-1)
    _check_indices(input, indices, "2d", (3, 4), True)
    return dispatch(OPS["max_unpool2d"], (input, indices), {"output_size": (size[0], 1)}).squeeze(-1)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Scatter max_pool3d's values back to their indices in each (D, H, W) volume, zeros elsewhere."""
    kernel = _tuple(kernel_size, 3)
    step = _tuple(stride, 3) if stride is not None else kernel
    size = _unpool_output_size(input, kernel, step, _tuple(padding, 3), output_size)
    _check_indices(input, indices, "3d", (4, 5), False)
    return dispatch(OPS["max_unpool3d"], (input, indices), {"output_size": tuple(size)})


class MaxUnpool1d(Module):
    """The partial inverse of MaxPool1d: values back at their indices, zeros elsewhere."""

    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self.dims)
        self.stride = _tuple(stride if stride is not None else kernel_size, self.dims)
        self.padding = _tuple(padding, self.dims)

    def forward(self, input, indices, output_size=None):
        return max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool3d(MaxUnpool1d):
    """The partial inverse of MaxPool3d."""

    dims = 3

    def forward(self, input, indices, output_size=None):
        return max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)
