"""``torch.nn.modules.conv``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.conv_more import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
