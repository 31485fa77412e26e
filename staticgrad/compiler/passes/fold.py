"""Constant folding: evaluate ops whose inputs are all constants (factories, ones-like seeds)
once at compile time. Random ops are never folded: each replay must draw afresh.

A folded value has the layout eager gave it, not only its numbers: a view keeps the strides of
the constant it views (an expand's 0 strides, a transpose's order), any other op's result is
C-contiguous (dispatch's rule for a result that owns its memory). A later view that worked in
eager then works here, and a later matmul or reduction reads its operand in eager's order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.compiler.ir import Graph, ScalarSlot
from staticgrad.ops.quiet import restore, silence


def fold_constants(graph: Graph) -> tuple:
    constants = dict(graph.constants)
    values = dict(graph.values)
    kept = []
    changed = False
    for op in graph.ops:
        if op.inputs and op.inputs[0] not in constants:
            kept.append(op)  # not all inputs constant (the usual case, told by the first)
            continue
        opdef = op.opdef
        foldable = (opdef.kind in ("factory", "elementwise", "reduction", "view", "matmul")
                    and all(v in constants for v in op.inputs)
                    and not any(isinstance(v, ScalarSlot) for _, v in op.attrs)
                    and len(op.outputs) == 1)
        if not foldable or (not op.inputs and opdef.kind != "factory"):
            kept.append(op)
            continue
        quiet = silence()  # a constant that is nan or inf folds silently, as eager computes it
        try:
            result = opdef.forward(*[constants[v] for v in op.inputs], **dict(op.attrs))
        finally:
            restore(quiet)
        out = op.outputs[0]
        frozen = _as_eager(result, opdef.is_view, np.dtype(graph.values[out].dtype))
        frozen.flags.writeable = False
        constants[out] = frozen
        values[out] = replace(values[out], kind="constant")
        changed = True
    if not changed:
        return graph, False
    return replace(graph, ops=kept, constants=constants, values=values).with_ops(kept), True


def _as_eager(result, view: bool, dtype: np.dtype) -> np.ndarray:
    """``result`` in the layout eager's dispatch leaves it: a view op's result as the view it is
    (of a read-only constant, so itself read-only), any other op's a C-contiguous array of its own."""
    if view:
        array = np.asarray(result)
        if array.dtype == dtype:
            return array.view()  # a new array object: marking it read-only leaves its base alone
    return np.array(result, dtype=dtype, order="C", copy=True)
