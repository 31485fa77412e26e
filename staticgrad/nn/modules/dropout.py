"""``torch.nn.modules.dropout``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.alpha_dropout import AlphaDropout, FeatureAlphaDropout
from staticgrad.nn.channel_dropout import Dropout1d, Dropout2d, Dropout3d
from staticgrad.nn.dropout import Dropout

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]
