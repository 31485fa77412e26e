"""nn.utils.clip_grad_norm_ / clip_grad_value_ against PyTorch, and recorded in a compiled step
(no host read: replay equals eager bit for bit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def twin_grads(scale=1.0, dtype="float64"):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) * scale for s in ((3, 4), (4,), (2, 2))]
    out = []
    for lib in (torch, sg):
        params = [lib.zeros(*a.shape, dtype=getattr(lib, dtype), requires_grad=True) for a in arrays]
        for p, a in zip(params, arrays):
            p.grad = lib.tensor(a)
        out.append(params + [lib.zeros(2, requires_grad=True)])  # one without a gradient
    return out


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.5, -math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    t_params, s_params = twin_grads()
    t_norm = torch.nn.utils.clip_grad_norm_(t_params, max_norm, norm_type)
    s_norm = sg.nn.utils.clip_grad_norm_(s_params, max_norm, norm_type=norm_type, foreach=True)
    np.testing.assert_allclose(s_norm.numpy(), t_norm.numpy(), rtol=1e-13)
    for t, s in zip(t_params[:3], s_params[:3]):
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-13)


def test_clip_grad_norm_edge_cases_match_torch():
    assert sg.nn.utils.clip_grad_norm_([sg.zeros(2, requires_grad=True)], 1.0).item() == 0.0
    t_params, s_params = twin_grads()
    s_params[0].grad[0, 0] = math.nan
    t_params[0].grad[0, 0] = math.nan
    with pytest.raises(RuntimeError) as t_error:
        torch.nn.utils.clip_grad_norm_(t_params, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as s_error:
        sg.nn.utils.clip_grad_norm_(s_params, 1.0, error_if_nonfinite=True)
    assert str(s_error.value) == str(t_error.value)
    one = sg.zeros(3, requires_grad=True)
    one.grad = sg.tensor([3.0, 4.0, 0.0])
    assert sg.nn.utils.clip_grad_norm_(one, 1.0).item() == pytest.approx(5.0)


def test_clip_grad_value_matches_torch():
    t_params, s_params = twin_grads(scale=2.0)
    torch.nn.utils.clip_grad_value_(t_params, 0.7)
    sg.nn.utils.clip_grad_value_(s_params, 0.7)
    for t, s in zip(t_params[:3], s_params[:3]):
        assert np.array_equal(s.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("clip", ["norm", "norm-inf", "value"])
def test_clipping_in_a_compiled_step_replays_like_eager(clip):
    sides = []
    for compiled in (False, True):
        sg.manual_seed(0)
        model = sg.nn.Sequential(sg.nn.Linear(5, 8), sg.nn.Tanh(), sg.nn.Linear(8, 2))
        opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = sg.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if clip == "value":
                sg.nn.utils.clip_grad_value_(model.parameters(), 0.05)
                return loss
            return sg.nn.utils.clip_grad_norm_(model.parameters(), 0.3, math.inf if clip == "norm-inf" else 2.0)

        def full_step(x, y, step=step, opt=opt):
            out = step(x, y)
            opt.step()
            return out

        sides.append((model, sg.compile(full_step) if compiled else full_step))
    rng = np.random.default_rng(1)
    for _ in range(6):
        x, y = rng.standard_normal((6, 5)).astype(np.float32), 3 * rng.standard_normal((6, 2)).astype(np.float32)
        outs = [step(sg.tensor(x), sg.tensor(y)).detach().numpy() for _, step in sides]
        assert np.array_equal(outs[0], outs[1])
    for a, b in zip(sides[0][0].parameters(), sides[1][0].parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    assert sides[1][1].stats.replays >= 4
