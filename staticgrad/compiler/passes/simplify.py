"""Algebraic simplifications the backward of common layers leaves behind:

- t(t(x)) -> x, and transpose(transpose(x, a, b), a, b) -> x;
- clone(t(mm(a, b))) -> mm(t(b), t(a)): a linear layer's weight gradient is computed straight
  into its own contiguous buffer instead of computed transposed and copied.
"""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import Graph, Op


def simplify(graph: Graph) -> tuple:
    producer = {}
    users = graph.users()
    rename = {}
    ops = []
    changed = False
    next_id = max(graph.values) + 1 if graph.values else 0
    values = dict(graph.values)
    for op in graph.ops:
        inputs = tuple(rename.get(v, v) for v in op.inputs)
        if inputs != op.inputs:
            op = replace(op, inputs=inputs)
        inner = producer.get(op.inputs[0]) if op.inputs else None
        if op.op == "t" and inner is not None and inner.op == "t":
            rename[op.outputs[0]] = inner.inputs[0]
            changed = True
            continue
        if op.op == "transpose" and inner is not None and inner.op == "transpose" and set(
                (inner.attr_dict["dim0"], inner.attr_dict["dim1"])) == set((op.attr_dict["dim0"], op.attr_dict["dim1"])):
            rename[op.outputs[0]] = inner.inputs[0]
            changed = True
            continue
        if op.op == "clone" and inner is not None and inner.op == "t":
            product = producer.get(inner.inputs[0])
            if (product is not None and product.op == "mm" and len(users.get(inner.inputs[0], ())) == 1
                    and len(users.get(op.inputs[0], ())) == 1):
                a, b = product.inputs
                ta, tb = next_id, next_id + 1
                next_id += 2
                values[ta] = replace(values[a], id=ta, shape=values[a].shape[::-1], kind="op")
                values[tb] = replace(values[b], id=tb, shape=values[b].shape[::-1], kind="op")
                ops.append(Op("t", (b,), (tb,)))
                ops.append(Op("t", (a,), (ta,)))
                new = Op("mm", (tb, ta), op.outputs)
                ops.append(new)
                producer[op.outputs[0]] = new
                changed = True
                continue
        ops.append(op)
        for v in op.outputs:
            producer[v] = op
    if not changed:
        return graph, False
    results = [rename.get(v, v) for v in graph.results]
    writebacks = [(rename.get(v, v), target) for v, target in graph.writebacks]
    return replace(graph, values=values, results=results, writebacks=writebacks).with_ops(ops), True
