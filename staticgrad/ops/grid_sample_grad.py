"""The second derivative of 4-D grid_sample: the backward of ``grid_sampler_2d_backward`` (PyTorch's
``GridSampler2DBackwardBackward0``), one op. With L = <gg_input, grad_input> + <gg_grid, grad_grid>
and the bilinear weights w_k of the four corners (products of the distances s, n, e, w):

  dL/dgrad  = sum_k gg_input@corner_k w_k + gg_x mx sum_k v_k dw_k/dx + gg_y my sum_k v_k dw_k/dy
  dL/dinput = scatter to corner k of grad (gg_x mx dw_k/dx + gg_y my dw_k/dy)
  dL/dgrid  = mx (sum_c grad sum_k gg_input@corner_k dw_k/dx + gg_y my sum_c grad (v_nw - v_ne - v_sw + v_se)),
              and the same with x and y swapped,

since the weights are linear along each axis (their only second derivative is the mixed one, +-1)
and the coordinate multipliers mx, my are piecewise constant. Nearest sampling has only the first
term. This op itself has no derivative (a third derivative is refused)."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.grid_sample import (
    _ATTRS,
    BICUBIC,
    NEAREST,
    _bilinear_parts,
    _corner,
    _prepare,
    _scatter,
    grid_sampler_2d_backward,
)
from staticgrad.ops.registry import OpDef, Save, register


def _channel_sum(a):
    return a.sum(1)


def grid_sampler_2d_double_backward(grad, input, grid, *gg, out=None, interpolation_mode=0, padding_mode=0,
                                    align_corners=False, given=(True, True), needs=(True, True, True)):
    """Gradients of (grad, input, grid) that ``needs`` asks for, from the gradients of grid_sampler_2d_backward's
    (grad_input, grad_grid) that ``given`` says are passed (the others are zero)."""
    if interpolation_mode == BICUBIC:
        raise RuntimeError("staticgrad's grid_sample with mode='bicubic' has no second derivative: use "
                           "mode='bilinear', or differentiate it once")
    supplied = iter(gg)
    gg_input, gg_grid = (next(supplied) if g else None for g in given)
    x, y, mx, my, n = _prepare(input, grid, padding_mode, align_corners)
    d_grad = np.zeros_like(grad) if needs[0] else None
    d_input = np.zeros_like(input) if needs[1] else None
    d_grid = np.zeros_like(grid) if needs[2] else None
    if interpolation_mode == NEAREST:
        if needs[0] and gg_input is not None:
            d_grad += _corner(gg_input, n, np.rint(y).astype(np.int64), np.rint(x).astype(np.int64))[0]
    else:
        ix, iy, w, e, n_, s = _bilinear_parts(x, y)
        # per corner: (row, column, weight, d weight / dx, d weight / dy)
        corners = ((iy, ix, s * e, -s, -e), (iy, ix + 1, s * w, s, -w), (iy + 1, ix, n_ * e, -n_, e),
                   (iy + 1, ix + 1, n_ * w, n_, w))
        values = [_corner(input, n, cy, cx)[0] for cy, cx, *_ in corners] if (needs[0] or needs[2]) else None
        gx = gy = None
        if gg_grid is not None:
            gx, gy = gg_grid[..., 0] * mx, gg_grid[..., 1] * my
        for k, (cy, cx, weight, dx, dy) in enumerate(corners):
            picked = _corner(gg_input, n, cy, cx)[0] if gg_input is not None else None
            if needs[0]:
                if picked is not None:
                    d_grad += picked * weight[:, None]
                if gx is not None:
                    d_grad += values[k] * (gx * dx + gy * dy)[:, None]
            if needs[1] and gx is not None:
                _scatter(d_input, grad, n, cy, cx, gx * dx + gy * dy)
            if needs[2] and picked is not None:
                flow = _channel_sum(grad * picked)
                d_grid[..., 0] += flow * dx * mx
                d_grid[..., 1] += flow * dy * my
        if needs[2] and gx is not None:
            mixed = _channel_sum(grad * (values[0] - values[1] - values[2] + values[3]))
            d_grid[..., 0] += mixed * gy * mx
            d_grid[..., 1] += mixed * gx * my
    results = [r for r, need in zip((d_grad, d_input, d_grid), needs) if need]
    if len(results) > 1:
        return tuple(results)
    if out is None:
        return results[0]
    np.copyto(out, results[0])
    return out


def _double_backward_formula(F, g, s, at, need):
    """The backward of grid_sampler_2d_backward, whose outputs are the gradients its ``needs`` asked for."""
    outputs = iter(g if type(g) is tuple else (g,))
    grads = [next(outputs) if asked else None for asked in at["needs"]]
    given = tuple(grad is not None for grad in grads)
    needs = tuple(bool(k) for k in need[:3])
    result = F.grid_sampler_2d_double_backward(s["grad_output"], s["input"], s["grid"],
                                               *(grad for grad in grads if grad is not None),
                                               interpolation_mode=at["interpolation_mode"],
                                               padding_mode=at["padding_mode"], align_corners=at["align_corners"],
                                               given=given, needs=needs)
    supplied = iter(result if type(result) is tuple else (result,))
    return tuple(next(supplied) if k else None for k in needs)


def _no_third_derivative(F, g, s, at, need):
    raise RuntimeError("staticgrad's grid_sample has no third derivative: differentiate it at most twice")


register(OpDef("grid_sampler_2d_double_backward", grid_sampler_2d_double_backward, "other",
               "GridSampler2DBackwardBackwardBackward0", _no_third_derivative, (), "same"))


register(OpDef("grid_sampler_2d_backward", grid_sampler_2d_backward, "other", "GridSampler2DBackwardBackward0",
               _double_backward_formula, (Save("grad_output", 0), Save("input", 1), Save("grid", 2)) + _ATTRS,
               "same"))
