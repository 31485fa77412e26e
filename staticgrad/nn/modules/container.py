"""``torch.nn.modules.container``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.layers import ModuleDict, ModuleList, Sequential

__all__ = ["ModuleDict", "ModuleList", "Sequential"]
