"""2-D convolution and max pooling over NCHW arrays, with their gradients as ops of their own.

Convolution is im2col (``sliding_window_view`` over the zero-padded input, copied into columns)
and one matmul. conv2d is bilinear in (input, weight), and so are its input and weight gradients,
so the three ops close under differentiation: each one's backward is written with the other two,
and double backward needs nothing more. Max pooling records the flat argmax of each window; its
gradient scatters back to those positions, and that scatter's gradient gathers from them; both
are Numba loops (staticgrad.ops.loops).

Forward functions write ``out`` only in their last NumPy call, or earlier only when nothing read
afterwards can share its memory (out is C-contiguous, as the arena's views are), so a planner may
hand them an ``out`` that aliases an input.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from staticgrad.ops.elementwise import fill_outputs, loop_output
from staticgrad.ops.registry import OpDef, Save, jit_loops, register
from staticgrad.ops.scratch import Scratch, scratch_bytes
from staticgrad.ops.shape import reshape_back


def _windows(x, kernel_size, stride, padding, fill=0, scratch=None):
    """(..., OH, OW, kh, kw) strided view of the windows a kernel visits over the last two axes of
    the padded input (padded into the next temporary of ``scratch``, a Scratch, if given)."""
    ph, pw = padding
    if ph or pw:
        *lead, h, w = x.shape
        padded = (scratch or Scratch(None)).take((*lead, h + 2 * ph, w + 2 * pw), x.dtype)
        padded.fill(fill)
        padded[..., ph:ph + h, pw:pw + w] = x
        x = padded
    sh, sw = stride
    return sliding_window_view(x, tuple(kernel_size), axis=(-2, -1))[..., ::sh, ::sw, :, :]


def _padded_shape(x_shape, padding) -> list:
    """The padded input's shape, a temporary of _windows, if the convolution pads."""
    n, c, h, w = x_shape
    ph, pw = padding
    return [(n, c, h + 2 * ph, w + 2 * pw)] if ph or pw else []


def _conv_scratch(temporaries):
    """An op's ``scratch`` sizer from its temporaries (in_shapes, in_dtypes, attrs) -> [(shape, dtype)]:
    none for shapes the op does not take as 4-D batches, or for empty results."""
    def size(in_shapes, in_dtypes, attrs) -> int:
        if any(shape is None or len(shape) != 4 for shape in in_shapes[:2]):
            return 0
        listed = temporaries(in_shapes, in_dtypes, attrs)
        if any(d <= 0 for shape, _ in listed for d in shape):
            return 0
        return scratch_bytes(listed)
    return size


def _write(result, out):
    """Return ``result``, or copy it into ``out`` (the op's last NumPy call) and return ``out``."""
    if out is None:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


# ---- conv2d(input, weight[, bias]) -------------------------------------------------------------

def _conv2d(x, weight, bias=None, out=None, stride=(1, 1), padding=(0, 0), scratch=None):
    n, c, o = x.shape[0], x.shape[1], weight.shape[0]
    temporaries = Scratch(scratch)
    windows = _windows(x, weight.shape[2:], stride, padding, scratch=temporaries)
    oh, ow, kh, kw = windows.shape[2:]
    columns = temporaries.take((n, c, kh, kw, oh, ow), x.dtype)   # the windows in C order (im2col)
    np.copyto(columns, windows.transpose(0, 1, 4, 5, 2, 3))
    columns = columns.reshape(n, c * kh * kw, oh * ow)
    kernel = weight.reshape(o, c * kh * kw)
    flat_out = None if out is None else np.reshape(out, (n, o, oh * ow), copy=False)
    if bias is None:
        product = np.matmul(kernel, columns, out=flat_out)
        return product.reshape(n, o, oh, ow) if out is None else out
    # The matmul may fill out early unless out shares memory with the bias, the one input read after it.
    early = flat_out if flat_out is not None and not np.may_share_memory(out, bias) else None
    product = np.matmul(kernel, columns, out=early)
    result = np.add(product, bias.reshape(o, 1), out=flat_out)
    return result.reshape(n, o, oh, ow) if out is None else out


def _conv2d_backward(F, g, s, at, need):
    x, weight = s["input"], s["weight"]
    geometry = {"stride": at["stride"], "padding": at["padding"]}
    grad_input = F.conv2d_input_grad(g, weight, input_size=tuple(x.shape[2:]), **geometry) if need[0] else None
    grad_weight = F.conv2d_weight_grad(g, x, kernel_size=tuple(weight.shape[2:]), **geometry) if need[1] else None
    if len(need) == 2:
        return grad_input, grad_weight
    return grad_input, grad_weight, F.sum(g, dim=(0, 2, 3)) if need[2] else None


# PyTorch saves input and weight whichever of them needs a gradient; in training both are alive
# anyway (the batch or an activation, and a parameter), so saving them costs nothing extra.
def _conv2d_temporaries(in_shapes, in_dtypes, attrs) -> list:
    (n, c, h, w), (_, _, kh, kw) = in_shapes[:2]
    stride, padding = attrs.get("stride", (1, 1)), attrs.get("padding", (0, 0))
    oh, ow = (pool_output_size(*geometry) for geometry in zip((h, w), (kh, kw), stride, padding))
    listed = [(shape, in_dtypes[0]) for shape in _padded_shape((n, c, h, w), padding)]
    return listed + [((n, c, kh, kw, oh, ow), in_dtypes[0])]


register(OpDef("conv2d", _conv2d, "matmul", "ConvolutionBackward0", _conv2d_backward,
               (Save("input", 0), Save("weight", 1),
                Save("stride", "attr:stride", freed=False), Save("padding", "attr:padding", freed=False)),
               "same", scratch=_conv_scratch(_conv2d_temporaries)))


def _conv2d_input_grad(g, weight, out=None, input_size=(1, 1), stride=(1, 1), padding=(0, 0), scratch=None):
    """Gradient w.r.t. conv2d's input (col2im): weight^T times g gives a gradient for every cell
    of every window, each added back onto the padded-input position it was read from."""
    n, o, oh, ow = g.shape
    _, c, kh, kw = weight.shape
    (h, w), (sh, sw), (ph, pw) = input_size, stride, padding
    temporaries = Scratch(scratch if out is not None else None)   # without out, the result is a view of padded
    columns = temporaries.take((n, c * kh * kw, oh * ow), np.result_type(weight, g))
    np.matmul(weight.reshape(o, c * kh * kw).T, g.reshape(n, o, oh * ow), out=columns)
    columns = columns.reshape(n, c, kh, kw, oh, ow)
    padded = temporaries.take((n, c, h + 2 * ph, w + 2 * pw), columns.dtype)
    padded.fill(0)
    for i in range(kh):
        for j in range(kw):
            padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += columns[:, :, i, j]
    return _write(padded[:, :, ph:ph + h, pw:pw + w], out)


def _conv2d_input_grad_backward(F, gg, s, at, need):
    # grad_input = A(weight)^T g, linear in each: <gg, A^T g> = <A gg, g> = <conv2d(gg, weight), g>.
    geometry = {"stride": at["stride"], "padding": at["padding"]}
    grad_g = F.conv2d(gg, s["weight"], **geometry) if need[0] else None
    grad_weight = (F.conv2d_weight_grad(s["grad_output"], gg, kernel_size=tuple(s["weight_sym_sizes"][2:]),
                                        **geometry) if need[1] else None)
    return grad_g, grad_weight


def _conv2d_input_grad_temporaries(in_shapes, in_dtypes, attrs) -> list:
    (n, _, oh, ow), (_, c, kh, kw) = in_shapes[:2]
    h, w = attrs.get("input_size", (1, 1))
    ph, pw = attrs.get("padding", (0, 0))
    dtype = np.result_type(*in_dtypes[:2])
    return [((n, c * kh * kw, oh * ow), dtype), ((n, c, h + 2 * ph, w + 2 * pw), dtype)]


register(OpDef("conv2d_input_grad", _conv2d_input_grad, "matmul", "ConvolutionBackwardBackward0",
               _conv2d_input_grad_backward,
               (Save("grad_output", 0, when=(1,)), Save("weight", 1, when=(0,)),
                Save("weight_sym_sizes", "shape:1", freed=False)),
               "same", scratch=_conv_scratch(_conv2d_input_grad_temporaries)))


def _conv2d_weight_grad(g, x, out=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), scratch=None):
    """Gradient w.r.t. conv2d's weight: g times the input's columns, summed over batch and positions
    in one matmul of (O, N*OH*OW) by (N*OH*OW, C*kh*kw)."""
    n, o, oh, ow = g.shape
    c, (kh, kw) = x.shape[1], kernel_size
    temporaries = Scratch(scratch)
    windows = _windows(x, kernel_size, stride, padding, scratch=temporaries)
    columns = temporaries.take((c, kh, kw, n, oh, ow), x.dtype)   # the windows in C order
    np.copyto(columns, windows.transpose(1, 4, 5, 0, 2, 3))
    columns = columns.reshape(c * kh * kw, n * oh * ow)
    grad = temporaries.take((o, n, oh, ow), g.dtype)   # channels first
    np.copyto(grad, g.transpose(1, 0, 2, 3))
    grad = grad.reshape(o, n * oh * ow)
    if out is None:
        return np.matmul(grad, columns.T).reshape(o, c, kh, kw)
    np.matmul(grad, columns.T, out=np.reshape(out, (o, c * kh * kw), copy=False))
    return out


def _conv2d_weight_grad_backward(F, gg, s, at, need):
    # grad_weight = B(input)^T g, linear in each: <gg, grad_weight> = <conv2d(input, gg), g>.
    geometry = {"stride": at["stride"], "padding": at["padding"]}
    grad_g = F.conv2d(s["input"], gg, **geometry) if need[0] else None
    grad_input = (F.conv2d_input_grad(s["grad_output"], gg, input_size=tuple(s["input_sym_sizes"][2:]),
                                      **geometry) if need[1] else None)
    return grad_g, grad_input


def _conv2d_weight_grad_temporaries(in_shapes, in_dtypes, attrs) -> list:
    (n, o, oh, ow), x_shape = in_shapes[:2]
    c, (kh, kw) = x_shape[1], attrs.get("kernel_size", (1, 1))
    listed = [(shape, in_dtypes[1]) for shape in _padded_shape(x_shape, attrs.get("padding", (0, 0)))]
    return listed + [((c, kh, kw, n, oh, ow), in_dtypes[1]), ((o, n, oh, ow), in_dtypes[0])]


register(OpDef("conv2d_weight_grad", _conv2d_weight_grad, "matmul", "ConvolutionBackwardBackward0",
               _conv2d_weight_grad_backward,
               (Save("grad_output", 0, when=(1,)), Save("input", 1, when=(0,)),
                Save("input_sym_sizes", "shape:1", freed=False)),
               "same", scratch=_conv_scratch(_conv2d_weight_grad_temporaries)))


# ---- max_pool2d(input) -> (values, flat indices into each H*W plane) ----------------------------

def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def pool_output_size(size, kernel, stride, padding, dilation=1, ceil_mode=False):
    """PyTorch's pooling output length: with ceil_mode a last partial window counts, unless it
    would start in the right padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _max_pool2d(x, out=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), ceil_mode=False):
    """A Numba loop over the windows of each (H, W) plane, with PyTorch's scan and indices (see
    loops.max_pool2d). float16 pools its exact float32 values, bool its bytes."""
    *lead, height, width = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    out_h = pool_output_size(height, kh, sh, ph, dh, ceil_mode)
    out_w = pool_output_size(width, kw, sw, pw, dw, ceil_mode)
    work = np.dtype(np.float32) if x.dtype == np.float16 else np.dtype(np.uint8) if x.dtype == np.bool_ else x.dtype
    planes = np.ascontiguousarray(x, dtype=work).reshape(-1, height, width)
    shape = (planes.shape[0], out_h, out_w)
    # out (values, indices): the loop writes into them directly where they fit
    values, indices = (loop_output(math.prod(shape), dtype, None if out is None else out[k], (x, planes))
                       .reshape(shape) for k, dtype in enumerate((work, np.dtype(np.int64))))
    if (dh, dw) != (1, 1):
        jit_loops().max_pool2d_dilated(planes, kh, kw, sh, sw, ph, pw, dh, dw, work.type(_lowest(work)), values,
                                       indices)
    elif (kh, kw, ph, pw) == (2, 2, 0, 0) and not ceil_mode:
        jit_loops().max_pool2d_2x2(planes, sh, sw, values, indices)
    else:
        jit_loops().max_pool2d(planes, kh, kw, sh, sw, ph, pw, work.type(_lowest(work)), values, indices)
    values = values.reshape(*lead, out_h, out_w)
    indices = indices.reshape(*lead, out_h, out_w)
    if out is None:
        return values.astype(x.dtype, copy=False), indices
    return fill_outputs((values, indices), out)


def _max_pool2d_backward_formula(F, g, s, at, need):
    return (F.max_pool2d_backward(g[0], s["result1"], input_size=tuple(s["self_sym_sizes"][-2:])),)


register(OpDef("max_pool2d", _max_pool2d, "other", "MaxPool2DWithIndicesBackward0", _max_pool2d_backward_formula,
               (Save("result1", "result:1"), Save("self_sym_sizes", "shape:0", freed=False),
                Save("kernel_size", "attr:kernel_size", freed=False), Save("stride", "attr:stride", freed=False),
                Save("padding", "attr:padding", freed=False), Save("dilation", "attr:dilation", freed=False),
                Save("ceil_mode", "attr:ceil_mode", freed=False)),
               "same", fills_outputs=True))


def _max_pool2d_backward(g, indices, out=None, input_size=(1, 1)):
    """Each output's gradient added at its argmax (overlapping windows may share one), in output
    order and in g's precision, as PyTorch: a Numba loop (float16 adds in float32)."""
    lead = g.shape[:-2]
    plane = input_size[0] * input_size[1]
    work = np.dtype(np.float32) if g.dtype == np.float16 else g.dtype
    flat_g = np.ascontiguousarray(g, dtype=work).reshape(-1, g.shape[-2] * g.shape[-1])
    flat_indices = np.ascontiguousarray(indices, dtype=np.int64).reshape(flat_g.shape)
    direct = (out is not None and out.dtype == work and out.flags.c_contiguous
              and not np.may_share_memory(out, g) and not np.may_share_memory(out, indices))
    grad = out.reshape(-1, plane) if direct else np.empty((flat_g.shape[0], plane), work)
    if jit_loops().max_pool2d_backward(flat_g, flat_indices, grad):
        raise IndexError("max_pool2d_backward: an index lies outside its input plane")
    if direct:
        return out
    return _write(grad.reshape(*lead, *input_size).astype(g.dtype, copy=False), out)


def _max_pool2d_backward_backward(F, gg, s, at, need):
    # The scatter's adjoint: gather gg at the indices (PyTorch's max_pool_double_backward).
    indices = s["indices"]
    lead, (oh, ow) = tuple(indices.shape[:-2]), indices.shape[-2:]
    flat = reshape_back(F, gg, lead + (gg.shape[-2] * gg.shape[-1],))
    picked = F.gather(flat, F.view(indices, shape=lead + (oh * ow,)), dim=len(lead))
    return F.view(picked, shape=tuple(indices.shape)), None


register(OpDef("max_pool2d_backward", _max_pool2d_backward, "other", "MaxPool2DWithIndicesBackwardBackward0",
               _max_pool2d_backward_backward, (Save("indices", 1),), "same", grad_inputs=(0,)))
