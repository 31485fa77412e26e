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


@pytest.mark.parametrize("fn", [
    lambda x: x.sum() * 2,
    lambda x: x.sum(dim=1) + 1,
    lambda x: x.sum(dim=(0,), keepdim=True) - x,
    lambda x: x + x[:1].sum(),
], ids=["sum", "sum-dim", "sum-keepdim", "broadcast-back"])
def test_half_sums_add_in_float32_as_torch_and_replay_as_eager(fn):
    """PyTorch's CPU sum of float16 adds in float32 and rounds once; NumPy's adds in float16. The
    gradients' sums (a broadcast summed back to its shape) follow the same rule."""
    torch = pytest.importorskip("torch")
    compiled = staticgrad.compile(fn)
    rng = np.random.default_rng(1)
    for _ in range(30):
        data = (rng.standard_normal((37, 61)) * 3).astype(np.float16)
        x = staticgrad.tensor(data, requires_grad=True)
        expected = fn(x)
        t = torch.tensor(data, requires_grad=True)
        want = fn(t)
        assert np.array_equal(expected.detach().numpy(), want.detach().numpy())
        assert np.array_equal(compiled(x).detach().numpy(), expected.detach().numpy())
    b = staticgrad.tensor((rng.standard_normal((1, 61)) * 3).astype(np.float16), requires_grad=True)
    a = staticgrad.tensor((rng.standard_normal((37, 61)) * 3).astype(np.float16))
    tb = torch.tensor(b.detach().numpy(), requires_grad=True)
    (a * b).sum().backward()
    (torch.tensor(a.numpy()) * tb).sum().backward()
    assert np.array_equal(b.grad.numpy(), tb.grad.numpy())
    assert compiled.stats.replays >= 28


def test_half_module_casts_its_floats_as_torch():
    torch = pytest.importorskip("torch")
    model = staticgrad.nn.Sequential(staticgrad.nn.Linear(3, 4), staticgrad.nn.BatchNorm1d(4))
    assert model.half() is model
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).half()
    for (name, value), (_, want) in zip(model.state_dict().items(), twin.state_dict().items()):
        assert str(value.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], name
