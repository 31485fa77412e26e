"""dropout2d and Dropout2d: zero whole channels (one draw per sample and channel), scale the rest by 1/(1-p)."""

from __future__ import annotations

import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._state import guard
from staticgrad.nn.dropout import Dropout, _check_probability
from staticgrad.ops import OPS


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """``input * mask`` (MulBackward0) with one mask value per (sample, channel) of a 3-D or 4-D input."""
    _check_probability(p)
    ndim = input.dim()
    if ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", UserWarning, stacklevel=2)
    if ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", UserWarning, stacklevel=2)
    if not training or p == 0 or input._data.size == 0:
        return input
    if ndim < 2:
        raise RuntimeError(f"dropout2d: a {ndim}-D input has no channel dimension to drop")
    shape = tuple(input.shape[:2]) + (1,) * (ndim - 2)
    mask = dispatch(OPS["dropout_mask"], (), {"shape": shape, "p": float(p), "dtype": input._data.dtype})
    return fn.mul_(input, mask) if inplace else fn.mul(input, mask)


class Dropout2d(Dropout):
    def forward(self, input):
        training = guard(lambda: self.training, "Dropout2d.training")
        p = guard(lambda: self.p, "Dropout2d.p")
        return dropout2d(input, p, training, self.inplace)
