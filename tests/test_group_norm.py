"""group_norm and GroupNorm against PyTorch: values, gradients of the input, weight and bias (and
second derivatives) in float64 and float32, finite differences, the autograd node and its saved
slots, PyTorch's errors, the module (defaults, repr, state_dict from torch), and a compiled
training step (conv, GroupNorm, relu, SGD) whose replay equals eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.oracle import compare, finite_difference_check, same_error, torch

# (input shape, num_groups): ranks 2 to 5, one group, one channel per group.
SHAPES = [((3, 4, 5), 2), ((2, 6), 3), ((2, 6, 3, 4), 3), ((2, 4, 2, 3, 2), 4), ((4, 3, 7), 1), ((2, 4, 3), 4)]
# Which of weight and bias are given.
PARAMS = {"none": (False, False), "weight": (True, False), "bias": (False, True), "affine": (True, True)}


def _arrays(shape, has_weight, has_bias, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 + 0.5
    params = [rng.standard_normal(shape[1]) for given in (has_weight, has_bias) if given]
    return [a.astype(dtype) for a in [x, *params]]


def _group_norm(groups, has_weight, has_bias, eps=1e-5):
    def fn(lib, x, *params):
        weight = params[0] if has_weight else None
        bias = params[-1] if has_bias else None
        return lib.nn.functional.group_norm(x, groups, weight, bias, eps)
    return fn


@pytest.mark.parametrize("params", list(PARAMS))
@pytest.mark.parametrize(("shape", "groups"), SHAPES)
def test_values_and_gradients_match_torch_float64(shape, groups, params):
    has_weight, has_bias = PARAMS[params]
    fn = _group_norm(groups, has_weight, has_bias)
    if params == "bias":
        # PyTorch 2.13 cannot differentiate group_norm given a bias without a weight ("tensor does not
        # have a device"); a weight of ones is the same function, so its gradients are the reference.
        compare(fn, _arrays(shape, False, True), grad=False, atol=1e-10, rtol=1e-8)
        ones = np.ones(shape[1])
        x, bias = _arrays(shape, False, True)
        compare(lambda lib, x, b: lib.nn.functional.group_norm(x, groups, lib.tensor(ones), b) if lib is torch
                else lib.nn.functional.group_norm(x, groups, None, b), [x, bias], double=True, atol=1e-10, rtol=1e-8)
        return
    compare(fn, _arrays(shape, has_weight, has_bias), double=True, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("params", ["none", "affine"])
@pytest.mark.parametrize(("shape", "groups"), [((3, 4, 5), 2), ((2, 6, 3, 4), 3)])
def test_float32_keeps_dtype_and_matches_torch(shape, groups, params):
    has_weight, has_bias = PARAMS[params]
    out = compare(_group_norm(groups, has_weight, has_bias, eps=1e-3),
                  _arrays(shape, has_weight, has_bias, np.float32, seed=1), double=True, atol=2e-5, rtol=2e-4)
    assert out.dtype == sg.float32


@pytest.mark.parametrize("params", list(PARAMS))
def test_gradients_match_finite_differences(params):
    has_weight, has_bias = PARAMS[params]
    fn = _group_norm(2, has_weight, has_bias)
    finite_difference_check(lambda *xs: fn(sg, *xs), _arrays((2, 4, 3), has_weight, has_bias, seed=2))


def test_second_derivatives_match_finite_differences_of_the_gradient():
    """d/d(x, w, b) of sum(v * grad_x): the gradient of group_norm, differentiated once more."""
    rng = np.random.default_rng(3)
    v, u = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))

    def grad_x(x, w, b):
        with sg.enable_grad():  # also when the check evaluates it under no_grad
            x = x if x.requires_grad else x.detach().requires_grad_(True)
            y = sg.nn.functional.group_norm(x, 2, w, b)
            (g,) = sg.autograd.grad((y * sg.tensor(u)).sum(), [x], create_graph=True)
        return g * sg.tensor(v)

    finite_difference_check(grad_x, _arrays((2, 4, 3), True, True, seed=4), atol=1e-4)


@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 0, 3), (2, 4, 0), (0, 4)])
@pytest.mark.parametrize("params", ["none", "weight", "affine"])
def test_empty_inputs_match_torch(shape, params):
    """PyTorch's empty-group values: mean 0, rstd NaN; a weight's gradient NaN when HxW is 0."""
    has_weight, has_bias = PARAMS[params]
    compare(_group_norm(2, has_weight, has_bias), _arrays(shape, has_weight, has_bias))
    x = sg.zeros(*shape, requires_grad=True)
    node = sg.nn.functional.group_norm(x, 2).grad_fn
    t_node = torch.nn.functional.group_norm(torch.zeros(*shape, requires_grad=True), 2).grad_fn
    for name in ("_saved_result1", "_saved_result2"):
        np.testing.assert_array_equal(getattr(node, name).detach().numpy(), getattr(t_node, name).detach().numpy())


@pytest.mark.parametrize("params", list(PARAMS))
def test_node_and_saved_slots_match_torch(params):
    has_weight, has_bias = PARAMS[params]
    arrays = _arrays((3, 4, 5), has_weight, has_bias)
    nodes = []
    for lib in (torch, sg):
        tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
        nodes.append(_group_norm(2, has_weight, has_bias)(lib, *tensors).grad_fn)
    t_node, s_node = nodes
    assert s_node.name() == t_node.name() == "NativeGroupNormBackward0"
    assert [fn is None for fn, _ in s_node.next_functions] == [fn is None for fn, _ in t_node.next_functions]
    for name in ("_saved_N", "_saved_C", "_saved_HxW", "_saved_group", "_saved_eps"):
        assert getattr(s_node, name) == getattr(t_node, name), name
    for name in ("_saved_input", "_saved_result1", "_saved_result2", "_saved_weight"):
        t_value, s_value = getattr(t_node, name), getattr(s_node, name)
        if t_value is None:
            assert s_value is None, name
        else:
            np.testing.assert_allclose(s_value.detach().numpy(), t_value.detach().numpy(), rtol=1e-10, err_msg=name)
    assert s_node._saved_result1.grad_fn is s_node  # mean and rstd are outputs of the node, as in PyTorch


def test_saved_tensors_are_freed_by_backward():
    x = sg.randn(2, 4, 3, requires_grad=True)
    y = sg.nn.functional.group_norm(x, 2, sg.ones(4, requires_grad=True))
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _ = y.grad_fn._saved_input
    assert y.grad_fn._saved_group == 2


def _tensor(lib, shape, dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


ERRORS = {
    "groups-not-dividing": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 3),
    "more-groups-than-channels": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 8),
    "negative-groups": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), -2),
    "zero-groups": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 0),
    "float-groups": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2.0),
    "bool-groups": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), True),
    "one-dim-input": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (4,)), 1),
    "zero-dim-input": lambda lib: lib.nn.functional.group_norm(lib.tensor(1.0), 1),
    "one-value-per-group": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (1, 4)), 4),
    "one-value-per-group-3d": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (1, 4, 1)), 4),
    "weight-size": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, _tensor(lib, (3,))),
    "weight-matrix": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, _tensor(lib, (2, 2))),
    "weight-zero-dim": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (2, 1, 3)), 1, lib.tensor(1.0)),
    "bias-size-no-weight": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, None,
                                                                     _tensor(lib, (3,))),
    "bias-size": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, _tensor(lib, (4,)),
                                                           _tensor(lib, (3,))),
    "weight-list": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, [1.0] * 4),
    "eps-string": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (3, 4, 5)), 2, eps="a"),
    "double-input-float-weight": lambda lib: lib.nn.functional.group_norm(
        _tensor(lib, (2, 4, 3), lib.float64), 2, _tensor(lib, (4,))),
    "float-input-double-weight": lambda lib: lib.nn.functional.group_norm(
        _tensor(lib, (2, 4, 3)), 2, _tensor(lib, (4,), lib.float64)),
    "float-input-double-bias": lambda lib: lib.nn.functional.group_norm(
        _tensor(lib, (2, 4, 3)), 2, None, _tensor(lib, (4,), lib.float64)),
    "double-weight-float-bias": lambda lib: lib.nn.functional.group_norm(
        _tensor(lib, (2, 4, 3), lib.float64), 2, _tensor(lib, (4,), lib.float64), _tensor(lib, (4,))),
    "long-input": lambda lib: lib.nn.functional.group_norm(_tensor(lib, (2, 4, 3), lib.int64), 2),
    "long-input-float-weight": lambda lib: lib.nn.functional.group_norm(
        _tensor(lib, (2, 4, 3), lib.int64), 2, _tensor(lib, (4,))),
    "module-groups-not-dividing": lambda lib: lib.nn.GroupNorm(3, 4),
    "module-zero-groups": lambda lib: lib.nn.GroupNorm(0, 4),
    "module-wrong-channels": lambda lib: lib.nn.GroupNorm(2, 4)(_tensor(lib, (2, 6, 3))),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    same_error(ERRORS[name])


def test_float16_input_with_float32_parameters_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="mixed-precision"):
        sg.nn.functional.group_norm(sg.ones(2, 4, 3).half(), 2, sg.ones(4))


def test_integer_eps_and_index_groups_are_taken_like_torch():
    x = np.random.default_rng(5).standard_normal((2, 4, 3))
    compare(lambda lib, t: lib.nn.functional.group_norm(t, lib.tensor(2), eps=1), [x])


@pytest.mark.parametrize("kwargs", [{}, {"eps": 0.1, "affine": False}, {"bias": False}, {"dtype": "float64"}])
def test_module_matches_torch_defaults_repr_and_state_dict(kwargs):
    t_kwargs = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
    s_kwargs = {k: getattr(sg, v) if k == "dtype" else v for k, v in kwargs.items()}
    t, s = torch.nn.GroupNorm(2, 6, **t_kwargs), sg.nn.GroupNorm(2, 6, **s_kwargs)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for key, value in t.state_dict().items():
        assert s.state_dict()[key].dtype == getattr(sg, str(value.dtype).split(".")[-1])
        np.testing.assert_array_equal(s.state_dict()[key].numpy(), value.numpy())
    assert [name for name, _ in s.named_parameters()] == [name for name, _ in t.named_parameters()]
    assert (s.num_groups, s.num_channels, s.eps, s.affine) == (t.num_groups, t.num_channels, t.eps, t.affine)


def test_module_loads_a_torch_state_dict_and_matches_forward_and_backward():
    t = torch.nn.GroupNorm(3, 6, eps=1e-4).double()
    with torch.no_grad():
        t.weight.copy_(torch.linspace(0.5, 2.0, 6, dtype=torch.float64))
        t.bias.copy_(torch.linspace(-1.0, 1.0, 6, dtype=torch.float64))
    s = sg.nn.GroupNorm(3, 6, eps=1e-4, dtype=sg.float64)
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(6).standard_normal((4, 6, 5, 5))
    t_x, s_x = torch.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
    t_y, s_y = t(t_x), s(s_x)
    np.testing.assert_allclose(s_y.detach().numpy(), t_y.detach().numpy(), rtol=1e-10, atol=1e-12)
    (t_y * t_y).sum().backward()
    (s_y * s_y).sum().backward()
    for t_grad, s_grad in [(t_x.grad, s_x.grad), (t.weight.grad, s.weight.grad), (t.bias.grad, s.bias.grad)]:
        np.testing.assert_allclose(s_grad.numpy(), t_grad.numpy(), rtol=1e-8, atol=1e-10)


def _model():
    sg.manual_seed(0)
    return sg.nn.Sequential(sg.nn.Conv2d(2, 6, 3, padding=1), sg.nn.GroupNorm(3, 6), sg.nn.ReLU(),
                            sg.nn.Flatten(), sg.nn.Linear(6 * 5 * 5, 3))


@pytest.mark.bitexact
def test_compiled_training_step_replays_eager_bit_for_bit():
    sides = []
    for compiled in (False, True):
        model = _model()
        opt = sg.optim.SGD(model.parameters(), lr=0.05)

        step = training_step(sg, model, opt)
        sides.append((model, sg.compile(step) if compiled else step))
    rng = np.random.default_rng(8)
    for call in range(5):
        x, y = rng.standard_normal((4, 2, 5, 5)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
        losses = [step(sg.tensor(x), sg.tensor(y)).item() for _, step in sides]
        assert losses[0] == losses[1], f"loss differs at call {call}"
        (eager_model, _), (model, _) = sides
        for (key, a), b in zip(eager_model.state_dict().items(), model.state_dict().values()):
            assert np.array_equal(a.numpy(), b.numpy()), f"{key} differs after call {call}"
        for a, b in zip(eager_model.parameters(), model.parameters()):
            assert np.array_equal(a.grad.numpy(), b.grad.numpy()), f"a gradient differs at call {call}"
    compiled = sides[1][1]
    assert compiled.stats.replays >= 3 and compiled.stats.traces <= 2, compiled.stats


@pytest.mark.bitexact
@pytest.mark.parametrize("params", list(PARAMS))
def test_compiled_forward_and_input_gradient_replay_eager_on_new_inputs(params):
    has_weight, has_bias = PARAMS[params]
    rng = np.random.default_rng(10)
    weight = sg.tensor(rng.standard_normal(4).astype(np.float32)) if has_weight else None
    bias = sg.tensor(rng.standard_normal(4).astype(np.float32)) if has_bias else None

    def forward_and_grad(x):
        y = sg.nn.functional.group_norm(x, 2, weight, bias)
        (grad,) = sg.autograd.grad((y * y.relu()).sum(), [x])
        return y.detach(), grad

    compiled = sg.compile(forward_and_grad)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((3, 4, 6)).astype(np.float32), requires_grad=True)
        for got, expected in zip(compiled(x), forward_and_grad(x)):
            assert np.array_equal(got.numpy(), expected.numpy()), f"call {call}"
    assert compiled.stats.replays >= 2, compiled.stats
