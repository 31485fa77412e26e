"""interpolate and the Upsample modules, with PyTorch's argument handling and messages in front of
the ``upsample`` op (staticgrad.ops.pooling).

Modes "nearest" and "nearest-exact" (1-3 D), "linear" (1-D), "bilinear" and "bicubic" (2-D),
"trilinear" (3-D) and "area" (1-3 D: adaptive average pooling, as PyTorch computes it); "lanczos" and
antialias=True raise a NotImplementedError.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from staticgrad._eager.dispatch import dispatch
from staticgrad.nn.module import Module
from staticgrad.nn.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
from staticgrad.nn.pooling_more import adaptive_avg_pool3d
from staticgrad.ops import OPS

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample the spatial axes of (N, C, *spatial) input, as torch's interpolate (modes "nearest",
    "nearest-exact", "linear", "bilinear", "bicubic", "trilinear" and "area")."""
    dims = input._data.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if dims < 1 or dims > 3:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {dims + 2}D) for "
                                  f"the modes: {_MODES} (got {mode})")
    spatial = list(input._data.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dims:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {spatial} and output size of {size}. Please provide "
                                 f"input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                                 f"format.")
            output_size = tuple(int(s) for s in size)
        else:
            output_size = (int(size),) * dims
        scales = (None,) * dims
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dims:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {spatial} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 f"scale_factor in (s1, s2, ...,sK) format.")
            factors = tuple(float(f) for f in scale_factor)
        else:
            factors = (float(scale_factor),) * dims
        output_size = tuple(math.floor(float(n) * f) for n, f in zip(spatial, factors))
        scales = (None,) * dims if recompute_scale_factor else factors
    else:
        raise ValueError("either size or scale_factor should be defined")
    if antialias:
        raise NotImplementedError("staticgrad's interpolate does not support antialias=True; use antialias=False")
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dims - 1](input, output_size)
    linear_dims = {"linear": 1, "bilinear": 2, "trilinear": 3}
    if mode == "bicubic" and dims == 2:
        linear_dims["bicubic"] = 2
    if mode in linear_dims and dims != linear_dims[mode]:
        raise NotImplementedError(f"Got {dims + 2}D input, but {mode} mode needs {linear_dims[mode] + 2}D input")
    if mode not in ("nearest", "nearest-exact") and mode not in linear_dims:
        if mode in _MODES.split(" | ") and mode != "bicubic":
            raise NotImplementedError(f"staticgrad's interpolate does not support mode={mode!r}; use 'nearest', "
                                      f"'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear' or 'area'")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {dims + 2}D) for "
                                  f"the modes: {_MODES} (got {mode})")
    if min(output_size) <= 0 or min(spatial) <= 0:
        axes = ["W"] if dims == 1 else ["H", "W"] if dims == 2 else ["D", "H", "W"]
        shown = lambda sizes: ", ".join(f"{a}: {n}" for a, n in zip(axes, sizes))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({shown(spatial)}) "
                           f"output ({shown(output_size)})")
    if input._data.dtype.kind != "f" and not (input._data.dtype == np.uint8 and mode in ("nearest", "nearest-exact")):
        raise NotImplementedError(f"staticgrad's interpolate does not support integer input (got {input.dtype}); "
                                  f"convert the input to a floating dtype first")
    return dispatch(OPS["upsample"], (input,), {"mode": mode, "output_size": output_size, "scales": scales,
                                                "align_corners": bool(align_corners)})


def _deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate under its deprecated name (with PyTorch's warning)."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate(mode="nearest") under its deprecated name (with PyTorch's warning)."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate(mode="bilinear", align_corners=True) under its deprecated name (with PyTorch's warning)."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


class Upsample(Module):
    """interpolate as a module."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest"."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True, as PyTorch's."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
