"""ChainedScheduler against torch.optim.lr_scheduler.ChainedScheduler: the same lr floats at every step,
state dicts, PyTorch's errors, and a compiled training step that sees each new lr without retracing."""

from __future__ import annotations

import warnings

import pytest

import staticgrad as sg
from tests.test_lr_scheduler import twin_optimizers
from tests.test_schedulers_more import check_compiled_step_follows_schedule

torch = pytest.importorskip("torch")


def _chain(*members, pass_optimizer=True):
    """A ChainedScheduler over ``members`` (each ``(name, kwargs)``), built the same way in either library."""
    def make(lib, opt):
        schedulers = lib.optim.lr_scheduler
        chained = [getattr(schedulers, name)(opt, **kwargs) for name, kwargs in members]
        if pass_optimizer:
            return schedulers.ChainedScheduler(chained, optimizer=opt)
        return schedulers.ChainedScheduler(chained)
    return make


def _sequential_inside_a_chain(lib, opt):
    schedulers = lib.optim.lr_scheduler
    sequential = schedulers.SequentialLR(opt, [schedulers.LinearLR(opt, start_factor=0.2, total_iters=3),
                                               schedulers.CosineAnnealingLR(opt, T_max=6)], milestones=[3])
    return schedulers.ChainedScheduler([sequential, schedulers.StepLR(opt, step_size=4, gamma=0.5)])


CHAINS = {
    "constant-exponential": _chain(("ConstantLR", dict(factor=0.1, total_iters=8)),
                                   ("ExponentialLR", dict(gamma=0.9))),
    "linear-step": _chain(("LinearLR", dict(start_factor=0.25, total_iters=6)),
                          ("StepLR", dict(step_size=3, gamma=0.5)), pass_optimizer=False),
    "exponential-multistep-cosine": _chain(("ExponentialLR", dict(gamma=0.95)),
                                           ("MultiStepLR", dict(milestones=[4, 11], gamma=0.3)),
                                           ("CosineAnnealingLR", dict(T_max=7))),
    "one": _chain(("PolynomialLR", dict(total_iters=9, power=1.5))),
    "sequential-inside": _sequential_inside_a_chain,
}


def _twins(name, **opt_kwargs):
    t_opt, s_opt = twin_optimizers(**opt_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # members step their lrs at construction
        return t_opt, CHAINS[name](torch, t_opt), s_opt, CHAINS[name](sg, s_opt)


def _lrs(opt):
    return [g["lr"] for g in opt.param_groups]


@pytest.mark.parametrize("name", list(CHAINS))
def test_lr_sequence_matches_torch_step_by_step(name):
    t_opt, t_sched, s_opt, s_sched = _twins(name, momentum=0.9)
    seen = set()
    for _ in range(20):
        assert s_sched.get_last_lr() == t_sched.get_last_lr()
        assert _lrs(s_opt) == _lrs(t_opt)
        seen.add(s_sched.get_last_lr()[0])
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    assert len(seen) > 5
    assert [s.last_epoch for s in s_sched._schedulers] == [s.last_epoch for s in t_sched._schedulers]


@pytest.mark.parametrize("name", ["constant-exponential", "linear-step", "sequential-inside"])
def test_state_dict_round_trip_continues_the_same_sequence(name):
    t_opt, t_sched, s_opt, s_sched = _twins(name)
    for _ in range(5):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    saved = s_sched.state_dict()
    t_saved = t_sched.state_dict()
    assert set(saved) == set(t_saved) == {"_last_lr", "_schedulers"}
    assert [set(member) for member in saved["_schedulers"]] == [set(member) for member in t_saved["_schedulers"]]
    _, fresh_opt = twin_optimizers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = CHAINS[name](sg, fresh_opt)
    fresh_opt.load_state_dict(s_opt.state_dict())  # a resumed run: build, then load both
    fresh.load_state_dict(saved)
    assert "_schedulers" in saved  # loading leaves the caller's dict as it was
    assert fresh.get_last_lr() == s_sched.get_last_lr()
    for _ in range(10):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched), (fresh_opt, fresh)):
            opt.step()
            sched.step()
        assert fresh.get_last_lr() == s_sched.get_last_lr() == t_sched.get_last_lr()
        assert _lrs(fresh_opt) == _lrs(t_opt)


def _other_optimizer(lib, opt):
    return lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)


ERRORS = {
    "empty": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler([]),
    "empty-with-optimizer": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler([], optimizer=opt),
    "plateau": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ExponentialLR(opt, 0.9), lib.optim.lr_scheduler.ReduceLROnPlateau(opt)]),
    "not-a-scheduler": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ExponentialLR(opt, 0.9), object()]),
    "first-not-a-scheduler": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler([object()]),
    "get-lr": lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ExponentialLR(opt, 0.9)]).get_lr(),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    t_opt, s_opt = twin_optimizers()
    with pytest.raises(Exception) as t_error:
        ERRORS[name](torch, t_opt)
    with pytest.raises(Exception) as s_error:
        ERRORS[name](sg, s_opt)
    assert type(s_error.value) is type(t_error.value)
    assert str(s_error.value) == str(t_error.value)


@pytest.mark.parametrize("where", ["given-optimizer", "second-member"])
def test_schedulers_of_another_optimizer_are_refused_like_torch(where):
    t_opt, s_opt = twin_optimizers()
    messages = []
    for lib, opt in ((torch, t_opt), (sg, s_opt)):
        schedulers, other = lib.optim.lr_scheduler, _other_optimizer(lib, opt)
        with pytest.raises(ValueError) as error:
            if where == "given-optimizer":
                schedulers.ChainedScheduler([schedulers.ConstantLR(opt)], optimizer=other)
            else:
                schedulers.ChainedScheduler([schedulers.ConstantLR(opt), schedulers.StepLR(other, 2)])
        messages.append(str(error.value))
    index = 0 if where == "given-optimizer" else 1
    name = "ConstantLR" if where == "given-optimizer" else "StepLR"
    for message in messages:  # the optimizer's repr differs between the libraries; the rest is PyTorch's
        assert message.startswith("ChainedScheduler expects all schedulers to belong to the same optimizer, but got "
                                  f"scheduler {name} at index {index} has ")
        assert message.endswith(", which is different from SGD.")


def test_the_optimizer_defaults_to_the_first_members():
    _, s_opt = twin_optimizers()
    schedulers = sg.optim.lr_scheduler
    chained = schedulers.ChainedScheduler([schedulers.ExponentialLR(s_opt, 0.5)])
    assert chained.optimizer is s_opt
    assert isinstance(chained, schedulers.LRScheduler)


@pytest.mark.parametrize("name", ["constant-exponential", "linear-step"])
def test_compiled_step_sees_each_new_lr_without_retracing(name):
    check_compiled_step_follows_schedule(CHAINS[name], distinct_lrs=6)
