"""``torch.nn.modules.transformer``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.attention import TransformerEncoder, TransformerEncoderLayer
from staticgrad.nn.transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]
