"""``torch.nn.modules.module``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.module import Module

__all__ = ["Module"]
