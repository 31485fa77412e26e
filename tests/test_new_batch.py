"""A new batch size (a partial last batch) compiles cheaply and exactly: the passes run once per
structure on symbolic dims and each batch size fills in its own (compiler/generic.py). The suite's
conftest turns on generic.CROSS_CHECK, so every compile here also compares with concrete passes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import SIZES, build, initial_weights
from staticgrad.compiler import generic
from staticgrad.compiler.generic import PassCache, SymbolicDims, canonical
from staticgrad.compiler.ir import Graph, Op, Value, freeze_attrs
from staticgrad.compiler.passes import PIPELINE, run_pipeline

SIZE = SIZES["tiny"]   # batch 32, 64 -> 4 x 64 -> 10


def batch(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return (sg.tensor(rng.standard_normal((n, SIZE.features), dtype=np.float32)),
            sg.tensor(rng.standard_normal((n, SIZE.outputs), dtype=np.float32)))


def eager_and_compiled():
    weights = initial_weights(SIZE)
    (eager_model, _, eager), (model, _, step) = build(sg, SIZE, weights), build(sg, SIZE, weights)
    return eager_model, eager, model, sg.compile(step)


def run_both(sizes, eager_model, eager, model, compiled):
    for seed, n in enumerate(sizes):
        x, y = batch(n, seed)
        assert eager(x, y).detach().numpy().tobytes() == compiled(x, y).detach().numpy().tobytes()
    for a, b in zip(eager_model.parameters(), model.parameters()):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
        assert a.grad.numpy().tobytes() == b.grad.numpy().tobytes()


def test_a_new_batch_size_fills_in_the_pass_results_of_the_first():
    eager_model, eager, model, compiled = eager_and_compiled()
    run_both([32, 32, 32], eager_model, eager, model, compiled)
    passes = compiled._passes
    runs, reuses = passes.symbolic_runs, passes.reuses
    assert runs == 1   # after the momentum buffers exist: the trace that made them never replays, nor compiles
    run_both([20, 20, 7, 7, 2, 20, 32], eager_model, eager, model, compiled)
    assert passes.symbolic_runs == runs and passes.reuses == reuses + 3
    plans = {plan.signature[1][0][0]: plan for plan in compiled.plans if plan.replayable}
    assert set(plans) == {32, 20, 7, 2}
    reference = plans[32].graph
    for n, plan in plans.items():
        assert [(op.op, op.inputs, op.outputs) for op in plan.graph.ops] == \
            [(op.op, op.inputs, op.outputs) for op in reference.ops]
        assert plan.program.kernels == plans[32].program.kernels   # the same kernels, no Numba compile
        fused = [op.attr_dict["dims"] for op in plan.graph.ops if op.op == "fused"]
        assert fused[0] == (n, SIZE.hidden)
        assert all(type(d) is int for v in plan.graph.values.values() for d in v.shape)


def test_dims_equal_to_one_or_to_another_dim_make_another_structure():
    eager_model, eager, model, compiled = eager_and_compiled()
    run_both([32, 32], eager_model, eager, model, compiled)
    runs = compiled._passes.symbolic_runs
    # a batch of 1 broadcasts differently; batches of 64 and 10 equal the hidden and output widths
    # (other patterns of equal dims): new structures for the passes, each compiled on its own
    run_both([1, 1, 64, 64, 10, 10], eager_model, eager, model, compiled)
    assert compiled._passes.symbolic_runs == runs + 3


def test_a_symbolic_dim_answers_only_what_every_size_answers():
    a, b = generic._dim(0), generic._dim(1)
    assert a == a and a != b and (a,) == (a,) and (a, 1) != (b, 1)
    assert a != 1 and a != 0 and a != 1 and not (a == 0.0) and a  # noqa: SIM201  (== itself is under test)
    assert a in {a: 1} and (a, 3) != (a,)
    for read in (lambda: a == 2, lambda: a == 5, lambda: a < b, lambda: a * 2, lambda: int(a), lambda: repr(a),
                 lambda: np.prod((a, b)), lambda: float(a), lambda: a.bit_length(), lambda: f"{a}",
                 lambda: np.array(a, dtype=np.int64)):
        with pytest.raises(SymbolicDims):
            read()
    assert not issubclass(SymbolicDims, Exception)   # no pass's `except Exception` takes it


def _tiny_graph(attr=1.0, n=20):
    values = {0: Value(0, (n, 3), "float32", "input"), 1: Value(1, (n, 3), "float32", "op"),
              2: Value(2, (n, 3), "float32", "op")}
    ops = [Op("mul_scalar", (0,), (1,), freeze_attrs({"other": attr})), Op("tanh", (1,), (2,))]
    return Graph(values=values, ops=ops, inputs=[0], results=[2])


def test_the_canonical_form_keeps_attribute_types_and_float_signs():
    key, dims = canonical(_tiny_graph(1.0, 20))
    assert dims == (20, 3)
    assert canonical(_tiny_graph(1.0, 7))[0] == key
    assert canonical(_tiny_graph(1, 20))[0] != key
    assert canonical(_tiny_graph(True, 20))[0] != canonical(_tiny_graph(1, 20))[0]
    assert canonical(_tiny_graph(-0.0, 20))[0] != canonical(_tiny_graph(0.0, 20))[0]
    assert canonical(_tiny_graph(np.float32(1.0), 20))[0] != key
    assert canonical(_tiny_graph(1.0, 3))[0] != key       # 3 x 3: both dims equal
    assert canonical(_tiny_graph(1.0, 1))[0] != key       # a dim of 1 stays itself


def _reads_a_dim(graph):
    """A pass that decides on a dim's value (as shape-generic passes must not)."""
    big = [op for op in graph.ops if int(np.prod(graph.values[op.outputs[0]].shape)) > 100]
    return graph, bool(big)


def test_a_pass_that_reads_a_dims_value_runs_concretely_every_time():
    pipeline = PIPELINE + [(_reads_a_dim, "decides on a size")]
    cache = PassCache()
    for n in (20, 50):
        final, report, _ = run_pipeline(_tiny_graph(2.0, n), pipeline=pipeline, cache=cache)
        assert report[-1] == ("_reads_a_dim", n * 3 > 100)
        assert all(d in (n, 3) for v in final.values.values() for d in v.shape)
    assert cache.symbolic_runs == 0 and cache.reuses == 0 and len(cache) == 1   # tried once, then concrete


def test_filled_in_results_equal_concrete_passes():
    cache = PassCache()
    for n in (20, 7, 20, 2):
        graph = _tiny_graph(2.0, n)
        got = run_pipeline(graph, cache=cache)
        want = run_pipeline(graph)
        generic._check_same(got, want)
        assert got[0].ops == want[0].ops and got[0].values == want[0].values
    assert cache.symbolic_runs == 1 and cache.reuses == 3
    with pytest.raises(AssertionError, match="differ"):
        graph = _tiny_graph(2.0, 20)
        got = run_pipeline(graph, cache=cache)
        wrong = replace(got[0], values={**got[0].values, 2: Value(2, (21, 3), "float32", "op")})
        generic._check_same((wrong,) + got[1:], run_pipeline(graph))


def test_a_new_batch_size_shares_the_replay_code_and_the_kernel_sources():
    eager_model, eager, model, compiled = eager_and_compiled()
    run_both([32, 32, 32, 20, 20], eager_model, eager, model, compiled)
    plans = {plan.signature[1][0][0]: plan for plan in compiled.plans if plan.replayable}
    a, b = plans[32].compiled_replay, plans[20].compiled_replay
    assert a.source != b.source                               # their shapes and counts differ...
    assert a._build.__code__ is b._build.__code__             # ...and nothing else: one compile
    kernels = [op.attr_dict["kernel"] for op in plans[20].graph.ops if op.op == "fused"]
    assert kernels == [op.attr_dict["kernel"] for op in plans[32].graph.ops if op.op == "fused"]
    assert all(k is j for k, j in zip(kernels, [op.attr_dict["kernel"] for op in plans[32].graph.ops
                                                if op.op == "fused"]))


def test_numbers_become_names_bound_to_the_same_values():
    from staticgrad.runtime.replay import _code

    source = ("def f(b12, x):\n"
              "    return (b12 + 1.5e-07, x[3], 'b3 7', \"4\", 2.0, -0.0, 0x1f, 1_0, 10, 1e+16)\n")
    code, numbers = _code(source)
    assert numbers == {"_sgN0": 1.5e-07, "_sgN1": 3, "_sgN2": 2.0, "_sgN3": 0.0, "_sgN4": 10, "_sgN5": 1e16}
    assert [type(v) for v in numbers.values()] == [float, int, float, float, int, float]
    namespace = dict(numbers)
    exec(code, namespace)
    expected = {}
    exec(source, expected)
    got, want = namespace["f"](1, [0, 1, 2, 3]), expected["f"](1, [0, 1, 2, 3])
    assert got == want and [type(v) for v in got] == [type(v) for v in want]
    assert str(got[5]) == "-0.0"
    assert _code(source.replace("10, 1e+16", "11, 2e+16"))[0] is code     # one template, one compile


def test_kernel_sources_are_kept_by_kernel_object_not_by_equality():
    from staticgrad.compiler.codegen import kernel_source
    from staticgrad.compiler.ir import FusedKernel, FusedLoop

    def kernel(other):
        loop = FusedLoop(1, "float32", (0,), ((("in", 0), (0,)),),
                         (("mul_scalar", (("in", 0),), (("other", other),)),), ((0, 0, (0,)),), ())
        return FusedKernel((loop,), 1, 1, 0, 1)

    zero, minus_zero = kernel(0.0), kernel(-0.0)
    assert zero == minus_zero                     # equal as data...
    assert kernel_source(zero)[1] != kernel_source(minus_zero)[1]      # ...printed apart
    assert kernel_source(zero) is kernel_source(zero)
