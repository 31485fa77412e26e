"""2-D convolution and max pooling over NCHW arrays, with their gradients as ops of their own.

Convolution is im2col (a Numba loop copying each window of the input into columns, zeros for the
padding) and one matmul per sample. conv2d is bilinear in (input, weight), and so are its input
and weight gradients, so the three ops close under differentiation: each one's backward is written
with the other two, and double backward needs nothing more. The input gradient adds columns back
onto the input (col2im, a Numba loop). Max pooling records the flat argmax of each window; its
gradient scatters back to those positions, and that scatter's gradient gathers from them; both
are Numba loops (staticgrad.ops.loops).

Forward functions write ``out`` only in their last NumPy call, or earlier only when nothing read
afterwards can share its memory (out is C-contiguous, as the arena's views are), so a planner may
hand them an ``out`` that aliases an input.
"""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.elementwise import fill_outputs, loop_output, loop_result
from staticgrad.ops.registry import OpDef, Save, jit_loops, register
from staticgrad.ops.scratch import Scratch, scratch_bytes
from staticgrad.ops.shape import reshape_back

# Unsigned integers of each width: im2col copies any dtype (all are 1, 2, 4 or 8 bytes wide) as its bits.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# The most bytes of columns made at once: the batch goes through in chunks of samples whose columns
# stay in L2 between the loop writing them and the matmul reading them (5-25% faster than the whole
# batch at once on the bench CNN, and the op's working memory is a chunk's, not the batch's). Each
# sample's matmul is its own BLAS call either way, so the chunks change no bits.
_COLUMNS_BUDGET = 1 << 18


def _geometry(x_shape, kernel_size, stride, padding) -> tuple:
    """(n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow): the sizes the column loops take."""
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    return (n, c, h, w, kh, kw, sh, sw, ph, pw,
            pool_output_size(h, kh, sh, ph), pool_output_size(w, kw, sw, pw))


def _attr_geometry(x_shape, kernel_size, attrs) -> tuple:
    """_geometry with the stride and padding of an op's attributes (its temporaries' sizers)."""
    return _geometry(x_shape, kernel_size, attrs.get("stride", (1, 1)), attrs.get("padding", (0, 0)))


def _chunk_columns(geometry, dtype) -> tuple:
    """The shape of one chunk's columns (samples, C * kh * kw, OH * OW): as many samples as fit in
    _COLUMNS_BUDGET bytes, at least one (none for an empty batch)."""
    n, c, _, _, kh, kw, _, _, _, _, oh, ow = geometry
    sample = c * kh * kw * oh * ow * np.dtype(dtype).itemsize
    return min(n, max(1, _COLUMNS_BUDGET // max(sample, 1))), c * kh * kw, oh * ow


def _chunks(n: int, columns):
    """(start, part) per chunk of a batch of ``n``: part, the first rows of ``columns`` (one chunk's
    temporary), as many as the chunk has samples."""
    for start in range(0, n, max(len(columns), 1)):
        yield start, columns[:min(len(columns), n - start)]


def _column_chunks(x, geometry, columns):
    """(start, columns) per chunk of the batch: the windows of samples start.. of x (N, C, H, W) as
    columns (samples, C * kh * kw, OH * OW), zero in the padding, written into ``columns`` (one
    chunk's temporary) by a Numba loop that copies the elements' bits."""
    n = geometry[0]
    if n == 0:
        return
    bits = _BITS[x.dtype.itemsize]
    samples = np.ascontiguousarray(x).reshape(n, -1).view(bits)
    for start, part in _chunks(n, columns):
        if part.size:
            jit_loops().im2col(samples[start:start + len(part)].reshape(-1), len(part), *geometry[1:],
                               part.reshape(-1).view(bits))
        yield start, part


def _col2im(columns, out, geometry):
    """out (N, C, H, W), C-contiguous: each cell of columns (N, C * kh * kw, OH * OW) added back onto
    the input cell it was read from, one kernel cell after another (a Numba loop for float32 and
    float64; NumPy's shifted adds otherwise, the same additions in the same order)."""
    _, _, h, w, kh, kw, sh, sw, ph, pw, oh, ow = geometry
    n, c = out.shape[:2]
    if out.dtype in (np.float32, np.float64) and out.dtype == columns.dtype:
        jit_loops().col2im(np.ascontiguousarray(columns).reshape(-1), n, *geometry[1:], out.reshape(-1))
        return out
    cells = columns.reshape(n, c, kh, kw, oh, ow)
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), out.dtype)
    for i in range(kh):
        for j in range(kw):
            padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += cells[:, :, i, j]
    np.copyto(out, padded[:, :, ph:ph + h, pw:pw + w])
    return out


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
    n, o = x.shape[0], weight.shape[0]
    geometry = _geometry(x.shape, weight.shape[2:], stride, padding)
    oh, ow = geometry[-2:]
    dtype = np.result_type(weight, x)
    # written chunk by chunk while x is still read: into out only if it shares memory with no input
    product = loop_output(n * o * oh * ow, dtype, out, (x, weight, bias)).reshape(n, o, oh * ow)
    kernel = weight.reshape(o, -1)
    columns = Scratch(scratch).take(_chunk_columns(geometry, x.dtype), x.dtype)
    for start, part in _column_chunks(x, geometry, columns):
        np.matmul(kernel, part, out=product[start:start + len(part)])
    if bias is not None:
        np.add(product, bias.reshape(o, 1), out=product)
    return loop_result(product, (n, o, oh, ow), dtype, out)


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
    geometry = _attr_geometry(in_shapes[0], in_shapes[1][2:], attrs)
    return [(_chunk_columns(geometry, in_dtypes[0]), in_dtypes[0])]


register(OpDef("conv2d", _conv2d, "matmul", "ConvolutionBackward0", _conv2d_backward,
               (Save("input", 0), Save("weight", 1),
                Save("stride", "attr:stride", freed=False), Save("padding", "attr:padding", freed=False)),
               "same", scratch=_conv_scratch(_conv2d_temporaries)))


def _conv2d_input_grad(g, weight, out=None, input_size=(1, 1), stride=(1, 1), padding=(0, 0), scratch=None):
    """Gradient w.r.t. conv2d's input (col2im): weight^T times g gives a gradient for every cell
    of every window, each added back onto the input position it was read from."""
    n, o, oh, ow = g.shape
    _, c, kh, kw = weight.shape
    dtype = np.result_type(weight, g)
    geometry = _geometry((n, c, *input_size), (kh, kw), stride, padding)
    shape = (n, c, *input_size)
    result = loop_output(math.prod(shape), dtype, out, (g, weight)).reshape(shape)
    kernel, grads = weight.reshape(o, -1).T, g.reshape(n, o, oh * ow)
    columns = Scratch(scratch).take(_chunk_columns(geometry, dtype), dtype)
    for start, part in _chunks(n, columns):
        np.matmul(kernel, grads[start:start + len(part)], out=part)
        _col2im(part, result[start:start + len(part)], geometry)
    return loop_result(result, shape, dtype, out)


def _conv2d_input_grad_backward(F, gg, s, at, need):
    # grad_input = A(weight)^T g, linear in each: <gg, A^T g> = <A gg, g> = <conv2d(gg, weight), g>.
    geometry = {"stride": at["stride"], "padding": at["padding"]}
    grad_g = F.conv2d(gg, s["weight"], **geometry) if need[0] else None
    grad_weight = (F.conv2d_weight_grad(s["grad_output"], gg, kernel_size=tuple(s["weight_sym_sizes"][2:]),
                                        **geometry) if need[1] else None)
    return grad_g, grad_weight


def _conv2d_input_grad_temporaries(in_shapes, in_dtypes, attrs) -> list:
    (n, _, _, _), (_, c, kh, kw) = in_shapes[:2]
    geometry = _attr_geometry((n, c, *attrs.get("input_size", (1, 1))), (kh, kw), attrs)
    dtype = np.result_type(*in_dtypes[:2])
    return [(_chunk_columns(geometry, dtype), dtype)]


register(OpDef("conv2d_input_grad", _conv2d_input_grad, "matmul", "ConvolutionBackwardBackward0",
               _conv2d_input_grad_backward,
               (Save("grad_output", 0, when=(1,)), Save("weight", 1, when=(0,)),
                Save("weight_sym_sizes", "shape:1", freed=False)),
               "same", scratch=_conv_scratch(_conv2d_input_grad_temporaries)))


def _conv2d_weight_grad(g, x, out=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), scratch=None):
    """Gradient w.r.t. conv2d's weight: per sample, g (O, OH*OW) times the input's columns
    transposed, summed over each chunk's samples, the chunks' sums added in order. One matmul over
    N*OH*OW would be long and thin (O by C*kh*kw), a shape BLAS runs 2-5x slower here."""
    n, o, oh, ow = g.shape
    geometry = _geometry(x.shape, kernel_size, stride, padding)
    dtype = np.result_type(g, x)
    temporaries = Scratch(scratch)
    columns = temporaries.take(_chunk_columns(geometry, x.dtype), x.dtype)
    products = temporaries.take((len(columns), o, columns.shape[1]), dtype)
    shape = (o, x.shape[1], *kernel_size)
    total = loop_output(math.prod(shape), dtype, out, (g, x)).reshape(o, -1)
    grads = g.reshape(n, o, oh * ow)
    if n == 0:
        total.fill(0)
    for start, part in _column_chunks(x, geometry, columns):
        chunk = np.matmul(grads[start:start + len(part)], part.transpose(0, 2, 1), out=products[:len(part)])
        if start == 0:
            np.sum(chunk, axis=0, out=total)
        else:
            total += chunk.sum(axis=0)
    return loop_result(total, shape, dtype, out)


def _conv2d_weight_grad_backward(F, gg, s, at, need):
    # grad_weight = B(input)^T g, linear in each: <gg, grad_weight> = <conv2d(input, gg), g>.
    geometry = {"stride": at["stride"], "padding": at["padding"]}
    grad_g = F.conv2d(s["input"], gg, **geometry) if need[0] else None
    grad_input = (F.conv2d_input_grad(s["grad_output"], gg, input_size=tuple(s["input_sym_sizes"][2:]),
                                      **geometry) if need[1] else None)
    return grad_g, grad_input


def _conv2d_weight_grad_temporaries(in_shapes, in_dtypes, attrs) -> list:
    (_, o, _, _), x_shape = in_shapes[:2]
    geometry = _attr_geometry(x_shape, attrs.get("kernel_size", (1, 1)), attrs)
    columns = _chunk_columns(geometry, in_dtypes[1])
    return [(columns, in_dtypes[1]), ((columns[0], o, columns[1]), np.result_type(*in_dtypes[:2]))]


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
