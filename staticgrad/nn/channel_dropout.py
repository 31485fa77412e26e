"""Channel dropout: dropout1d/2d/3d and Dropout1d/2d/3d zero whole channels (one draw per sample and
channel), scale the rest by 1/(1-p)."""

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
    return _drop_channels(input, p, inplace, batched=True)


def _drop_channels(input, p: float, inplace: bool, batched: bool):
    """``input * mask`` with one mask value per channel (dim 1 when batched, else dim 0)."""
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)
    mask = dispatch(OPS["dropout_mask"], (), {"shape": shape, "p": float(p), "dtype": input._data.dtype})
    return fn.mul_(input, mask) if inplace else fn.mul(input, mask)


def _feature_dropout(input, p: float, training: bool, inplace: bool, batched: bool):
    """PyTorch's way for dropout1d/3d: an unbatched input gets a batch dim (unsqueeze), is dropped
    by channel, and loses it again (squeeze), so even an eval call returns a new view."""
    if not batched:
        input = fn.unsqueeze(input, 0)
    result = input
    if training and p != 0 and input._data.size:
        if input.dim() < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        result = _drop_channels(input, p, inplace, batched=True)
    return fn.squeeze(result, 0) if not batched else result


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Channel dropout of a (C, L) or (N, C, L) input (MulBackward0)."""
    _check_probability(p)
    ndim = input.dim()
    if ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {ndim}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, batched=ndim == 3)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Channel dropout of a (C, D, H, W) or (N, C, D, H, W) input (MulBackward0)."""
    _check_probability(p)
    ndim = input.dim()
    if ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {ndim}-D input to dropout3d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, inplace, batched=ndim == 5)


class Dropout2d(Dropout):
    def forward(self, input):
        training = guard(lambda: self.training, "Dropout2d.training")
        p = guard(lambda: self.p, "Dropout2d.p")
        return dropout2d(input, p, training, self.inplace)


class Dropout1d(Dropout):
    def forward(self, input):
        training = guard(lambda: self.training, "Dropout1d.training")
        p = guard(lambda: self.p, "Dropout1d.p")
        return dropout1d(input, p, training, self.inplace)


class Dropout3d(Dropout):
    def forward(self, input):
        training = guard(lambda: self.training, "Dropout3d.training")
        p = guard(lambda: self.p, "Dropout3d.p")
        return dropout3d(input, p, training, self.inplace)
