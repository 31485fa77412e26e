"""Views the replay makes once (its build hoists views of arena buffers and constants out of the
call), same-shape expands that vanish from the program, and ``Tensor.sum_to_size`` with
PyTorch's graph: each checked against eager bit for bit, and against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staticgrad as sg
from tests.oracle import node_names
from tests.replay_check import same_bits


def _plan_source(compiled) -> str:
    plan = next(p for p in reversed(compiled.plans) if p.replayable)
    return plan.compiled_replay.source


def _eager_and_compiled(fn, shapes, calls=4):
    """fn(x) eagerly and compiled on the same new inputs each call: outputs equal bit for bit."""
    compiled = sg.compile(fn)
    rng = np.random.default_rng(3)
    for call in range(calls):
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        eager = fn(*(sg.tensor(a) for a in arrays))
        replay = compiled(*(sg.tensor(a) for a in arrays))
        for k, (e, r) in enumerate(zip(eager, replay)):
            same_bits(r.detach().numpy(), e.detach().numpy(), f"result {k} of call {call}")
    assert compiled.stats.replays >= calls - 2, compiled.stats
    return compiled


def test_views_of_arena_buffers_are_made_once_per_arena_and_read_each_call():
    """A reshape and a transpose of intermediate values are made in build; each call reads the
    values the call computed through them."""
    def fn(x):
        h = (x * 2.0 + 1.0).exp()
        v = h.reshape(4, 6).t()
        return [(v @ v.t()).sum(dim=0), v.sum(dim=1)]

    compiled = _eager_and_compiled(fn, [(3, 8)])
    source = _plan_source(compiled)
    assert "    _h" in source.split("def replay")[0], source


def test_a_reshape_of_a_transposed_value_is_a_clone_then_a_view():
    """As in eager, a reshape that cannot be a view is a clone and a view of it: both views here
    are made once."""
    def fn(x):
        h = x.exp()
        moved = h.transpose(0, 1)          # a view, static
        flat = moved.reshape(-1)           # a copy of the transposed layout
        return [flat * 3.0, moved.sum(dim=0)]

    compiled = _eager_and_compiled(fn, [(4, 5)], calls=5)
    plan = next(p for p in reversed(compiled.plans) if p.replayable)
    assert _hoisted(plan) and all(v is not None for v in _hoisted(plan).values())


def test_views_stay_correct_in_a_training_step_with_results_that_are_views():
    w = sg.randn(6, 4, requires_grad=True)
    w_torch = torch.tensor(w.detach().numpy(), requires_grad=True)

    def step(x, framework, weight):
        y = (x @ weight).reshape(2, 3, 4).transpose(1, 2)
        loss = (y * y).sum()
        loss.backward()
        return y.detach()

    compiled = sg.compile(lambda x: step(x, sg, w))
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.standard_normal((6, 6)).astype(np.float32)
        w.grad = None
        w_torch.grad = None
        got = compiled(sg.tensor(x))
        want = step(torch.tensor(x), torch, w_torch)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), w_torch.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_same_shape_expand_leaves_the_program_and_batched_matmul_stays_exact():
    """q @ k^T on 4-D tensors expands both operands to the shapes they have (PyTorch's graph keeps
    ExpandBackward0); the replay drops those expands and the identity gradient sums."""
    w = sg.randn(8, 24, requires_grad=True)

    def step(x):
        qkv = (x @ w).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        out = att @ v
        loss = (out * out).sum()
        loss.backward()
        grad = w.grad.clone()
        w.grad = None
        return [out.detach(), grad]

    compiled = _eager_and_compiled(step, [(2, 5, 8)])
    plan = next(p for p in reversed(compiled.plans) if p.replayable)
    ops = [op.op for op in plan.graph.ops]
    assert "expand" not in ops and "sum_to_size" not in ops, ops
    # the backward reshapes transposed gradients (a copy): those the build leaves to each call
    hoisted = _hoisted(plan)
    assert any(v is None for v in hoisted.values()) and any(v is not None for v in hoisted.values()), hoisted


def _hoisted(plan) -> dict:
    """The views a replay function holds from its build: {name: array, or None for a copy}."""
    replay = plan.compiled_replay._idle[0]
    cells = zip(replay.__code__.co_freevars, replay.__closure__)
    return {name: cell.cell_contents for name, cell in cells if name.startswith("_h")}


def test_expand_gradient_to_the_same_shape_is_the_incoming_gradient_itself():
    """PyTorch's ExpandBackward0 hands the gradient on when the expand kept the shape: a -0.0 stays
    -0.0 (a sum over no dims would make it +0.0)."""
    g = [-0.0, 2.0, -0.0]
    results = []
    for lib in (torch, sg):
        a = lib.tensor([-0.0, 1.0, 3.0], requires_grad=True)
        (a * 1).expand(3).backward(lib.tensor(g))
        results.append(a.grad.numpy())
    assert results[0].tobytes() == results[1].tobytes()
    assert np.signbit(results[1]).tolist() == [True, False, True]


@pytest.mark.parametrize("size", [(1, 3), (3,), (2, 1), (1, 1), (1,), (2, 3), ()])
def test_sum_to_size_matches_pytorch(size):
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float64)
    got, want = [], []
    for lib, out in ((torch, want), (sg, got)):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 1
        z = y.sum_to_size(*size) if size else y.sum_to_size(())
        out.append((z, y, leaf))
    (z_sg, y_sg, leaf_sg), (z_t, y_t, leaf_t) = got[0], want[0]
    assert tuple(z_sg.shape) == tuple(z_t.shape)
    np.testing.assert_allclose(z_sg.detach().numpy(), z_t.detach().numpy(), rtol=1e-12)
    assert (z_sg is y_sg) == (z_t is y_t)
    assert node_names(z_sg.grad_fn) == node_names(z_t.grad_fn)
    seed = np.random.default_rng(2).standard_normal(tuple(z_t.shape))
    z_t.backward(torch.tensor(seed))
    z_sg.backward(sg.tensor(seed))
    np.testing.assert_allclose(leaf_sg.grad.numpy(), leaf_t.grad.numpy(), rtol=1e-12)


def test_sum_to_size_of_integers_and_bools_and_its_error():
    for lib in (torch, sg):
        ints = lib.arange(6).reshape(2, 3).sum_to_size(3)
        assert ints.tolist() == [3, 5, 7] and str(ints.dtype).endswith("int64")
        bools = lib.ones(2, 3, dtype=lib.bool).sum_to_size(3)
        assert bools.tolist() == [2, 2, 2] and str(bools.dtype).endswith("int64")
    messages = []
    for lib in (torch, sg):
        for size in ((4, 3), (2, 3, 1)):
            with pytest.raises(RuntimeError) as error:
                lib.ones(2, 3).sum_to_size(*size)
            messages.append(str(error.value))
    assert messages[:2] == messages[2:]
