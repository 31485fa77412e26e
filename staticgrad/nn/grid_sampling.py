"""F.affine_grid and F.grid_sample (spatial transformer networks) with PyTorch's checks, warnings
and errors, over the ops ``affine_grid_generator`` (2-D and 3-D) and ``grid_sampler_2d`` /
``grid_sampler_3d`` (4-D or 5-D input; bilinear or nearest; zeros, border or reflection padding)."""

from __future__ import annotations

import warnings

from staticgrad._eager.dispatch import dispatch
from staticgrad.ops import OPS

_ALIGN_CORNERS_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                          "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                          "documentation of grid_sample for details.")


def _sizes(shape) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _scalar_name(tensor) -> str:
    """PyTorch's scalar type name of a tensor's dtype (Float, Long, Bool...)."""
    return tensor.dtype.tensor_type[:-len("Tensor")]


def _check_grid_sampler(input, grid) -> None:
    """PyTorch's checks of grid_sampler, in its order: the shapes, then the kernel's dtypes."""
    shapes = f"input with sizes {_sizes(input.shape)} and grid with sizes {_sizes(grid.shape)}"
    if input.dim() == 0 or grid.dim() == 0:   # PyTorch reads both batch sizes first
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got {shapes}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but got "
                           f"grid with sizes {_sizes(grid.shape)}")
    for i in range(2, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {_sizes(input.shape)} with dimension {i} being empty")
    rank = 4 if input.dim() == 4 else 5
    if input.dim() != rank or grid.dim() != rank:
        raise RuntimeError(f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but got "
                           f"{shapes}")
    if not input.is_floating_point():
        kernel = "grid_sampler_2d_cpu_kernel_impl" if rank == 4 else "grid_sampler3d_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_scalar_name(input)}\'')
    if input.dtype != grid.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(input)} but found {_scalar_name(grid)}")


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at the grid's (N, H_out, W_out, 2) normalized (x, y) locations, or
    (N, C, D, H, W) at (N, D_out, H_out, W_out, 3) (x, y, z) locations."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, stacklevel=2)
        align_corners = False
    _check_grid_sampler(input, grid)
    if mode == "bicubic" and input.dim() == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    attrs = {"interpolation_mode": ("bilinear", "nearest", "bicubic").index(mode),
             "padding_mode": ("zeros", "border", "reflection").index(padding_mode),
             "align_corners": bool(align_corners)}
    op = OPS["grid_sampler_2d"] if input.dim() == 4 else OPS["grid_sampler_3d"]
    return dispatch(op, (input, grid), attrs)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) or (N, 3, 4) over an output of ``size``
    (N, C, H, W) or (N, C, D, H, W): (N, H, W, 2) or (N, D, H, W, 3) normalized coordinates."""
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    given, size = size, tuple(int(n) for n in size)
    shape = tuple(theta.shape)
    shown = f"{given}. Got {theta.shape}."
    if len(size) == 4:
        if theta.dim() != 3 or shape[-2] != 2 or shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {shown}")
    elif len(size) == 5:
        if theta.dim() != 3 or shape[-2] != 3 or shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {shown}")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {given}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")
    if shape[0] != size[0]:  # PyTorch's bmm of the base grid by theta^T says it so
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, {shape[2]}] "
                           f"but got: [{shape[0]}, {shape[2]}].")
    return dispatch(OPS["affine_grid_generator"], (theta,), {"size": size, "align_corners": bool(align_corners)})
