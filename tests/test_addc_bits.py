"""addcmul and addcdiv give PyTorch's bits (CPU): addcmul rounds value * t1, then adds self and the
product with t2 as one fused multiply-add; addcdiv divides, then adds. float16 works in float32.
Their gradients follow PyTorch's formulas operation for operation (the same roundings, the same
nodes under create_graph). Eager and a compiled replay agree bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import node_names, torch
from tests.replay_check import replay_matches_eager, same_bits, unfused_ops

VALUES = [1, 0.5, -3, 1e-3]


def _arrays(dtype, n=4099, seed=0):
    """Three arrays with exponents spread wide (so that sums cancel and products round often)."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype) for _ in range(3)]


def _both(name, arrays, value, grad=None):
    """(values, gradients) of ``lib.name(*arrays, value=value)`` in PyTorch then staticgrad."""
    results = []
    for lib in (torch, sg):
        inputs = [lib.tensor(a, requires_grad=grad is not None) for a in arrays]
        y = getattr(lib, name)(*inputs, value=value)
        grads = []
        if grad is not None:
            y.backward(lib.tensor(grad))
            grads = [t.grad.numpy() for t in inputs]
        results.append((y.detach().numpy(), grads))
    return results


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_values_and_gradients_are_torchs_bits(name, dtype, value):
    a, b, c = _arrays(dtype)
    if name == "addcdiv":
        c = np.where(np.abs(c) < 1e-2, dtype(1.5), c)
    grad = _arrays(dtype, seed=1)[0]
    (t_value, t_grads), (s_value, s_grads) = _both(name, [a, b, c], value, grad if dtype != np.float16 else None)
    same_bits(s_value, t_value, f"{name} value={value}")
    for k, (s, t) in enumerate(zip(s_grads, t_grads)):
        same_bits(s, t, f"{name} gradient of input {k}, value={value}")


@pytest.mark.parametrize("value", VALUES)
def test_addcmul_in_place_broadcast_and_strided_inputs(value):
    a, b, c = _arrays(np.float32, n=40 * 50, seed=2)
    a, b, c = a.reshape(50, 40).T, b.reshape(40, 50)[:, :1], c.reshape(40, 50)[0]
    outs = []
    for lib in (torch, sg):
        target = lib.tensor(np.ascontiguousarray(a.T)).T   # a transposed view, written in place
        target.addcmul_(lib.tensor(b), lib.tensor(c), value=value)
        outs.append(np.ascontiguousarray(target.numpy()))
        outs.append(lib.addcmul(lib.tensor(a), lib.tensor(np.float32(0.7)), lib.tensor(c), value=value).numpy())
    same_bits(outs[2], outs[0], "in place into a transposed view")
    same_bits(outs[3], outs[1], "a 0-dim tensor1")


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_gradient_graphs_under_create_graph_are_torchs(name):
    graphs = []
    for lib in (torch, sg):
        xs = [lib.tensor([0.5, -1.25, 2.0], requires_grad=True) for _ in range(3)]
        grads = lib.autograd.grad(getattr(lib, name)(*xs, value=0.5).sum(), xs, create_graph=True)
        graphs.append([node_names(g.grad_fn) for g in grads])
    assert graphs[1] == graphs[0]


@pytest.mark.parametrize("value", VALUES)
def test_addcmul_replays_its_eager_bits(value):
    def op(a, b):
        return sg.addcmul(b, a, b * 3.0, value=value) * 2.0

    def inputs(rng):
        return rng.uniform(-2, 2, size=(4, 6)), rng.uniform(-2, 2, size=(4, 6))

    plan = replay_matches_eager(op, inputs, np.float32)
    assert "addcmul" not in unfused_ops(plan)   # joins the fused kernel, as fma(value * t1, t2, self)
