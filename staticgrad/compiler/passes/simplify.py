"""Algebraic simplifications the backward of common layers leaves behind:

- t(t(x)) -> x, and transpose(transpose(x, a, b), a, b) -> x (a view of a view with the same
  strides as x, so every op reading it sees the same memory order).

Never a rewrite that changes a matmul's operands or their layout (``clone(t(mm(a, b)))`` into
``mm(t(b), t(a))``, say): the BLAS adds the products in another order for another layout, and
replay must compute what eager computes, bit for bit, on every BLAS kernel.
"""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import Graph


def simplify(graph: Graph) -> tuple:
    producer = {}
    rename = {}
    ops = []
    changed = False
    for op in graph.ops:
        inputs = tuple(rename.get(v, v) for v in op.inputs)
        if inputs != op.inputs:
            op = replace(op, inputs=inputs)
        inner = producer.get(op.inputs[0]) if op.inputs else None
        if op.op == "t" and inner is not None and inner.op == "t":
            rename[op.outputs[0]] = inner.inputs[0]
            changed = True
            continue
        if (op.op == "transpose" and inner is not None and inner.op == "transpose"
                and {inner.attr_dict["dim0"], inner.attr_dict["dim1"]} == {op.attr_dict["dim0"], op.attr_dict["dim1"]}):
            rename[op.outputs[0]] = inner.inputs[0]
            changed = True
            continue
        ops.append(op)
        for v in op.outputs:
            producer[v] = op
    if not changed:
        return graph, False
    results = [rename.get(v, v) for v in graph.results]
    writebacks = [(rename.get(v, v), target) for v, target in graph.writebacks]
    return replace(graph, results=results, writebacks=writebacks).with_ops(ops), True
