"""Common subexpressions: an op with the same name, inputs and attributes as an earlier one
reuses its outputs. Random ops are never merged (two draws are two different values)."""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import Graph, Op


def eliminate_common_subexpressions(graph: Graph) -> tuple:
    seen = {}
    rename = {}
    kept = []
    for op in graph.ops:
        inputs = tuple(rename.get(v, v) for v in op.inputs)
        if inputs != op.inputs:
            op = replace(op, inputs=inputs)
        if op.opdef.kind == "random":
            kept.append(op)
            continue
        key = (op.op, inputs, op.attrs)
        earlier = seen.get(key)
        if earlier is not None and _same_types(graph, earlier, op):
            rename.update(zip(op.outputs, earlier.outputs))
            continue
        seen[key] = op
        kept.append(op)
    if not rename:
        return graph, False
    return _renamed(graph, kept, rename), True


def _same_types(graph: Graph, a: Op, b: Op) -> bool:
    return all(graph.values[x].shape == graph.values[y].shape and graph.values[x].dtype == graph.values[y].dtype
               for x, y in zip(a.outputs, b.outputs))


def _renamed(graph: Graph, ops: list, rename: dict) -> Graph:
    results = [rename.get(v, v) for v in graph.results]
    writebacks = [(rename.get(v, v), target) for v, target in graph.writebacks]
    return replace(graph, results=results, writebacks=writebacks).with_ops(ops)
