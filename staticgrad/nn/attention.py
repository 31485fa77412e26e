"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder as PyTorch 2.13 defines them
(same signatures, parameter names and state_dict keys), over ``scaled_dot_product_attention``
(staticgrad.nn.sdpa) and, with need_weights, PyTorch's explicit bmm/softmax path."""

from __future__ import annotations

import copy
import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import empty
from staticgrad.nn import functional as F
from staticgrad.nn import init
from staticgrad.nn.dropout import Dropout, dropout
from staticgrad.nn.layers import Linear, ModuleList, NonDynamicallyQuantizableLinear
from staticgrad.nn.module import Module
from staticgrad.nn.normalization import LayerNorm
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.sdpa import _additive_mask, scaled_dot_product_attention


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads with packed input projections (``in_proj_weight``) or, when
    kdim/vdim differ from embed_dim, separate ``q/k/v_proj_weight``; ``forward`` -> (output, weights)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("staticgrad's MultiheadAttention has no add_bias_kv or add_zero_attn; "
                                      "append the extra key/value rows to key and value yourself")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query, key, value):
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = fn.chunk(self.in_proj_weight, 3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q = b_k = b_v = None
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = fn.chunk(self.in_proj_bias, 3)
        return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        batched = query.dim() == 3
        if self.batch_first and batched:
            query, key, value = (fn.transpose(x, 1, 0) for x in (query, key, value))
        if not batched:
            query, key, value = (fn.unsqueeze(x, 1) for x in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = fn.unsqueeze(key_padding_mask, 0)
        output, weights = self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                                       average_attn_weights)
        if not batched:
            output = fn.squeeze(output, 1)
            weights = fn.squeeze(weights, 0) if weights is not None else None
        elif self.batch_first:
            output = fn.transpose(output, 1, 0)
        return output, weights

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights):
        length, batch, embed = query.shape
        source_length, heads, head_dim = key.shape[0], self.num_heads, self.head_dim
        if embed != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {embed}")
        q, k, v = self._projections(query, key, value)
        mask = _additive_mask(attn_mask, q.dtype, keep_where_true=False)
        if mask is not None and mask.dim() == 2:
            if tuple(mask.shape) != (length, source_length):
                raise RuntimeError(f"The shape of the 2D attn_mask is {mask.shape}, but should be "
                                   f"{(length, source_length)}.")
            mask = fn.unsqueeze(mask, 0)
        padding = _additive_mask(key_padding_mask, q.dtype, keep_where_true=False)
        if padding is not None:
            padding = fn.reshape(fn.expand(fn.view(padding, (batch, 1, 1, source_length)),
                                           (batch, heads, 1, source_length)), (batch * heads, 1, source_length))
            mask = padding if mask is None else fn.add(mask, padding)
        q = fn.transpose(fn.view(q, (length, batch * heads, head_dim)), 0, 1)
        k = fn.transpose(fn.view(k, (source_length, batch * heads, head_dim)), 0, 1)
        v = fn.transpose(fn.view(v, (source_length, batch * heads, head_dim)), 0, 1)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = fn.bmm(fn.mul(q, math.sqrt(1.0 / head_dim)), fn.transpose(k, -2, -1))
            if mask is not None:
                scores = fn.add(mask, scores)
            weights = fn.softmax(scores, -1)
            if p > 0.0:
                weights = dropout(weights, p)
            output = fn.bmm(weights, v)
            output = fn.view(fn.transpose(output, 0, 1).contiguous(), (length * batch, embed))
            weights = fn.view(weights, (batch, heads, length, source_length))
            if average_attn_weights:
                weights = fn.mean(weights, 1)
        else:
            if mask is not None:
                mask = fn.unsqueeze(mask, 0) if mask.shape[0] == 1 else fn.view(mask, (batch, heads, -1, source_length))
            q, k, v = (fn.view(x, (batch, heads, x.shape[1], head_dim)) for x in (q, k, v))
            output = scaled_dot_product_attention(q, k, v, mask, p)
            output = fn.view(fn.permute(output, 2, 0, 1, 3).contiguous(), (batch * length, embed))
            weights = None
        output = F.linear(output, self.out_proj.weight, self.out_proj.bias)
        return fn.view(output, (length, batch, embed)), weights


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual and a LayerNorm (after, or
    before with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional norm."""

    def __init__(self, encoder_layer, num_layers: int, norm=None, enable_nested_tensor: bool = True,
                 mask_check: bool = True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=is_causal is True)
        return self.norm(output) if self.norm is not None else output
