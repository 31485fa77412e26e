"""One traced-and-replayed check for an elementwise op: a small training step using it, run eagerly
and through @staticgrad.compile on twin parameters, must agree bit for bit on new inputs."""

from __future__ import annotations

import numpy as np

import staticgrad as sg


def same_bits(a, b, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert a.tobytes() == b.tobytes(), f"{what}: {int(np.sum(a != b))} elements differ"


def _step(op, w, opt):
    def step(x, z):
        opt.zero_grad()
        y = op(x * w, z)
        loss = (y * y).sum()
        loss.backward()
        opt.step()
        return y
    return step


def replay_matches_eager(op, inputs, dtype=np.float32, calls=4):
    """``op(a, b)`` inside a step (a = x * w, w a parameter, b a plain input), eager and compiled;
    returns the compiled function's last plan, for checks of what was fused."""
    rng = np.random.default_rng(5)
    start = rng.uniform(0.5, 1.5, size=inputs(rng)[0].shape).astype(dtype)
    w_eager = sg.tensor(start.copy(), requires_grad=True)
    w_comp = sg.tensor(start.copy(), requires_grad=True)
    eager = _step(op, w_eager, sg.optim.SGD([w_eager], lr=1e-3))
    compiled = sg.compile(_step(op, w_comp, sg.optim.SGD([w_comp], lr=1e-3)))
    for call in range(calls):
        x, z = (sg.tensor(a.astype(dtype)) for a in inputs(rng))
        y_eager, y_comp = eager(x, z), compiled(x, z)
        same_bits(y_comp.detach().numpy(), y_eager.detach().numpy(), f"output of call {call}")
        same_bits(w_comp.grad.numpy(), w_eager.grad.numpy(), f"gradient of call {call}")
        same_bits(w_comp.detach().numpy(), w_eager.detach().numpy(), f"parameter after call {call}")
    assert compiled.stats.replays >= calls - 2, compiled.stats
    return next(p for p in reversed(compiled.plans) if p.replayable)


def unfused_ops(plan) -> set:
    """The names of the ops a plan runs as separate steps (those that joined a kernel are gone)."""
    return {op.op for op in plan.graph.ops}
