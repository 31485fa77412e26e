"""Buffer planning: liveness over the schedule -> lifetimes -> offsets in one arena -> Program.

A buffer lives from the op that defines it to the last op that reads it or any view of it
(both inclusive), so activations saved for backward live exactly until their last backward
reader. Buffers that leave the call (results) are allocated fresh per call instead; inputs,
captured state and constants are bound, not planned.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

from staticgrad.compiler.analysis import alias_roots, reads_in_place
from staticgrad.compiler.ir import Graph, ScalarSlot
from staticgrad.runtime.program import KERNEL, MULTI, OUT, VIEW, BufferSpec, Program, Step

ALIGNMENT = 64
# Greedy packing compares each buffer with every placed buffer it overlaps (quadratic when many
# overlap, as a deep network's saved activations do); up to this many buffers the schedule sweep
# (n log n) and two greedy orders pack, and the smallest arena is kept, above it the sweep alone.
# No one packing is always the tightest: on the bench MLPs all reach the lower bound; on the bench
# LM greedy-by-size is 1.1% above it and the sweep on it; on the bench CNN, whose convolutions'
# working memory lives one step each, only largest-area-first (bytes times steps) reaches it. On a
# 700-layer MLP all give the same arena, the sweep 80x faster (2 ms against 160 ms).
GREEDY_LIMIT = 500
GREEDY_ORDERS = (
    lambda l: (-l.nbytes, l.first, l.value),                          # largest first
    lambda l: (-l.nbytes * (l.last - l.first + 1), l.first, l.value),   # largest area first
)


@dataclass(frozen=True, slots=True)
class Lifetime:
    """[first, last]: op indices, both inclusive. ``last == len(ops)`` means "until the call ends"."""

    value: int
    first: int
    last: int
    nbytes: int

    def overlaps(self, other: "Lifetime") -> bool:
        return self.first <= other.last and other.first <= self.last


def direct_writebacks(graph: Graph, roots: dict | None = None) -> dict:
    """Writebacks whose source can be computed straight into the target's storage: {source: target}.

    Safe when nothing after the producing op reads the target's old value (or a view of it), the
    source is not returned, and the producing op reads the target only where it writes it: a
    fused loop loading and storing at the same index, or a single NumPy ufunc call."""
    if roots is None:
        roots = alias_roots(graph)
    producer = {v: i for i, op in enumerate(graph.ops) for v in op.outputs}
    results = set(graph.results)
    last_read = {}  # storage owner -> index of the last op reading it (or a view of it)
    for i, op in enumerate(graph.ops):
        for v in op.inputs:
            last_read[roots.get(v, v)] = i
    direct = {}
    viewed_inputs = {}  # producing op -> storage owners it reads through a view (computed once per op)
    for source, target in graph.writebacks:
        p = producer.get(source)
        if p is None or source in results or roots.get(source, source) != source:
            continue
        op = graph.ops[p]
        if op.opdef.is_view or op.returns_own_arrays:
            continue
        later_reads = last_read.get(target, -1) > p
        through_views = viewed_inputs.get(p)
        if through_views is None:
            through_views = viewed_inputs[p] = {roots[v] for v in op.inputs if v in roots and roots[v] != v}
        views_read = target in through_views
        if later_reads or views_read or graph.values[target].shape != graph.values[source].shape:
            continue
        if target in op.inputs and not reads_in_place(op, target, source):
            continue
        direct[source] = target
    return direct


def lifetimes(graph: Graph, bound: dict | None = None, roots: dict | None = None) -> dict:
    """Lifetime of every buffer an op output owns (views and in-place outputs extend their
    owner's lifetime). Values in ``bound`` live in an input's or captured value's storage."""
    roots = dict(roots) if roots is not None else alias_roots(graph)
    if bound:
        roots.update(bound)
    external = set(graph.inputs) | set(graph.captured) | set(graph.constants) | set(bound or ())
    end = len(graph.ops)
    first, last = {}, {}
    multi = set()
    for i, op in enumerate(graph.ops):
        if op.returns_own_arrays:
            multi.update(op.outputs)
        for v in op.outputs:
            r = roots.get(v, v)
            first.setdefault(r, i)
            last[r] = max(last.get(r, i), i)
        for v in op.inputs:
            r = roots.get(v, v)
            if r in first:
                last[r] = max(last[r], i)
    for v in graph.live_roots():
        r = roots.get(v, v)
        if r in first:
            last[r] = end
    for v in bound or ():
        first.pop(v, None)
    out = {}
    for r, f in first.items():
        if r in external or r in multi:
            continue
        out[r] = Lifetime(r, f, last[r], graph.values[r].nbytes)
    return out


def _aligned(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


def pack(spans: list, alignment: int = ALIGNMENT, order=GREEDY_ORDERS[0]) -> tuple:
    """Offsets for lifetimes, greedy in ``order`` (a sort key; by default largest first), each in
    the best-fitting gap among the already placed buffers it overlaps in time. Returns ({value:
    offset}, arena bytes)."""
    placed = []  # (lifetime, offset, end)
    offsets = {}
    total = 0
    for lt in sorted(spans, key=order):
        size = _aligned(max(lt.nbytes, 1), alignment)
        busy = sorted((off, e) for other, off, e in placed if other.overlaps(lt))
        best_gap, best_offset, cursor = None, None, 0
        for off, e in busy:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best_gap, best_offset = gap, cursor
            cursor = max(cursor, e)
        offset = best_offset if best_offset is not None else cursor
        placed.append((lt, offset, offset + size))
        offsets[lt.value] = offset
        total = max(total, offset + size)
    return offsets, total


def pack_sweep(spans: list, alignment: int = ALIGNMENT) -> tuple:
    """Offsets by walking the schedule: free what has died, then put each new buffer in the
    smallest free gap that fits (coalescing neighbours on free). O(n log n) bookkeeping."""
    by_offset, by_size = [], []  # free gaps as (offset, size) and (size, offset), both sorted
    ends = []
    offsets, top = {}, 0

    def add_gap(offset, size):
        i = bisect.bisect_left(by_offset, (offset, 0))
        if i > 0 and by_offset[i - 1][0] + by_offset[i - 1][1] == offset:
            prev = by_offset.pop(i - 1)
            by_size.remove((prev[1], prev[0]))
            offset, size, i = prev[0], prev[1] + size, i - 1
        if i < len(by_offset) and offset + size == by_offset[i][0]:
            nxt = by_offset.pop(i)
            by_size.remove((nxt[1], nxt[0]))
            size += nxt[1]
        bisect.insort(by_offset, (offset, size))
        bisect.insort(by_size, (size, offset))

    for lt in sorted(spans, key=lambda l: (l.first, -l.nbytes, l.value)):
        while ends and ends[0][0] < lt.first:
            _, offset, size = heapq.heappop(ends)
            add_gap(offset, size)
        size = _aligned(max(lt.nbytes, 1), alignment)
        i = bisect.bisect_left(by_size, (size, -1))
        if i < len(by_size):
            gap_size, offset = by_size.pop(i)
            by_offset.remove((offset, gap_size))
            if gap_size > size:
                bisect.insort(by_offset, (offset + size, gap_size - size))
                bisect.insort(by_size, (gap_size - size, offset + size))
        elif by_offset and sum(by_offset[-1]) == top:
            offset, gap_size = by_offset.pop()
            by_size.remove((gap_size, offset))
            top = offset + size
        else:
            offset, top = top, top + size
        offsets[lt.value] = offset
        heapq.heappush(ends, (lt.last, offset, size))
    return offsets, top


def lower_bound(spans: list, n_steps: int) -> int:
    """The most bytes live at any one step: no packing can use less."""
    delta = np.zeros(n_steps + 2, dtype=np.int64)
    for lt in spans:
        delta[lt.first] += lt.nbytes
        delta[lt.last + 1] -= lt.nbytes
    return int(np.cumsum(delta).max()) if spans else 0


# Ops that reduce gradients over the ranks: what they read may lie in one gradient block.
COLLECTIVES = ("all_reduce_grads", "all_reduce_start")


def gradient_block(graph: Graph, spans: dict, fresh: set, roots: dict) -> dict:
    """{buffer: element offset}: the gradients the all-reduce ops read, laid out one after another
    in one block allocated per call (in the order the ops read them), so that each all-reduce
    runs in place on its part of the block with no packing copy, and the gradients it hands
    back are views of it. A gradient written into another value's buffer (an in-place copy)
    places that buffer. Empty (each gradient a buffer of its own, packed by the op) unless every
    such gradient fills a whole buffer (not a view), read by no op after its all-reduce and not
    returned, and all have one dtype."""
    views = {v for op in graph.ops if op.opdef.is_view for v in op.outputs}
    members, dtype = [], None
    for index, op in enumerate(graph.ops):
        if op.op not in COLLECTIVES:
            continue
        for v in op.inputs:
            root = roots.get(v, v)
            span = spans.get(root)
            value = graph.values[v]
            if (span is None or v in views or root in fresh or span.last != index or root in members
                    or graph.values[root].shape != value.shape or (dtype is not None and value.dtype != dtype)):
                return {}
            dtype = value.dtype
            members.append(root)
    offsets, total = {}, 0
    for v in members:
        offsets[v] = total
        total += int(np.prod(graph.values[v].shape, dtype=np.int64))
    return offsets


def scratch_spans(graph: Graph) -> dict:
    """{op index: Lifetime of that op's working memory}, for ops that declare one (OpDef.scratch):
    a buffer live during its op only, numbered below every value (-1 - index)."""
    spans = {}
    for i, op in enumerate(graph.ops):
        if op.opdef.scratch is None:
            continue
        values = [graph.values[v] for v in op.inputs]
        attrs = {k: v for k, v in op.attrs if not isinstance(v, ScalarSlot)}
        nbytes = op.opdef.scratch([v.shape for v in values], [np.dtype(v.dtype) for v in values], attrs)
        if nbytes > 0:
            spans[i] = Lifetime(-1 - i, i, i, nbytes)
    return spans


def plan_program(graph: Graph) -> Program:
    roots = alias_roots(graph)
    bound = direct_writebacks(graph, roots)
    spans = lifetimes(graph, bound, roots)
    fresh = {roots.get(v, v) for v in graph.results}
    block = gradient_block(graph, spans, fresh, roots)
    arena_spans = [lt for v, lt in spans.items() if v not in fresh and v not in block]
    scratch = scratch_spans(graph)
    arena_spans += scratch.values()
    offsets, arena_bytes = pack_sweep(arena_spans)
    for order in GREEDY_ORDERS if len(arena_spans) <= GREEDY_LIMIT else ():   # keep the smallest arena
        greedy_offsets, greedy_bytes = pack(arena_spans, order=order)
        if greedy_bytes < arena_bytes:
            offsets, arena_bytes = greedy_offsets, greedy_bytes
    buffers = []
    for v in spans:
        value = graph.values[v]
        lt = spans[v]
        buffers.append(BufferSpec(v, value.shape, np.dtype(value.dtype), offsets.get(v), lt.first, lt.last,
                                  block.get(v)))

    steps = []
    for op in graph.ops:
        static = tuple((k, v) for k, v in op.attrs if not isinstance(v, ScalarSlot))
        if block and op.op in COLLECTIVES:
            static += (("in_block", True),)
        dynamic = tuple((k, v.index) for k, v in op.attrs if isinstance(v, ScalarSlot))
        if op.opdef.is_view:
            mode = VIEW
        elif op.op == "fused":
            mode = KERNEL
        elif len(op.outputs) > 1:
            mode = MULTI
        else:
            mode = OUT
        working = scratch.get(len(steps))
        steps.append(Step(op.op, op.inputs, op.outputs, static, dynamic, mode,
                          (offsets[working.value], working.nbytes) if working is not None else ()))

    writebacks = [(src, target) for src, target in graph.writebacks if src not in bound]
    n_slots = max(graph.values) + 1 if graph.values else 0
    return Program(
        n_slots=n_slots, steps=steps, input_slots=list(graph.inputs), captured_slots=list(graph.captured),
        constants=dict(graph.constants), buffers=buffers, arena_bytes=arena_bytes,
        result_slots=list(graph.results), writebacks=writebacks, n_scalars=graph.n_scalars,
        alignment=ALIGNMENT, aliases={**{v: roots[v] for v in graph.reuse}, **bound},
        lower_bound=lower_bound(arena_spans, len(graph.ops)),
        shapes={v: value.shape for v, value in graph.values.items()})
