"""Packing a padded batch of sequences (PyTorch's ``_pack_padded_sequence``, node
``PackPaddedSequenceBackward0``): the rows of each time step that still hold a sequence, step
after step, in one (sum of batch sizes, *) array; and its adjoint, which puts a packed gradient
back in the padded layout (zeros in the padding).

``batch_sizes`` (how many sequences are still running at each step, non-increasing) is a tuple
attribute: a plan is recorded for one set of lengths."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register


def _time_major(a, batch_first: bool):
    return np.swapaxes(a, 0, 1) if batch_first else a


def _pack_padded_sequence(input, out=None, batch_sizes=(), batch_first=False):
    """The rows ``input[t, :batch_sizes[t]]`` of every step t, stacked (time-major input unless batch_first).
    Lengths beyond the input's steps take what steps there are, as PyTorch's slices do: the result
    then has fewer rows than ``batch_sizes`` add up to (and its backward refuses, as PyTorch's does)."""
    steps = _time_major(input, batch_first)
    result = np.concatenate([steps[t:t + 1, :size].reshape((-1,) + steps.shape[2:])
                             for t, size in enumerate(batch_sizes)], 0)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _pack_padded_sequence_backward(grad, out=None, input_size=(), batch_sizes=(), batch_first=False):
    """The packed ``grad`` written back into a zero padded array of ``input_size``."""
    result = np.zeros(input_size, grad.dtype)
    steps = _time_major(result, batch_first)
    if len(batch_sizes) > steps.shape[0]:   # packed with lengths beyond the input's steps
        raise IndexError(f"select(): index {steps.shape[0]} out of range for tensor of size {list(steps.shape)} "
                         "at dimension 0")
    offset = 0
    for t, size in enumerate(batch_sizes):
        steps[t, :size] = grad[offset:offset + size]
        offset += size
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _pack_formula(F, g, s, at, need):
    return (F.pack_padded_sequence_backward(g, input_size=s["input_sizes"], batch_sizes=at["batch_sizes"],
                                            batch_first=at["batch_first"]),)


def _unpack_formula(F, g, s, at, need):
    return (F.pack_padded_sequence(g, batch_sizes=at["batch_sizes"], batch_first=at["batch_first"]),)


register(OpDef("pack_padded_sequence", _pack_padded_sequence, "other", "PackPaddedSequenceBackward0", _pack_formula,
               (Save("input_sizes", "shape:0", freed=False), Save("batch_first", "attr:batch_first", freed=False)),
               "same"))
register(OpDef("pack_padded_sequence_backward", _pack_padded_sequence_backward, "other",
               "PackPaddedSequenceBackwardBackward0", _unpack_formula, (), "same"))
