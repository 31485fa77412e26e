"""grid_sample on 5-D input (PyTorch's ``grid_sampler_3d``, node ``GridSampler3DBackward0``): each
output location reads the (N, C, D, H, W) input at the (x, y, z) its grid entry gives, trilinearly
or from the nearest voxel, with grid_sampler_2d's padding modes and coordinate rules
(staticgrad.ops.grid_sample). A corner's weight is the product over the axes of the distance to the
opposite side; its derivative along an axis replaces that factor by -1 or +1. The backward op is
registered with its own derivative in staticgrad.ops.grid_sample_3d_grad."""

from __future__ import annotations

import itertools

import numpy as np

from staticgrad.ops.grid_sample import NEAREST, ZEROS, _source_coordinates
from staticgrad.ops.registry import OpDef, Save, register


def _coordinates(input, grid, padding, align_corners):
    """Per grid component (x, y, z): the voxel coordinate and its derivative by the grid value."""
    spatial = input.shape[2:]
    pairs = [_source_coordinates(grid[..., k], spatial[-1 - k], padding, align_corners) for k in range(3)]
    return [c for c, _ in pairs], [m for _, m in pairs]


def _locate(spatial, index):
    """(inside the (D, H, W) volume?, the indices clipped into it, in z, y, x order) for (x, y, z) ``index``."""
    inside = np.ones(index[0].shape, bool)
    clipped = []
    for k in (2, 1, 0):
        size = spatial[2 - k]
        inside &= (index[k] >= 0) & (index[k] < size)
        clipped.append(np.clip(index[k], 0, size - 1))
    return inside, clipped


def _gather(input, n, index):
    """input[n, :, z, y, x] for integer (x, y, z) ``index``, zero outside: (N, C, *grid locations)."""
    inside, clipped = _locate(input.shape[2:], index)
    values = input[(n, slice(None), *clipped)] * inside[..., None]
    return np.moveaxis(values, -1, 1)


def _corners(coords):
    """For each of the 8 corners: (integer index per axis, weight factor per axis, sign per axis)."""
    floors = [np.floor(c) for c in coords]
    fractions = [c - f for c, f in zip(coords, floors)]
    low = [f.astype(np.int64) for f in floors]
    one = coords[0].dtype.type(1)
    for offsets in itertools.product((0, 1), repeat=3):
        index = [lo + o for lo, o in zip(low, offsets)]
        factors = [fr if o else one - fr for fr, o in zip(fractions, offsets)]
        yield index, factors, [1 if o else -1 for o in offsets]


def _batch_index(input):
    return np.arange(input.shape[0]).reshape(-1, 1, 1, 1)


def _grid_sampler_3d(input, grid, out=None, interpolation_mode=0, padding_mode=ZEROS, align_corners=False):
    coords, _ = _coordinates(input, grid, padding_mode, align_corners)
    n = _batch_index(input)
    if interpolation_mode == NEAREST:
        result = _gather(input, n, [np.rint(c).astype(np.int64) for c in coords])
    else:
        result = None
        for index, factors, _ in _corners(coords):
            term = _gather(input, n, index) * (factors[0] * factors[1] * factors[2])[:, None]
            result = term if result is None else result + term
    result = result.astype(input.dtype, copy=False)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _scatter(grad_input, grad, n, index, weight):
    inside, clipped = _locate(grad_input.shape[2:], index)
    contribution = np.moveaxis(grad * weight[:, None], 1, -1)[inside]
    target = np.moveaxis(grad_input, 1, -1)  # (N, D, H, W, C) view
    np.add.at(target, (np.broadcast_to(n, inside.shape)[inside], *(c[inside] for c in clipped)), contribution)


def grid_sampler_3d_backward(grad, input, grid, out=None, interpolation_mode=0, padding_mode=ZEROS,
                             align_corners=False, needs=(True, True)):
    """(gradient of input, gradient of grid) of grid_sampler_3d, those ``needs`` asks for (a tuple of
    two when both, else the one array, written into ``out`` when given)."""
    coords, mults = _coordinates(input, grid, padding_mode, align_corners)
    n = _batch_index(input)
    grad_input = np.zeros_like(input) if needs[0] else None
    grad_grid = np.zeros_like(grid) if needs[1] else None
    if interpolation_mode == NEAREST:
        if needs[0]:
            _scatter(grad_input, grad, n, [np.rint(c).astype(np.int64) for c in coords], np.ones_like(coords[0]))
    else:
        for index, factors, signs in _corners(coords):
            if needs[0]:
                _scatter(grad_input, grad, n, index, factors[0] * factors[1] * factors[2])
            if needs[1]:
                flow = (_gather(input, n, index) * grad).sum(1)  # value times incoming gradient, per location
                for k in range(3):
                    others = factors[(k + 1) % 3] * factors[(k + 2) % 3]
                    grad_grid[..., k] += flow * others * signs[k]
        if needs[1]:
            for k in range(3):
                grad_grid[..., k] *= mults[k]
    results = [r for r, need in zip((grad_input, grad_grid), needs) if need]
    if len(results) == 2:
        return tuple(results)
    if out is None:
        return results[0]
    np.copyto(out, results[0])
    return out


def _grid_sampler_3d_formula(F, g, s, at, need):
    needs = (bool(need[0]), bool(need[1]))
    result = F.grid_sampler_3d_backward(g, s["input"], s["grid"], interpolation_mode=at["interpolation_mode"],
                                        padding_mode=at["padding_mode"], align_corners=at["align_corners"],
                                        needs=needs)
    supplied = iter(result if type(result) is tuple else (result,))
    return tuple(next(supplied) if n else None for n in needs)


register(OpDef("grid_sampler_3d", _grid_sampler_3d, "other", "GridSampler3DBackward0", _grid_sampler_3d_formula,
               (Save("input", 0), Save("grid", 1), Save("interpolation_mode", "attr:interpolation_mode", freed=False),
                Save("padding_mode", "attr:padding_mode", freed=False),
                Save("align_corners", "attr:align_corners", freed=False)), "same"))
