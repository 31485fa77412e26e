"""``torch.nn.modules.instancenorm``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.instance_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
