"""Facts about a graph that the passes, the planner and plan inspection all ask: which values live
in another value's memory, and whether an op reads a buffer only where it writes its output."""

from __future__ import annotations

from staticgrad.compiler.ir import Graph, Op


def alias_roots(graph: Graph) -> dict:
    """Map each value that lives in another value's memory to that memory's owner: view outputs
    (their first input's owner) and outputs written in place over a dying input (``graph.reuse``)."""
    roots = {}
    for op in graph.ops:
        if op.opdef.is_view:
            base = op.inputs[0]
            roots[op.outputs[0]] = roots.get(base, base)
        for out in op.outputs:
            source = graph.reuse.get(out)
            if source is not None:
                roots[out] = roots.get(source, source)
    return roots


def reads_in_place(op: Op, source: int, out: int) -> bool:
    """The op reads ``source`` only at the index where it writes ``out``, before writing it."""
    if op.op == "fused":
        loads_of, stores_of, summed = _accesses(op.attr_dict["kernel"])
        # Every argument position that passes ``source`` counts: a loop reading it through a second
        # position would see the new value where it expects the old one.
        loads = [load for k, v in enumerate(op.inputs) if v == source for load in loads_of.get(("in", k), ())]
        slot = op.outputs.index(out)
        stores = stores_of.get(slot, ())
        return slot not in summed and len(stores) == 1 and bool(loads) and all(load == stores[0] for load in loads)
    if op.opdef.kind != "elementwise" or op.opdef.emit is None:
        return False
    statement = op.opdef.emit([f"x{i}" for i in range(len(op.inputs))], "out", dict(op.attrs), [])
    return statement is not None and ";" not in statement


_ACCESSES: dict = {}   # id(kernel) -> (kernel, its accesses): kernels are reused across batch sizes


def _accesses(kernel) -> tuple:
    """A fused kernel's array accesses: {source: [(loop, pattern)]} of its loads, {output:
    [(loop, pattern)]} of its stores, and the outputs it sums into."""
    kept = _ACCESSES.get(id(kernel))
    if kept is not None and kept[0] is kernel:
        return kept[1]
    loads, stores, summed = {}, {}, set()
    for n, loop in enumerate(kernel.loops):
        for src, pattern in loop.loads:
            loads.setdefault(src, []).append((n, pattern))
        for _, o, pattern in loop.stores:
            stores.setdefault(o, []).append((n, pattern))
        summed.update(o for _, o, _ in loop.sums)
    if len(_ACCESSES) >= 512:
        _ACCESSES.clear()
    _ACCESSES[id(kernel)] = (kernel, (loads, stores, summed))
    return loads, stores, summed
