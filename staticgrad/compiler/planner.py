"""Buffer planning: liveness over the schedule -> lifetimes -> offsets in one arena -> Program.

A buffer lives from the op that defines it to the last op that reads it or any view of it
(both inclusive), so activations saved for backward live exactly until their last backward
reader. Buffers that leave the call (results) are allocated fresh per call instead; inputs,
captured state and constants are bound, not planned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from staticgrad.compiler.ir import Graph, ScalarSlot
from staticgrad.runtime.program import KERNEL, MULTI, OUT, VIEW, BufferSpec, Program, Step

ALIGNMENT = 64


@dataclass(frozen=True, slots=True)
class Lifetime:
    """[first, last]: op indices, both inclusive. ``last == len(ops)`` means "until the call ends"."""

    value: int
    first: int
    last: int
    nbytes: int

    def overlaps(self, other: "Lifetime") -> bool:
        return self.first <= other.last and other.first <= self.last


def alias_roots(graph: Graph) -> dict:
    """Map each view op's output to the value that owns its memory."""
    roots = {}
    for op in graph.ops:
        if op.opdef.kind == "view":
            base = op.inputs[0]
            roots[op.outputs[0]] = roots.get(base, base)
    return roots


def direct_writebacks(graph: Graph) -> dict:
    """Writebacks whose source can be computed straight into the target's storage: {source: target}.

    Safe when nothing after the producing op reads the target's old value (or a view of it), the
    source is not returned, and the producing op reads the target only where it writes it: a
    fused loop loading and storing at the same index, or a single NumPy ufunc call."""
    roots = alias_roots(graph)
    producer = {v: i for i, op in enumerate(graph.ops) for v in op.outputs}
    results = set(graph.results)
    direct = {}
    for source, target in graph.writebacks:
        p = producer.get(source)
        if p is None or source in results or roots.get(source, source) != source:
            continue
        op = graph.ops[p]
        if op.opdef.kind == "view" or (len(op.outputs) > 1 and op.op != "fused"):
            continue
        later_reads = any(roots.get(v, v) == target for later in graph.ops[p + 1:] for v in later.inputs)
        if later_reads or not _reads_target_in_place(op, source, target, roots, graph):
            continue
        direct[source] = target
    return direct


def _reads_target_in_place(op, source: int, target: int, roots: dict, graph: Graph) -> bool:
    reads = [v for v in op.inputs if roots.get(v, v) == target]
    if not reads:
        return True
    if any(v != target for v in reads):
        return False  # reads a view of the target: index patterns differ
    if op.op == "fused":
        kernel = op.attr_dict["kernel"]
        arg, out = op.inputs.index(target), op.outputs.index(source)
        store = [(n, pattern) for n, loop in enumerate(kernel.loops) for t, o, pattern in loop.stores if o == out]
        loads = [(n, pattern) for n, loop in enumerate(kernel.loops) for src, pattern in loop.loads if src == ("in", arg)]
        return len(store) == 1 and all(load == store[0] for load in loads)
    if op.opdef.kind != "elementwise" or op.opdef.emit is None:
        return False
    shapes = [graph.values[v].shape for v in op.inputs] + [graph.values[source].shape]
    statement = op.opdef.emit([f"x{i}" for i in range(len(op.inputs))], "out", dict(op.attrs), shapes)
    return statement is not None and ";" not in statement and graph.values[target].shape == graph.values[source].shape


def lifetimes(graph: Graph, bound: dict | None = None) -> dict:
    """Lifetime of every buffer an op output owns (views extend their root's lifetime). Values in
    ``bound`` live in another value's storage and own none."""
    roots = alias_roots(graph)
    if bound:
        roots.update(bound)
    external = set(graph.inputs) | set(graph.captured) | set(graph.constants) | set(bound or ())
    end = len(graph.ops)
    first, last = {}, {}
    multi = set()
    for i, op in enumerate(graph.ops):
        if len(op.outputs) > 1 and op.op != "fused":
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


def pack(spans: list, alignment: int = ALIGNMENT) -> tuple:
    """Offsets for lifetimes, greedy by size (largest first), each in the best-fitting gap among
    the already placed buffers it overlaps in time. Returns ({value: offset}, arena bytes)."""
    placed = []  # (lifetime, offset, end)
    offsets = {}
    total = 0
    for lt in sorted(spans, key=lambda l: (-l.nbytes, l.first, l.value)):
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


def lower_bound(spans: list, n_steps: int) -> int:
    """The most bytes live at any one step: no packing can use less."""
    delta = np.zeros(n_steps + 2, dtype=np.int64)
    for lt in spans:
        delta[lt.first] += lt.nbytes
        delta[lt.last + 1] -= lt.nbytes
    return int(np.cumsum(delta).max()) if spans else 0


def plan_program(graph: Graph) -> Program:
    roots = alias_roots(graph)
    bound = direct_writebacks(graph)
    spans = lifetimes(graph, bound)
    fresh = {roots.get(v, v) for v in graph.results}
    arena_spans = [lt for v, lt in spans.items() if v not in fresh]
    offsets, arena_bytes = pack(arena_spans)
    buffers = []
    for v, lt in spans.items():
        value = graph.values[v]
        buffers.append(BufferSpec(v, value.shape, np.dtype(value.dtype), None if v in fresh else offsets[v]))

    steps = []
    for op in graph.ops:
        static = tuple((k, v) for k, v in op.attrs if not isinstance(v, ScalarSlot))
        dynamic = tuple((k, v.index) for k, v in op.attrs if isinstance(v, ScalarSlot))
        if op.opdef.kind == "view":
            mode = VIEW
        elif op.op == "fused":
            mode = KERNEL
        elif len(op.outputs) > 1:
            mode = MULTI
        else:
            mode = OUT
        steps.append(Step(op.op, op.inputs, op.outputs, static, dynamic, mode))

    writebacks = [(src, target) for src, target in graph.writebacks if src not in bound]
    n_slots = max(graph.values) + 1 if graph.values else 0
    return Program(
        n_slots=n_slots, steps=steps, input_slots=list(graph.inputs), captured_slots=list(graph.captured),
        constants=dict(graph.constants), buffers=buffers, arena_bytes=arena_bytes,
        result_slots=list(graph.results), writebacks=writebacks, n_scalars=graph.n_scalars,
        alignment=ALIGNMENT, aliases=bound,
        notes={"lower_bound": lower_bound(arena_spans, len(graph.ops))})
