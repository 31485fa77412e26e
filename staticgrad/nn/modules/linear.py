"""``torch.nn.modules.linear``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.layers import Identity, Linear, NonDynamicallyQuantizableLinear

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]

from staticgrad.nn.layers_more import Bilinear

__all__ += ["Bilinear"]
