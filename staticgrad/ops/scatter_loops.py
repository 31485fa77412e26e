"""Numba loops that move rows of a matrix by index: an embedding's lookup (each token's word row,
with the range check in the same pass), and its gradient (each token's row of the incoming gradient
added into its word's row). ``np.add.at`` does the same additions in the same
order (index by index, each element in turn) but costs about fifty times as long on an LM's batch.
No fastmath: each addition is the IEEE one ``np.add.at`` performs, so the results are its bits.

Loaded on first use, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

from staticgrad.ops.numba_cache import njit_cached


def _jit(function):
    """Compiled on first call, without a C wrapper (called from Python only; it costs compile time)."""
    return njit_cached(function, nogil=True, error_model="numpy", no_cfunc_wrapper=True)


@_jit
def add_rows(result, indices, rows):
    """``result[indices[i]] += rows[i]`` for each i in order, element by element."""
    width = rows.shape[1]
    for i in range(indices.shape[0]):
        target = indices[i]
        for j in range(width):
            result[target, j] += rows[i, j]


@_jit
def gather_rows(weight, indices, out):
    """``out[i] = weight[indices[i]]`` for each i; returns -1, or the first i whose index is not a
    row of weight (out is then partly written)."""
    rows, width = weight.shape[0], weight.shape[1]
    for i in range(indices.shape[0]):
        row = indices[i]
        if row < 0 or row >= rows:
            return i
        for j in range(width):
            out[i, j] = weight[row, j]
    return -1
