"""``torch.nn.modules.upsampling``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
