"""Random refills of an existing tensor: ``Tensor.uniform_`` and ``Tensor.normal_``. The input gives
only the shape and dtype (its values are overwritten), so the gradient to it is zero, under
PyTorch's node names UniformBackward0 and NormalBackward0. Kind "random": re-drawn on every replay."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.factory import generator
from staticgrad.ops.registry import OpDef, register


def _into_like(a, result, out):
    if out is None:
        return result.astype(a.dtype, copy=False)
    np.copyto(out, result, casting="unsafe")
    return out


def _uniform_fill(a, out=None, low=0.0, high=1.0, source=None):
    draw = generator(source).random(a.shape, dtype=np.float64)
    return _into_like(a, low + (high - low) * draw, out)


def _normal_fill(a, out=None, mean=0.0, std=1.0, source=None):
    return _into_like(a, mean + std * generator(source).standard_normal(a.shape), out)


def _zero_grad(F, g, s, at, need):
    return (F.zeros_like(g),)


register(OpDef("uniform_fill", _uniform_fill, "random", "UniformBackward0", _zero_grad, (), "same"))
register(OpDef("normal_fill", _normal_fill, "random", "NormalBackward0", _zero_grad, (), "same"))
