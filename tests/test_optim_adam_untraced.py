"""Adam/AdamW's untraced step (one Numba pass per parameter) against the ops a compiled step
records and replays: the same bits in every parameter and state buffer, the same versions, on
every branch (maximize, L2 or decoupled weight decay, float32 and float64), and the ops kept for
what the loop does not take (AMSGrad, a non-contiguous parameter)."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.optim import adam as adam_module

CASES = [
    ("Adam", {}),
    ("Adam", dict(weight_decay=0.1, maximize=True)),
    ("Adam", dict(weight_decay=0.05, betas=(0.8, 0.95), eps=1e-6)),
    ("AdamW", {}),
    ("AdamW", dict(weight_decay=0)),
    ("AdamW", dict(weight_decay=0.1, maximize=True, eps=1e-3)),
]
IDS = [name + "-" + ("-".join(kwargs) or "defaults") for name, kwargs in CASES]


def params(dtype, transposed=False):
    """Three leaves of several shapes (one 0-dim); the first one non-contiguous if ``transposed``."""
    sg.manual_seed(0)
    weight = sg.randn(4, 3, dtype=dtype)
    weight = (weight.t() if transposed else weight).detach().requires_grad_()
    return [weight, sg.randn(7, dtype=dtype).requires_grad_(), sg.randn((), dtype=dtype).requires_grad_()]


def train(name, kwargs, dtype, compiled, transposed=False, steps=5):
    """``steps`` updates with fixed gradients and a changing lr and betas; the bytes of every
    parameter and state tensor, and every version, after them."""
    ps = params(dtype, transposed)
    opt = getattr(sg.optim, name)(ps, lr=0.01, **kwargs)
    step = sg.compile(opt.step) if compiled else opt.step
    rng = np.random.default_rng(1)
    for i in range(steps):
        for p in ps:
            grad = sg.tensor(rng.standard_normal(tuple(p.shape)), dtype=dtype)
            if p.grad is None:
                p.grad = grad
            else:
                p.grad.copy_(grad)  # the same .grad tensors: a compiled step replays
        opt.param_groups[0]["lr"] = 0.01 / (1 + i)
        opt.param_groups[0]["betas"] = (0.9 - 0.01 * i, 0.999 - 0.0005 * i)
        step()
    if compiled:
        assert step.stats.replays >= steps - 2, step.stats
    tensors = [t for p in ps for t in [p] + [v for _, v in sorted(opt.state[p].items())]]
    return [t.detach().numpy().tobytes() for t in tensors], [t._version_counter[0] for t in tensors]


def spy_on_loop(monkeypatch) -> list:
    """The results of every ``adam_step`` call (True: the loop updated the parameter)."""
    taken, real = [], adam_module.adam_step

    def spy(*args):
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(adam_module, "adam_step", spy)
    return taken


@pytest.mark.parametrize("dtype", [sg.float32, sg.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_untraced_adam_equals_its_replayed_ops_bit_for_bit_with_versions(monkeypatch, name, kwargs, dtype):
    taken = spy_on_loop(monkeypatch)
    eager = train(name, kwargs, dtype, compiled=False)
    assert taken and all(taken), "the untraced step ran the loop"
    taken.clear()
    compiled = train(name, kwargs, dtype, compiled=True)
    assert not taken, "a traced step records the ops"
    assert eager == compiled


@pytest.mark.parametrize("name,kwargs,transposed", [("Adam", dict(amsgrad=True), False),
                                                     ("AdamW", dict(weight_decay=0.1), True)],
                         ids=["amsgrad", "non-contiguous"])
def test_what_the_loop_does_not_take_runs_the_ops_and_stays_equal(monkeypatch, name, kwargs, transposed):
    taken = spy_on_loop(monkeypatch)
    eager = train(name, kwargs, sg.float32, compiled=False, transposed=transposed)
    if transposed:  # the non-contiguous parameter runs the ops, the others the loop
        assert taken.count(False) == 5 and taken.count(True) == 10
    else:
        assert not taken
    assert eager == train(name, kwargs, sg.float32, compiled=True, transposed=transposed)


def test_untraced_adam_matches_torch():
    """The loop's numbers are PyTorch's (float64, maximize and L2 weight decay on)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(s) for s in ((4, 3), (7,))]
    grads = [[rng.standard_normal(v.shape) for v in values] for _ in range(4)]
    results = []
    for lib in (sg, torch):
        ps = [lib.tensor(v.copy(), requires_grad=True) for v in values]
        opt = lib.optim.Adam(ps, lr=0.05, weight_decay=0.1, maximize=True)
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = lib.tensor(g.copy())
            opt.step()
        results.append([p.detach().numpy().copy() for p in ps] + [opt.state[ps[0]]["exp_avg_sq"].numpy().copy()])
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-13, atol=1e-15)
