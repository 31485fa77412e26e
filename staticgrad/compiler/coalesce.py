"""Coalescing a fused kernel's loop dims: adjacent iteration dims that every array indexes alike
become one dim, its arrays passed reshaped (a view: each such array is C-contiguous).

Why: the same elementwise pattern then has the same kernel at every rank. A bias added to a
(batch, steps, width) activation and to a (batch, width) one, an optimizer's update of a matrix
and of a vector, are one kernel each, which Numba compiles once (0.2-0.4 s per kernel, cold); and
a loop nest of fewer levels compiles faster. The loop runs the same elements in the same order
(row-major over the merged dims is row-major over the original ones), so every element, and every
sum's order of additions, is what the original loop computes: the same bits.

Dims d and d+1 merge when, for every array of the loop, either both lie in its leading broadcast
part (it is of lower rank), or it indexes them as d, d+1 (then it must be C-contiguous), or both
are size-1 broadcast dims of it. This reads the kernel's patterns only, never a dim's size, so one
kernel's coalesced form serves every batch size.
"""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import FusedKernel, FusedLoop


def coalesce(kernel: FusedKernel, contiguous) -> tuple | None:
    """(the kernel with merged dims, the groups of original kernel dims per new kernel dim, and per
    argument key ("in", k) / ("out", k) the groups of its own dims per new array dim), or None when
    no dims merge. ``contiguous(key)``: whether that argument's array is known to be C-contiguous.
    Each loop of a kernel merges on its own; an array two loops read (or one stores and the next
    reads) must be reshaped alike by both, else the kernel stays as it is."""
    loops, dim_groups, array_groups = [], [], {}
    merged = False
    for loop in kernel.loops:
        new_loop, groups, arrays = _coalesce_loop(loop, contiguous)
        merged = merged or new_loop is not loop
        first = len(dim_groups)
        loops.append(replace(new_loop, dims=tuple(range(first, first + new_loop.ndim))))
        dim_groups += [[loop.dims[d] for d in g] for g in groups]
        for key, g in arrays.items():
            if array_groups.setdefault(key, g) != g:
                return None
    if not merged:
        return None
    return replace(kernel, loops=tuple(loops), n_dims=len(dim_groups)), dim_groups, array_groups


def _coalesce_loop(loop: FusedLoop, contiguous) -> tuple:
    """(the loop with merged dims, or the loop itself; the groups of its dims per new dim; per
    argument key, the groups of the array's dims per new array dim)."""
    patterns = _patterns(loop)
    groups = [[d] for d in range(loop.ndim)]
    array_groups = {key: [[j] for j in range(len(p))] for key, p in patterns.items()}
    d = loop.ndim - 2
    while d >= 0:
        if all(_mergeable(patterns[key], len(groups), d, key, contiguous) for key in patterns):
            for key, p in patterns.items():
                patterns[key], array_groups[key] = _merge(p, array_groups[key], len(groups), d)
            groups[d:d + 2] = [groups[d] + groups[d + 1]]
        d -= 1
    if len(groups) == loop.ndim:
        return loop, groups, array_groups
    loads = tuple((source, patterns[source]) for source, _ in loop.loads)
    stores = tuple((t, out, patterns[("out", out)]) for t, out, _ in loop.stores)
    sums = tuple((t, out, patterns[("out", out)]) for t, out, _ in loop.sums)
    return replace(loop, ndim=len(groups), loads=loads, stores=stores, sums=sums), groups, array_groups


def _patterns(loop: FusedLoop) -> dict:
    """Each array's pattern by its argument key (an array read or written twice has one pattern)."""
    patterns = dict(loop.loads)
    for _, out, pattern in loop.stores + loop.sums:
        patterns[("out", out)] = pattern
    return patterns


def _mergeable(pattern: tuple, ndim: int, d: int, key: tuple, contiguous) -> bool:
    offset = ndim - len(pattern)
    j = d - offset
    if j + 1 <= 0:
        return j + 1 < 0   # both in its leading broadcast part; only d+1 in it: one dim broadcast
    if j < 0:
        return False
    pair = pattern[j], pattern[j + 1]
    if pair == (-1, -1):
        return True
    if pair == (d, d + 1):
        return contiguous(key)
    return False


def _merge(pattern: tuple, groups: list, ndim: int, d: int) -> tuple:
    """The pattern and dim groups of an array once iteration dims d and d+1 are one (dims after
    them numbered one lower)."""
    offset = ndim - len(pattern)
    j = d - offset

    def renumbered(p):
        return tuple(x - 1 if x > d else x for x in p)

    if j + 1 <= 0:
        return renumbered(pattern), groups
    merged = pattern[:j] + (pattern[j],) + pattern[j + 2:]
    return renumbered(merged), groups[:j] + [groups[j] + groups[j + 1]] + groups[j + 2:]


def reshaped(shape: tuple, groups: list) -> tuple:
    """An array's shape once its dims are merged by ``groups``."""
    result = []
    for g in groups:
        n = 1
        for j in g:
            n *= shape[j]
        result.append(n)
    return tuple(result)
