"""Activations (F.silu ... F.normalize and their nn modules) against PyTorch in float64: values,
gradients, double backward, node names (in place too); finite differences; dtype rules and errors;
module arguments and reprs; replay equals eager bit for bit, the piecewise ones fused into kernels."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import replay_matches_eager, unfused_ops

rng = np.random.default_rng(7)


def away_from_kinks(*shape, kinks=(0.0,), low=-5.0, high=5.0):
    """Values at least 0.05 from each kink of a piecewise function (no ambiguous derivative)."""
    x = rng.uniform(low, high, size=shape)
    for k in kinks:
        near = np.abs(x - k) < 0.05
        x[near] += 0.1
    return x


def F(lib):
    return lib.nn.functional


ACTIVATIONS = [
    ("silu", lambda lib, a: F(lib).silu(a), away_from_kinks(3, 4), True),
    ("softplus", lambda lib, a: F(lib).softplus(a), away_from_kinks(3, 4), True),
    ("softplus_beta_threshold", lambda lib, a: F(lib).softplus(a, beta=2.0, threshold=3.0),
     away_from_kinks(3, 4, kinks=(1.5,)), True),
    ("softsign", lambda lib, a: F(lib).softsign(a), away_from_kinks(3, 4), True),
    ("elu", lambda lib, a: F(lib).elu(a), away_from_kinks(3, 4), True),
    ("elu_alpha", lambda lib, a: F(lib).elu(a, alpha=0.5), away_from_kinks(3, 4), True),
    ("selu", lambda lib, a: F(lib).selu(a), away_from_kinks(3, 4), True),
    ("celu", lambda lib, a: F(lib).celu(a, alpha=2.0), away_from_kinks(3, 4), True),
    ("relu6", lambda lib, a: F(lib).relu6(a), away_from_kinks(3, 4, kinks=(0.0, 6.0), high=8), True),
    ("hardtanh", lambda lib, a: F(lib).hardtanh(a), away_from_kinks(3, 4, kinks=(-1.0, 1.0)), True),
    ("hardtanh_bounds", lambda lib, a: F(lib).hardtanh(a, -2.0, 0.5), away_from_kinks(3, 4, kinks=(-2.0, 0.5)),
     True),
    ("hardsigmoid", lambda lib, a: F(lib).hardsigmoid(a), away_from_kinks(3, 4, kinks=(-3.0, 3.0)), False),
    ("hardswish", lambda lib, a: F(lib).hardswish(a), away_from_kinks(3, 4, kinks=(-3.0, 3.0)), True),
    ("mish", lambda lib, a: F(lib).mish(a), away_from_kinks(3, 4), True),
    ("logsigmoid", lambda lib, a: F(lib).logsigmoid(a), away_from_kinks(3, 4), True),
    ("leaky_relu", lambda lib, a: F(lib).leaky_relu(a), away_from_kinks(3, 4), True),
    ("leaky_relu_slope", lambda lib, a: F(lib).leaky_relu(a, 0.2), away_from_kinks(3, 4), True),
    ("leaky_relu_negative_slope", lambda lib, a: F(lib).leaky_relu(a, -0.3), away_from_kinks(3, 4), True),
    ("glu", lambda lib, a: F(lib).glu(a), away_from_kinks(3, 4), True),
    ("glu_dim0", lambda lib, a: F(lib).glu(a, 0), away_from_kinks(4, 3), True),
    ("normalize", lambda lib, a: F(lib).normalize(a), away_from_kinks(3, 4), True),
    ("normalize_p1_dim0", lambda lib, a: F(lib).normalize(a, p=1.0, dim=0), away_from_kinks(3, 4), True),
    ("normalize_zero_row", lambda lib, a: F(lib).normalize(a * lib.tensor([[0.0], [1.0], [1.0]], dtype=a.dtype)),
     away_from_kinks(3, 4), False),
    ("extreme_inputs", lambda lib, a: F(lib).softplus(a * 100) + F(lib).mish(a * 100) + F(lib).logsigmoid(a * 100)
     + F(lib).elu(a * 1000) + F(lib).silu(a * 100), away_from_kinks(3, 4), False),
]
IDS = [c[0] for c in ACTIVATIONS]


@pytest.mark.parametrize("name,fn,values,double", ACTIVATIONS, ids=IDS)
def test_activation_matches_torch_with_double_backward(name, fn, values, double):
    compare(fn, [values], double=double)


@pytest.mark.parametrize("name,fn,values,double", ACTIVATIONS[:-2], ids=IDS[:-2])
def test_activation_gradient_matches_finite_differences(name, fn, values, double):
    finite_difference_check(lambda a: fn(sg, a), [values])


@pytest.mark.parametrize("name,fn,values,double", ACTIVATIONS[:-2], ids=IDS[:-2])
def test_activation_float32_matches_torch(name, fn, values, double):
    compare(fn, [values.astype(np.float32)], atol=1e-5, rtol=1e-5)


# ---- in place --------------------------------------------------------------------------------------------

INPLACE = [
    ("silu", lambda lib, a: F(lib).silu(a, inplace=True)),
    ("elu", lambda lib, a: F(lib).elu(a, 0.7, inplace=True)),
    ("elu_", lambda lib, a: F(lib).elu_(a)),
    ("selu", lambda lib, a: F(lib).selu(a, inplace=True)),
    ("celu", lambda lib, a: F(lib).celu(a, 1.5, inplace=True)),
    ("relu6", lambda lib, a: F(lib).relu6(a, inplace=True)),
    ("hardtanh_", lambda lib, a: F(lib).hardtanh_(a, -0.5, 0.5)),
    ("hardsigmoid", lambda lib, a: F(lib).hardsigmoid(a, inplace=True)),
    ("hardswish", lambda lib, a: F(lib).hardswish(a, inplace=True)),
    ("mish", lambda lib, a: F(lib).mish(a, inplace=True)),
    ("leaky_relu", lambda lib, a: F(lib).leaky_relu(a, 0.1, inplace=True)),
    ("leaky_relu_", lambda lib, a: F(lib).leaky_relu_(a)),
]


@pytest.mark.parametrize("name,fn", INPLACE, ids=[c[0] for c in INPLACE])
def test_in_place_activation_matches_torch(name, fn):
    values = away_from_kinks(3, 4, kinks=(-3.0, -0.5, 0.0, 0.5, 3.0, 6.0), high=7)
    compare(lambda lib, a: fn(lib, a * 1.0), [values], double=name != "hardsigmoid")


@pytest.mark.parametrize("fn", [lambda lib, a: F(lib).leaky_relu(a, -0.2, inplace=True),
                                lambda lib, a: F(lib).elu(a, -0.5, inplace=True)])
def test_in_place_with_negative_slope_refuses_backward_like_torch(fn):
    values = np.array([1.0, -2.0, 3.0])
    same_error(lambda lib: fn(lib, lib.tensor(values, requires_grad=True) * 1.0).sum().backward())


def test_hardsigmoid_double_backward_is_refused_like_torch():
    def second(lib):
        x = lib.tensor([0.5, -1.0, 4.0], requires_grad=True)
        (g,) = lib.autograd.grad(F(lib).hardsigmoid(x).sum(), x, create_graph=True)
        lib.autograd.grad(g.sum(), x)
    same_error(second)


def test_in_place_on_a_leaf_that_requires_grad_is_refused():
    same_error(lambda lib: F(lib).hardtanh(lib.tensor([1.0], requires_grad=True), inplace=True))


# ---- dtype rules and errors --------------------------------------------------------------------------------

def test_integer_rules_follow_torch():
    ints = np.array([1, -2, 7, 0])
    for fn in (lambda lib, a: F(lib).relu6(a), lambda lib, a: F(lib).hardtanh(a),
               lambda lib, a: F(lib).softsign(a), lambda lib, a: F(lib).relu6(a, inplace=True)):
        compare(fn, [ints], grad=False)


ERRORS = [(name, (lambda n: lambda lib: getattr(F(lib), n)(lib.tensor([1, 2]), ))(name))
          for name in ("silu", "softplus", "elu", "selu", "celu", "hardsigmoid", "hardswish", "mish", "logsigmoid",
                       "leaky_relu", "glu", "normalize")]
ERRORS += [
    ("hardtanh_bounds", lambda lib: F(lib).hardtanh(lib.tensor([1.0]), 2.0, 1.0)),
    ("celu_alpha_zero", lambda lib: F(lib).celu(lib.tensor([1.0]), 0.0)),
    ("glu_odd", lambda lib: F(lib).glu(lib.tensor([1.0, 2.0, 3.0]))),
    ("glu_scalar", lambda lib: F(lib).glu(lib.tensor(1.0))),
    ("glu_bad_dim", lambda lib: F(lib).glu(lib.zeros(2, 2), 2)),
    ("normalize_1d_default_dim", lambda lib: F(lib).normalize(lib.tensor([1.0, 2.0]))),
    ("hardsigmoid_int_inplace", lambda lib: F(lib).hardsigmoid(lib.tensor([1, 2]), inplace=True)),
    ("silu_not_a_tensor", lambda lib: F(lib).silu([1.0])),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


# ---- modules -----------------------------------------------------------------------------------------------

MODULES = [
    ("SiLU", (), {}), ("SiLU", (True,), {}), ("Softplus", (), {}), ("Softplus", (2, 10), {}), ("Softsign", (), {}),
    ("ELU", (), {}), ("ELU", (0.5, True), {}), ("SELU", (), {}), ("SELU", (True,), {}), ("CELU", (2.0,), {}),
    ("ReLU6", (), {}), ("ReLU6", (True,), {}), ("Hardsigmoid", (True,), {}), ("Hardswish", (), {}),
    ("Hardtanh", (), {}), ("Hardtanh", (-2, 2, True), {}), ("Hardtanh", (), {"min_val": -0.5, "max_val": 0.25}),
    ("Mish", (), {}), ("LogSigmoid", (), {}), ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}),
    ("GLU", (), {}), ("GLU", (0,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=[f"{m[0]}{m[1]}{m[2]}" for m in MODULES])
def test_module_matches_torch_values_gradients_and_repr(name, args, kwargs):
    values = away_from_kinks(2, 3, 4, kinks=(-3.0, -2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 3.0))
    compare(lambda lib, a: getattr(lib.nn, name)(*args, **kwargs)(a * 1.0), [values])
    assert repr(getattr(sg.nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


def test_modules_in_a_sequential_train_like_torch():
    torch.manual_seed(0)
    t_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.SiLU(), torch.nn.Linear(8, 8),
                                  torch.nn.Hardswish(), torch.nn.Linear(8, 6), torch.nn.GLU(), torch.nn.LeakyReLU(0.1))
    s_model = sg.nn.Sequential(sg.nn.Linear(4, 8), sg.nn.SiLU(), sg.nn.Linear(8, 8), sg.nn.Hardswish(),
                               sg.nn.Linear(8, 6), sg.nn.GLU(), sg.nn.LeakyReLU(0.1))
    for (_, tp), (_, sp) in zip(t_model.named_parameters(), s_model.named_parameters()):
        sp.data = sg.tensor(tp.detach().numpy().copy())
    x = rng.standard_normal((5, 4)).astype(np.float32)
    t_out, s_out = t_model(torch.tensor(x)), s_model(sg.tensor(x))
    np.testing.assert_allclose(s_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    t_out.sum().backward()
    s_out.sum().backward()
    for tp, sp in zip(t_model.parameters(), s_model.parameters()):
        np.testing.assert_allclose(sp.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- replay: every activation traced and replayed, the piecewise ones fused --------------------------------

def _edges(rng):
    """Every branch and the boundaries (0, +-1, +-3, 6) the piecewise formulas test."""
    x = rng.uniform(-7, 7, size=(4, 6))
    x.flat[:10] = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 2.5, -2.5, 0.5]
    return x, rng.uniform(-1, 1, size=(4, 6))


def _f(name, *args, **kwargs):
    return lambda a, b: getattr(sg.nn.functional, name)(a, *args, **kwargs) * 2.0


FUSED = [
    ("hardtanh", _f("hardtanh"), "hardtanh"), ("hardtanh_bounds", _f("hardtanh", -2.0, 0.5), "hardtanh"),
    ("relu6", _f("relu6"), "hardtanh"), ("hardsigmoid", _f("hardsigmoid"), "hardsigmoid"),
    ("hardswish", _f("hardswish"), "hardswish"), ("leaky_relu", _f("leaky_relu", 0.2), "leaky_relu"),
]
NUMPY_CALLS = [
    ("silu", _f("silu")), ("softplus", _f("softplus", 2.0, 4.0)), ("softsign", _f("softsign")), ("elu", _f("elu")),
    ("selu", _f("selu")), ("celu", _f("celu", 0.5)), ("mish", _f("mish")), ("logsigmoid", _f("logsigmoid")),
    ("glu", lambda a, b: sg.nn.functional.glu(a) * 2.0), ("normalize", _f("normalize")),
    ("in_place", lambda a, b: (sg.nn.functional.elu(a * 1.0, inplace=True)
                              + sg.nn.functional.mish(a * 1.0, inplace=True))),
]


@pytest.mark.parametrize("name,op,op_name", FUSED, ids=[c[0] for c in FUSED])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_piecewise_activation_joins_a_kernel_and_replays_bit_for_bit(name, op, op_name, dtype):
    plan = replay_matches_eager(op, _edges, dtype)
    ops = unfused_ops(plan)
    assert op_name not in ops and op_name + "_backward" not in ops and "fused" in ops, ops


@pytest.mark.parametrize("name,op", NUMPY_CALLS, ids=[c[0] for c in NUMPY_CALLS])
def test_activation_replays_bit_for_bit(name, op):
    replay_matches_eager(op, _edges, np.float32)
