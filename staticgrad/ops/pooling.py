"""Average pooling, adaptive average pooling, max unpooling and nearest / (bi, tri)linear upsampling over
the last two (upsampling: last one to three) axes, with their gradients as ops of their own.

Each forward is a sum over a few shifted strided views (one per kernel offset or interpolation
tap), never a loop over pixels; each backward adds the same views back (``np.add.at`` where two
outputs may read one input). All of them are linear in their input, so each backward op's own
gradient is the forward op again, and double backward needs nothing more.
"""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.conv import pool_output_size
from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.shape import reshape_back


def _write(result, out):
    if out is None:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


def _along(axis: int, ndim: int, values):
    """``values`` (one per position on ``axis``) shaped to broadcast against an ndim array."""
    shape = [1] * ndim
    shape[axis] = -1
    return np.reshape(values, shape)


# ---- avg_pool2d ---------------------------------------------------------------------------------

def _avg_geometry(size, kernel, stride, padding, ceil_mode, count_include_pad):
    """Per output position along one axis: the window's first padded-input cell, and its divisor
    factor (cells inside the padded input, or inside the input alone)."""
    out = pool_output_size(size, kernel, stride, padding, 1, ceil_mode)
    start = np.arange(out) * stride - padding
    end = np.minimum(start + kernel, size + padding)
    factor = end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0)
    return out, factor


def _avg_divisor(shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """(OH, OW) out sizes and the (OH, OW) divisor of each window, as PyTorch's avg_pool2d."""
    (oh, fh), (ow, fw) = (_avg_geometry(n, k, s, p, ceil_mode, count_include_pad)
                          for n, k, s, p in zip(shape[-2:], kernel_size, stride, padding))
    if divisor_override:
        return (oh, ow), None
    return (oh, ow), np.multiply.outer(fh, fw)


def _padded_extent(size, out, kernel, stride, padding):
    return max(size + 2 * padding, (out - 1) * stride + kernel)


def _avg_pool2d(x, out=None, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    (oh, ow), divisor = _avg_divisor(x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override)
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    height, width = x.shape[-2:]
    eh, ew = _padded_extent(height, oh, kh, sh, ph), _padded_extent(width, ow, kw, sw, pw)
    padded = np.zeros(x.shape[:-2] + (eh, ew), x.dtype)
    padded[..., ph:ph + height, pw:pw + width] = x
    total = np.zeros(x.shape[:-2] + (oh, ow), x.dtype)
    for i in range(kh):  # a window's cells row by row, as PyTorch adds them
        for j in range(kw):
            total += padded[..., i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    divisor = divisor_override if divisor is None else divisor.astype(x.dtype)
    return np.divide(total, divisor, out=out)


def _pool_attrs(at):
    return {k: at[k] for k in ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                               "divisor_override")}


def _avg_pool2d_backward_formula(F, g, s, at, need):
    return (F.avg_pool2d_backward(g, input_size=tuple(s["self_sym_sizes"][-2:]), **_pool_attrs(at)),)


_AVG_SAVES = (Save("kernel_size", "attr:kernel_size", freed=False), Save("stride", "attr:stride", freed=False),
              Save("padding", "attr:padding", freed=False), Save("ceil_mode", "attr:ceil_mode", freed=False),
              Save("count_include_pad", "attr:count_include_pad", freed=False),
              Save("divisor_override", "attr:divisor_override", freed=False))

register(OpDef("avg_pool2d", _avg_pool2d, "other", "AvgPool2DBackward0", _avg_pool2d_backward_formula,
               (Save("self_sym_sizes", "shape:0", freed=False),) + _AVG_SAVES, "same"))


def _avg_pool2d_backward(g, out=None, input_size=(1, 1), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                         ceil_mode=False, count_include_pad=True, divisor_override=None):
    """Each output's gradient over its divisor, added onto every cell of its window."""
    height, width = input_size
    (oh, ow), divisor = _avg_divisor(input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override)
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    share = g / (divisor_override if divisor is None else divisor.astype(g.dtype))
    eh, ew = _padded_extent(height, oh, kh, sh, ph), _padded_extent(width, ow, kw, sw, pw)
    padded = np.zeros(g.shape[:-2] + (eh, ew), g.dtype)
    for i in range(kh):
        for j in range(kw):
            padded[..., i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += share
    return _write(padded[..., ph:ph + height, pw:pw + width], out)


def _avg_pool2d_backward_backward(F, gg, s, at, need):
    return (F.avg_pool2d(gg, **_pool_attrs(at)),)


register(OpDef("avg_pool2d_backward", _avg_pool2d_backward, "other", "AvgPool2DBackwardBackward0",
               _avg_pool2d_backward_backward, _AVG_SAVES, "same"))


# ---- separable linear maps along one axis: adaptive pooling and upsampling -----------------------
#
# Along one axis, output o reads input index[t][o] with weight[t][o] for each tap t; a mask marks
# the taps that exist (windows of adaptive pooling differ in length). Forward gathers and adds the
# taps in order; the adjoint adds each tap's share back with np.add.at (two outputs may read one
# input).

def _gather_taps(x, axis, taps):
    total = None
    for index, weight, mask in taps:
        part = np.take(x, index, axis=axis)
        if weight is not None:
            part = part * _along(axis, x.ndim, weight.astype(x.dtype))
        if mask is not None:
            part = np.where(_along(axis, x.ndim, mask), part, 0)
        total = part if total is None else total + part
    return total


def _scatter_taps(g, axis, taps, size):
    shape = list(g.shape)
    shape[axis] = size
    grad = np.zeros(shape, g.dtype)
    target = np.moveaxis(grad, axis, 0)
    for index, weight, mask in taps:
        part = g
        if weight is not None:
            part = part * _along(axis, g.ndim, weight.astype(g.dtype))
        if mask is not None:
            part = np.where(_along(axis, g.ndim, mask), part, 0)
        np.add.at(target, index, np.moveaxis(part, axis, 0))
    return grad


# ---- adaptive_avg_pool2d ------------------------------------------------------------------------

def _adaptive_taps(size, out):
    """Window o covers [floor(o * size / out), ceil((o + 1) * size / out)): one tap per offset up to
    the longest window, masked where a window is shorter; and each window's length."""
    o = np.arange(out)
    start = (o * size) // out
    end = -((-(o + 1) * size) // out)
    length = end - start
    taps = [(np.minimum(start + t, size - 1), None, t < length) for t in range(int(length.max()))]
    return taps, length


def _adaptive_avg_pool2d(x, out=None, output_size=(1, 1)):
    (th, lh), (tw, lw) = (_adaptive_taps(n, m) for n, m in zip(x.shape[-2:], output_size))
    total = _gather_taps(_gather_taps(x, x.ndim - 2, th), x.ndim - 1, tw)
    return np.divide(total, np.multiply.outer(lh, lw).astype(x.dtype), out=out)


def _adaptive_avg_pool2d_formula(F, g, s, at, need):
    return (F.adaptive_avg_pool2d_backward(g, input_size=tuple(s["self_sym_sizes"][-2:])),)


register(OpDef("adaptive_avg_pool2d", _adaptive_avg_pool2d, "other", "AdaptiveAvgPool2DBackward0",
               _adaptive_avg_pool2d_formula, (Save("self_sym_sizes", "shape:0", freed=False),), "same"))


def _adaptive_avg_pool2d_backward(g, out=None, input_size=(1, 1)):
    (th, lh), (tw, lw) = (_adaptive_taps(n, m) for n, m in zip(input_size, g.shape[-2:]))
    share = g / np.multiply.outer(lh, lw).astype(g.dtype)
    grad = _scatter_taps(_scatter_taps(share, g.ndim - 1, tw, input_size[1]), g.ndim - 2, th, input_size[0])
    return _write(grad, out)


def _adaptive_avg_pool2d_backward_backward(F, gg, s, at, need):
    return (F.adaptive_avg_pool2d(gg, output_size=tuple(s["grad_output_sym_sizes"][-2:])),)


register(OpDef("adaptive_avg_pool2d_backward", _adaptive_avg_pool2d_backward, "other",
               "AdaptiveAvgPool2DBackwardBackward0", _adaptive_avg_pool2d_backward_backward,
               (Save("grad_output_sym_sizes", "shape:0", freed=False),), "same"))


# ---- upsample: nearest (1-3 D), linear (1-D), bilinear (2-D), trilinear (3-D) -------------------

def _scale(size, out, scale, dtype):
    """PyTorch's source-per-destination step: 1/scale when a scale was given, else size/out, in the
    precision PyTorch computes it (float32 for nearest, the input's for linear)."""
    if scale is not None and scale > 0:
        return dtype.type(1.0 / scale)
    return dtype.type(size) / dtype.type(out)


def _nearest_taps(size, out, scale):
    """Output o reads floor(o * step) (float32), except the cases PyTorch takes exactly: the same
    size (o) and twice the size (o // 2)."""
    if out == size:
        return [(np.arange(out), None, None)]
    if out == 2 * size:
        return [(np.arange(out) // 2, None, None)]
    step = _scale(size, out, scale, np.dtype(np.float32))
    source = np.floor(np.arange(out, dtype=np.float32) * step).astype(np.int64)
    return [(np.minimum(source, size - 1), None, None)]


def _linear_taps(size, out, scale, align_corners, dtype):
    """Two taps per output: floor of the source coordinate and the next cell, with PyTorch's weights."""
    dtype = np.dtype(np.float32) if dtype != np.float64 else np.dtype(np.float64)
    if align_corners:
        step = dtype.type(size - 1) / dtype.type(out - 1) if out > 1 else dtype.type(0)
        source = step * np.arange(out, dtype=dtype)
    else:
        step = _scale(size, out, scale, dtype)
        source = np.maximum(step * (np.arange(out, dtype=dtype) + dtype.type(0.5)) - dtype.type(0.5), 0)
    low = np.floor(source).astype(np.int64)
    low = np.minimum(low, size - 1)
    high = np.where(low < size - 1, low + 1, low)
    weight_high = np.clip(source - low, 0, 1).astype(dtype)
    weight_low = dtype.type(1) - weight_high
    return [(low, weight_low, None), (high, weight_high, None)]


def _nearest_exact_taps(size, out, scale):
    """Output o reads floor((o + 0.5) * step) (float32), clamped to the last cell."""
    step = _scale(size, out, scale, np.dtype(np.float32))
    source = np.floor((np.arange(out, dtype=np.float32) + np.float32(0.5)) * step).astype(np.int64)
    return [(np.minimum(source, size - 1), None, None)]


def _cubic_taps(size, out, scale, align_corners, dtype):
    """Four taps per output at floor(source) - 1 ... + 2 (clamped to the edges), weighted by Keys' cubic
    convolution with a = -0.75 at the source's fraction, as PyTorch's bicubic (the source unclamped)."""
    dtype = np.dtype(np.float32) if dtype != np.float64 else np.dtype(np.float64)
    T = dtype.type
    o = np.arange(out, dtype=dtype)
    if align_corners:
        source = (T(size - 1) / T(out - 1) if out > 1 else T(0)) * o
    else:
        source = _scale(size, out, scale, dtype) * (o + T(0.5)) - T(0.5)
    low = np.floor(source)
    t = source - low
    a = T(-0.75)

    def near(x):  # |x| <= 1
        return ((a + T(2)) * x - (a + T(3))) * x * x + T(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - T(5) * a) * x + T(8) * a) * x - T(4) * a

    rest = T(1) - t
    weights = (far(t + T(1)), near(t), near(rest), far(rest + T(1)))
    start = low.astype(np.int64) - 1
    return [(np.clip(start + k, 0, size - 1), weights[k], None) for k in range(4)]


def _taps(mode, size, out, scale, align_corners, dtype):
    if mode == "nearest":
        return _nearest_taps(size, out, scale)
    if mode == "nearest-exact":
        return _nearest_exact_taps(size, out, scale)
    if mode == "bicubic":
        return _cubic_taps(size, out, scale, align_corners, dtype)
    return _linear_taps(size, out, scale, align_corners, dtype)


def _upsample(x, out=None, mode="nearest", output_size=(1,), scales=(None,), align_corners=False):
    """Resample the last len(output_size) axes; the last axis first, as PyTorch's linear modes weigh them."""
    dims = len(output_size)
    result = x
    for axis in reversed(range(dims)):
        where = x.ndim - dims + axis
        taps = _taps(mode, x.shape[where], output_size[axis], scales[axis], align_corners, x.dtype)
        result = _gather_taps(result, where, taps)
    return _write(result, out)


def _upsample_name(suffix):
    def name(at):
        mode = at["mode"].title().replace("-", "")  # Nearest, NearestExact, Linear, Bilinear, Bicubic, Trilinear
        return f"Upsample{mode}{len(at['output_size'])}D{suffix}"

    return name


def _upsample_formula(F, g, s, at, need):
    return (F.upsample_backward(g, input_size=tuple(s["self_sym_sizes"][-len(at["output_size"]):]), mode=at["mode"],
                                output_size=at["output_size"], scales=at["scales"], align_corners=at["align_corners"]),)


_UPSAMPLE_SAVES = (Save("output_size", "attr:output_size", freed=False), Save("scales", "attr:scales", freed=False),
                   Save("align_corners", "attr:align_corners", freed=False))

register(OpDef("upsample", _upsample, "other", _upsample_name("Backward0"), _upsample_formula,
               (Save("self_sym_sizes", "shape:0", freed=False),) + _UPSAMPLE_SAVES, "same"))


def _upsample_backward(g, out=None, input_size=(1,), mode="nearest", output_size=(1,), scales=(None,),
                       align_corners=False):
    dims = len(output_size)
    grad = g
    for axis in range(dims):
        where = g.ndim - dims + axis
        taps = _taps(mode, input_size[axis], output_size[axis], scales[axis], align_corners, g.dtype)
        grad = _scatter_taps(grad, where, taps, input_size[axis])
    return _write(grad, out)


def _upsample_backward_backward(F, gg, s, at, need):
    return (F.upsample(gg, mode=at["mode"], output_size=at["output_size"], scales=at["scales"],
                       align_corners=at["align_corners"]),)


register(OpDef("upsample_backward", _upsample_backward, "other", _upsample_name("BackwardBackward0"),
               _upsample_backward_backward, _UPSAMPLE_SAVES, "same"))


# ---- max_unpool2d(values, indices) ----------------------------------------------------------------

def _max_unpool2d(values, indices, out=None, output_size=(1, 1)):
    """Each value written at its flat index in its (H, W) output plane, zeros elsewhere."""
    lead = values.shape[:-2]
    planes = math.prod(lead)
    flat_values = np.reshape(values, (planes, -1))
    flat_indices = np.reshape(indices, (planes, -1))
    plane = output_size[0] * output_size[1]
    bad = (flat_indices < 0) | (flat_indices >= plane)
    if bad.any():
        raise RuntimeError(f"Found an invalid max index: {int(flat_indices[bad][0])} (output volumes are of size "
                           f"{output_size[0]}x{output_size[1]})")
    result = np.zeros((planes, plane), values.dtype)
    np.put_along_axis(result, flat_indices, flat_values, axis=1)
    return _write(result.reshape(*lead, *output_size), out)


def _max_unpool2d_formula(F, g, s, at, need):
    # The adjoint of the scatter: g gathered at the indices (a view of g's planes, then the gather).
    indices = s["indices"]
    lead = tuple(indices.shape[:-2])
    flat = reshape_back(F, g, lead + (g.shape[-2] * g.shape[-1],))
    picked = F.gather(flat, F.view(indices, shape=lead + (indices.shape[-2] * indices.shape[-1],)), dim=len(lead))
    return F.view(picked, shape=tuple(indices.shape)), None


register(OpDef("max_unpool2d", _max_unpool2d, "other", "MaxUnpool2DBackward0", _max_unpool2d_formula,
               (Save("indices", 1), Save("output_size", "attr:output_size", freed=False)), "same", grad_inputs=(0,)))
