"""grid_sample on 4-D input (PyTorch's ``grid_sampler_2d``, node ``GridSampler2DBackward0``):
each output location reads the input at the (x, y) its grid entry gives, in [-1, 1] across the
input, bilinearly, from the nearest pixel or bicubically (staticgrad.ops.grid_sample_bicubic), with
zeros, border or reflection padding outside (the coordinates: staticgrad.ops.grid_coordinates).

The arithmetic follows PyTorch's CPU kernel: the coordinate is unnormalized as
``(g + 1) * scale`` (minus 1/2 without align_corners), reflected and clipped as it does, the four
corner weights are products of the distances to the cell's sides, and the grid's gradient is
``((ne - nw) * s + (se - sw) * n) * grad`` (x) and ``((sw - nw) * e + (se - ne) * w) * grad`` (y)
summed over channels, times the coordinate's derivative. One backward op returns both gradients
(registered with its own derivative in staticgrad.ops.grid_sample_grad)."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.grid_coordinates import (  # noqa: F401  (the constants, for the other grid_sample modules)
    BICUBIC,
    BILINEAR,
    BORDER,
    NEAREST,
    REFLECTION,
    ZEROS,
    _source_coordinates,
)
from staticgrad.ops.grid_sample_bicubic import bicubic_backward, bicubic_sample
from staticgrad.ops.registry import OpDef, Save, register


def _corner(input, n, y, x):
    """input[n, :, y, x] at integer corners, zero where (y, x) is outside: (N, C, H_out, W_out)."""
    height, width = input.shape[2:]
    inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
    values = input[n, :, np.clip(y, 0, height - 1), np.clip(x, 0, width - 1)]  # (N, H_out, W_out, C)
    values = values * inside[..., None]
    return np.moveaxis(values, -1, 1), inside


def _prepare(input, grid, padding, align_corners):
    height, width = input.shape[2:]
    x, gx_mult = _source_coordinates(grid[..., 0], width, padding, align_corners)
    y, gy_mult = _source_coordinates(grid[..., 1], height, padding, align_corners)
    n = np.arange(input.shape[0]).reshape(-1, 1, 1)
    return x, y, gx_mult, gy_mult, n


def _bilinear_parts(x, y):
    x_w, y_n = np.floor(x), np.floor(y)
    w = x - x_w
    e = x.dtype.type(1) - w
    n_ = y - y_n
    s = y.dtype.type(1) - n_
    ix, iy = x_w.astype(np.int64), y_n.astype(np.int64)
    return ix, iy, w, e, n_, s


def _grid_sampler_2d(input, grid, out=None, interpolation_mode=BILINEAR, padding_mode=ZEROS, align_corners=False):
    x, y, _, _, n = _prepare(input, grid, padding_mode, align_corners)
    if interpolation_mode == BICUBIC:
        result = bicubic_sample(input, grid, padding_mode, align_corners)
    elif interpolation_mode == NEAREST:
        result, _ = _corner(input, n, np.rint(y).astype(np.int64), np.rint(x).astype(np.int64))
    else:
        ix, iy, w, e, n_, s = _bilinear_parts(x, y)
        nw, _ = _corner(input, n, iy, ix)
        ne, _ = _corner(input, n, iy, ix + 1)
        sw, _ = _corner(input, n, iy + 1, ix)
        se, _ = _corner(input, n, iy + 1, ix + 1)
        # each weight is per location, shared by the channels
        result = (nw * (s * e)[:, None] + ne * (s * w)[:, None] + sw * (n_ * e)[:, None]
                  + se * (n_ * w)[:, None])
    result = result.astype(input.dtype, copy=False)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _scatter(grad_input, grad, n, y, x, weight):
    """Add grad * weight into grad_input at the corners (y, x) that fall inside."""
    height, width = grad_input.shape[2:]
    inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
    contribution = np.moveaxis(grad * weight[:, None], 1, -1)[inside]  # (points inside, C)
    target = np.moveaxis(grad_input, 1, -1)  # (N, H, W, C) view
    np.add.at(target, (np.broadcast_to(n, inside.shape)[inside], y[inside], x[inside]), contribution)


def grid_sampler_2d_backward(grad, input, grid, out=None, interpolation_mode=BILINEAR, padding_mode=ZEROS,
                             align_corners=False, needs=(True, True)):
    """(gradient of input, gradient of grid) of grid_sampler_2d, those ``needs`` asks for (a tuple of
    two when both, else the one array, written into ``out`` when given)."""
    x, y, gx_mult, gy_mult, n = _prepare(input, grid, padding_mode, align_corners)
    grad_input = np.zeros_like(input) if needs[0] else None
    grad_grid = np.zeros_like(grid) if needs[1] else None
    if interpolation_mode == BICUBIC:
        grad_input, grad_grid = bicubic_backward(grad, input, grid, padding_mode, align_corners, needs, _scatter)
    elif interpolation_mode == NEAREST:
        if needs[0]:
            _scatter(grad_input, grad, n, np.rint(y).astype(np.int64), np.rint(x).astype(np.int64),
                     np.ones_like(x))
    else:
        ix, iy, w, e, n_, s = _bilinear_parts(x, y)
        corners = ((iy, ix, s * e), (iy, ix + 1, s * w), (iy + 1, ix, n_ * e), (iy + 1, ix + 1, n_ * w))
        if needs[0]:
            for cy, cx, weight in corners:
                _scatter(grad_input, grad, n, cy, cx, weight)
        if needs[1]:
            nw, ne, sw, se = (_corner(input, n, cy, cx)[0] for cy, cx, _ in corners)
            gx = (((ne - nw) * s[:, None] + (se - sw) * n_[:, None]) * grad).sum(1)
            gy = (((sw - nw) * e[:, None] + (se - ne) * w[:, None]) * grad).sum(1)
            grad_grid[..., 0] = gx * gx_mult
            grad_grid[..., 1] = gy * gy_mult
    results = [r for r, need in zip((grad_input, grad_grid), needs) if need]
    if len(results) == 2:
        return tuple(results)
    if out is None:
        return results[0]
    np.copyto(out, results[0])
    return out


def _grid_sampler_formula(F, g, s, at, need):
    needs = (bool(need[0]), bool(need[1]))
    result = F.grid_sampler_2d_backward(g, s["input"], s["grid"], interpolation_mode=at["interpolation_mode"],
                                        padding_mode=at["padding_mode"], align_corners=at["align_corners"],
                                        needs=needs)
    supplied = iter(result if type(result) is tuple else (result,))
    return tuple(next(supplied) if n else None for n in needs)


_ATTRS = (Save("interpolation_mode", "attr:interpolation_mode", freed=False),
          Save("padding_mode", "attr:padding_mode", freed=False),
          Save("align_corners", "attr:align_corners", freed=False))

register(OpDef("grid_sampler_2d", _grid_sampler_2d, "other", "GridSampler2DBackward0", _grid_sampler_formula,
               (Save("input", 0), Save("grid", 1)) + _ATTRS, "same"))
