"""MultiplicativeLR, ConstantLR, LinearLR, PolynomialLR, CosineAnnealingWarmRestarts and SequentialLR
against torch.optim.lr_scheduler: the same lr floats at every step (and in closed form), state dicts,
PyTorch's errors, and a compiled training step that sees each new lr without retracing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.test_lr_scheduler import batches, mlp, twin_optimizers

torch = pytest.importorskip("torch")


def factor(epoch):
    return 0.95 if epoch % 3 else 1.02


def _sequential(lib, opt):
    schedulers = lib.optim.lr_scheduler
    return schedulers.SequentialLR(opt, [schedulers.LinearLR(opt, start_factor=0.1, total_iters=4),
                                         schedulers.ExponentialLR(opt, gamma=0.9),
                                         schedulers.CosineAnnealingLR(opt, T_max=5)], milestones=[4, 9])


def _sequential_constant(lib, opt):
    schedulers = lib.optim.lr_scheduler
    return schedulers.SequentialLR(opt, [schedulers.ConstantLR(opt, factor=0.5, total_iters=3),
                                         schedulers.PolynomialLR(opt, total_iters=6, power=2.0)], milestones=[5])


def _named(name, **kwargs):
    return lambda lib, opt: getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)


SCHEDULES = {
    "multiplicative": _named("MultiplicativeLR", lr_lambda=factor),
    "multiplicative-per-group": _named("MultiplicativeLR", lr_lambda=[factor, lambda e: 0.9]),
    "constant": _named("ConstantLR"),
    "constant-factor": _named("ConstantLR", factor=0.25, total_iters=7),
    "linear": _named("LinearLR"),
    "linear-down": _named("LinearLR", start_factor=1.0, end_factor=0.05, total_iters=9),
    "polynomial": _named("PolynomialLR"),
    "polynomial-power": _named("PolynomialLR", total_iters=8, power=0.7),
    "warm-restarts": _named("CosineAnnealingWarmRestarts", T_0=4),
    "warm-restarts-mult": _named("CosineAnnealingWarmRestarts", T_0=2, T_mult=2, eta_min=0.001),
    "sequential": _sequential,
    "sequential-constant-polynomial": _sequential_constant,
}


def _twins(name):
    t_opt, s_opt = twin_optimizers(momentum=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's members step their lrs at construction
        return t_opt, SCHEDULES[name](torch, t_opt), s_opt, SCHEDULES[name](sg, s_opt)


def _lrs(opt):
    return [g["lr"] for g in opt.param_groups]


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_matches_torch_step_by_step(name):
    t_opt, t_sched, s_opt, s_sched = _twins(name)
    for _ in range(20):
        assert s_sched.get_last_lr() == t_sched.get_last_lr()
        assert _lrs(s_opt) == _lrs(t_opt)
        t_opt.step()
        s_opt.step()
        t_sched.step()
        s_sched.step()
    assert s_sched.last_epoch == t_sched.last_epoch


@pytest.mark.parametrize("name", ["constant", "linear-down", "polynomial-power", "warm-restarts",
                                  "warm-restarts-mult"])
def test_step_with_an_epoch_matches_torch(name):
    _, t_sched, _, s_sched = _twins(name)
    epochs = (3, 1, 6, 12, 2.5, 0) if name.startswith("warm") else (3, 1, 6, 12, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in epochs:
            t_sched.step(epoch)
            s_sched.step(epoch)
            assert s_sched.get_last_lr() == t_sched.get_last_lr()
            assert s_sched.last_epoch == t_sched.last_epoch


@pytest.mark.parametrize("name", ["multiplicative", "constant-factor", "linear", "polynomial", "warm-restarts-mult",
                                  "sequential"])
def test_state_dict_round_trip_continues_the_same_sequence(name):
    t_opt, t_sched, s_opt, s_sched = _twins(name)
    for _ in range(5):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    saved = s_sched.state_dict()
    assert set(saved) == set(t_sched.state_dict()) and "optimizer" not in saved
    _, fresh_opt = twin_optimizers(momentum=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = SCHEDULES[name](sg, fresh_opt)
    fresh_opt.load_state_dict(s_opt.state_dict())  # a resumed run: build, then load both
    fresh.load_state_dict(saved)
    for _ in range(8):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched), (fresh_opt, fresh)):
            opt.step()
            sched.step()
        assert fresh.get_last_lr() == s_sched.get_last_lr() == t_sched.get_last_lr()


def test_constant_factor_zero_fails_when_it_ends_like_torch():
    t_opt, s_opt = twin_optimizers()
    for lib, opt in ((torch, t_opt), (sg, s_opt)):
        sched = lib.optim.lr_scheduler.ConstantLR(opt, factor=0.0, total_iters=2)
        opt.step()
        sched.step()
        assert sched.get_last_lr() == [0.0, 0.0]
        with pytest.raises(ZeroDivisionError):
            sched.step()


def _other_optimizer_member(lib, opt):
    other = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
    return lib.optim.lr_scheduler.SequentialLR(opt, [lib.optim.lr_scheduler.ConstantLR(other)], milestones=[])


ERRORS = {
    "constant-factor-above-one": _named("ConstantLR", factor=1.5),
    "constant-factor-negative": _named("ConstantLR", factor=-0.1),
    "linear-start-zero": _named("LinearLR", start_factor=0),
    "linear-start-above-one": _named("LinearLR", start_factor=1.2),
    "linear-end-negative": _named("LinearLR", end_factor=-0.5),
    "multiplicative-count": _named("MultiplicativeLR", lr_lambda=[factor]),
    "multiplicative-not-callable": _named("MultiplicativeLR", lr_lambda=0.9),
    "warm-t0-zero": _named("CosineAnnealingWarmRestarts", T_0=0),
    "warm-t0-float": _named("CosineAnnealingWarmRestarts", T_0=2.0),
    "warm-tmult-zero": _named("CosineAnnealingWarmRestarts", T_0=2, T_mult=0),
    "warm-eta-min-string": _named("CosineAnnealingWarmRestarts", T_0=2, eta_min="0"),
    "warm-negative-epoch": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 3).step(-1),
    "sequential-empty": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [], milestones=[]),
    "sequential-milestones": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.ConstantLR(opt)], milestones=[3]),
    "sequential-plateau": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.ReduceLROnPlateau(opt)], milestones=[]),
    "sequential-not-a-scheduler": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [object()], milestones=[]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    t_opt, s_opt = twin_optimizers()
    with pytest.raises(Exception) as t_error:
        ERRORS[name](torch, t_opt)
    with pytest.raises(Exception) as s_error:
        ERRORS[name](sg, s_opt)
    assert type(s_error.value) is type(t_error.value)
    assert str(s_error.value) == str(t_error.value).replace("torch.", "staticgrad.")


def test_sequential_names_the_other_optimizer_like_torch():
    t_opt, s_opt = twin_optimizers()
    for lib, opt in ((torch, t_opt), (sg, s_opt)):
        with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer, but got "
                                             "scheduler ConstantLR at index 0 has"):
            _other_optimizer_member(lib, opt)


def test_sequential_constant_is_a_warmup_that_hands_over():
    _, s_opt = twin_optimizers()
    sched = SCHEDULES["sequential"](sg, s_opt)
    seen = []
    for _ in range(10):
        s_opt.step()
        seen.append(sched.get_last_lr()[0])
        sched.step()
    assert seen[0] == pytest.approx(0.01) and max(seen[:4]) < 0.1 and seen[4] == pytest.approx(0.1)


SCHEDULED_STEPS = ["multiplicative", "linear", "constant", "polynomial", "warm-restarts-mult", "sequential"]


def check_compiled_step_follows_schedule(make_scheduler, distinct_lrs: int) -> None:
    """An eager and a compiled SGD step under schedulers ``make_scheduler(sg, opt)`` over 12 steps:
    the same losses and parameters bit for bit, at least ``distinct_lrs`` learning rates seen, and
    the compiled step replays every new lr without retracing (two plans: before and after the
    optimizer's state exists)."""
    sides = []
    for compiled in (False, True):
        model = mlp()
        opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = make_scheduler(sg, opt)
        step = training_step(sg, model, opt)
        sides.append((model, sched, sg.compile(step) if compiled else step))
    traces_when_state_exists = None
    lrs = set()
    for i, (x, y) in enumerate(batches(12)):
        if i == 2:  # the first step creates the optimizer's state: a second plan, then no more
            traces_when_state_exists = sides[1][2].stats.traces
        losses = []
        for _, sched, step in sides:
            losses.append(step(sg.tensor(x), sg.tensor(y)).detach().numpy())
            sched.step()
        lrs.add(sides[1][1].get_last_lr()[0])
        assert np.array_equal(losses[0], losses[1])
    (eager_model, eager_sched, _), (model, sched, compiled) = sides
    assert sched.get_last_lr() == eager_sched.get_last_lr() and len(lrs) >= distinct_lrs
    for a, b in zip(eager_model.parameters(), model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    assert compiled.stats.traces == traces_when_state_exists <= 2, compiled.stats
    assert compiled.stats.replays == 12 - compiled.stats.traces, compiled.stats


@pytest.mark.parametrize("name", SCHEDULED_STEPS)
def test_compiled_step_sees_each_new_lr_without_retracing(name):
    check_compiled_step_follows_schedule(SCHEDULES[name.replace("-per-group", "")], distinct_lrs=2)
