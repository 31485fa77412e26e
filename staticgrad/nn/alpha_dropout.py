"""alpha_dropout and feature_alpha_dropout (and AlphaDropout, FeatureAlphaDropout): SELU's dropout.
Dropped elements become SELU's negative saturation value and the rest are scaled and shifted so
that zero-mean unit-variance inputs keep mean 0 and variance 1. PyTorch's composition: with keep
noise k (one per element, or per sample and channel for the feature version) and
a = 1 / sqrt((alpha^2 p + 1)(1 - p)), the output is ``input * (k a) + ((k - 1) alpha a + alpha a p)``
(MulBackward0, then AddBackward0); the input itself when p == 0 or not training."""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._state import guard
from staticgrad.nn.dropout import Dropout, _check_probability
from staticgrad.ops import OPS

# SELU's alpha (its negative saturation is -alpha * scale; alpha dropout sets dropped elements there).
SELU_ALPHA = 1.7580993408473766


def _alpha_dropout(input, p: float, training: bool, inplace: bool, feature: bool):
    _check_probability(p)
    if p == 0 or not training or input._data.size == 0:
        return input
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not input.is_floating_point() and p != 1:  # the float shift cannot be added in place into it
        name = "Long" if input.dtype.tensor_type == "BoolTensor" else input.dtype.tensor_type[:-len("Tensor")]
        raise RuntimeError(f"result type Float can't be cast to the desired output type {name}")
    if p == 1:
        nothing = zeros((), dtype=input.dtype)
        return fn.mul_(input, nothing) if inplace else fn.mul(input, nothing)
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    noise = dispatch(OPS["alpha_dropout_noise"], (), {"shape": shape, "p": float(p), "dtype": input._data.dtype})
    a = 1.0 / math.sqrt((SELU_ALPHA * SELU_ALPHA * p + 1) * (1 - p))
    shift = fn.add(fn.mul(fn.add(noise, -1), SELU_ALPHA * a), SELU_ALPHA * a * p)
    scale = fn.mul(noise, a)
    if inplace:
        return fn.add_(fn.mul_(input, scale), shift)
    return fn.add(fn.mul(input, scale), shift)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Alpha dropout of each element (for SELU networks); identity unless training."""
    return _alpha_dropout(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Alpha dropout of whole channels (one draw per sample and channel of an (N, C, ...) input)."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


class AlphaDropout(Dropout):
    """Alpha dropout in training, the identity in eval."""

    def forward(self, input):
        training = guard(lambda: self.training, f"{type(self).__name__}.training")
        p = guard(lambda: self.p, f"{type(self).__name__}.p")
        return alpha_dropout(input, p, training, self.inplace)


class FeatureAlphaDropout(Dropout):
    """Alpha dropout of whole channels in training, the identity in eval."""

    def forward(self, input):
        training = guard(lambda: self.training, f"{type(self).__name__}.training")
        p = guard(lambda: self.p, f"{type(self).__name__}.p")
        return feature_alpha_dropout(input, p, training, self.inplace)
