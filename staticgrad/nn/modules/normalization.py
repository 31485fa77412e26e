"""``torch.nn.modules.normalization``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.group_norm import GroupNorm
from staticgrad.nn.normalization import LayerNorm

__all__ = ["GroupNorm", "LayerNorm"]
