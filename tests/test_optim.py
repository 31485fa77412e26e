"""Optimizers against torch.optim from identical weights, state dicts, and Adam under @compile
(replay equals eager, hyperparameters re-read on replay, branches retrace)."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step

torch = pytest.importorskip("torch")

TOLERANCES = {"float64": dict(rtol=1e-12, atol=1e-14), "float32": dict(rtol=3e-6, atol=1e-7)}


def mlp(lib, dtype="float32", seed=0):
    lib.manual_seed(seed)
    model = lib.nn.Sequential(lib.nn.Linear(5, 8), lib.nn.Tanh(), lib.nn.Linear(8, 8), lib.nn.Tanh(),
                              lib.nn.Linear(8, 2))
    return model.to(getattr(lib, dtype))


def twin_mlps(dtype="float32"):
    t_model, s_model = mlp(torch, dtype), mlp(sg, dtype)
    s_model.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t_model.state_dict().items()})
    return t_model, s_model


def batches(n, dtype="float32", seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((6, 5)).astype(dtype), rng.standard_normal((6, 2)).astype(dtype)) for _ in range(n)]


def run(lib, model, opt, data, step=None):
    step = step or training_step(lib, model, opt)
    return [step(lib.tensor(x), lib.tensor(y)).item() for x, y in data]


def assert_params_close(s_model, t_model, **tol):
    for (name, t), s in zip(t_model.named_parameters(), s_model.parameters()):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), err_msg=name, **tol)


ADAM_CASES = [
    ("Adam", {}),
    ("Adam", dict(weight_decay=0.1)),
    ("Adam", dict(amsgrad=True)),
    ("Adam", dict(maximize=True)),
    ("Adam", dict(weight_decay=0.05, amsgrad=True, maximize=True, betas=(0.8, 0.95), eps=1e-6)),
    ("AdamW", {}),
    ("AdamW", dict(weight_decay=0.1)),
    ("AdamW", dict(weight_decay=0)),
    ("AdamW", dict(amsgrad=True)),
    ("AdamW", dict(maximize=True)),
    ("AdamW", dict(weight_decay=0.05, amsgrad=True, maximize=True, betas=(0.8, 0.95), eps=1e-6)),
]
CASE_IDS = [name + "-" + ("-".join(kwargs) or "defaults") for name, kwargs in ADAM_CASES]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", ADAM_CASES, ids=CASE_IDS)
def test_adam_matches_torch_over_ten_steps(name, kwargs, dtype):
    t_model, s_model = twin_mlps(dtype)
    t_opt = getattr(torch.optim, name)(t_model.parameters(), lr=0.01, foreach=False, **kwargs)
    s_opt = getattr(sg.optim, name)(s_model.parameters(), lr=0.01, **kwargs)
    data = batches(10, dtype)
    tol = TOLERANCES[dtype]
    np.testing.assert_allclose(run(sg, s_model, s_opt, data), run(torch, t_model, t_opt, data), **tol)
    assert_params_close(s_model, t_model, **tol)
    for t_p, s_p in zip(t_model.parameters(), s_model.parameters()):
        t_state, s_state = t_opt.state[t_p], s_opt.state[s_p]
        assert sorted(s_state) == sorted(t_state)
        assert s_state["step"].shape == () and s_state["step"].dtype == sg.float32 and s_state["step"].item() == 10
        for key in t_state:
            np.testing.assert_allclose(s_state[key].numpy(), t_state[key].numpy(), err_msg=key, **tol)


def test_adam_defaults_and_param_group_keys_follow_torch():
    t_model, s_model = twin_mlps()
    for name in ("Adam", "AdamW"):
        t_group = getattr(torch.optim, name)(t_model.parameters()).param_groups[0]
        s_group = getattr(sg.optim, name)(s_model.parameters()).param_groups[0]
        assert {k: v for k, v in s_group.items() if k != "params"} == \
               {k: v for k, v in t_group.items() if k != "params"}


@pytest.mark.parametrize("kwargs,message", [
    (dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
])
def test_adam_rejects_bad_hyperparameters_like_torch(kwargs, message):
    t_model, s_model = twin_mlps()
    with pytest.raises(ValueError, match=message):
        torch.optim.Adam(t_model.parameters(), **kwargs)
    with pytest.raises(ValueError, match=message):
        sg.optim.Adam(s_model.parameters(), **kwargs)


def test_params_without_grad_are_skipped_like_torch():
    t_model, s_model = twin_mlps()
    for model in (t_model, s_model):
        model[0].requires_grad_(False)
    t_opt = torch.optim.Adam(t_model.parameters(), lr=0.01, foreach=False)
    s_opt = sg.optim.Adam(s_model.parameters(), lr=0.01)
    data = batches(3)
    run(torch, t_model, t_opt, data)
    run(sg, s_model, s_opt, data)
    assert s_model[0].weight not in s_opt.state and len(s_opt.state) == len(t_opt.state) == 4
    assert_params_close(s_model, t_model, **TOLERANCES["float32"])


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_state_dict_round_trip_continues_training_identically(name):
    data = batches(6)
    models = [mlp(sg), mlp(sg)]
    opts = [getattr(sg.optim, name)(m.parameters(), lr=0.01, amsgrad=True) for m in models]
    run(sg, models[0], opts[0], data[:3])
    saved = opts[0].state_dict()
    models[1].load_state_dict(models[0].state_dict())
    opts[1].param_groups[0]["lr"] = 0.5
    opts[1].load_state_dict(saved)
    assert opts[1].param_groups[0]["lr"] == 0.01
    run(sg, models[0], opts[0], data[3:])
    assert saved["state"][0]["step"].item() == 3, "a state dict is a snapshot, not a view of live state"
    run(sg, models[1], opts[1], data[3:])
    for pa, pb in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_array_equal(pb.detach().numpy(), pa.detach().numpy())
        for key, value in opts[0].state[pa].items():
            np.testing.assert_array_equal(opts[1].state[pb][key].numpy(), value.numpy())


def test_state_dict_layout_matches_torch_and_loads_torchs_state():
    t_model, s_model = twin_mlps("float64")
    t_opt = torch.optim.Adam(t_model.parameters(), lr=0.01, foreach=False)
    s_opt = sg.optim.Adam(s_model.parameters(), lr=0.01, foreach=False)
    data = batches(6, "float64")
    run(torch, t_model, t_opt, data[:3])
    t_saved = t_opt.state_dict()
    run(sg, s_model, s_opt, data[:3])
    s_saved = s_opt.state_dict()
    assert s_saved["param_groups"] == t_saved["param_groups"]
    assert {i: sorted(s) for i, s in s_saved["state"].items()} == {i: sorted(s) for i, s in t_saved["state"].items()}

    s_model.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t_model.state_dict().items()})
    s_opt.load_state_dict({"param_groups": t_saved["param_groups"],
                           "state": {i: {k: sg.tensor(v.numpy()) for k, v in s.items()}
                                     for i, s in t_saved["state"].items()}})
    run(torch, t_model, t_opt, data[3:])
    run(sg, s_model, s_opt, data[3:])
    assert_params_close(s_model, t_model, **TOLERANCES["float64"])


# ---- SGD ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(weight_decay=0.1),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(momentum=0.8, dampening=0.3, weight_decay=0.01, maximize=True),
], ids=["weight_decay", "nesterov", "nesterov-weight_decay", "dampening-maximize"])
def test_sgd_matches_torch(kwargs):
    t_model, s_model = twin_mlps("float64")
    t_opt = torch.optim.SGD(t_model.parameters(), lr=0.05, foreach=False, **kwargs)
    s_opt = sg.optim.SGD(s_model.parameters(), lr=0.05, **kwargs)
    data = batches(10, "float64")
    tol = TOLERANCES["float64"]
    np.testing.assert_allclose(run(sg, s_model, s_opt, data), run(torch, t_model, t_opt, data), **tol)
    assert_params_close(s_model, t_model, **tol)


# ---- Adam under @staticgrad.compile -------------------------------------------------------------

def twin_runs(name, **kwargs):
    """An eager and a compiled training step over identical models and optimizers."""
    eager_model, compiled_model = mlp(sg), mlp(sg)
    eager_opt = getattr(sg.optim, name)(eager_model.parameters(), **kwargs)
    compiled_opt = getattr(sg.optim, name)(compiled_model.parameters(), **kwargs)
    eager = training_step(sg, eager_model, eager_opt)
    compiled = sg.compile(training_step(sg, compiled_model, compiled_opt))
    return (eager_model, eager_opt, eager), (compiled_model, compiled_opt, compiled)


def assert_same_training_state(eager_side, compiled_side):
    (eager_model, eager_opt, _), (compiled_model, compiled_opt, _) = eager_side, compiled_side
    for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-6, atol=1e-7)
        assert sorted(compiled_opt.state[pc]) == sorted(eager_opt.state[pe])
        for key, value in eager_opt.state[pe].items():
            np.testing.assert_allclose(compiled_opt.state[pc][key].numpy(), value.numpy(), rtol=1e-6, atol=1e-9,
                                       err_msg=key)


@pytest.mark.parametrize("name,kwargs", [("Adam", {}), ("Adam", dict(weight_decay=0.1, amsgrad=True, maximize=True)),
                                         ("AdamW", {}), ("AdamW", dict(amsgrad=True))],
                         ids=["Adam", "Adam-all-branches", "AdamW", "AdamW-amsgrad"])
def test_compiled_adam_replays_like_eager(name, kwargs):
    eager_side, compiled_side = twin_runs(name, lr=0.01, **kwargs)
    for x, y in batches(8):
        le = eager_side[2](sg.tensor(x), sg.tensor(y))
        lc = compiled_side[2](sg.tensor(x), sg.tensor(y))
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
    assert compiled_side[2].stats.replays >= 5
    assert_same_training_state(eager_side, compiled_side)
    assert compiled_side[1].state[next(compiled_side[0].parameters())]["step"].item() == 8


def test_changing_lr_and_betas_between_compiled_calls_takes_effect_without_retracing():
    eager_side, compiled_side = twin_runs("AdamW", lr=0.01)
    for i, (x, y) in enumerate(batches(8)):
        for _, opt, step in (eager_side, compiled_side):
            opt.param_groups[0]["lr"] = 0.01 / (1 + i)
            opt.param_groups[0]["betas"] = (0.9 - 0.02 * i, 0.999 - 0.001 * i)
            step(sg.tensor(x), sg.tensor(y))
    assert compiled_side[2].stats.traces <= 2 and compiled_side[2].stats.replays >= 6
    assert_same_training_state(eager_side, compiled_side)


def test_toggling_amsgrad_retraces_and_stays_equal_to_eager():
    eager_side, compiled_side = twin_runs("Adam", lr=0.01, amsgrad=True)
    compiled = compiled_side[2]
    data = batches(9)
    for i, (x, y) in enumerate(data):
        if i in (4, 7):
            traces = compiled.stats.traces
            for _, opt, _ in (eager_side, compiled_side):
                opt.param_groups[0]["amsgrad"] = i == 7
        eager_side[2](sg.tensor(x), sg.tensor(y))
        compiled(sg.tensor(x), sg.tensor(y))
        if i == 4:
            assert compiled.stats.traces == traces + 1, "amsgrad off is another branch: retrace"
    assert compiled.stats.replays >= 5
    assert_same_training_state(eager_side, compiled_side)


def test_compiled_adam_with_two_param_groups_replays_like_eager():
    models = [mlp(sg), mlp(sg)]
    opts = [sg.optim.Adam([{"params": m[0].parameters(), "lr": 0.1, "betas": (0.5, 0.9)},
                           {"params": list(m[2].parameters()) + list(m[4].parameters())}], lr=0.001)
            for m in models]
    eager, compiled = training_step(sg, models[0], opts[0]), sg.compile(training_step(sg, models[1], opts[1]))
    for x, y in batches(6):
        eager(sg.tensor(x), sg.tensor(y))
        compiled(sg.tensor(x), sg.tensor(y))
    assert compiled.stats.replays >= 3
    assert_same_training_state((models[0], opts[0], eager), (models[1], opts[1], compiled))


def test_sgd_untraced_update_equals_its_ops_bit_for_bit_with_versions():
    """Eager SGD updates the arrays directly; a compiled step records (and replays) its ops: both
    give the same bits and move the same versions (momentum with dampening)."""

    def run(compiled):
        sg.manual_seed(0)
        model = sg.nn.Linear(5, 3)
        opt = sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.3)
        step = sg.compile(opt.step) if compiled else opt.step
        x = sg.randn(4, 5)
        for _ in range(4):
            opt.zero_grad()
            (model(x) ** 2).sum().backward()
            step()
        versions = [p._version_counter[0] for p in model.parameters()]
        buffers = [opt.state[p]["momentum_buffer"].detach().numpy().copy() for p in model.parameters()]
        return [p.detach().numpy().copy() for p in model.parameters()], buffers, versions

    eager, compiled = run(False), run(True)
    for a, b in zip(eager[0] + eager[1], compiled[0] + compiled[1]):
        assert np.array_equal(a, b)
    assert eager[2] == compiled[2]
