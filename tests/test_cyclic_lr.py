"""CyclicLR against torch.optim.lr_scheduler.CyclicLR step by step (the same floats for lr and for
momentum / Adam's beta1), its errors and state dict, and a compiled training step that sees each new
lr and momentum without retracing."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.test_lr_scheduler import batches, mlp, momenta, twin_optimizers

torch = pytest.importorskip("torch")


class HalfEachCycle:
    """A scale_fn that is a callable object (its attributes go into the state dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base ** (x - 1)


CASES = [
    ("triangular", dict(base_lr=0.01, max_lr=0.1, step_size_up=4), "SGD", dict(momentum=0.9)),
    ("triangular_asymmetric", dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=5),
     "SGD", dict(momentum=0.5)),
    ("triangular2", dict(base_lr=0.001, max_lr=0.01, step_size_up=2, mode="triangular2"), "SGD",
     dict(momentum=0.9)),
    ("exp_range", dict(base_lr=0.01, max_lr=0.2, step_size_up=3, mode="exp_range", gamma=0.93), "SGD",
     dict(momentum=0.9)),
    ("scale_fn_cycle", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 1 / x), "SGD",
     dict(momentum=0.9)),
    ("scale_fn_iterations", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda x: 0.95 ** x,
                                 scale_mode="iterations", base_momentum=[0.7, 0.6], max_momentum=0.95),
     "SGD", dict(momentum=0.9)),
    ("adam_beta1", dict(base_lr=0.001, max_lr=0.005, step_size_up=3, mode="triangular2"), "Adam", {}),
    ("no_momentum", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False), "Adagrad", {}),
]


def schedulers(kwargs, optimizer, opt_kwargs):
    t_opt, s_opt = twin_optimizers(optimizer, **opt_kwargs)
    return (t_opt, torch.optim.lr_scheduler.CyclicLR(t_opt, **kwargs),
            s_opt, sg.optim.lr_scheduler.CyclicLR(s_opt, **kwargs))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_lr_and_momentum_sequences_match_torch(case):
    _, kwargs, optimizer, opt_kwargs = case
    t_opt, t_sched, s_opt, s_sched = schedulers(kwargs, optimizer, opt_kwargs)
    for _ in range(25):
        assert s_sched.get_last_lr() == t_sched.get_last_lr()
        assert [g["lr"] for g in s_opt.param_groups] == [g["lr"] for g in t_opt.param_groups]
        assert momenta(s_opt) == momenta(t_opt)
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    assert s_sched.last_epoch == t_sched.last_epoch and s_sched.base_lrs == t_sched.base_lrs


@pytest.mark.parametrize("make", [
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="sawtooth"),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, [0.01], 0.1),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(lib.optim.Adagrad(opt.param_groups[0]["params"]), 0.01, 0.1),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(None, 0.01, 0.1),
])
def test_errors_match_torch(make):
    t_opt, s_opt = twin_optimizers("SGD", momentum=0.9)
    with pytest.raises(Exception) as t_info:
        make(torch, t_opt)
    with pytest.raises(type(t_info.value), match=str(t_info.value).split("\n")[0].replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        make(sg, s_opt)


def test_state_dict_matches_torch_and_round_trips():
    kwargs = dict(base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=HalfEachCycle())
    t_opt, t_sched, s_opt, s_sched = schedulers(kwargs, "SGD", dict(momentum=0.9))
    for _ in range(5):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    saved, theirs = s_sched.state_dict(), t_sched.state_dict()
    assert set(saved) == set(theirs) and saved["_scale_fn_custom"] == theirs["_scale_fn_custom"] == {"base": 0.5}
    _, fresh_opt = twin_optimizers("SGD", momentum=0.9)
    fresh_opt.load_state_dict(s_opt.state_dict())
    fresh = sg.optim.lr_scheduler.CyclicLR(fresh_opt, **dict(kwargs, scale_fn=HalfEachCycle()))
    fresh.load_state_dict(saved)
    for _ in range(7):
        for opt, sched in ((s_opt, s_sched), (fresh_opt, fresh), (t_opt, t_sched)):
            opt.step()
            sched.step()
        assert fresh.get_last_lr() == s_sched.get_last_lr() == t_sched.get_last_lr()
        assert momenta(fresh_opt) == momenta(s_opt) == momenta(t_opt)


@pytest.mark.parametrize("opt_name,opt_kwargs", [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01))])
def test_compiled_step_sees_each_new_lr_and_momentum_without_retracing(opt_name, opt_kwargs):
    sides = []
    for compiled in (False, True):
        model = mlp()
        opt = getattr(sg.optim, opt_name)(model.parameters(), **opt_kwargs)
        sched = sg.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.05, step_size_up=2, mode="exp_range",
                                               gamma=0.9)
        step = training_step(sg, model, opt)
        sides.append((model, opt, sched, sg.compile(step) if compiled else step))
    traces_when_state_exists = None
    for i, (x, y) in enumerate(batches(10)):
        if i == 2:  # the first step creates the optimizer's state: a second plan, then no more
            traces_when_state_exists = sides[1][3].stats.traces
        losses = []
        for _, _, sched, step in sides:
            losses.append(step(sg.tensor(x), sg.tensor(y)).detach().numpy())
            sched.step()
        assert np.array_equal(losses[0], losses[1])
    (eager_model, eager_opt, _, _), (model, opt, _, compiled) = sides
    assert momenta(opt) == momenta(eager_opt)
    for a, b in zip(eager_model.parameters(), model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    assert compiled.stats.traces == traces_when_state_exists <= 2, compiled.stats
    assert compiled.stats.replays == 10 - compiled.stats.traces, compiled.stats


def test_resuming_with_last_epoch_matches_torch():
    kwargs = dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2")
    t_opt, t_sched, s_opt, s_sched = schedulers(kwargs, "SGD", dict(momentum=0.9))
    for _ in range(5):
        for opt, sched in ((t_opt, t_sched), (s_opt, s_sched)):
            opt.step()
            sched.step()
    t_again = torch.optim.lr_scheduler.CyclicLR(t_opt, last_epoch=4, **kwargs)
    s_again = sg.optim.lr_scheduler.CyclicLR(s_opt, last_epoch=4, **kwargs)
    for _ in range(6):
        assert s_again.get_last_lr() == t_again.get_last_lr() and momenta(s_opt) == momenta(t_opt)
        for opt, sched in ((t_opt, t_again), (s_opt, s_again)):
            opt.step()
            sched.step()
