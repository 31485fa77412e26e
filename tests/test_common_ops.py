"""Common PyTorch ops beyond the issue's first list, against PyTorch in float64 (values, gradients,
second derivatives, node names), finite differences, PyTorch's errors, and replay: a recorded training
step replays on new inputs exactly as eager runs it."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# (id, fn(lib, x), input) for one float64 input that requires grad
CASES = [
    ("repeat", lambda lib, x: x.repeat(2, 3), rand(2, 3)),
    ("repeat_new_dims", lambda lib, x: x.repeat(2, 1, 2), rand(2, 3)),
    ("repeat_tuple", lambda lib, x: x.repeat((1, 2)), rand(2, 3)),
    ("repeat_list_ones", lambda lib, x: x.repeat([1, 1]), rand(2, 3)),
    ("repeat_zero", lambda lib, x: x.repeat(0, 2), rand(2, 3)),
    ("repeat_0dim", lambda lib, x: x.sum().repeat(3), rand(2, 3)),
    ("repeat_of_transposed", lambda lib, x: x.t().repeat(2, 2), rand(2, 3)),
    ("repeat_size", lambda lib, x: x.repeat(lib.Size([3, 1])), rand(2, 3)),
    ("tile", lambda lib, x: lib.tile(x, (2,)), rand(2, 3)),
    ("tile_more_dims", lambda lib, x: x.tile(2, 1, 2), rand(2, 3)),
    ("tile_empty", lambda lib, x: lib.tile(x, ()), rand(2, 3)),
]


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64(name, fn, x):
    compare(fn, [x], atol=1e-12, rtol=1e-10, double=True)


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_float32_matches_torch(name, fn, x):
    compare(fn, [x.astype(np.float32)], atol=1e-5, rtol=1e-5)


FD_CASES = [c for c in CASES if c[0] in ("repeat_new_dims", "repeat_of_transposed", "tile_more_dims")]


@pytest.mark.parametrize("name,fn,x", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_gradients_match_finite_differences(name, fn, x):
    finite_difference_check(lambda t: fn(sg, t), [x])


def test_repeat_saves_what_torch_saves():
    for lib in (torch, sg):
        x = lib.ones(2, 3, requires_grad=True)
        node = x.repeat(2, 1, 2).grad_fn
        assert node.name() == "RepeatBackward0"
        assert tuple(node._saved_repeats) == (2, 1, 2) and tuple(node._saved_self_sym_sizes) == (2, 3)


def test_instance_norm_repeats_its_weight_as_torch_does():
    x = rand(2, 3, 5)
    for lib in (torch, sg):
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        out = lib.nn.functional.instance_norm(lib.tensor(x), weight=w)
        names, stack = set(), [out.grad_fn]
        while stack:
            node = stack.pop()
            names.add(node.name())
            stack.extend(n for n, _ in node.next_functions if n is not None)
        assert "RepeatBackward0" in names, names


ERRORS = [
    lambda lib: lib.zeros(2, 3).repeat(2),
    lambda lib: lib.zeros(2, 3).repeat(2, -1),
    lambda lib: lib.zeros(2, 3).repeat(-1, 2),
    lambda lib: lib.zeros(2, 3).repeat((2.0, 1)),
    lambda lib: lib.zeros(2, 3).repeat(),
    lambda lib: lib.tile(lib.zeros(2, 3), 2),
    lambda lib: lib.zeros(2, 3).tile(),
]


@pytest.mark.parametrize("fn", ERRORS)
def test_errors_match_torch(fn):
    same_error(fn)


# ---- replay ----------------------------------------------------------------------------------------

def _loss_step(fn, weight):
    def step(x):
        out = fn(sg, x * weight)
        out = out[0] if isinstance(out, tuple) else out
        loss = (out * out).sum()
        loss.backward()
        return loss
    return step


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_replayed_training_step_equals_eager(name, fn, x):
    w_eager = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    w_comp = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    eager, compiled = _loss_step(fn, w_eager), sg.compile(_loss_step(fn, w_comp))
    for seed in range(4):
        data = sg.tensor(rand(*x.shape, seed=10 + seed))
        w_eager.grad = w_comp.grad = None
        le, lc = eager(data), compiled(data)
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
        assert w_comp.grad.numpy().tobytes() == w_eager.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2
