"""Constant folding: evaluate ops whose inputs are all constants (factories, ones-like seeds)
once at compile time. Random ops are never folded: each replay must draw afresh."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.compiler.ir import Graph, ScalarSlot, frozen_constant


def fold_constants(graph: Graph) -> tuple:
    constants = dict(graph.constants)
    values = dict(graph.values)
    kept = []
    changed = False
    for op in graph.ops:
        opdef = op.opdef
        foldable = (opdef.kind in ("factory", "elementwise", "reduction", "view", "matmul")
                    and all(v in constants for v in op.inputs)
                    and not any(isinstance(v, ScalarSlot) for _, v in op.attrs)
                    and len(op.outputs) == 1)
        if not foldable or (not op.inputs and opdef.kind != "factory"):
            kept.append(op)
            continue
        result = opdef.forward(*[constants[v] for v in op.inputs], **dict(op.attrs))
        out = op.outputs[0]
        # As eager lays it out: a view keeps its strides (an expand stays broadcast), any other
        # op's result is C-contiguous (dispatch makes owned results so).
        if opdef.kind == "view":
            constants[out] = frozen_constant(result)
        else:
            frozen = np.array(result, dtype=graph.values[out].dtype, order="C", copy=True)
            frozen.flags.writeable = False
            constants[out] = frozen
        values[out] = replace(values[out], kind="constant")
        changed = True
    if not changed:
        return graph, False
    return replace(graph, ops=kept, constants=constants, values=values).with_ops(kept), True
