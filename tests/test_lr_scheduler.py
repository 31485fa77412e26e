"""Learning-rate schedulers against torch.optim.lr_scheduler step by step (the same floats), their
state dicts, and a compiled training step that sees each new lr without retracing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step

torch = pytest.importorskip("torch")


def twin_optimizers(optimizer="SGD", **kwargs):
    """The same two-group optimizer in both libraries (the parameters never change: no steps of the model)."""
    out = []
    for lib in (torch, sg):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)
        out.append(getattr(lib.optim, optimizer)([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, **kwargs))
    return out


def lambda_factor(epoch):
    return 0.9 ** epoch + 0.01 * epoch


CASES = [
    ("StepLR", dict(step_size=3, gamma=0.5), {}),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), {}),
    ("ExponentialLR", dict(gamma=0.87), {}),
    ("CosineAnnealingLR", dict(T_max=7), {}),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01), {}),
    ("LambdaLR", dict(lr_lambda=lambda_factor), {}),
    ("OneCycleLR", dict(max_lr=[1.0, 2.0], total_steps=17), dict(momentum=0.9)),
    ("OneCycleLR", dict(max_lr=0.3, epochs=3, steps_per_epoch=5, three_phase=True, anneal_strategy="linear"),
     dict(momentum=0.9)),
]


def ids(case):
    return case[0] + "-" + "-".join(case[1])


def schedulers(name, kwargs, opt_kwargs, optimizer="SGD"):
    t_opt, s_opt = twin_optimizers(optimizer, **opt_kwargs)
    return (t_opt, getattr(torch.optim.lr_scheduler, name)(t_opt, **kwargs),
            s_opt, getattr(sg.optim.lr_scheduler, name)(s_opt, **kwargs))


def momenta(opt):
    return [(g.get("momentum"), tuple(g.get("betas", ()))) for g in opt.param_groups]


@pytest.mark.parametrize("case", CASES, ids=[ids(c) for c in CASES])
def test_lr_sequence_matches_torch_step_by_step(case):
    name, kwargs, opt_kwargs = case
    t_opt, t_sched, s_opt, s_sched = schedulers(name, kwargs, opt_kwargs)
    steps = 15 if name == "OneCycleLR" else 20
    for _ in range(steps):
        assert s_sched.get_last_lr() == t_sched.get_last_lr()
        assert [g["lr"] for g in s_opt.param_groups] == [g["lr"] for g in t_opt.param_groups]
        assert momenta(s_opt) == momenta(t_opt)
        t_opt.step()
        s_opt.step()
        t_sched.step()
        s_sched.step()
    assert s_sched.last_epoch == t_sched.last_epoch


def test_one_cycle_cycles_adams_beta1_like_torch_and_refuses_stepping_past_the_end():
    t_opt, t_sched, s_opt, s_sched = schedulers("OneCycleLR", dict(max_lr=0.1, total_steps=6), {}, "Adam")
    for _ in range(6):
        t_opt.step()
        s_opt.step()
        t_sched.step()
        s_sched.step()
        assert s_sched.get_last_lr() == t_sched.get_last_lr() and momenta(s_opt) == momenta(t_opt)
    with pytest.raises(ValueError, match=r"Tried to step 7 times\. The specified number of total steps is 6"):
        s_sched.step()


@pytest.mark.parametrize("name,kwargs", [("StepLR", dict(step_size=2)), ("MultiStepLR", dict(milestones=[1, 3])),
                                         ("ExponentialLR", dict(gamma=0.5)), ("CosineAnnealingLR", dict(T_max=4))])
def test_step_with_an_epoch_uses_the_closed_form_like_torch(name, kwargs):
    _, t_sched, _, s_sched = schedulers(name, kwargs, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (3, 1, 6):
            t_sched.step(epoch)
            s_sched.step(epoch)
            assert s_sched.get_last_lr() == t_sched.get_last_lr()


PLATEAU_CASES = [dict(), dict(mode="max", factor=0.5, patience=1, threshold_mode="abs", threshold=0.1, cooldown=2),
                 dict(patience=0, min_lr=[0.05, 0.2], eps=1e-3), dict(mode="max", threshold=0.01, patience=2)]


@pytest.mark.parametrize("kwargs", PLATEAU_CASES, ids=["defaults", "max-abs-cooldown", "min-lrs", "max-rel"])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    t_opt, s_opt = twin_optimizers()
    t_sched = torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, **kwargs)
    s_sched = sg.optim.lr_scheduler.ReduceLROnPlateau(s_opt, **kwargs)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.97, 0.9, 0.8, 0.8, 0.85, 0.99, 1.0, 1.0, 0.7, 0.7, 0.71] * 2
    for i, m in enumerate(metrics):
        t_sched.step(torch.tensor(m, dtype=torch.float64) if i % 3 == 0 else m)
        s_sched.step(sg.tensor(m, dtype=sg.float64) if i % 3 == 0 else m)
        assert s_sched.get_last_lr() == t_sched.get_last_lr()
        assert (s_sched.num_bad_epochs, s_sched.cooldown_counter, s_sched.best) == (
            t_sched.num_bad_epochs, t_sched.cooldown_counter, t_sched.best)


@pytest.mark.parametrize("make,error", [
    (lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0), ValueError),
    (lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="up"), ValueError),
    (lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0]), ValueError),
    (lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1), ValueError),
    (lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=5, pct_start=1), ValueError),
    (lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, 2, last_epoch=3), KeyError),
    (lambda lib, opt: lib.optim.lr_scheduler.StepLR(object(), 2), TypeError),
], ids=["factor", "mode", "lambdas", "one-cycle-steps", "pct-start", "resume", "not-an-optimizer"])
def test_errors_match_torch(make, error):
    t_opt, s_opt = twin_optimizers()
    with pytest.raises(error) as t_error:
        make(torch, t_opt)
    with pytest.raises(error) as s_error:
        make(sg, s_opt)
    if error is not KeyError:
        assert str(s_error.value) == str(t_error.value)


def test_stepping_the_scheduler_before_the_optimizer_warns_like_torch():
    _, s_opt = twin_optimizers()
    sched = sg.optim.lr_scheduler.StepLR(s_opt, 2)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()


@pytest.mark.parametrize("case", CASES[:6], ids=[ids(c) for c in CASES[:6]])
def test_state_dict_round_trip_continues_the_same_sequence(case):
    name, kwargs, opt_kwargs = case
    t_opt, t_sched, s_opt, s_sched = schedulers(name, kwargs, opt_kwargs)
    for _ in range(4):
        s_opt.step()
        s_sched.step()
        t_opt.step()
        t_sched.step()
    saved = s_sched.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 4
    assert set(saved) == set(t_sched.state_dict())
    _, fresh_opt = twin_optimizers(**opt_kwargs)
    fresh_opt.load_state_dict(s_opt.state_dict())
    fresh = getattr(sg.optim.lr_scheduler, name)(fresh_opt, **kwargs)
    fresh.load_state_dict(saved)
    for _ in range(6):
        for opt, sched in ((s_opt, s_sched), (fresh_opt, fresh), (t_opt, t_sched)):
            opt.step()
            sched.step()
        assert fresh.get_last_lr() == s_sched.get_last_lr() == t_sched.get_last_lr()


def test_reduce_lr_on_plateau_state_dict_round_trip():
    _, s_opt = twin_optimizers()
    sched = sg.optim.lr_scheduler.ReduceLROnPlateau(s_opt, patience=1, mode="max")
    for m in (1.0, 0.5, 0.5):
        sched.step(m)
    other = sg.optim.lr_scheduler.ReduceLROnPlateau(twin_optimizers()[1])
    other.load_state_dict(sched.state_dict())
    assert (other.mode, other.mode_worse, other.best, other.num_bad_epochs) == ("max", -float("inf"), 1.0, 0)


def mlp(seed=0):
    sg.manual_seed(seed)
    return sg.nn.Sequential(sg.nn.Linear(5, 8), sg.nn.Tanh(), sg.nn.Linear(8, 2))


def batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32))
            for _ in range(n)]


SCHEDULED_STEPS = [
    ("SGD", dict(lr=0.1, momentum=0.9), "StepLR", dict(step_size=2, gamma=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.9), "OneCycleLR", dict(max_lr=0.2, total_steps=12)),
    ("Adam", dict(lr=0.01), "OneCycleLR", dict(max_lr=0.02, total_steps=12, three_phase=True)),
    ("Adam", dict(lr=0.01), "CosineAnnealingLR", dict(T_max=4)),
    ("SGD", dict(lr=0.05), "LambdaLR", dict(lr_lambda=lambda_factor)),
]


@pytest.mark.parametrize("opt_name,opt_kwargs,name,kwargs", SCHEDULED_STEPS,
                         ids=[f"{c[0]}-{c[2]}" for c in SCHEDULED_STEPS])
def test_compiled_step_sees_each_new_lr_without_retracing(opt_name, opt_kwargs, name, kwargs):
    sides = []
    for compiled in (False, True):
        model = mlp()
        opt = getattr(sg.optim, opt_name)(model.parameters(), **opt_kwargs)
        sched = getattr(sg.optim.lr_scheduler, name)(opt, **kwargs)
        step = training_step(sg, model, opt)
        sides.append((model, opt, sched, sg.compile(step) if compiled else step))
    traces_when_state_exists = None
    for i, (x, y) in enumerate(batches(12)):
        if i == 2:  # the first step creates the optimizer's state: a second plan, then no more
            traces_when_state_exists = sides[1][3].stats.traces
        losses = []
        for _, _, sched, step in sides:
            losses.append(step(sg.tensor(x), sg.tensor(y)).detach().numpy())
            sched.step()
        assert np.array_equal(losses[0], losses[1])
    (eager_model, _, eager_sched, _), (model, _, sched, compiled) = sides
    assert sched.get_last_lr() == eager_sched.get_last_lr()
    assert len(set(sched.get_last_lr())) == 1 and sched.get_last_lr() != [opt_kwargs["lr"]]
    for a, b in zip(eager_model.parameters(), model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    assert compiled.stats.traces == traces_when_state_exists <= 2, compiled.stats
    assert compiled.stats.replays == 12 - compiled.stats.traces, compiled.stats
