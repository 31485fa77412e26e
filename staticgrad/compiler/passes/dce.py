"""Dead-code elimination: keep only ops whose outputs reach a result or a writeback.

Random ops are always kept: each draw advances the generator, and a replay must draw
exactly what the eager call drew so that both stay reproducible under one seed.
"""

from __future__ import annotations

from staticgrad.compiler.ir import Graph


def eliminate_dead_code(graph: Graph) -> tuple:
    live = graph.live_roots()
    kept = []
    for op in reversed(graph.ops):
        if op.opdef.kind == "random" or any(v in live for v in op.outputs):
            kept.append(op)
            live.update(op.inputs)
    kept.reverse()
    changed = len(kept) != len(graph.ops)
    return (graph.with_ops(kept) if changed else graph), changed
