"""Fused kernels with coalesced dims (compiler/coalesce.py): the same elementwise pattern at two
ranks is one kernel; replays keep eager's bits; an array whose layout does not allow a reshape
as a view (a non-contiguous parameter or argument) keeps its dims, and is written in place."""

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.compiler.coalesce import coalesce, reshaped
from staticgrad.compiler.ir import FusedKernel, FusedLoop


def _loop(ndim, loads, stores=(), sums=()):
    body = tuple(("add", (("in", 0), ("in", 1)), ()) for _ in range(1))
    return FusedKernel((FusedLoop(ndim, "float32", tuple(range(ndim)), loads, body, stores, sums),),
                       len(loads), len(stores) + len(sums), 0, ndim)


def _everything_contiguous(key):
    return True


def test_a_bias_over_trailing_dims_merges_them_and_keeps_the_broadcast_dim():
    # (B, S, D) + (S, D): S and D merge, B stays apart (the bias does not span it)
    kernel = _loop(3, ((("in", 0), (0, 1, 2)), (("in", 1), (1, 2))), ((0, 0, (0, 1, 2)),))
    coalesced, dim_groups, arrays = coalesce(kernel, _everything_contiguous)
    loop = coalesced.loops[0]
    assert loop.ndim == 2 and dim_groups == [[0], [1, 2]]
    assert loop.loads == ((("in", 0), (0, 1)), (("in", 1), (1,)))
    assert arrays[("in", 1)] == [[0, 1]] and arrays[("out", 0)] == [[0], [1, 2]]
    assert reshaped((8, 32, 64), arrays[("in", 0)]) == (8, 2048)
    # the same pattern at rank 2 needs no merge, and the rank-3 one became it
    plain = _loop(2, ((("in", 0), (0, 1)), (("in", 1), (1,))), ((0, 0, (0, 1)),))
    assert coalesce(plain, _everything_contiguous) is None
    assert coalesced.loops[0].loads == plain.loops[0].loads


def test_a_dim_broadcast_for_one_array_only_stays_apart():
    # (B, S, D) + (B, 1, D): S is broadcast for the second array, so neither pair of dims merges
    kernel = _loop(3, ((("in", 0), (0, 1, 2)), (("in", 1), (0, -1, 2))), ((0, 0, (0, 1, 2)),))
    assert coalesce(kernel, _everything_contiguous) is None
    # (B, S, D) + (1, 1, D): the leading two are broadcast for it (size 1 both), so they merge
    kernel = _loop(3, ((("in", 0), (0, 1, 2)), (("in", 1), (-1, -1, 2))), ((0, 0, (0, 1, 2)),))
    coalesced, dim_groups, arrays = coalesce(kernel, _everything_contiguous)
    assert dim_groups == [[0, 1], [2]] and coalesced.loops[0].loads[1] == (("in", 1), (-1, 1))
    assert reshaped((1, 1, 5), arrays[("in", 1)]) == (1, 5)


def test_a_non_contiguous_array_blocks_the_merge_of_its_dims():
    kernel = _loop(2, ((("in", 0), (0, 1)), (("in", 1), (0, 1))), ((0, 0, (0, 1)),))
    assert coalesce(kernel, lambda key: key != ("in", 1)) is None
    assert coalesce(kernel, _everything_contiguous)[1] == [[0, 1]]


def test_a_sum_over_leading_dims_merges_them_in_the_same_order():
    # sum over (B, S) of a (B, S, D) value into (D,): B and S merge (row-major over both, as before)
    kernel = _loop(3, ((("in", 0), (0, 1, 2)), (("in", 1), (0, 1, 2))), ((0, 0, (0, 1, 2)),), ((0, 1, (2,)),))
    coalesced, dim_groups, arrays = coalesce(kernel, _everything_contiguous)
    assert dim_groups == [[0, 1], [2]] and arrays[("out", 1)] == [[0]]
    assert coalesced.loops[0].sums == ((0, 1, (1,)),)


def _same_bits(a, b):
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _train(step_fn, params, data):
    return [step_fn(*batch).detach().numpy().copy() for batch in data] + [p.detach().numpy().copy() for p in params]


def test_a_rank_3_bias_add_runs_the_rank_2_loop_with_eager_s_bits():
    """An embedding plus a (steps, width) table, as a language model adds positions, and a (batch,
    width) activation plus a bias: both loops are 2-D (the first over batch x steps*width)."""
    sg.manual_seed(0)
    table = sg.nn.Parameter(sg.randn(6, 4))
    bias = sg.nn.Parameter(sg.randn(4))
    embedding = sg.nn.Embedding(10, 4)

    def forward(idx, x):
        return (embedding(idx) + table).tanh().sum() + (x + bias).tanh().sum()

    compiled = sg.compile(forward)
    for _ in range(4):
        idx, x = sg.randint(0, 10, (3, 6)), sg.randn(5, 4)
        with sg.no_grad():
            _same_bits(forward(idx, x).numpy(), compiled(idx, x).numpy())
    assert compiled.stats.replays >= 2
    sources = list(compiled.plan.program.kernels.values())
    assert sources and all("for i2 " not in source for source in sources)
    assert ".reshape((3, 24))" in compiled.plan.compiled_replay.source


def test_optimizer_updates_of_a_matrix_and_a_vector_run_one_dimensional_loops():
    weights = []
    for compiled in (False, True):
        sg.manual_seed(3)
        w, b = sg.nn.Parameter(sg.randn(5, 3)), sg.nn.Parameter(sg.randn(7))
        opt = sg.optim.Adam([w, b], lr=0.01)

        def step(x, w=w, b=b, opt=opt):
            opt.zero_grad()
            ((x @ w).sum() + (b * b).sum()).backward()
            opt.step()

        fn = sg.compile(step) if compiled else step
        for _ in range(4):
            fn(sg.ones(2, 5))
        weights.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
        if compiled:
            (source,) = fn.plan.program.kernels.values()   # Adam's updates, both 1-D loops
            assert source.count("for i0 ") == 2 and "for i1 " not in source
    for a, b in zip(*weights):
        _same_bits(a, b)


@pytest.mark.parametrize("layout", ["sliced parameter", "transposed parameter", "transposed argument"])
def test_a_non_contiguous_array_is_passed_as_it_is_and_written_in_place(layout):
    """A parameter whose storage is another array's (a slice, a transpose) must be updated in its
    own memory: a reshape of it would be a copy, and the kernel's writes into it would be lost."""
    results = []
    for compiled in (False, True):
        sg.manual_seed(5)
        if layout == "sliced parameter":
            w = sg.nn.Parameter(sg.randn(6, 8)[:, :4])
        elif layout == "transposed parameter":
            w = sg.nn.Parameter(sg.randn(4, 6).t())
        else:
            w = sg.nn.Parameter(sg.randn(6, 4))
        assert w.is_contiguous() == (layout == "transposed argument")
        opt = sg.optim.Adam([w], lr=0.1)

        def step(x, w=w, opt=opt):
            opt.zero_grad()
            loss = (x @ w).tanh().sum()
            loss.backward()
            opt.step()
            return loss

        fn = sg.compile(step) if compiled else step
        data = [sg.randn(6, 3).t() if layout == "transposed argument" else sg.randn(3, 6) for _ in range(4)]
        results.append(_train(fn, [w], [(x,) for x in data]))
        if compiled:
            assert fn.stats.replays >= 2
    for a, b in zip(*results):
        _same_bits(a, b)


def test_a_parameter_whose_data_becomes_non_contiguous_is_traced_again_and_updated_in_place():
    results = []
    for compiled in (False, True):
        sg.manual_seed(6)
        w = sg.nn.Parameter(sg.randn(6, 4))
        opt = sg.optim.Adam([w], lr=0.1)

        def step(x, w=w, opt=opt):
            opt.zero_grad()
            (x @ w).tanh().sum().backward()
            opt.step()

        fn = sg.compile(step) if compiled else step
        data = [sg.randn(3, 6) for _ in range(6)]
        for x in data[:3]:
            fn(x)
        sliced = sg.randn(6, 8)
        with sg.no_grad():
            sliced[:, :4] = w
        w.data = sliced[:, :4]   # the same values, in another array's memory
        for x in data[3:]:
            fn(x)
        results.append((w.detach().numpy().copy(), sliced.numpy().copy()))
    for a, b in zip(*results):
        _same_bits(a, b)
