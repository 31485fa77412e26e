"""ctc_loss and CTCLoss: PyTorch's argument handling and reductions in front of the ctc_loss op
(staticgrad.ops.ctc)."""

from __future__ import annotations

import math

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import tensor, zeros_like
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.math_functions import clamp_min
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.reduction import _Loss
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _lengths(value, like) -> Tensor:
    """Sequence lengths as an int64 tensor (PyTorch takes tensors or lists / tuples of ints)."""
    if isinstance(value, Tensor):
        return value if value._data.dtype == np.int64 else fn.to_dtype(value, _dtypes.int64)
    return tensor(list(value) if isinstance(value, (list, tuple)) else [value], dtype=_dtypes.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The CTC loss of (T, N, C) (or unbatched (T, C)) log-probabilities against each target
    (CtcLossBackward0); mean divides each loss by its target length first, as PyTorch's."""
    fn.require_tensor(log_probs, "ctc_loss", "log_probs")
    fn.require_tensor(targets, "ctc_loss", "targets", 2)
    batched = log_probs._data.ndim == 3
    if log_probs._data.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    if not batched:
        log_probs = fn.unsqueeze(log_probs, 1)
        if targets._data.ndim == 1 and isinstance(target_lengths, Tensor) and target_lengths._data.ndim == 0:
            targets = fn.unsqueeze(targets, 0)
    inputs = _lengths(input_lengths, log_probs).reshape(-1)
    lengths = _lengths(target_lengths, log_probs).reshape(-1)
    if not 0 <= blank < log_probs._data.shape[2]:
        raise RuntimeError("blank must be in label range")
    if inputs._data.shape[0] != log_probs._data.shape[1]:
        raise RuntimeError("input_lengths must be of size batch_size")
    if lengths._data.shape[0] != log_probs._data.shape[1]:
        raise RuntimeError("target_lengths must be of size batch_size")
    loss = dispatch(OPS["ctc_loss"], (log_probs, targets, inputs, lengths),
                    {"blank": int(blank), "zero_infinity": bool(zero_infinity)})
    if zero_infinity:
        loss = fn.where(fn.eq(loss, math.inf), zeros_like(loss), loss)
    if reduction == "mean":
        return fn.mean(fn.div(loss, clamp_min(fn.to_dtype(lengths, loss.dtype), 1)))
    if reduction == "sum":
        return fn.sum(loss)
    return loss if batched else fn.squeeze(loss, 0)


class CTCLoss(_Loss):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)
