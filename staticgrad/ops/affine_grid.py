"""affine_grid's op (PyTorch's ``affine_grid_generator``, node ``AffineGridGeneratorBackward0``):
each output location's normalized coordinates (x, y[, z], 1) times the transposed affine matrices,
2-D (theta N x 2 x 3, grid N x H x W x 2) or 3-D (theta N x 3 x 4, grid N x D x H x W x 3).

The base grid (the homogeneous coordinates of every location) is its own factory op, so the
backward is PyTorch's composition: ``base^T @ grad`` (BmmBackward0) transposed (TransposeBackward0)."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.shape import reshape_back


def _linspace_from_neg_one(steps: int, align_corners: bool, dtype) -> np.ndarray:
    """``steps`` coordinates across [-1, 1] (pixel centres unless align_corners), as PyTorch computes them."""
    if steps <= 1:
        return np.zeros(1, dtype)
    step = dtype.type(2) / dtype.type(steps - 1)
    index = np.arange(steps)
    half = steps // 2
    values = np.where(index < half, dtype.type(-1) + index.astype(dtype) * step,
                      dtype.type(1) - (steps - 1 - index).astype(dtype) * step).astype(dtype)
    if not align_corners:
        values = values * dtype.type(steps - 1) / dtype.type(steps)
    return values


def _affine_grid_base(out=None, size=(), align_corners=False, dtype=None):
    """(N, prod(spatial), dims + 1): each location's (x, y[, z], 1), x along the last spatial dim."""
    dtype = np.dtype(dtype)
    batch, spatial = size[0], tuple(size[2:])
    axes = [_linspace_from_neg_one(n, align_corners, dtype) for n in spatial]
    grids = np.meshgrid(*axes, indexing="ij")  # one per spatial dim, first dim first
    base = np.stack(list(grids[::-1]) + [np.ones(spatial, dtype)], -1).reshape(1, -1, len(spatial) + 1)
    result = np.ascontiguousarray(np.broadcast_to(base, (batch,) + base.shape[1:]))
    if out is None:
        return result
    np.copyto(out, result)
    return out


register(OpDef("affine_grid_base", _affine_grid_base, "factory", dtype_rule="attr"))


def _affine_grid_generator(theta, out=None, size=(), align_corners=False):
    base = _affine_grid_base(size=size, align_corners=align_corners, dtype=theta.dtype)
    grid = np.matmul(base, np.swapaxes(theta, 1, 2)).reshape(tuple(size[:1]) + tuple(size[2:]) + (theta.shape[1],))
    if out is None:
        return grid
    np.copyto(out, grid)
    return out


def _affine_grid_formula(F, g, s, at, need):
    size = at["size"]
    base = F.affine_grid_base(size=size, align_corners=at["align_corners"], dtype=g._data.dtype)
    flat = reshape_back(F, g, (size[0], base.shape[1], len(size) - 2))
    return (F.transpose(F.bmm(F.transpose(base, dim0=1, dim1=2), flat), dim0=1, dim1=2),)


register(OpDef("affine_grid_generator", _affine_grid_generator, "other", "AffineGridGeneratorBackward0",
               _affine_grid_formula, (Save("size", "attr:size", freed=False),
                                      Save("align_corners", "attr:align_corners", freed=False)), "same"))
