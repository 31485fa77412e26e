"""``torch.nn.modules.flatten``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.layers import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]
