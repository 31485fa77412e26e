"""The second derivative of 5-D grid_sample: the backward of ``grid_sampler_3d_backward`` (PyTorch's
``GridSampler3DBackwardBackward0``), one op, as staticgrad.ops.grid_sample_grad is for 4-D input:
with L = <gg_input, grad_input> + <gg_grid, grad_grid>, each corner's weight w is a product of one
factor per axis, dw/da replaces the factor of axis a by its sign, and the only second derivatives
are the mixed ones, d2w/da db = sign_a sign_b (factor of the third axis). This op has no derivative."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.grid_sample import _ATTRS, NEAREST
from staticgrad.ops.grid_sample_3d import (
    _batch_index,
    _coordinates,
    _corners,
    _gather,
    _scatter,
    grid_sampler_3d_backward,
)
from staticgrad.ops.grid_sample_grad import _no_third_derivative
from staticgrad.ops.registry import OpDef, Save, register


def grid_sampler_3d_double_backward(grad, input, grid, *gg, out=None, interpolation_mode=0, padding_mode=0,
                                    align_corners=False, given=(True, True), needs=(True, True, True)):
    """Gradients of (grad, input, grid) that ``needs`` asks for, from the gradients of grid_sampler_3d_backward's
    (grad_input, grad_grid) that ``given`` says are passed (the others are zero)."""
    supplied = iter(gg)
    gg_input, gg_grid = (next(supplied) if g else None for g in given)
    coords, mults = _coordinates(input, grid, padding_mode, align_corners)
    n = _batch_index(input)
    d_grad = np.zeros_like(grad) if needs[0] else None
    d_input = np.zeros_like(input) if needs[1] else None
    d_grid = np.zeros_like(grid) if needs[2] else None
    if interpolation_mode == NEAREST:
        if needs[0] and gg_input is not None:
            d_grad += _gather(gg_input, n, [np.rint(c).astype(np.int64) for c in coords])
    else:
        scaled = [gg_grid[..., k] * mults[k] for k in range(3)] if gg_grid is not None else None
        for index, factors, signs in _corners(coords):
            weight = factors[0] * factors[1] * factors[2]
            slopes = [signs[k] * factors[(k + 1) % 3] * factors[(k + 2) % 3] for k in range(3)]
            picked = _gather(gg_input, n, index) if gg_input is not None else None
            value = _gather(input, n, index) if scaled is not None and (needs[0] or needs[2]) else None
            along = scaled[0] * slopes[0] + scaled[1] * slopes[1] + scaled[2] * slopes[2] if scaled else None
            if needs[0]:
                if picked is not None:
                    d_grad += picked * weight[:, None]
                if value is not None:
                    d_grad += value * along[:, None]
            if needs[1] and along is not None:
                _scatter(d_input, grad, n, index, along)
            if needs[2]:
                if picked is not None:
                    flow = (grad * picked).sum(1)
                    for k in range(3):
                        d_grid[..., k] += flow * slopes[k] * mults[k]
                if value is not None:
                    flow = (grad * value).sum(1)
                    for a in range(3):
                        for b in range(3):
                            if a != b:
                                mixed = signs[a] * signs[b] * factors[3 - a - b]
                                d_grid[..., a] += flow * scaled[b] * mixed * mults[a]
    results = [r for r, need in zip((d_grad, d_input, d_grid), needs) if need]
    if len(results) > 1:
        return tuple(results)
    if out is None:
        return results[0]
    np.copyto(out, results[0])
    return out


def _double_backward_formula(F, g, s, at, need):
    """The backward of grid_sampler_3d_backward, whose outputs are the gradients its ``needs`` asked for."""
    outputs = iter(g if type(g) is tuple else (g,))
    grads = [next(outputs) if asked else None for asked in at["needs"]]
    needs = tuple(bool(k) for k in need[:3])
    result = F.grid_sampler_3d_double_backward(s["grad_output"], s["input"], s["grid"],
                                               *(grad for grad in grads if grad is not None),
                                               interpolation_mode=at["interpolation_mode"],
                                               padding_mode=at["padding_mode"], align_corners=at["align_corners"],
                                               given=tuple(grad is not None for grad in grads), needs=needs)
    supplied = iter(result if type(result) is tuple else (result,))
    return tuple(next(supplied) if k else None for k in needs)


register(OpDef("grid_sampler_3d_backward", grid_sampler_3d_backward, "other", "GridSampler3DBackwardBackward0",
               _double_backward_formula, (Save("grad_output", 0), Save("input", 1), Save("grid", 2)) + _ATTRS,
               "same"))
register(OpDef("grid_sampler_3d_double_backward", grid_sampler_3d_double_backward, "other",
               "GridSampler3DBackwardBackwardBackward0", _no_third_derivative, (), "same"))
