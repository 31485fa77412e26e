"""An op's temporaries carved out of the working memory a replay hands it (``scratch=``, a uint8
array from the arena, live during the step only), or allocated when it is called without one.

The same list of temporaries sizes the scratch (``scratch_bytes``) and fills it (``Scratch.take``),
so a planner's size and an op's use cannot drift apart."""

from __future__ import annotations

import math

import numpy as np

ALIGNMENT = 64   # each temporary starts on a cache line, as the arena's buffers do


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def scratch_bytes(temporaries) -> int:
    """Bytes for ``temporaries``, a list of (shape, dtype), each starting aligned."""
    return sum(_aligned(math.prod(shape) * np.dtype(dtype).itemsize) for shape, dtype in temporaries)


class Scratch:
    """Hands out an op's temporaries in order: views of ``memory`` if given, new arrays otherwise."""

    __slots__ = ("_at", "_memory")

    def __init__(self, memory):
        self._memory = memory
        self._at = 0

    def take(self, shape: tuple, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        if self._memory is None:
            return np.empty(shape, dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        start = self._at
        if start + nbytes > self._memory.size:
            raise ValueError(f"scratch of {self._memory.size} bytes is too small: a temporary of shape {shape} "
                             f"({dtype}) needs bytes [{start}, {start + nbytes})")
        self._at = start + _aligned(nbytes)
        return self._memory[start:start + nbytes].view(dtype).reshape(shape)
