"""F.rms_norm and nn.RMSNorm, built as PyTorch builds them (its composite CPU path): x times
rsqrt(mean(x^2) + eps) over the last dims, computed in float32 for float16 inputs, then times the
weight (nodes MulBackward0, RsqrtBackward0, AddBackward0, MeanBackward1, PowBackward0). eps=None
means the dtype's machine epsilon."""

from __future__ import annotations

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import ones
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import dtypes as _dtypes


def rms_norm(input, normalized_shape, weight=None, eps=None):
    fn.require_tensor(input, "rms_norm")
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(int(d) for d in normalized_shape)
    if not normalized_shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = []")
    if input.dim() < len(normalized_shape):
        raise ValueError(f"Input tensor must have at least {len(normalized_shape)} dimensions, but got "
                         f"{input.dim()}")
    shape = tuple(input.shape)
    if shape[len(shape) - len(normalized_shape):] != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*{', '.join(str(d) for d in normalized_shape)}], but got input of size"
                           f"{list(shape)}")
    if weight is not None and tuple(weight.shape) != normalized_shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(normalized_shape)}")
    compute = input if input.dtype != _dtypes.float16 else fn.to_dtype(input, _dtypes.float32)
    if eps is None:
        eps = float(np.finfo(compute._data.dtype).eps)
    dims = tuple(range(input.dim() - len(normalized_shape), input.dim()))
    mean_square = fn.mean(fn.pow(compute, 2), dims, keepdim=True)
    scale = fn.rsqrt(fn.add_(mean_square, float(eps)))
    result = fn.to_dtype(fn.mul(compute, scale), input.dtype)
    return fn.mul(result, weight) if weight is not None else result


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            self.weight.data.fill_(1.0)

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
