"""instance_norm and InstanceNorm1d/2d/3d against PyTorch: values, gradients and second
derivatives, running statistics, node names, errors, the modules (defaults, repr, state_dict,
unbatched inputs), and a compiled training step whose replay equals eager bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.oracle import compare, finite_difference_check, same_error, torch

SHAPES = [(3, 4, 5), (2, 3, 4, 5), (2, 2, 3, 2, 2)]


def _arrays(shape, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [a.astype(dtype) for a in (rng.standard_normal(shape) * 1.5 + 0.3, rng.standard_normal(shape[1]),
                                      rng.standard_normal(shape[1]))]


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_values_and_gradients_match_torch(shape, affine):
    x, w, b = _arrays(shape)
    if affine:
        compare(lambda lib, x, w, b: lib.nn.functional.instance_norm(x, weight=w, bias=b), [x, w, b], double=True,
                atol=1e-10, rtol=1e-8)
    else:
        compare(lambda lib, x: lib.nn.functional.instance_norm(x), [x], double=True, atol=1e-10, rtol=1e-8)


def test_float32_matches_torch():
    x, w, b = _arrays((2, 3, 6), seed=1, dtype=np.float32)
    out = compare(lambda lib, x, w, b: lib.nn.functional.instance_norm(x, weight=w, bias=b), [x, w, b],
                  atol=2e-5, rtol=2e-4)
    assert out.dtype == sg.float32


def test_gradients_match_finite_differences():
    x, w, b = _arrays((2, 3, 4), seed=2)
    finite_difference_check(lambda x, w, b: sg.nn.functional.instance_norm(x, weight=w, bias=b), [x, w, b])


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_running_statistics_and_gradients_match_torch(use_input_stats):
    x, w, _ = _arrays((3, 4, 5), seed=3)
    rng = np.random.default_rng(4)
    running = rng.standard_normal(4), rng.uniform(0.5, 2.0, 4)
    results = []
    for lib in (torch, sg):
        mean, var = lib.tensor(running[0].copy()), lib.tensor(running[1].copy())
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.instance_norm(xt, mean, var, wt, None, use_input_stats, 0.3)
        (y * y.sin()).sum().backward()
        names = [y.grad_fn.name(), y.grad_fn.next_functions[0][0].name()]
        results.append((names, [a.detach().numpy() for a in (y, mean, var, xt.grad, wt.grad)]))
    (t_names, t_values), (s_names, s_values) = results
    assert s_names == t_names == ["ViewBackward0", "NativeBatchNormBackward0"]
    for what, t_value, s_value in zip(("output", "running_mean", "running_var", "grad x", "grad w"), t_values,
                                      s_values):
        np.testing.assert_allclose(s_value, t_value, rtol=1e-9, atol=1e-12, err_msg=what)


def _x(lib, shape=(2, 3, 4), dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


ERRORS = {
    "one-spatial-element": lambda lib: lib.nn.functional.instance_norm(_x(lib, (2, 3))),
    "one-dim": lambda lib: lib.nn.functional.instance_norm(_x(lib, (3,))),
    "zero-dim": lambda lib: lib.nn.functional.instance_norm(lib.tensor(1.0)),
    "one-dim-running": lambda lib: lib.nn.functional.instance_norm(_x(lib, (3,)), _x(lib, (3,)), _x(lib, (3,)),
                                                                   use_input_stats=False),
    "zero-dim-running": lambda lib: lib.nn.functional.instance_norm(lib.tensor(1.0), _x(lib, (3,)), _x(lib, (3,)),
                                                                    use_input_stats=False),
    "no-running-statistics": lambda lib: lib.nn.functional.instance_norm(_x(lib), use_input_stats=False),
    "only-running-mean": lambda lib: lib.nn.functional.instance_norm(_x(lib), _x(lib, (3,))),
    "weight-size": lambda lib: lib.nn.functional.instance_norm(_x(lib), weight=_x(lib, (4,))),
    "bias-size": lambda lib: lib.nn.functional.instance_norm(_x(lib), bias=_x(lib, (4,))),
    "running-mean-first": lambda lib: lib.nn.functional.instance_norm(_x(lib), _x(lib, (4,)), _x(lib, (4,)),
                                                                      weight=_x(lib, (4,))),
    "running-var-size": lambda lib: lib.nn.functional.instance_norm(_x(lib), _x(lib, (3,)), _x(lib, (4,))),
    "weight-matrix": lambda lib: lib.nn.functional.instance_norm(_x(lib), weight=_x(lib, (3, 1))),
    "long-input": lambda lib: lib.nn.functional.instance_norm(_x(lib, dtype=lib.int64)),
    "float-input-double-weight": lambda lib: lib.nn.functional.instance_norm(_x(lib), weight=_x(lib, (3,),
                                                                                                lib.float64)),
    "double-input-float-weight": lambda lib: lib.nn.functional.instance_norm(_x(lib, dtype=lib.float64),
                                                                             weight=_x(lib, (3,))),
    "module-1d-rank": lambda lib: lib.nn.InstanceNorm1d(3)(_x(lib, (3,))),
    "module-2d-rank": lambda lib: lib.nn.InstanceNorm2d(3)(_x(lib, (2, 3))),
    "module-3d-rank": lambda lib: lib.nn.InstanceNorm3d(3)(_x(lib, (2, 3, 4, 5, 6, 7))),
    "module-affine-features": lambda lib: lib.nn.InstanceNorm1d(4, affine=True)(_x(lib, (2, 3, 5))),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    same_error(ERRORS[name])


def test_double_running_statistics_serve_a_float_input_like_torch():
    x = _arrays((2, 3, 4), seed=5, dtype=np.float32)[0]
    compare(lambda lib, x: lib.nn.functional.instance_norm(x, lib.zeros(3, dtype=lib.float64),
                                                           lib.ones(3, dtype=lib.float64), use_input_stats=False),
            [x], atol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"affine": True, "bias": False},
                                    {"track_running_stats": True, "momentum": None, "eps": 0.1}])
@pytest.mark.parametrize("name", ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"])
def test_modules_match_torch_defaults_repr_and_state_dict(name, kwargs):
    t, s = getattr(torch.nn, name)(3, **kwargs), getattr(sg.nn, name)(3, **kwargs)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for key, value in t.state_dict().items():
        np.testing.assert_array_equal(s.state_dict()[key].numpy(), value.numpy(), err_msg=key)
        assert str(s.state_dict()[key].dtype).split(".")[-1] == str(value.dtype).split(".")[-1], key


@pytest.mark.parametrize(("name", "shape"), [("InstanceNorm1d", (3, 5)), ("InstanceNorm1d", (2, 3, 5)),
                                             ("InstanceNorm2d", (3, 4, 5)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                             ("InstanceNorm3d", (3, 2, 3, 2)), ("InstanceNorm3d", (2, 3, 2, 2, 3))])
def test_module_train_and_eval_match_torch_with_running_statistics(name, shape):
    t = getattr(torch.nn, name)(3, affine=True, track_running_stats=True).double()
    s = getattr(sg.nn, name)(3, affine=True, track_running_stats=True, dtype=sg.float64)
    rng = np.random.default_rng(6)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(rng.standard_normal(3)))
        t.bias.copy_(torch.tensor(rng.standard_normal(3)))
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})
    for training in (True, True, False):
        t.train(training)
        s.train(training)
        x = rng.standard_normal(shape)
        t_x, s_x = torch.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
        t_y, s_y = t(t_x), s(s_x)
        np.testing.assert_allclose(s_y.detach().numpy(), t_y.detach().numpy(), rtol=1e-9, atol=1e-12)
        (t_y * t_y).sum().backward()
        (s_y * s_y).sum().backward()
        np.testing.assert_allclose(s_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-8, atol=1e-10)
        for key, value in t.state_dict().items():
            np.testing.assert_allclose(s.state_dict()[key].numpy(), value.numpy(), rtol=1e-12, err_msg=key)


def test_feature_mismatch_without_affine_warns_like_torch():
    for lib in (torch, sg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.InstanceNorm1d(4)(lib.ones(2, 3, 5))
        assert any("input's size at dim=1 does not match num_features" in str(w.message) for w in caught), lib


@pytest.mark.bitexact
def test_compiled_training_step_replays_eager_bit_for_bit():
    sides = []
    for compiled in (False, True):
        sg.manual_seed(0)
        model = sg.nn.Sequential(sg.nn.Conv2d(2, 4, 3, padding=1),
                                 sg.nn.InstanceNorm2d(4, affine=True, track_running_stats=True), sg.nn.ReLU(),
                                 sg.nn.Flatten(), sg.nn.Linear(4 * 5 * 5, 3))
        opt = sg.optim.SGD(model.parameters(), lr=0.05)

        step = training_step(sg, model, opt)
        sides.append((model, sg.compile(step) if compiled else step))
    rng = np.random.default_rng(8)
    for call in range(5):
        x, y = rng.standard_normal((3, 2, 5, 5)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
        losses = [step(sg.tensor(x), sg.tensor(y)).item() for _, step in sides]
        assert losses[0] == losses[1], f"loss differs at call {call}"
        (eager_model, _), (model, _) = sides
        for (key, a), b in zip(eager_model.state_dict().items(), model.state_dict().values()):
            assert np.array_equal(a.numpy(), b.numpy()), f"{key} differs after call {call}"
    assert sides[1][1].stats.replays >= 3, sides[1][1].stats
