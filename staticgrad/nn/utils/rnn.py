"""torch.nn.utils.rnn: batches of sequences of different lengths. ``pad_sequence`` stacks them
padded; a ``PackedSequence`` keeps only the real steps (``pack_padded_sequence``, ``pack_sequence``)
and the recurrent layers (nn.RNN, nn.GRU, nn.LSTM) run on it directly, each sequence stopping at
its own last step; ``pad_packed_sequence``, ``unpad_sequence`` and ``unpack_sequence`` go back.

Packing is one op (``PackPaddedSequenceBackward0``); unpacking is built as PyTorch builds it (a
padded tensor filled step by step: CopySlices, then a transpose and an index_select as needed)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from staticgrad._eager.creation import full, tensor
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.tensor import Tensor, _read_guard
from staticgrad._state import Tracing
from staticgrad.ops import OPS, dtypes

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence", "unpack_sequence", "unpad_sequence"]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """The steps of a batch of sequences packed together: ``data`` (sum of batch_sizes, *),
    ``batch_sizes`` (int64, sequences still running at each step), and the permutation that sorted
    the batch by decreasing length (``sorted_indices``) and its inverse (``unsorted_indices``)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), sorted_indices=...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        """The same packing with ``data.to(*args, **kwargs)`` (the index tensors stay as they are)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self, *args, **kwargs):
        return self

    def pin_memory(self):
        return self

    def double(self):
        return self.to(dtype=_dtype("float64"))

    def float(self):
        return self.to(dtype=_dtype("float32"))

    def half(self):
        return self.to(dtype=_dtype("float16"))

    def long(self):
        return self.to(dtype=_dtype("int64"))

    def int(self):
        return self.to(dtype=_dtype("int32"))

    def short(self):
        return self.to(dtype=_dtype("int16"))

    def char(self):
        return self.to(dtype=_dtype("int8"))

    def byte(self):
        return self.to(dtype=_dtype("uint8"))

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _dtype(name: str):
    return getattr(dtypes, name)


def _int64(values) -> Tensor:
    """An int64 tensor of ``values``, made as ``staticgrad.tensor(list)`` (a constant to a trace)."""
    return tensor(np.asarray(values, dtype=np.int64).tolist(), dtype=_dtype("int64"))


def _values(t: Tensor, what: str) -> np.ndarray:
    """The numbers of an index tensor, read into Python (which a compiled function may do only for
    tensors it made itself as constants: the plan then holds these numbers)."""
    _read_guard(t, what)
    return t._data


def invert_permutation(permutation):
    """The inverse of ``permutation`` (None stays None)."""
    if permutation is None:
        return None
    order = _values(permutation, "invert_permutation")
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.shape[0])
    return _int64(inverse)


def _check_lengths(lengths: np.ndarray, batch_size: int) -> None:
    """PyTorch's checks of ``_pack_padded_sequence``, in its order. A length beyond the input's steps
    passes, as in PyTorch: the packing takes the steps there are (see ops/packed_sequence.py)."""
    if lengths.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.ndim}D cpu Long "
                           "tensor")
    if lengths.shape[0] != batch_size:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.shape[0]} "
                           f"(batch_size={batch_size})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if np.any(lengths[1:] > lengths[:-1]):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                           "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True):
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of ``lengths``;
    with enforce_sorted=False the batch is sorted by decreasing length first (and unsorted on unpacking)."""
    if not isinstance(lengths, Tensor):
        if Tracing.tracer is not None:
            warnings.warn("pack_padded_sequence has been called with a Python list of sequence lengths. The tracer "
                          "cannot track the data flow of Python values, and it will treat them as constants, likely "
                          "rendering the trace incorrect for any other combination of lengths.", stacklevel=2)
        lengths = np.asarray(lengths, dtype=np.int64)
    else:
        lengths = _values(lengths, "pack_padded_sequence's lengths").astype(np.int64)
    batch_dim = 0 if batch_first else 1
    sorted_indices = None
    if not enforce_sorted:
        order = np.argsort(-lengths, kind="stable") if lengths.ndim == 1 else None
        if order is not None:
            lengths = lengths[order]
            sorted_indices = _int64(order)
            input = input.index_select(batch_dim, sorted_indices)
    _check_lengths(lengths, input.shape[batch_dim] if input.dim() > batch_dim else 0)
    sizes = tuple(int(n) for n in (lengths[None, :] > np.arange(int(lengths[0]))[:, None]).sum(1))
    data = dispatch(OPS["pack_padded_sequence"], (input,), {"batch_sizes": sizes, "batch_first": bool(batch_first)})
    return PackedSequence(data, _int64(sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0, total_length=None):
    """A PackedSequence back to a padded batch (T, B, *) (or (B, T, *)) and the lengths (int64), in the
    batch's original order; ``total_length`` pads to that many steps."""
    data = sequence.data
    batch_sizes = [int(n) for n in _values(sequence.batch_sizes, "pad_packed_sequence's batch_sizes")]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    _check_packed_rows(data, batch_sizes)
    batch = batch_sizes[0]
    output = full((steps, batch) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
    offset = 0
    for t, size in enumerate(batch_sizes):  # each step written into its rows (PyTorch's CopySlices)
        output[t, :size] = data[offset:offset + size]
        offset += size
    lengths = (np.asarray(batch_sizes)[None, :] > np.arange(batch)[:, None]).sum(1)
    if batch_first:
        output = output.transpose(0, 1)
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        output = output.index_select(0 if batch_first else 1, unsorted)
        lengths = lengths[_values(unsorted, "pad_packed_sequence's unsorted_indices")]
    return output, _int64(lengths)


def _check_packed_rows(data, batch_sizes: list) -> None:
    """PyTorch's error where a PackedSequence's data holds fewer rows than its batch sizes add up to
    (lengths beyond a padded input's steps, or a hand-made one): it reads each run of equal batch
    sizes as a (steps, batch, *) view of the next rows."""
    rows, row_shape = data.shape[0], list(data.shape[1:])
    row_size = int(np.prod(row_shape, dtype=np.int64))
    offset, start = 0, 0
    for i in range(1, len(batch_sizes) + 1):
        size = batch_sizes[i - 1]
        if i < len(batch_sizes) and batch_sizes[i] == size:
            continue
        wanted = size * (i - start)
        available = max(0, min(rows, offset + wanted) - offset)
        if available != wanted:
            raise RuntimeError(f"shape '{[i - start, size] + row_shape}' is invalid for input of size "
                               f"{available * row_size}")
        offset, start = offset + wanted, i


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Sequences (L_i, *) padded with ``padding_value`` to the longest and stacked: (L, B, *), or
    (B, L, *) with batch_first; padded on the right, or on the left with padding_side="left"."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    first = sequences[0]
    shape = (len(sequences), longest) if batch_first else (longest, len(sequences))
    out = full(shape + tuple(first.shape[1:]), padding_value, dtype=first.dtype)
    for i, s in enumerate(sequences):  # each written into its slot (PyTorch's CopySlices)
        length = s.shape[0]
        steps = slice(longest - length, longest) if padding_side == "left" else slice(0, length)
        out[(i, steps) if batch_first else (steps, i)] = s
    return out


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False):
    """The padded batch split back into its sequences, each cut to its length."""
    if not batch_first:
        if padded_sequences.requires_grad and padded_sequences.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        # PyTorch transposes the caller's tensor in place here; staticgrad leaves it as it was
        padded_sequences = padded_sequences.transpose(0, 1)
    index = np.arange(padded_sequences.shape[1])
    return [seq[tensor((index < int(length)).tolist())]
            for seq, length in zip(padded_sequences, _lengths_list(lengths), strict=True)]


def _lengths_list(lengths) -> list:
    return [int(n) for n in (_values(lengths, "unpad_sequence's lengths") if isinstance(lengths, Tensor) else lengths)]


def pack_sequence(sequences, enforce_sorted: bool = True):
    """A list of sequences (L_i, *) packed (sorted by decreasing length first unless enforce_sorted)."""
    lengths = _int64([s.shape[0] for s in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """A PackedSequence back to the list of its sequences, in the batch's original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
