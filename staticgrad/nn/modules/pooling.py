"""``torch.nn.modules.pooling``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool2d,
)

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d", "MaxUnpool2d"]
from staticgrad.nn.max_unpool import MaxUnpool1d, MaxUnpool3d
from staticgrad.nn.pooling_more import (
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool3d,
)

__all__ += [
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool3d",
]
