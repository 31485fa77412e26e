"""TransformerDecoderLayer, TransformerDecoder and Transformer as PyTorch 2.13 defines them (same
signatures, parameter names and state_dict keys, so a PyTorch checkpoint loads), built from the
encoder pieces of staticgrad.nn.attention; plus the causal-mask helper
``Transformer.generate_square_subsequent_mask``."""

from __future__ import annotations

import copy
import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import full
from staticgrad.nn import functional as F
from staticgrad.nn import init
from staticgrad.nn.attention import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer, _activation
from staticgrad.nn.dropout import Dropout
from staticgrad.nn.layers import Linear, ModuleList
from staticgrad.nn.module import Module
from staticgrad.nn.normalization import LayerNorm
from staticgrad.ops.dtypes import INT

# The C type PyTorch names when -inf does not fit an integer dtype.
_INTEGER_TYPE_NAMES = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t"}


def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """An (sz, sz) float mask, -inf above the diagonal and 0 elsewhere: position i attends to
    positions <= i. ``dtype`` None means the default dtype, as ``torch.full`` gives."""
    if isinstance(sz, bool) or not isinstance(sz, int):
        raise TypeError("full(): argument 'size' (position 1) must be tuple of ints, but found element of type "
                        f"{type(sz).__name__} at pos 0")
    if sz < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {sz}: [{sz}, {sz}]")
    if dtype is not None and dtype.category == INT:
        raise RuntimeError(f"value cannot be converted to type {_INTEGER_TYPE_NAMES[dtype.name]} without overflow")
    return fn.triu(full((sz, sz), -math.inf, dtype=dtype, device=device), diagonal=1)


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention from the target to ``memory`` (the encoder's
    output), then a feed-forward block; each with a residual and a LayerNorm (after, or before
    with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of a decoder layer, then an optional norm.

    ``tgt_is_causal`` is a hint only: staticgrad always applies ``tgt_mask`` as given, so it does
    not compare the mask with a causal one (a data-dependent test a compiled step could not
    replay); the output is the same either way for a causal mask."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal is True, memory_is_causal=memory_is_causal)
        return self.norm(output) if self.norm is not None else output


class Transformer(Module):
    """An encoder stack and a decoder stack, each ending in a LayerNorm (or ``custom_encoder`` /
    ``custom_decoder``); ``forward(src, tgt)`` encodes ``src`` and decodes ``tgt`` against it."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, dtype=dtype), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, dtype=dtype), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        batch_dim = 0 if self.batch_first else 1
        if src.size(batch_dim) != tgt.size(batch_dim) and src.dim() == 3:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def _reset_parameters(self) -> None:
        """Xavier-uniform every parameter of two or more dims (weights), as PyTorch's Transformer does."""
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
