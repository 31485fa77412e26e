"""float16 replays give eager's bits: NumPy computes some float16 results differently when handed
an output buffer (its mean sums in float32 and divides before rounding, but rounds the sum into a
given out= first), and a replay hands every op its planned buffer."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad


def _half(rng, *shape):
    return staticgrad.tensor((rng.standard_normal(shape) * 3).astype(np.float16))


@pytest.mark.parametrize("fn", [
    lambda x: x.mean() * 2,
    lambda x: x.mean(dim=1) + 1,
    lambda x: x.mean(dim=0, keepdim=True) - x,
    lambda x: staticgrad.nn.functional.mse_loss(x, x.flip(0)),
    lambda x: staticgrad.nn.functional.l1_loss(x, x * 0.5),
], ids=["mean", "mean-dim", "mean-keepdim", "mse", "l1"])
def test_half_means_replay_as_eager(fn):
    compiled = staticgrad.compile(fn)
    rng = np.random.default_rng(0)
    for _ in range(40):
        x = _half(rng, 37, 29)
        expected = fn(x)
        assert np.array_equal(compiled(x).numpy(), expected.numpy())
    assert compiled.stats.replays >= 38


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_half_training_step_replays_as_eager(optimizer):
    def make():
        staticgrad.manual_seed(0)
        model = staticgrad.nn.Linear(29, 7)
        with staticgrad.no_grad():
            for p in model.parameters():
                p.data = p.data.to(staticgrad.float16)
        opt = (staticgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd"
               else staticgrad.optim.Adam(model.parameters(), lr=0.01))
        return model, opt

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = staticgrad.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    (eager_model, eager_opt), (model, opt) = make(), make()
    compiled = staticgrad.compile(lambda x, y: step(model, opt, x, y))
    rng = np.random.default_rng(1)
    for _ in range(12):
        x, y = _half(rng, 64, 29), _half(rng, 64, 7)
        assert np.array_equal(step(eager_model, eager_opt, x, y).detach().numpy(), compiled(x, y).detach().numpy())
        for p, q in zip(eager_model.parameters(), model.parameters()):
            assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    assert compiled.stats.replays >= 10
