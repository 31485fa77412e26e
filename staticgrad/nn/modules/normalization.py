"""``torch.nn.modules.normalization``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.group_norm import GroupNorm
from staticgrad.nn.normalization import LayerNorm
from staticgrad.nn.rms_norm import RMSNorm

__all__ = ["GroupNorm", "LayerNorm", "RMSNorm"]
