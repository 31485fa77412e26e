"""Where a grid_sample grid entry points in the input, per axis: PyTorch's unnormalization of a
[-1, 1] coordinate to a pixel coordinate (``(g + 1) * scale``, minus 1/2 without align_corners), its
border (clip) and reflection padding, and the derivative of the result by the grid value."""

from __future__ import annotations

import numpy as np

BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2


def unnormalize(coord, size: int, align_corners: bool):
    """(pixel coordinate of the [-1, 1] ``coord``, its derivative: the scale)."""
    dtype = coord.dtype
    scale = dtype.type((size - 1) / 2 if align_corners else size / 2)
    x = (coord + dtype.type(1)) * scale
    if not align_corners:
        x = x - dtype.type(0.5)
    return x, scale


def padded(x, size: int, padding: int, align_corners: bool):
    """A pixel coordinate moved inside by the padding mode (zeros: as is; border: clipped;
    reflection: reflected, then clipped), as PyTorch's compute_coordinates."""
    if padding == BORDER:
        return _clip(x, size)[0]
    if padding == REFLECTION:
        return _clip(_reflect(x, size, align_corners)[0], size)[0]
    return x


def _source_coordinates(coord, size: int, padding: int, align_corners: bool):
    """(pixel coordinate, its derivative by the normalized coordinate) along one axis."""
    x, scale = unnormalize(coord, size, align_corners)
    grad = np.full(coord.shape, scale, coord.dtype)
    if padding == BORDER:
        x, inside = _clip(x, size)
        grad = grad * inside
    elif padding == REFLECTION:
        x, sign = _reflect(x, size, align_corners)
        x, inside = _clip(x, size)
        grad = grad * sign * inside
    return x, grad


def _clip(x, size: int):
    """x clipped to [0, size - 1], and 1 where it was strictly inside (PyTorch: borders are out)."""
    top = x.dtype.type(size - 1)
    low = np.maximum(x, x.dtype.type(0))
    clipped = np.minimum(low, top)
    return clipped, ((low != 0) & (clipped != top)).astype(x.dtype)


def _reflect(x, size: int, align_corners: bool):
    """x reflected into the input's span (pixel centres with align_corners, else its edges), and
    the sign of the derivative (+1 or -1)."""
    dtype = x.dtype
    twice_span = dtype.type(2 * (size - 1) if align_corners else 2 * size)
    if twice_span == 0:
        return np.zeros_like(x), np.zeros_like(x)
    shifted = x if align_corners else x + dtype.type(0.5)
    negative = shifted < 0
    magnitude = np.abs(shifted)
    extra = magnitude - np.trunc(magnitude / twice_span) * twice_span
    reflected_extra = twice_span - extra
    flip = extra > reflected_extra
    result = np.where(flip, reflected_extra, extra)
    if not align_corners:
        result = result - dtype.type(0.5)
    return result, np.where(flip ^ negative, dtype.type(-1), dtype.type(1))
