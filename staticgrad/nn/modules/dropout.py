"""``torch.nn.modules.dropout``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.channel_dropout import Dropout2d
from staticgrad.nn.dropout import Dropout

__all__ = ["Dropout", "Dropout2d"]
