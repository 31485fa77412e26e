"""A Numba loop that finds the k-th smallest value of each row the way PyTorch's CPU kthvalue does:
a quickselect with a median-of-three pivot and Hoare's partition (Sedgewick's Program 2), NaN above
every number, moving each row's values and their positions together. Among equal values it
therefore ends on the very position PyTorch reports; a stable sort would pick another one.

Loaded on first use, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

import math

from staticgrad.ops.numba_cache import njit_cached


def _jit(function, inner=False):
    """Compiled on first call, without a C wrapper (called from Python and from each other only)."""
    return njit_cached(function, nogil=True, error_model="numpy", no_cfunc_wrapper=True, no_cpython_wrapper=inner)


@_jit
def _above(x, y):
    """x sorts after y: greater, or NaN where y is a number."""
    return (math.isnan(x) and not math.isnan(y)) or x > y


@_jit
def kth_smallest(rows, k, values, positions):
    """For each row of ``rows`` (modified in place: it is the caller's copy), the 0-based k-th smallest
    value into ``values`` and its position in the row into ``positions``."""
    n = rows.shape[1]
    order = [0] * n
    for r in range(rows.shape[0]):
        row = rows[r]
        for m in range(n):
            order[m] = m
        left, right = 0, n - 1
        while right > left:
            if right == left + 1:
                if _above(row[left], row[right]):
                    row[left], row[right] = row[right], row[left]
                    order[left], order[right] = order[right], order[left]
                break
            middle = (left + right) >> 1
            row[middle], row[left + 1] = row[left + 1], row[middle]
            order[middle], order[left + 1] = order[left + 1], order[middle]
            if _above(row[left + 1], row[right]):
                row[left + 1], row[right] = row[right], row[left + 1]
                order[left + 1], order[right] = order[right], order[left + 1]
            if _above(row[left], row[right]):
                row[left], row[right] = row[right], row[left]
                order[left], order[right] = order[right], order[left]
            if _above(row[left + 1], row[left]):
                row[left + 1], row[left] = row[left], row[left + 1]
                order[left + 1], order[left] = order[left], order[left + 1]
            i, j = left + 1, right
            pivot = row[left]
            while True:
                i += 1
                while _above(pivot, row[i]):
                    i += 1
                j -= 1
                while _above(row[j], pivot):
                    j -= 1
                if j < i:
                    break
                row[i], row[j] = row[j], row[i]
                order[i], order[j] = order[j], order[i]
            row[left], row[j] = row[j], row[left]
            order[left], order[j] = order[j], order[left]
            if j <= k:
                left = i
            if j >= k:
                right = j - 1
        values[r] = row[k]
        positions[r] = order[k]
