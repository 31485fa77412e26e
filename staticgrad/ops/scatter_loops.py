"""Numba loops that add rows into a matrix by index: an embedding's gradient (each token's row of
the incoming gradient added into its word's row). ``np.add.at`` does the same additions in the same
order (index by index, each element in turn) but costs about fifty times as long on an LM's batch.
No fastmath: each addition is the IEEE one ``np.add.at`` performs, so the results are its bits.

Loaded on first use, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

import numba


def _jit(function):
    """Compiled on first call, without a C wrapper (called from Python only; it costs compile time)."""
    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy", no_cfunc_wrapper=True)(function)
    except RuntimeError:  # "no locator available": no writable cache directory
        return numba.njit(nogil=True, error_model="numpy", no_cfunc_wrapper=True)(function)


@_jit
def add_rows(result, indices, rows):
    """``result[indices[i]] += rows[i]`` for each i in order, element by element."""
    width = rows.shape[1]
    for i in range(indices.shape[0]):
        target = indices[i]
        for j in range(width):
            result[target, j] += rows[i, j]
