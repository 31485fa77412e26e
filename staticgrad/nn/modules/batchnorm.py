"""``torch.nn.modules.batchnorm``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
