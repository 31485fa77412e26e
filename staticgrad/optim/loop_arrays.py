"""Whether an untraced optimizer step may run as one Numba pass over its arrays (adam_loop,
sgd_loop) instead of the ops: the arrays are of the types those loops are compiled for."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.elementwise import may_share_memory_fast

LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def fit_one_loop(*arrays) -> bool:
    """One float32 or float64 dtype, one shape, C-contiguous, aligned and writable, and no two of
    them sharing memory (the loop reads and writes element by element)."""
    first = arrays[0]
    dtype, shape = first.dtype, first.shape
    if dtype not in LOOP_DTYPES:
        return False
    for k, array in enumerate(arrays):
        flags = array.flags
        if (array.dtype != dtype or array.shape != shape or not flags.c_contiguous or not flags.aligned
                or not flags.writeable):
            return False
        if any(may_share_memory_fast(array, other) for other in arrays[:k]):
            return False
    return True
