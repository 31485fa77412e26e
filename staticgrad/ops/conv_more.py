"""N-d convolution (1-, 2- or 3-D) with stride, padding, dilation and groups, plain or transposed,
with its gradients as ops of their own.

The plain 2-D convolution without dilation or groups stays the ``conv2d`` op (staticgrad.ops.conv);
everything else comes here. A convolution is im2col: a strided view of the padded input's windows
(``sliding_window_view``, then every ``stride``-th window and every ``dilation``-th cell), copied
into (groups, columns) and multiplied by the weight in one batched matmul. Its adjoint in the
input (col2im) is the transposed convolution: the weight's transpose times the gradient gives a
value for every cell of every window, added back onto the position it was read from, one strided
add per kernel offset. Its adjoint in the weight is the columns times the gradient. The three are
bilinear and close under differentiation, so double backward needs nothing more.

Geometry attributes are tuples with one entry per spatial dimension.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from staticgrad.ops.registry import OpDef, Save, register


def _write(result, out):
    if out is None:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


def _windows(x, kernel_size, stride, padding, dilation):
    """(N, C, *kernel, *out) strided view of the cells each output position reads from the
    zero-padded input (N, C, *spatial)."""
    dims = len(kernel_size)
    if any(padding):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel_size, dilation))
    view = sliding_window_view(x, span, axis=tuple(range(2, 2 + dims)))
    view = view[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
                + tuple(slice(None, None, d) for d in dilation)]
    return view.transpose((0, 1) + tuple(range(2 + dims, 2 + 2 * dims)) + tuple(range(2, 2 + dims)))


def convolve(x, weight, stride, padding, dilation, groups):
    """Cross-correlation of x (N, C, *in) with weight (O, C/groups, *k): (N, O, *out)."""
    n, o, kernel = x.shape[0], weight.shape[0], weight.shape[2:]
    windows = _windows(x, kernel, stride, padding, dilation)
    out_shape = windows.shape[2 + len(kernel):]
    depth = weight.shape[1] * math.prod(kernel)
    columns = windows.reshape(n, groups, depth, math.prod(out_shape))
    product = np.matmul(weight.reshape(groups, o // groups, depth), columns)
    return product.reshape(n, o, *out_shape)


def convolve_input_grad(g, weight, input_size, stride, padding, dilation, groups):
    """The adjoint of ``convolve`` in x (col2im): g (N, O, *out) to (N, C, *input_size). It is
    also the transposed convolution of g by weight."""
    n, o, out_shape = g.shape[0], g.shape[1], g.shape[2:]
    per_group, kernel = weight.shape[1], weight.shape[2:]
    depth = per_group * math.prod(kernel)
    kernel_t = weight.reshape(groups, o // groups, depth).transpose(0, 2, 1)
    columns = np.matmul(kernel_t, g.reshape(n, groups, o // groups, math.prod(out_shape)))
    columns = columns.reshape(n, groups * per_group, *kernel, *out_shape)
    padded = np.zeros((n, groups * per_group) + tuple(s + 2 * p for s, p in zip(input_size, padding)),
                      columns.dtype)
    everything = (slice(None), slice(None))
    for offset in np.ndindex(*kernel):
        where = tuple(slice(i * d, i * d + s * (m - 1) + 1, s)
                      for i, d, s, m in zip(offset, dilation, stride, out_shape))
        padded[everything + where] += columns[everything + offset]
    return padded[everything + tuple(slice(p, p + s) for p, s in zip(padding, input_size))]


def convolve_weight_grad(g, x, kernel_size, stride, padding, dilation, groups):
    """The adjoint of ``convolve`` in the weight: g (N, O, *out) and x (N, C, *in) to
    (O, C/groups, *kernel), summed over batch and positions in one matmul per group."""
    n, o, c, dims = g.shape[0], g.shape[1], x.shape[1], len(kernel_size)
    windows = _windows(x, kernel_size, stride, padding, dilation)
    positions = n * math.prod(g.shape[2:])
    depth = (c // groups) * math.prod(kernel_size)
    columns = windows.transpose((1,) + tuple(range(2, 2 + dims)) + (0,) + tuple(range(2 + dims, 2 + 2 * dims)))
    columns = columns.reshape(groups, depth, positions)
    grad = np.moveaxis(g, 1, 0).reshape(groups, o // groups, positions)
    return np.matmul(grad, columns.transpose(0, 2, 1)).reshape(o, c // groups, *kernel_size)


def transposed_size(size, kernel_size, stride, padding, dilation, output_padding):
    """The spatial output size of a transposed convolution."""
    return tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for i, k, s, p, d, op in zip(size, kernel_size, stride, padding, dilation, output_padding))


def leftover(size, out_size, kernel_size, stride, padding, dilation):
    """The output_padding that makes a transposed convolution of ``out_size`` come back to ``size``
    (the rows a strided convolution leaves unread)."""
    zero = (0,) * len(size)
    return tuple(n - m for n, m in zip(size, transposed_size(out_size, kernel_size, stride, padding, dilation, zero)))


# ---- convolution(input, weight[, bias]) ---------------------------------------------------------

def _convolution(x, weight, bias=None, out=None, stride=(1,), padding=(0,), dilation=(1,), groups=1,
                 transposed=False, output_padding=(0,)):
    if transposed:
        size = transposed_size(x.shape[2:], weight.shape[2:], stride, padding, dilation, output_padding)
        result = convolve_input_grad(x, weight, size, stride, padding, dilation, groups)
    else:
        result = convolve(x, weight, stride, padding, dilation, groups)
    if bias is not None:
        result = result + bias.reshape((-1,) + (1,) * (result.ndim - 2))
    return _write(result, out)


def _geometry(at):
    return {"stride": at["stride"], "padding": at["padding"], "dilation": at["dilation"], "groups": at["groups"]}


def _convolution_backward(F, g, s, at, need):
    geometry = _geometry(at)
    kernel = tuple(s["weight_sym_sizes"][2:])
    grad_input = grad_weight = None
    if not at["transposed"]:
        if need[0]:
            extra = leftover(tuple(s["input_sym_sizes"][2:]), tuple(g.shape[2:]), kernel, at["stride"],
                             at["padding"], at["dilation"])
            grad_input = F.convolution_in_backward(g, s["weight"], transposed=True, output_padding=extra, **geometry)
        if need[1]:
            grad_weight = F.convolution_weight_grad(g, s["input"], kernel_size=kernel, **geometry)
    else:
        if need[0]:
            zero = (0,) * len(kernel)
            grad_input = F.convolution_in_backward(g, s["weight"], transposed=False, output_padding=zero, **geometry)
        if need[1]:
            grad_weight = F.convolution_weight_grad(s["input"], g, kernel_size=kernel, **geometry)
    if len(need) == 2:
        return grad_input, grad_weight
    return grad_input, grad_weight, F.sum(g, dim=(0,) + tuple(range(2, g.ndim))) if need[2] else None


_GEOMETRY_SAVES = (Save("input_sym_sizes", "shape:0", freed=False), Save("weight_sym_sizes", "shape:1", freed=False),
                   Save("stride", "attr:stride", freed=False), Save("padding", "attr:padding", freed=False),
                   Save("dilation", "attr:dilation", freed=False), Save("groups", "attr:groups", freed=False),
                   Save("transposed", "attr:transposed", freed=False),
                   Save("output_padding", "attr:output_padding", freed=False))

# PyTorch's ConvolutionBackward0 keeps input and weight whichever needs a gradient.
register(OpDef("convolution", _convolution, "matmul", "ConvolutionBackward0", _convolution_backward,
               (Save("input", 0), Save("weight", 1)) + _GEOMETRY_SAVES, "same"))

# The same convolution when a backward formula computes it (a gradient of a convolution), under
# PyTorch's double-backward node name; it keeps only what its own gradient reads.
register(OpDef("convolution_in_backward", _convolution, "matmul", "ConvolutionBackwardBackward0",
               _convolution_backward,
               (Save("input", 0, when=(1,)), Save("weight", 1, when=(0,))) + _GEOMETRY_SAVES, "same"))


def _convolution_weight_grad(g, x, out=None, kernel_size=(1,), stride=(1,), padding=(0,), dilation=(1,), groups=1):
    return _write(convolve_weight_grad(g, x, kernel_size, stride, padding, dilation, groups), out)


def _convolution_weight_grad_backward(F, gg, s, at, need):
    # W(g, x) is bilinear: <gg, W(g, x)> = <convolve(x, gg), g> = <convolve_input_grad(g, gg), x>.
    geometry = _geometry(at)
    grad_g = grad_x = None
    if need[0]:
        zero = (0,) * len(at["kernel_size"])
        grad_g = F.convolution_in_backward(s["input"], gg, transposed=False, output_padding=zero, **geometry)
    if need[1]:
        g = s["grad_output"]
        extra = leftover(tuple(s["input_sym_sizes"][2:]), tuple(g.shape[2:]), at["kernel_size"], at["stride"],
                         at["padding"], at["dilation"])
        grad_x = F.convolution_in_backward(g, gg, transposed=True, output_padding=extra, **geometry)
    return grad_g, grad_x


register(OpDef("convolution_weight_grad", _convolution_weight_grad, "matmul", "ConvolutionBackwardBackward0",
               _convolution_weight_grad_backward,
               (Save("grad_output", 0, when=(1,)), Save("input", 1, when=(0,)),
                Save("input_sym_sizes", "shape:1", freed=False)),
               "same"))
