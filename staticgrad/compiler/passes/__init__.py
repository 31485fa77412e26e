"""The pass pipeline, written as data: (pass, what it does). Each pass is Graph -> (Graph, changed)."""

from __future__ import annotations

from staticgrad.compiler.ir import Graph, verify
from staticgrad.compiler.passes.buckets import overlap_gradient_buckets
from staticgrad.compiler.passes.cse import eliminate_common_subexpressions
from staticgrad.compiler.passes.dce import eliminate_dead_code
from staticgrad.compiler.passes.fold import fold_constants
from staticgrad.compiler.passes.fuse import fuse_elementwise
from staticgrad.compiler.passes.inplace import reuse_inputs_in_place
from staticgrad.compiler.passes.lower import split_matmul_epilogues
from staticgrad.compiler.passes.scalars import gather_scalar_chains
from staticgrad.compiler.passes.simplify import simplify

PIPELINE = [
    (fold_constants, "evaluate ops whose inputs are all constants (gradient seeds, factories) once"),
    (overlap_gradient_buckets, "start each gradient bucket's all-reduce as soon as backward has produced it"),
    (eliminate_common_subexpressions, "reuse the result of an identical earlier op"),
    (simplify, "drop double transposes and expands to the shape a value has"),
    (eliminate_dead_code, "drop ops whose results nothing reads (unused gradients and values)"),
    (split_matmul_epilogues, "split addmm into mm and a bias add that can join a fused kernel"),
    (gather_scalar_chains, "compute each family of identical 0-dim op chains (an optimizer's bias corrections, one "
                           "per parameter) in one step, once per distinct input"),
    (fuse_elementwise, "fuse exact elementwise groups (and their outer-axis sums) into Numba kernels"),
    (reuse_inputs_in_place, "write an op's output into the buffer of an input that dies there"),
]

# The plain interpreter (the oracle) runs the program as it stands before this pass.
LOWERING_STARTS = split_matmul_epilogues

# From this pass on, passes are shape-generic: they read a dim only to compare it with another dim
# or with 0 or 1 (never its value: no arithmetic, ordering, int(), printing, type tests), and never
# a constant's contents. So one run serves every batch size of a structure (compiler/generic.py);
# constant folding, before, computes with shapes and contents.
SHAPE_GENERIC_FROM = eliminate_common_subexpressions


def run_pipeline(graph: Graph, pipeline=None, check: bool = False, cache=None) -> tuple:
    """Run each pass in order. Returns the final graph, [(pass name, changed)] and the graph
    as it was before lowering (the oracle's program). With ``cache`` (a generic.PassCache), the
    shape-generic passes run once per structure, their result filled in with each graph's dims."""
    passes = list(pipeline if pipeline is not None else PIPELINE)
    functions = [fn for fn, _ in passes]
    split = (functions.index(SHAPE_GENERIC_FROM) if cache is not None and SHAPE_GENERIC_FROM in functions
             else len(passes))

    def run(g, part):
        return _run(g, part, check)

    initial = graph
    graph, report, before_lowering = run(graph, passes[:split])
    if split < len(passes):
        graph, tail_report, tail_before = cache.run(graph, passes[split:], run)
        report += tail_report
        if tail_before is not None:
            before_lowering = tail_before
    return graph, report, before_lowering if before_lowering is not None else initial


def _run(graph: Graph, passes: list, check: bool) -> tuple:
    """(final graph, report, graph before lowering or None if lowering does not start here)."""
    report = []
    before_lowering = None
    for pass_fn, _ in passes:
        if pass_fn is LOWERING_STARTS:
            before_lowering = graph
        graph, changed = pass_fn(graph)
        report.append((pass_fn.__name__, changed))
        if check:
            verify(graph)
    return graph, report, before_lowering
