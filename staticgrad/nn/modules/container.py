"""``torch.nn.modules.container``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.layers import ModuleDict, ModuleList, Sequential
from staticgrad.nn.parameter_containers import ParameterDict, ParameterList

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
