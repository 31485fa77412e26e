"""Bicubic grid_sample on 4-D input (``mode='bicubic'``), as PyTorch's CPU kernel: the grid value
is unnormalized (no padding applied to it), the 4 x 4 taps around it weighted by the cubic
convolution coefficients (A = -0.75) of the fractional offsets, each tap read at its own position
moved inside by the padding mode (zeros: taps outside read 0). The backward scatters to the same
taps; the grid's gradient uses the coefficients' derivatives."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.grid_coordinates import padded, unnormalize

A = -0.75  # the cubic convolution's parameter, PyTorch's (and OpenCV's) choice


def _near(x, A):
    """The cubic convolution kernel for |x| <= 1."""
    return ((A + 2) * x - (A + 3)) * x * x + 1


def _far(x, A):
    """The cubic convolution kernel for 1 < |x| < 2."""
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A


def _coefficients(t):
    """The weights of the taps at offsets -1, 0, 1, 2 from floor(x), t = x - floor(x)."""
    a = t.dtype.type(A)
    one = t.dtype.type(1)
    return [_far(t + one, a), _near(t, a), _near(one - t, a), _far((one - t) + one, a)]


def _coefficient_slopes(t):
    """The coefficients' derivatives (PyTorch's get_cubic_coefficients_grad, which the grid gradient subtracts)."""
    a = t.dtype.type(A)
    x = -1 - t
    first = (-3 * a * x - 10 * a) * x - 8 * a
    x = -t
    second = (-3 * (a + 2) * x - 2 * (a + 3)) * x
    x = 1 - t
    third = (3 * (a + 2) * x - 2 * (a + 3)) * x
    x = 2 - t
    fourth = (3 * a * x - 10 * a) * x + 8 * a
    return [first, second, third, fourth]


def _taps(input, grid, padding, align_corners):
    height, width = input.shape[2:]
    x, x_scale = unnormalize(grid[..., 0], width, align_corners)
    y, y_scale = unnormalize(grid[..., 1], height, align_corners)
    x0, y0 = np.floor(x), np.floor(y)
    n = np.arange(input.shape[0]).reshape(-1, 1, 1)
    return x, y, x0, y0, x_scale, y_scale, n


def _bounded(size: int, position, padding: int, align_corners: bool):
    """(integer index, inside?) of a tap at ``position`` after the padding mode moved it."""
    moved = padded(position, size, padding, align_corners)
    index = moved.astype(np.int64)
    return index, (moved >= 0) & (moved <= size - 1) & (index >= 0) & (index < size)


def _tap_values(input, n, column, row):
    (cx, inside_x), (cy, inside_y) = column, row
    height, width = input.shape[2:]
    inside = inside_x & inside_y
    values = input[n, :, np.clip(cy, 0, height - 1), np.clip(cx, 0, width - 1)] * inside[..., None]
    return np.moveaxis(values, -1, 1)


def _positions(input, x0, y0, padding, align_corners):
    height, width = input.shape[2:]
    one = x0.dtype.type(1)
    columns = [_bounded(width, x0 + (k - one), padding, align_corners) for k in range(4)]
    rows = [_bounded(height, y0 + (k - one), padding, align_corners) for k in range(4)]
    return columns, rows


def bicubic_sample(input, grid, padding, align_corners):
    x, y, x0, y0, _, _, n = _taps(input, grid, padding, align_corners)
    cx, cy = _coefficients(x - x0), _coefficients(y - y0)
    columns, rows = _positions(input, x0, y0, padding, align_corners)
    result = None
    for j in range(4):
        row = None
        for i in range(4):
            term = cx[i][:, None] * _tap_values(input, n, columns[i], rows[j])
            row = term if row is None else row + term
        term = cy[j][:, None] * row
        result = term if result is None else result + term
    return result


def bicubic_backward(grad, input, grid, padding, align_corners, needs, scatter):
    """(gradient of input or None, gradient of grid or None); ``scatter(target, grad, n, y, x, weight)``
    adds grad * weight at in-bound taps."""
    x, y, x0, y0, x_scale, y_scale, n = _taps(input, grid, padding, align_corners)
    cx, cy = _coefficients(x - x0), _coefficients(y - y0)
    columns, rows = _positions(input, x0, y0, padding, align_corners)
    grad_input = np.zeros_like(input) if needs[0] else None
    grad_grid = np.zeros_like(grid) if needs[1] else None
    if needs[1]:
        sx, sy = _coefficient_slopes(x - x0), _coefficient_slopes(y - y0)
        gx, gy = np.zeros_like(x), np.zeros_like(y)
    for j in range(4):
        for i in range(4):
            (col, col_in), (row, row_in) = columns[i], rows[j]
            if needs[0]:
                # taps outside (zeros padding) get nothing: their index is pushed out of range
                scatter(grad_input, grad, n, np.where(row_in & col_in, row, -1), col, cx[i] * cy[j])
            if needs[1]:
                flow = (_tap_values(input, n, columns[i], rows[j]) * grad).sum(1)
                gx -= flow * sx[i] * cy[j]
                gy -= flow * cx[i] * sy[j]
    if needs[1]:
        grad_grid[..., 0] = gx * x_scale
        grad_grid[..., 1] = gy * y_scale
    return grad_input, grad_grid
