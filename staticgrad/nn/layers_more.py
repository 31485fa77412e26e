"""More layers: embedding_bag and EmbeddingBag, embedding's max_norm, rrelu and RReLU, bilinear and
Bilinear, with PyTorch's arguments, defaults and errors in front of the ops in
staticgrad.ops.embedding_more (bilinear composed as PyTorch composes it)."""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import arange, empty, empty_like, full_like
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.einsum import einsum
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad.nn import init
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.sparse import _padding_index, renorm_rows
from staticgrad.ops import OPS

_MODES = {"sum": 0, "mean": 1, "max": 2}


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of the embedding rows of each bag: the rows of a 2-D input, or the runs of a
    1-D input that ``offsets`` starts (EmbeddingBagBackward0)."""
    fn.require_tensor(input, "embedding_bag")
    fn.require_tensor(weight, "embedding_bag", "weight", 2)
    if weight._data.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight._data.ndim}")
    if per_sample_weights is not None and input._data.shape != per_sample_weights._data.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)}) is not None, "
                         f"then it must have the same shape as the input ({tuple(input.shape)})")
    if input._data.ndim == 2:
        if offsets is not None:
            kind = type(offsets)
            kind = "staticgrad.Tensor" if isinstance(offsets, Tensor) else f"{kind.__module__}.{kind.__qualname__}"
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type <class '{kind}'>")
        length = input._data.shape[1]
        offsets = arange(0, input._data.size, length) if length else arange(0, input._data.shape[0]) * 0
        input = fn.reshape(input, (-1,))
        if per_sample_weights is not None:
            per_sample_weights = fn.reshape(per_sample_weights, (-1,))
    elif input._data.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets._data.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input._data.ndim}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("staticgrad's embedding_bag computes dense, unscaled gradients only; use "
                                  "scale_grad_by_freq=False and sparse=False")
    if max_norm is not None:
        renorm_rows(weight, input, max_norm, norm_type)
    num_bags = offsets._data.shape[0] - (1 if include_last_offset else 0)
    padding = -1 if padding_idx is None else _padding_index(padding_idx, weight._data.shape[0])
    attrs = {"mode": _MODES[mode], "num_bags": num_bags, "padding_idx": padding}
    if per_sample_weights is None:
        output, _ = dispatch(OPS["embedding_bag"], (weight, input, offsets), attrs)
    else:
        output, _ = dispatch(OPS["embedding_bag_weighted"], (weight, input, offsets, per_sample_weights), attrs)
    return output


class EmbeddingBag(Module):
    """A lookup table whose rows are pooled per bag (sum, mean or max); initialised from N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = None if padding_idx is None else _padding_index(padding_idx, num_embeddings)
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype))
            init.normal_(self.weight)
            if self.padding_idx is not None:
                with no_grad():
                    self.weight[self.padding_idx].fill_(0)
        else:
            self.weight = Parameter(_weight)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)


# ---- rrelu ----------------------------------------------------------------------------------------------

def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """x where x > 0, else x times a slope drawn from U(lower, upper) in training, their mean in eval
    (RreluWithNoiseBackward0); the draw is a random op, re-drawn by each replay."""
    fn.require_tensor(input, "rrelu")
    if training:
        noise = empty_like(input).uniform_(lower, upper)
    else:
        noise = full_like(input, (lower + upper) / 2)
    if inplace:
        return dispatch_inplace(OPS["rrelu_with_noise_inplace"], input, (noise,), {})
    return dispatch(OPS["rrelu_with_noise"], (input, noise), {})


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


# ---- bilinear: x1^T W x2 + b ----------------------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """y_k = x1^T W_k x2 + b_k over the leading dims of x1 and x2, composed as PyTorch's (the inputs
    flattened to rows, one contraction, the result reshaped, then the bias added)."""
    fn.require_tensor(input1, "bilinear", "input1")
    fn.require_tensor(input2, "bilinear", "input2", 2)
    fn.require_tensor(weight, "bilinear", "weight", 3)
    operands = [("input1", input1), ("input2", input2), ("weight", weight)]
    operands += [("bias", bias)] if bias is not None else []
    if len({t._data.dtype for _, t in operands}) > 1:
        listed = ", ".join(f"{name}: {fn._CPP_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name)}"
                           for name, t in operands)
        raise RuntimeError(f"All tensors must have the same dtype, got {listed}")
    shape1, shape2 = input1._data.shape, input2._data.shape
    if not shape1 or not shape2:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if len(shape1) != len(shape2):
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {len(shape1)} and {len(shape2)}")
    for i in range(len(shape1) - 1):
        if shape1[i] != shape2[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: got {shape1[i]} and "
                               f"{shape2[i]}")
    if shape1[-1] != weight._data.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {shape1[-1]} but expected "
                           f"{weight._data.shape[1]}")
    if shape2[-1] != weight._data.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {shape2[-1]} but expected "
                           f"{weight._data.shape[2]}")
    if bias is not None and bias._data.shape[-1] != weight._data.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias._data.shape[-1]} but "
                           f"expected {weight._data.shape[0]}")
    rows1 = fn.reshape(input1, (-1, shape1[-1]))
    rows2 = fn.reshape(input2, (-1, shape2[-1]))
    output = fn.reshape(einsum("bi,oij,bj->bo", rows1, weight, rows2), shape1[:-1] + (weight._data.shape[0],))
    return output if bias is None else fn.add(output, bias)


class Bilinear(Module):
    """y = x1^T A x2 + b; weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype))
        self.bias = Parameter(empty(out_features, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

