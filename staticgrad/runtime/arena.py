"""One preallocated block of memory, handed out as typed views at planned offsets."""

from __future__ import annotations

import numpy as np


class Arena:
    def __init__(self, nbytes: int, alignment: int = 64):
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        start = (-raw.ctypes.data) % alignment
        self.block = raw[start:start + nbytes]
        self.nbytes = nbytes

    def working_memory(self, program) -> dict:
        """The uint8 views its steps' working memory (Step.scratch) lives in, keyed as a replay's
        build reads them: ("scratch", offset, bytes)."""
        return {("scratch", offset, size): self.view(offset, (size,), np.uint8)
                for offset, size in dict.fromkeys(step.scratch for step in program.steps if step.scratch)}

    def view(self, offset: int, shape: tuple, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        end = offset + count * dtype.itemsize
        if end > self.nbytes:
            raise ValueError(f"buffer [{offset}, {end}) lies outside the {self.nbytes}-byte arena")
        return self.block[offset:end].view(dtype).reshape(shape)
