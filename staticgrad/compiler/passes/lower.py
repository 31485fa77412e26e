"""Lowering: addmm(bias, a, b) becomes mm(a, b) followed by an elementwise add of the bias, so the
bias add can join a fused kernel (it is what addmm computes: the product, then the bias added)."""

from __future__ import annotations

from dataclasses import replace

from staticgrad.compiler.ir import Graph, Op, freeze_attrs


def split_matmul_epilogues(graph: Graph) -> tuple:
    ops, values = [], dict(graph.values)
    next_id = max(values) + 1 if values else 0
    changed = False
    for op in graph.ops:
        attrs = op.attr_dict
        if op.op != "addmm" or attrs.get("alpha", 1) != 1 or attrs.get("beta", 1) != 1:
            ops.append(op)
            continue
        bias, a, b = op.inputs
        (out,) = op.outputs
        product = next_id
        next_id += 1
        values[product] = replace(values[out], id=product)
        ops.append(Op("mm", (a, b), (product,)))
        ops.append(Op("add", (product, bias), (out,), freeze_attrs({"alpha": 1})))
        changed = True
    if not changed:
        return graph, False
    return replace(graph, values=values).with_ops(ops), True
