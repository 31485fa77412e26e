"""The pass pipeline, written as data: (pass, what it does). Each pass is Graph -> (Graph, changed)."""

from __future__ import annotations

from staticgrad.compiler.ir import Graph, verify
from staticgrad.compiler.passes.cse import eliminate_common_subexpressions
from staticgrad.compiler.passes.dce import eliminate_dead_code
from staticgrad.compiler.passes.fold import fold_constants
from staticgrad.compiler.passes.fuse import fuse_elementwise
from staticgrad.compiler.passes.inplace import reuse_inputs_in_place
from staticgrad.compiler.passes.lower import split_matmul_epilogues
from staticgrad.compiler.passes.simplify import simplify

PIPELINE = [
    (fold_constants, "evaluate ops whose inputs are all constants (gradient seeds, factories) once"),
    (eliminate_common_subexpressions, "reuse the result of an identical earlier op"),
    (simplify, "drop double transposes"),
    (eliminate_dead_code, "drop ops whose results nothing reads (unused gradients and values)"),
    (split_matmul_epilogues, "split addmm into mm and a bias add that can join a fused kernel"),
    (fuse_elementwise, "fuse exact elementwise groups (and their outer-axis sums) into Numba kernels"),
    (reuse_inputs_in_place, "write an op's output into the buffer of an input that dies there"),
]

# The plain interpreter (the oracle) runs the program as it stands before this pass.
LOWERING_STARTS = "split_matmul_epilogues"


def run_pipeline(graph: Graph, pipeline=None, check: bool = False) -> tuple:
    """Run each pass in order. Returns the final graph, [(pass name, changed)] and the graph
    as it was before lowering (the oracle's program)."""
    report = []
    before_lowering = graph
    for pass_fn, _ in pipeline if pipeline is not None else PIPELINE:
        if pass_fn.__name__ == LOWERING_STARTS:
            before_lowering = graph
        graph, changed = pass_fn(graph)
        report.append((pass_fn.__name__, changed))
        if check:
            verify(graph)
    return graph, report, before_lowering
