"""Edges of the public API against PyTorch: losses on an empty batch, non-Tensor arguments to the
torch-level functions, and the node PyTorch records for linear and for reductions over dim=()."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad
from tests.oracle import compare, torch

# ---- losses on an empty batch: nan for the mean, zeros for gradients, no NumPy warning --------

EMPTY_LOSSES = [
    ("mse_loss", (0,), np.zeros(0)),
    ("mse_loss", (0, 3), np.zeros((0, 3))),
    ("cross_entropy", (0, 3), np.zeros(0, np.int64)),
    ("cross_entropy", (0, 3, 2, 2), np.zeros((0, 2, 2), np.int64)),
    ("cross_entropy", (2, 3, 0), np.zeros((2, 0), np.int64)),
    ("nll_loss", (0, 3), np.zeros(0, np.int64)),
    ("nll_loss", (0, 3, 2), np.zeros((0, 2), np.int64)),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, shape, target", EMPTY_LOSSES, ids=[f"{n}-{s}" for n, s, _ in EMPTY_LOSSES])
def test_loss_on_an_empty_batch_matches_torch(name, shape, target, reduction):
    def loss(lib, x):
        return getattr(lib.nn.functional, name)(x, lib.tensor(target.copy()), reduction=reduction)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compare(loss, [np.zeros(shape)])
    if reduction == "mean":
        assert np.isnan(out.item())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_label_smoothing_on_an_empty_batch_matches_torch(reduction):
    def loss(lib, x):
        return lib.nn.functional.cross_entropy(x, lib.tensor(np.zeros(0, np.int64)), reduction=reduction,
                                               label_smoothing=0.1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare(loss, [np.zeros((0, 3))])


def _empty_batch_steps(lib, loss_name, target, compiled=False):
    """Three SGD steps of a Linear(3, 2) on a batch of no rows: (loss, weight.grad, bias.grad, weight)."""
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10))
        model.bias.copy_(lib.tensor(np.array([0.1, -0.2], np.float32)))
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = getattr(lib.nn.functional, loss_name)(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = lib.compile(step) if compiled else step
    x, y = np.zeros((0, 3), np.float32), target
    results = []
    for _ in range(3):
        loss = step(lib.tensor(x), lib.tensor(y.copy()))
        results.append([loss.detach().numpy().copy(), model.weight.grad.numpy().copy(),
                        model.bias.grad.numpy().copy(), model.weight.detach().numpy().copy()])
    return results


@pytest.mark.parametrize("loss_name, target", [("mse_loss", np.zeros((0, 2), np.float32)),
                                               ("cross_entropy", np.zeros(0, np.int64))])
def test_training_step_on_an_empty_batch_gives_nan_loss_and_zero_gradients(loss_name, target):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = _empty_batch_steps(torch, loss_name, target)
        eager = _empty_batch_steps(staticgrad, loss_name, target)
        replayed = _empty_batch_steps(staticgrad, loss_name, target, compiled=True)
    for want, got, again in zip(expected, eager, replayed):
        assert np.isnan(got[0]) and not got[1].any() and not got[2].any()
        for w, g, r in zip(want, got, again):
            assert np.array_equal(g, w, equal_nan=True) and np.array_equal(r, g, equal_nan=True)
