"""Python float arguments are read at replay like an optimizer's lr: one plan serves every value,
unless Python made something of the value that a plan would hold (then each value traces)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import staticgrad as sg


def _twins(body):
    def make():
        p = sg.tensor([0.5, -1.0], requires_grad=True)
        opt = sg.optim.SGD([p], lr=0.1)

        def step(x, s):
            opt.zero_grad()
            loss = body(p, x, s, opt)
            loss.backward()
            opt.step()
            return loss
        return p, opt, step
    return make(), make()


# Read only through ops: the value becomes a replay-time scalar.
DYNAMIC = {
    "product": lambda p, x, s, o: ((p * x * s) ** 2).sum(),
    "derived": lambda p, x, s, o: ((p * x) * (1.0 - s) / (s * s)).sum(),
    "full": lambda p, x, s, o: (p * sg.full((2,), s)).sum(),
    "clamp": lambda p, x, s, o: (p * x).clamp(min=s - 1.0).sum(),
}
# Made into something a plan holds: each value gets its own plan.
STATIC = {
    "a branch": lambda p, x, s, o: ((p * x) ** 2).sum() if s > 0.75 else (p * x).sum(),
    "math.exp": lambda p, x, s, o: (p * x * math.exp(s)).sum(),
    "tensor(s)": lambda p, x, s, o: (p * x * sg.tensor(s)).sum(),
    "a list": lambda p, x, s, o: (p * sg.tensor([s, 1.0])).sum(),
    "np.float32": lambda p, x, s, o: (p * x * np.float32(s)).sum(),
    "a loop count": lambda p, x, s, o: sum([(p * x).sum() for _ in range(int(s * 4))]),
    "round": lambda p, x, s, o: (p * round(s, 1)).sum(),
    "kept as lr": lambda p, x, s, o: (o.param_groups[0].__setitem__("lr", s), (p * x).sum())[1],
}


def _run(body, calls=10):
    (pe, oe, eager), (pc, oc, compiled) = _twins(body)
    compiled = sg.compile(compiled, max_plans=calls + 1)
    for k in range(calls):
        x, s = sg.tensor([1.0, 2.0 + k]), 0.5 + 0.05 * k
        expected, got = eager(x, s), compiled(x, s)
        assert np.array_equal(got.detach().numpy(), expected.detach().numpy()), f"loss differs at call {k}"
        assert np.array_equal(pc.detach().numpy(), pe.detach().numpy()), f"parameter differs at call {k}"
        assert oc.param_groups[0]["lr"] == oe.param_groups[0]["lr"]
    return compiled


@pytest.mark.parametrize("name", list(DYNAMIC))
def test_a_float_read_only_through_ops_replays_for_every_value(name):
    compiled = _run(DYNAMIC[name])
    assert compiled.stats.traces == 2 and compiled.stats.replays == 8
    assert len(compiled.plans) == 2


@pytest.mark.parametrize("name", list(STATIC))
def test_a_float_python_made_a_value_of_traces_per_value(name):
    compiled = _run(STATIC[name])
    assert compiled.stats.replays == 0


def test_keyword_floats_with_repeated_and_new_values():
    w = sg.tensor([1.0, -2.0], requires_grad=True)

    def fn(x, scale=1.0, *, shift):
        loss = ((w * x) * scale + shift).sum()
        loss.backward()
        return loss

    compiled = sg.compile(fn)
    for scale, shift in [(0.5, 0.0), (0.5, 0.0), (0.75, 0.1), (2.0, -1.0), (0.5, 0.0), (3.0, 0.25)]:
        x = sg.tensor([1.0, 3.0])
        w.grad = None
        expected, expected_grad = fn(x, scale, shift=shift), w.grad.numpy().copy()
        w.grad = None
        got = compiled(x, scale=scale, shift=shift)
        assert np.array_equal(got.detach().numpy(), expected.detach().numpy())
        assert np.array_equal(w.grad.numpy(), expected_grad)
    assert compiled.stats.traces == 2 and compiled.stats.replays == 4


def test_threads_replaying_with_their_own_floats():
    """The float a replay reads is its own call's, also with several threads replaying one plan."""
    w = sg.tensor([1.0, 2.0, 3.0])

    @sg.compile
    def scaled(x, s):
        with sg.no_grad():
            return (x * w * s).sum()

    x = sg.tensor([1.0, 1.0, 1.0])
    for s in (0.5, 0.25):
        scaled(x, s)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            s = float(rng.uniform(-2, 2))
            if scaled(x, s).item() != (x * w * s).sum().item():
                errors.append(s)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert scaled.stats.traces == 2
