"""RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam against torch.optim from identical weights, their state dicts,
and under @compile (replay equals eager bit for bit, a new lr re-read without retracing)."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.test_optim import assert_params_close, batches, run, twin_mlps

torch = pytest.importorskip("torch")

CASES = [
    ("RMSprop", {}), ("RMSprop", dict(momentum=0.9)), ("RMSprop", dict(centered=True)),
    ("RMSprop", dict(centered=True, momentum=0.5, weight_decay=0.1, maximize=True, alpha=0.9, eps=1e-6)),
    ("Adagrad", {}), ("Adagrad", dict(lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.2)),
    ("Adagrad", dict(maximize=True, eps=1e-6)),
    ("Adadelta", {}), ("Adadelta", dict(rho=0.8, weight_decay=0.1, maximize=True, lr=0.5)),
    ("Adamax", {}), ("Adamax", dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, maximize=True, eps=1e-6)),
    ("NAdam", {}), ("NAdam", dict(weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}), ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True, eps=1e-6)),
]
IDS = [name + "-" + ("-".join(kwargs) or "defaults") for name, kwargs in CASES]


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch_over_ten_steps(name, kwargs, dtype):
    t_model, s_model = twin_mlps(dtype)
    t_opt = getattr(torch.optim, name)(t_model.parameters(), **kwargs)
    s_opt = getattr(sg.optim, name)(s_model.parameters(), **kwargs)
    data = batches(10, dtype)
    np.testing.assert_allclose(run(sg, s_model, s_opt, data), run(torch, t_model, t_opt, data),
                               rtol=1e-10 if dtype == "float64" else 2e-5)
    # float32: the buffers grow to ~10 over ten steps; rounding differences in their last bits
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=3e-5, atol=5e-5)
    assert_params_close(s_model, t_model, **tol)
    t_state, s_state = t_opt.state_dict(), s_opt.state_dict()
    assert s_state["param_groups"] == t_state["param_groups"]
    for key, entry in t_state["state"].items():
        assert sorted(s_state["state"][key]) == sorted(entry)
        for k, v in entry.items():
            np.testing.assert_allclose(s_state["state"][key][k].numpy(), v.numpy(), err_msg=k, **tol)


@pytest.mark.parametrize("name,kwargs", [("RMSprop", dict(lr=-1)), ("Adagrad", dict(lr_decay=-1)),
                                         ("Adadelta", dict(rho=1.5)), ("RMSprop", dict(alpha=-0.1)),
                                         ("Adamax", dict(betas=(1.0, 0.9))), ("NAdam", dict(momentum_decay=-1)),
                                         ("NAdam", dict(eps=-1)), ("RAdam", dict(weight_decay=-1)),
                                         ("RAdam", dict(lr=-0.1))])
def test_bad_hyperparameters_raise_like_torch(name, kwargs):
    with pytest.raises(ValueError) as t_error:
        getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as s_error:
        getattr(sg.optim, name)([sg.zeros(1, requires_grad=True)], **kwargs)
    assert str(s_error.value) == str(t_error.value)


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_compiled_step_replays_like_eager_and_rereads_lr(name, kwargs):
    sides = []
    for compiled in (False, True):
        _, model = twin_mlps("float32")
        opt = getattr(sg.optim, name)(model.parameters(), **kwargs)
        step = training_step(sg, model, opt)
        sides.append((model, opt, sg.compile(step) if compiled else step))
    for i, (x, y) in enumerate(batches(7)):
        for _, opt, _ in sides:
            opt.param_groups[0]["lr"] = opt.defaults["lr"] / (1 + i)
        losses = [step(sg.tensor(x), sg.tensor(y)).item() for _, _, step in sides]
        assert losses[0] == losses[1]
    for a, b in zip(sides[0][0].parameters(), sides[1][0].parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    for pa, pb in zip(sides[0][0].parameters(), sides[1][0].parameters()):
        for key, value in sides[0][1].state[pa].items():
            assert np.array_equal(value.numpy(), sides[1][1].state[pb][key].numpy()), key
    assert sides[1][2].stats.traces <= 2 and sides[1][2].stats.replays >= 5, sides[1][2].stats
