"""The pass pipeline, written as data: (pass, what it does). Each pass is Graph -> (Graph, changed)."""

from __future__ import annotations

from staticgrad.compiler.ir import Graph, verify
from staticgrad.compiler.passes.cse import eliminate_common_subexpressions
from staticgrad.compiler.passes.dce import eliminate_dead_code
from staticgrad.compiler.passes.fold import fold_constants
from staticgrad.compiler.passes.simplify import simplify

PIPELINE = [
    (fold_constants, "evaluate ops whose inputs are all constants (gradient seeds, factories) once"),
    (eliminate_common_subexpressions, "reuse the result of an identical earlier op"),
    (simplify, "drop double transposes; compute weight gradients straight into their buffer"),
    (eliminate_dead_code, "drop ops whose results nothing reads (unused gradients and values)"),
]


def run_pipeline(graph: Graph, pipeline=None, check: bool = False) -> tuple:
    """Run each pass in order; returns the final graph and [(pass name, changed)]."""
    report = []
    for pass_fn, _ in pipeline if pipeline is not None else PIPELINE:
        graph, changed = pass_fn(graph)
        report.append((pass_fn.__name__, changed))
        if check:
            verify(graph)
    return graph, report
