"""The keep mask of alpha dropout: 1 with probability 1 - p, else 0 (PyTorch's ``bernoulli_(1 - p)``
noise), drawn as ``dropout_mask`` draws (float32 uniforms >= p). Kind "random": re-drawn on every replay."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.factory import generator
from staticgrad.ops.registry import OpDef, register


def _alpha_dropout_noise(out=None, shape=(), p=0.5, dtype=None):
    keep = generator().random(shape, dtype=np.float32) >= p
    if out is None:
        return keep.astype(dtype)
    np.copyto(out, keep, casting="unsafe")
    return out


register(OpDef("alpha_dropout_noise", _alpha_dropout_noise, "random", dtype_rule="attr"))
