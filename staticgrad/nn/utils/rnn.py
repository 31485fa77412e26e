"""torch.nn.utils.rnn: pad_sequence stacks sequences of different lengths into one padded tensor.
Packed sequences (pack_padded_sequence and friends) are not built: the recurrent layers here take
padded batches, so those names raise an error that says what to do instead."""

from __future__ import annotations

from staticgrad._eager.creation import full


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Sequences (L_i, *) padded with ``padding_value`` to the longest and stacked: (L, B, *), or
    (B, L, *) with batch_first; padded on the right, or on the left with padding_side="left"."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
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


def _not_built(name: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"staticgrad has no packed sequences ({name}): pass the padded batch (see "
                                  "pad_sequence) to the recurrent layer and mask the padded steps in the loss")
    refuse.__name__ = name
    return refuse


pack_padded_sequence = _not_built("pack_padded_sequence")
pad_packed_sequence = _not_built("pad_packed_sequence")
pack_sequence = _not_built("pack_sequence")
