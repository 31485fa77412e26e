"""In-place reuse: an op writes its output into the buffer of an input that dies at that op.

Only a buffer an op output owns can be lent (never a view's: its memory belongs to another value,
possibly the caller's argument). Safe only where every element is read before it is overwritten
at the same index: a fused loop
that loads the input and stores the output with one pattern (and no other loop reads it), or an
op whose replay is one NumPy ufunc call. The decision is recorded in ``graph.reuse`` (output ->
input); the planner gives both one buffer.
"""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.analysis import reads_in_place
from staticgrad.compiler.ir import Graph


def reuse_inputs_in_place(graph: Graph) -> tuple:
    external = set(graph.inputs) | set(graph.captured) | set(graph.constants)
    keep = graph.live_roots() | {v for v, _ in graph.writebacks}
    viewed = {op.inputs[0] for op in graph.ops if op.opdef.is_view}
    # Views and the outputs of multi-output ops (which allocate their own arrays) own no planned buffer.
    views = {op.outputs[0] for op in graph.ops if op.opdef.is_view}
    views |= {v for op in graph.ops if op.returns_own_arrays for v in op.outputs}
    last_read = {}
    for i, op in enumerate(graph.ops):
        for v in op.inputs:
            last_read[v] = i
    reuse = dict(graph.reuse)
    taken = set(reuse.values())
    for i, op in enumerate(graph.ops):
        if op.opdef.is_view or op.returns_own_arrays:
            continue
        for out in op.outputs:
            if out in reuse or out in keep:
                continue
            for v in op.inputs:
                if (v in external or v in views or v in viewed or v in taken or v in keep or last_read.get(v) != i
                        or op.inputs.count(v) != 1 or not _same_layout(graph, v, out)
                        or not reads_in_place(op, v, out)):
                    continue
                reuse[out] = v
                taken.add(v)
                break
    if reuse == graph.reuse:
        return graph, False
    return replace(graph, reuse=reuse), True


def _same_layout(graph: Graph, a: int, b: int) -> bool:
    va, vb = graph.values[a], graph.values[b]
    return va.shape == vb.shape and va.dtype == vb.dtype
