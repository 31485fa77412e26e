"""Algebraic simplifications the backward of common layers leaves behind:

- t(t(x)) -> x, and transpose(transpose(x, a, b), a, b) -> x (a view of a view with the same
  strides as x, so every op reading it sees the same memory order).
- expand(x) to x's own shape -> x (a batched matmul expands both operands, mostly to the shapes
  they have): the same memory, the same strides.

Never a rewrite that changes a matmul's operands or their layout (``clone(t(mm(a, b)))`` into
``mm(t(b), t(a))``, say): the BLAS adds the products in another order for another layout, and
replay must compute what eager computes, bit for bit, on every BLAS kernel.
"""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import Graph


def _double_t(op, inner):
    """t(t(x)) -> x."""
    return inner.inputs[0] if op.op == "t" and inner.op == "t" else None


def _double_transpose(op, inner):
    """transpose(transpose(x, a, b), a, b) -> x (either order of a and b)."""
    if op.op != "transpose" or inner.op != "transpose":
        return None
    dims, inner_dims = op.attr_dict, inner.attr_dict
    return inner.inputs[0] if {inner_dims["dim0"], inner_dims["dim1"]} == {dims["dim0"], dims["dim1"]} else None


# Each rule looks at an op and the op producing its first input; it names the value the op's
# output equals, or None.
RULES = (_double_t, _double_transpose)


def _same_shape_expand(op, values):
    """expand(x) with x's shape -> x."""
    if op.op != "expand" or values[op.inputs[0]].shape != values[op.outputs[0]].shape:
        return None
    return op.inputs[0]


def simplify(graph: Graph) -> tuple:
    producer = {}
    rename = {}
    ops = []
    changed = False
    kept = graph.live_roots()   # a result or written-back value stays a value of its own
    for op in graph.ops:
        inputs = tuple(rename.get(v, v) for v in op.inputs)
        if inputs != op.inputs:
            op = replace(op, inputs=inputs)
        inner = producer.get(op.inputs[0]) if op.inputs else None
        same = next((v for rule in RULES if (v := rule(op, inner)) is not None), None) if inner is not None else None
        if same is None and op.outputs[0] not in kept:
            same = _same_shape_expand(op, graph.values)
        if same is not None:
            rename[op.outputs[0]] = same
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
