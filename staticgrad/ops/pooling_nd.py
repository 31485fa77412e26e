"""Pooling over the last three axes (avg_pool3d, max_pool3d with indices, adaptive_avg_pool3d), adaptive
max pooling over the last two or three (with indices), pixel_shuffle / pixel_unshuffle, channel_shuffle
and im2col / col2im (F.unfold / F.fold).

Forwards are sums or maxima over a few strided views (one per kernel offset or window tap), never loops
over pixels; max pooling keeps the flat index (within each input plane) of the first maximum (the last
NaN, as PyTorch's scan lets every NaN take over), and its backward adds the gradient back at those
indices. Every op's backward is an op whose own backward is the forward again (adjoint pairs), so
double backward works.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from staticgrad.ops.conv import pool_output_size
from staticgrad.ops.pooling import _adaptive_taps, _gather_taps, _scatter_taps, _write
from staticgrad.ops.registry import OpDef, Save, register

_SIZES = Save("self_sym_sizes", "shape:0", freed=False)


def _kept(*names):
    return tuple(Save(name, f"attr:{name}", freed=False) for name in names)


def _window(offset, stride, count):
    """The slice of a padded axis that kernel offset ``offset`` reads for ``count`` outputs."""
    return slice(offset, offset + stride * (count - 1) + 1, stride)


# ---- avg_pool3d ------------------------------------------------------------------------------------------

def _avg_axes(sizes, kernel, stride, padding, ceil_mode, count_include_pad):
    """Per axis: out size, and the factor of each window's divisor (cells in the padded input or the input)."""
    result = []
    for size, k, s, p in zip(sizes, kernel, stride, padding):
        out = pool_output_size(size, k, s, p, 1, ceil_mode)
        start = np.arange(out) * s - p
        end = np.minimum(start + k, size + p)
        factor = end - start if count_include_pad else np.minimum(end, size) - np.maximum(start, 0)
        result.append((out, factor))
    return result


def _divisor(axes, divisor_override, dtype):
    if divisor_override:
        return dtype.type(divisor_override)
    return np.einsum("i,j,k->ijk", *(factor for _, factor in axes)).astype(dtype)


def _padded(x, sizes, outs, kernel, stride, padding):
    extents = [max(n + 2 * p, (o - 1) * s + k) for n, o, k, s, p in zip(sizes, outs, kernel, stride, padding)]
    padded = np.zeros(x.shape[:-3] + tuple(extents), x.dtype)
    padded[(Ellipsis,) + tuple(slice(p, p + n) for n, p in zip(sizes, padding))] = x
    return padded


def _avg_pool3d(x, out=None, kernel_size=(1, 1, 1), stride=(1, 1, 1), padding=(0, 0, 0), ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    axes = _avg_axes(x.shape[-3:], kernel_size, stride, padding, ceil_mode, count_include_pad)
    outs = [o for o, _ in axes]
    padded = _padded(x, x.shape[-3:], outs, kernel_size, stride, padding)
    total = np.zeros(x.shape[:-3] + tuple(outs), x.dtype)
    for offsets in itertools.product(*(range(k) for k in kernel_size)):  # a window's cells in row-major order
        total += padded[(Ellipsis,) + tuple(_window(i, s, o) for i, s, o in zip(offsets, stride, outs))]
    return np.divide(total, _divisor(axes, divisor_override, x.dtype), out=out)


_AVG3D = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


def _avg_pool3d_backward(g, out=None, input_size=(1, 1, 1), kernel_size=(1, 1, 1), stride=(1, 1, 1),
                         padding=(0, 0, 0), ceil_mode=False, count_include_pad=True, divisor_override=None):
    axes = _avg_axes(input_size, kernel_size, stride, padding, ceil_mode, count_include_pad)
    outs = [o for o, _ in axes]
    share = g / _divisor(axes, divisor_override, g.dtype)
    extents = [max(n + 2 * p, (o - 1) * s + k) for n, o, k, s, p in zip(input_size, outs, kernel_size, stride,
                                                                         padding)]
    padded = np.zeros(g.shape[:-3] + tuple(extents), g.dtype)
    for offsets in itertools.product(*(range(k) for k in kernel_size)):
        padded[(Ellipsis,) + tuple(_window(i, s, o) for i, s, o in zip(offsets, stride, outs))] += share
    return _write(padded[(Ellipsis,) + tuple(slice(p, p + n) for n, p in zip(input_size, padding))], out)


register(OpDef("avg_pool3d", _avg_pool3d, "other", "AvgPool3DBackward0",
               lambda F, g, s, at, need: (F.avg_pool3d_backward(g, input_size=tuple(s["self_sym_sizes"][-3:]),
                                                                **{k: at[k] for k in _AVG3D}),),
               (_SIZES,) + _kept(*_AVG3D), "same"))
register(OpDef("avg_pool3d_backward", _avg_pool3d_backward, "other", "AvgPool3DBackwardBackward0",
               lambda F, gg, s, at, need: (F.avg_pool3d(gg, **{k: at[k] for k in _AVG3D}),), _kept(*_AVG3D), "same"))


# ---- adaptive_avg_pool3d ----------------------------------------------------------------------------------

def _adaptive_avg_pool3d(x, out=None, output_size=(1, 1, 1)):
    taps = [_adaptive_taps(n, m) for n, m in zip(x.shape[-3:], output_size)]
    total = x
    for axis, (axis_taps, _) in enumerate(taps):
        total = _gather_taps(total, x.ndim - 3 + axis, axis_taps)
    lengths = np.einsum("i,j,k->ijk", *(length for _, length in taps)).astype(x.dtype)
    return np.divide(total, lengths, out=out)


def _adaptive_avg_pool3d_backward(g, out=None, input_size=(1, 1, 1)):
    taps = [_adaptive_taps(n, m) for n, m in zip(input_size, g.shape[-3:])]
    grad = g / np.einsum("i,j,k->ijk", *(length for _, length in taps)).astype(g.dtype)
    for axis in reversed(range(3)):
        grad = _scatter_taps(grad, g.ndim - 3 + axis, taps[axis][0], input_size[axis])
    return _write(grad, out)


register(OpDef("adaptive_avg_pool3d", _adaptive_avg_pool3d, "other", "AdaptiveAvgPool3DBackward0",
               lambda F, g, s, at, need: (F.adaptive_avg_pool3d_backward(
                   g, input_size=tuple(s["self_sym_sizes"][-3:])),), (_SIZES,), "same"))
register(OpDef("adaptive_avg_pool3d_backward", _adaptive_avg_pool3d_backward, "other",
               "AdaptiveAvgPool3DBackwardBackward0",
               lambda F, gg, s, at, need: (F.adaptive_avg_pool3d(gg, output_size=tuple(s["grad_sizes"][-3:])),),
               (Save("grad_sizes", "shape:0", freed=False),), "same"))


# ---- max pooling with indices: the adjoint pair scatter / gather by flat index within a plane ------------

def _planes(x, dims):
    lead = x.shape[:x.ndim - dims]
    return x.reshape((math.prod(lead), -1)), lead


def _scatter_by_index(g, indices, out=None, input_size=(1,)):
    """Each gradient added at its index in a flat plane of ``input_size`` (zeros elsewhere)."""
    dims = len(input_size)
    flat_g, lead = _planes(g, dims)
    flat_i, _ = _planes(indices, dims)
    grad = np.zeros((flat_g.shape[0], math.prod(input_size)), g.dtype)
    np.add.at(grad, (np.arange(flat_g.shape[0])[:, None], flat_i), flat_g)
    return _write(grad.reshape(lead + tuple(input_size)), out)


def _gather_by_index(x, indices, out=None, dims=1):
    """The value at each index of a flat plane (the last ``dims`` axes of x)."""
    flat_x, _ = _planes(x, dims)
    flat_i = indices.reshape((flat_x.shape[0], -1))
    return _write(np.take_along_axis(flat_x, flat_i, axis=1).reshape(indices.shape), out)


register(OpDef("scatter_by_index", _scatter_by_index, "other", "MaxPoolWithIndicesBackwardBackward0",
               lambda F, gg, s, at, need: (F.gather_by_index(gg, s["indices"], dims=len(at["input_size"])), None),
               (Save("indices", 1),), "same", grad_inputs=(0,)))
register(OpDef("gather_by_index", _gather_by_index, "other", "GatherByIndexBackward0",
               lambda F, g, s, at, need: (F.scatter_by_index(g, s["indices"], input_size=tuple(s["x_sizes"][
                   len(s["x_sizes"]) - at["dims"]:])), None),
               (Save("indices", 1), Save("x_sizes", "shape:0", freed=False)), "same", grad_inputs=(0,)))


def _max_pool_backward(F, g, s, at, dims):
    sizes = tuple(s["self_sym_sizes"])
    return (F.scatter_by_index(g[0], s["result1"], input_size=sizes[len(sizes) - dims:]),)


def _max_pool3d(x, out=None, kernel_size=(1, 1, 1), stride=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1),
                ceil_mode=False):
    """(values, int64 flat indices into each D*H*W plane): every window's first maximum (its last NaN)."""
    sizes = x.shape[-3:]
    outs = [pool_output_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(sizes, kernel_size, stride, padding,
                                                                                 dilation)]
    extents = [max(n + 2 * p, (o - 1) * s + (k - 1) * d + 1)
               for n, o, k, s, p, d in zip(sizes, outs, kernel_size, stride, padding, dilation)]
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    padded = np.full(x.shape[:-3] + tuple(extents), low, x.dtype)
    padded[(Ellipsis,) + tuple(slice(p, p + n) for n, p in zip(sizes, padding))] = x
    best = best_index = None
    grids = np.meshgrid(*(np.arange(o) for o in outs), indexing="ij")
    for offsets in itertools.product(*(range(k) for k in kernel_size)):  # row-major, as PyTorch scans
        view = padded[(Ellipsis,) + tuple(_window(i * d, s, o) for i, d, s, o in zip(offsets, dilation, stride,
                                                                                      outs))]
        position = [grid * s - p + i * d for grid, s, p, i, d in zip(grids, stride, padding, offsets, dilation)]
        flat = (position[0] * sizes[1] + position[1]) * sizes[2] + position[2]
        if best is None:
            best, best_index = view.copy(), np.broadcast_to(flat, view.shape).copy()
            continue
        wins = (view > best) | np.isnan(view) if x.dtype.kind == "f" else view > best  # PyTorch: any NaN takes over
        best = np.where(wins, view, best)
        best_index = np.where(wins, flat, best_index)
    return best, best_index.astype(np.int64)


_MAX3D = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
register(OpDef("max_pool3d", _max_pool3d, "other", "MaxPool3DWithIndicesBackward0",
               lambda F, g, s, at, need: _max_pool_backward(F, g, s, at, 3),
               (_SIZES, Save("result1", "result:1")) + _kept(*_MAX3D), "same"))


# ---- adaptive_max_pool2d / 3d: windows [floor(o n / m), ceil((o + 1) n / m)) on each axis --------------

def _adaptive_max_pool(x, output_size):
    """(values, flat indices into each plane of the last len(output_size) axes), taps tried in row-major
    order: every window's first maximum (its last NaN), as PyTorch's scan finds it."""
    dims = len(output_size)
    sizes = x.shape[-dims:]
    taps = [_adaptive_taps(n, m)[0] for n, m in zip(sizes, output_size)]
    best = best_index = None
    for combination in itertools.product(*taps):
        view = x
        exists = np.ones((), bool)
        flat = np.zeros((), np.int64)
        for axis, (index, _, mask) in enumerate(combination):
            view = np.take(view, index, axis=x.ndim - dims + axis)
            shape = [1] * dims
            shape[axis] = -1
            exists = exists & mask.reshape(shape)
            flat = flat * sizes[axis] + index.reshape(shape)
        if best is None:
            best, best_index = view.copy(), np.broadcast_to(flat, view.shape).copy()
            continue
        wins = exists & ((view > best) | np.isnan(view))
        best = np.where(wins, view, best)
        best_index = np.where(wins, flat, best_index)
    return best, best_index.astype(np.int64)


for _dims in (2, 3):
    register(OpDef(f"adaptive_max_pool{_dims}d",
                   lambda x, out=None, output_size=(1,): _adaptive_max_pool(x, output_size), "other",
                   f"AdaptiveMaxPool{_dims}DBackward0",
                   lambda F, g, s, at, need, _d=_dims: _max_pool_backward(F, g, s, at, _d),
                   (_SIZES, Save("result1", "result:1")), "same"))


# ---- channel_shuffle: (N, g * c, ...) -> (N, c * g, ...) ---------------------------------------------------

def _channel_shuffle(x, out=None, groups=1):
    batch, channels = x.shape[:2]
    y = x.reshape((batch, groups, channels // groups) + x.shape[2:]).swapaxes(1, 2)
    return _write(y.reshape(x.shape), out)


register(OpDef("channel_shuffle", _channel_shuffle, "other", "ChannelShuffleBackward0",
               lambda F, g, s, at, need: (F.channel_shuffle(g, groups=g.shape[1] // at["groups"]),),
               _kept("groups"), "same"))


# ---- pixel_shuffle / pixel_unshuffle ------------------------------------------------------------------------

def _pixel_shuffle(x, out=None, upscale_factor=1):
    r = upscale_factor
    *lead, channels, height, width = x.shape
    y = x.reshape(tuple(lead) + (channels // (r * r), r, r, height, width))
    n = len(lead)
    y = y.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return _write(y.reshape(tuple(lead) + (channels // (r * r), height * r, width * r)), out)


def _pixel_unshuffle(x, out=None, downscale_factor=1):
    r = downscale_factor
    *lead, channels, height, width = x.shape
    y = x.reshape(tuple(lead) + (channels, height // r, r, width // r, r))
    n = len(lead)
    y = y.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return _write(y.reshape(tuple(lead) + (channels * r * r, height // r, width // r)), out)


register(OpDef("pixel_shuffle", _pixel_shuffle, "other", "PixelShuffleBackward0",
               lambda F, g, s, at, need: (F.pixel_unshuffle(g, downscale_factor=at["upscale_factor"]),),
               _kept("upscale_factor"), "same"))
register(OpDef("pixel_unshuffle", _pixel_unshuffle, "other", "PixelUnshuffleBackward0",
               lambda F, g, s, at, need: (F.pixel_shuffle(g, upscale_factor=at["downscale_factor"]),),
               _kept("downscale_factor"), "same"))


# ---- im2col / col2im: (N, C, H, W) <-> (N, C * kh * kw, L) ------------------------------------------------

def _blocks(size, kernel_size, dilation, padding, stride):
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(size, kernel_size, dilation, padding,
                                                                               stride)]


def _im2col(x, out=None, kernel_size=(1, 1), dilation=(1, 1), padding=(0, 0), stride=(1, 1)):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    oh, ow = _blocks(x.shape[-2:], kernel_size, dilation, padding, stride)
    padded = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(ph, ph), (pw, pw)])
    columns = np.stack([padded[..., _window(i * dh, sh, oh), _window(j * dw, sw, ow)]
                        for i in range(kh) for j in range(kw)], axis=-3)  # (..., C, kh * kw, oh, ow)
    return _write(columns.reshape(x.shape[:-3] + (x.shape[-3] * kh * kw, oh * ow)), out)


def _col2im(columns, out=None, output_size=(1, 1), kernel_size=(1, 1), dilation=(1, 1), padding=(0, 0),
            stride=(1, 1)):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    height, width = output_size
    oh, ow = _blocks(output_size, kernel_size, dilation, padding, stride)
    lead = columns.shape[:-2]
    channels = columns.shape[-2] // (kh * kw)
    blocks = columns.reshape(lead + (channels, kh * kw, oh, ow))
    padded = np.zeros(lead + (channels, height + 2 * ph, width + 2 * pw), columns.dtype)
    for tap, (i, j) in enumerate(itertools.product(range(kh), range(kw))):
        padded[..., _window(i * dh, sh, oh), _window(j * dw, sw, ow)] += blocks[..., tap, :, :]
    return _write(padded[..., ph:ph + height, pw:pw + width], out)


_FOLD = ("kernel_size", "dilation", "padding", "stride")
register(OpDef("im2col", _im2col, "other", "Im2ColBackward0",
               lambda F, g, s, at, need: (F.col2im(g, output_size=tuple(s["self_sym_sizes"][-2:]),
                                                   **{k: at[k] for k in _FOLD}),),
               (_SIZES,) + _kept(*_FOLD), "same"))
register(OpDef("col2im", _col2im, "other", "Col2ImBackward0",
               lambda F, g, s, at, need: (F.im2col(g, **{k: at[k] for k in _FOLD}),),
               _kept("output_size", *_FOLD), "same"))
