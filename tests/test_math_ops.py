"""Elementwise math (sin ... erf, rounding, copysign, atan2, logaddexp, lerp, clamp with tensor bounds,
norm) against PyTorch in float64: values, gradients, double backward, node names; finite
differences; dtype rules for integer and bool inputs; PyTorch's errors; replay equals eager bit for
bit, the exact ones fused into kernels."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import replay_matches_eager, unfused_ops

rng = np.random.default_rng(11)


def R(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape)


def unit(*shape):
    return rng.uniform(-0.9, 0.9, size=shape)


def off_half(*shape):
    """Values whose rounding is not at a tie (x.5) nor near one."""
    return np.round(rng.uniform(-4, 4, size=shape), 1) + 0.03


UNARY = [
    ("sin", R), ("cos", R), ("tan", lambda *s: R(*s, low=-1.2, high=1.2)), ("asin", unit), ("acos", unit),
    ("atan", R), ("sinh", R), ("cosh", R), ("asinh", R), ("acosh", lambda *s: R(*s, low=1.1, high=3.0)),
    ("atanh", unit), ("exp2", R), ("log2", lambda *s: R(*s, low=0.2, high=3.0)),
    ("log10", lambda *s: R(*s, low=0.2, high=3.0)), ("log1p", lambda *s: R(*s, low=-0.8, high=3.0)),
    ("expm1", R), ("erf", R),
]
ALIASES = [("arcsin", unit), ("arccos", unit), ("arctan", R), ("arcsinh", R), ("arccosh", lambda *s: R(*s, low=1.1)),
           ("arctanh", unit)]


@pytest.mark.parametrize("name,values", UNARY + ALIASES, ids=[n for n, _ in UNARY + ALIASES])
def test_unary_function_and_method_match_torch_with_double_backward(name, values):
    compare(lambda lib, a: getattr(lib, name)(a), [values(3, 4)], double=True)
    compare(lambda lib, a: getattr(a, name)(), [values(5)])


@pytest.mark.parametrize("name,values", UNARY, ids=[n for n, _ in UNARY])
def test_unary_gradient_matches_finite_differences(name, values):
    finite_difference_check(lambda a: getattr(sg, name)(a), [values(2, 3)])


@pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning")  # log2(0), acosh(-2)... as in PyTorch: inf, nan
@pytest.mark.parametrize("name", [n for n, _ in UNARY])
@pytest.mark.parametrize("dtype", ["int64", "bool", "float32"])
def test_unary_of_integer_and_bool_gives_default_float(name, dtype):
    values = {"int64": np.array([1, -2, 3, 0]), "bool": np.array([True, False, True, True]),
              "float32": np.array([0.5, -0.25, 0.75, 0.1], np.float32)}[dtype]
    out = compare(lambda lib, a: getattr(lib, name)(a), [values], requires_grad=[False], grad=False, atol=1e-6)
    assert out.dtype == sg.float32


@pytest.mark.parametrize("name", [n for n, _ in UNARY])
def test_in_place_unary_matches_torch(name):
    values = dict(UNARY)[name](3, 4)
    inverse_hyperbolic = name in ("asinh", "acosh", "atanh")  # PyTorch has no derivative for these in place
    compare(lambda lib, a: getattr(a * 1.0, name + "_")(), [values], grad=not inverse_hyperbolic)
    if inverse_hyperbolic:
        same_error(lambda lib: getattr(lib.tensor(values, requires_grad=True) * 1.0, name + "_")().sum().backward())


# ---- rounding -------------------------------------------------------------------------------------------

ROUNDING = ["floor", "ceil", "trunc", "round", "fix"]


@pytest.mark.parametrize("name", ROUNDING)
def test_rounding_values_zero_gradient_and_node_names(name):
    values = np.concatenate([off_half(10), [2.5, -2.5, 0.5, -0.5, 1.5, -0.0, 3.0]])
    compare(lambda lib, a: getattr(lib, name)(a), [values], double=True)
    compare(lambda lib, a: getattr(a, name)(), [values])
    compare(lambda lib, a: getattr(a * 1.0, name + "_")(), [values])


@pytest.mark.parametrize("name", ROUNDING)
def test_rounding_keeps_integer_tensors_and_refuses_bool(name):
    out = compare(lambda lib, a: getattr(lib, name)(a), [np.array([3, -2, 7])], grad=False)
    assert out.dtype == sg.int64
    same_error(lambda lib: getattr(lib, name)(lib.tensor([True, False])))


@pytest.mark.parametrize("decimals", [1, 2, -1, 0])  # decimals=0 given: PyTorch's RoundBackward1
def test_round_with_decimals(decimals):
    values = np.array([1.2345, -7.891, 123.456, 0.05, -0.049, 55.0])
    compare(lambda lib, a: lib.round(a, decimals=decimals), [values])
    compare(lambda lib, a: a.round(decimals=decimals), [values.astype(np.float32)], requires_grad=[False])


def test_round_with_decimals_refuses_integers():
    same_error(lambda lib: lib.round(lib.tensor([1, 2]), decimals=1))


# ---- binary ops ------------------------------------------------------------------------------------------

BINARY = [
    ("atan2", lambda lib, a, b: lib.atan2(a, b), [R(3, 4), R(4)]),
    ("arctan2", lambda lib, a, b: lib.arctan2(a, b), [R(3, 4), R(3, 4)]),
    ("atan2_method", lambda lib, a, b: a.atan2(b), [R(3, 1), R(1, 4)]),
    ("copysign", lambda lib, a, b: lib.copysign(a, b), [R(3, 4), R(4)]),
    ("copysign_scalar", lambda lib, a: lib.copysign(a, -1.0), [R(3, 4)]),
    ("copysign_method", lambda lib, a, b: a.copysign(b), [R(4), R(2, 4)]),
    ("logaddexp", lambda lib, a, b: lib.logaddexp(a, b), [R(3, 4), R(3, 1)]),
    ("logaddexp_method", lambda lib, a, b: a.logaddexp(b), [R(5), R(5)]),
    ("lerp_small_weight", lambda lib, a, b: lib.lerp(a, b, 0.3), [R(3, 4), R(4)]),
    ("lerp_large_weight", lambda lib, a, b: lib.lerp(a, b, 0.8), [R(3, 4), R(3, 4)]),
    ("lerp_tensor_weight", lambda lib, a, b, w: lib.lerp(a, b, w), [R(3, 4), R(3, 4), R(3, 4, low=-0.5, high=1.5)]),
    ("lerp_method_broadcast", lambda lib, a, b, w: a.lerp(b, w), [R(3, 1), R(4), R(2, 1, 1)]),
    ("clamp_tensors", lambda lib, a, lo, hi: lib.clamp(a, lo, hi), [R(3, 4), R(4, high=-0.5), R(3, 1, low=0.5)]),
    ("clamp_tensor_min", lambda lib, a, lo: lib.clamp(a, min=lo), [R(3, 4), R(3, 4)]),
    ("clamp_tensor_max", lambda lib, a, hi: a.clamp(max=hi), [R(3, 4), R(4)]),
    ("clip_tensors", lambda lib, a, lo, hi: a.clip(lo, hi), [R(6), R(6), R(6)]),
    ("clamp_min_above_max", lambda lib, a, lo, hi: lib.clamp(a, lo, hi), [R(8), R(8, low=0.5), R(8, high=-0.5)]),
]


@pytest.mark.parametrize("name,fn,arrays", BINARY, ids=[c[0] for c in BINARY])
def test_binary_matches_torch_with_double_backward(name, fn, arrays):
    compare(fn, arrays, double=True)


@pytest.mark.parametrize("name,fn,arrays", BINARY, ids=[c[0] for c in BINARY])
def test_binary_gradient_matches_finite_differences(name, fn, arrays):
    if name == "clamp_min_above_max":
        pytest.skip("a kink at every point where min > max")
    finite_difference_check(lambda *ts: fn(sg, *ts), arrays)


@pytest.mark.parametrize("fn", [
    lambda lib, a, b: a.clone().copysign_(b), lambda lib, a, b: a.clone().atan2_(b),
    lambda lib, a, b: a.clone().lerp_(b, 0.25), lambda lib, a, b: a.clone().clamp_(min=b),
    lambda lib, a, b: a.clone().clip_(-0.5, 0.5)])
def test_binary_in_place(fn):
    compare(fn, [R(3, 4), R(3, 4)])


@pytest.mark.parametrize("fn,dtype", [
    (lambda lib, a: lib.atan2(a, a), "float32"), (lambda lib, a: lib.copysign(a, a), "float32"),
    (lambda lib, a: lib.copysign(a, -1), "float32"), (lambda lib, a: lib.clamp(a, min=a * 0), "int64"),
    (lambda lib, a: lib.clamp(a, min=lib.tensor([0.5, 0.5, 0.5])), "float32"),
    (lambda lib, a: lib.logaddexp(a, lib.tensor([0.5, 0.5, 0.5])), "float32")])
def test_binary_dtype_rules_for_integers(fn, dtype):
    out = compare(fn, [np.array([1, -2, 3])], grad=False)
    assert str(out.dtype) == f"staticgrad.{dtype}"


def test_copysign_gradient_at_zero_is_zero():
    compare(lambda lib, a, b: lib.copysign(a, b), [np.array([0.0, -0.0, 1.5, -2.0]), np.array([-1.0, 1.0, -1.0, 1.0])])


ERRORS = [
    ("atan2_number", lambda lib: lib.atan2(lib.tensor([1.0]), 1.0)),
    ("logaddexp_number", lambda lib: lib.logaddexp(lib.tensor([1.0]), 1.0)),
    ("logaddexp_ints", lambda lib: lib.logaddexp(lib.tensor([1]), lib.tensor([2]))),
    ("copysign_number_first", lambda lib: lib.copysign(2.0, lib.tensor([1.0]))),
    ("lerp_ints", lambda lib: lib.lerp(lib.tensor([1, 2]), lib.tensor([1, 2]), 0.5)),
    ("lerp_int_weight_tensor", lambda lib: lib.lerp(lib.tensor([1, 2]), lib.tensor([1, 2]), lib.tensor([1, 2]))),
    ("lerp_end_dtype", lambda lib: lib.lerp(lib.tensor([1.0]), lib.tensor([1]), 0.5)),
    ("lerp_end_double", lambda lib: lib.lerp(lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64), 0.5)),
    ("lerp_weight_dtype", lambda lib: lib.lerp(lib.tensor([1.0]), lib.tensor([1.0]),
                                              lib.tensor([0.5], dtype=lib.float64))),
    ("clamp_mixed_bounds", lambda lib: lib.clamp(lib.tensor([1.0]), min=lib.tensor([0.0]), max=0.5)),
    ("norm_of_integers", lambda lib: lib.tensor([1, 2]).norm()),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


def test_in_place_transcendental_on_integers_is_refused_like_torch():
    same_error(lambda lib: lib.tensor([1, 2]).sin_())


# ---- norm ------------------------------------------------------------------------------------------------

NORMS = [
    ("all", lambda lib, a: a.norm()), ("fro_dim", lambda lib, a: lib.norm(a, "fro", dim=1)),
    ("p1", lambda lib, a: a.norm(p=1, dim=0)), ("p3_keepdim", lambda lib, a: a.norm(3, dim=1, keepdim=True)),
    ("dims", lambda lib, a: a.norm(2, dim=(0, 2))), ("inf", lambda lib, a: a.norm(float("inf"), dim=-1)),
    ("p_half", lambda lib, a: a.norm(0.5, dim=1)),
]


@pytest.mark.parametrize("name,fn", NORMS, ids=[n[0] for n in NORMS])
def test_norm_matches_torch(name, fn):
    compare(fn, [R(3, 4, 2)], double=name != "inf")


def test_norm_gradient_of_a_zero_row_is_zero():
    values = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    compare(lambda lib, a: a.norm(dim=1), [values])
    compare(lambda lib, a: a.norm(3, dim=1), [values])


# ---- replay: every op traced and replayed, the exact ones fused --------------------------------------------

def _pair(low=-2.0, high=2.0):
    return lambda rng: (rng.uniform(low, high, size=(4, 6)), rng.uniform(low, high, size=(4, 6)))


def _edges(rng):
    """Values on every branch and at the boundaries the piecewise formulas test, plus ties of round."""
    x = rng.uniform(-4, 4, size=(4, 6))
    x.flat[:8] = [0.0, -0.0, 0.5, -2.5, 1.5, 3.0, -3.0, 6.0]
    return x, rng.uniform(-1, 1, size=(4, 6))


EXACT = [
    ("floor", lambda a, b: sg.floor(a) + a, _edges), ("ceil", lambda a, b: a.ceil() * a, _edges),
    ("trunc", lambda a, b: sg.trunc(a) - a, _edges), ("round", lambda a, b: sg.round(a) + a, _edges),
    ("round_decimals", lambda a, b: sg.round(a, decimals=2) * a, _edges),
    ("round_negative_decimals", lambda a, b: sg.round(a * 100, decimals=-1) + a, _edges),
    ("copysign", lambda a, b: sg.copysign(a, b) * 2.0, _edges),
    ("copysign_scalar", lambda a, b: sg.copysign(a, -1.5) + b, _edges),
    ("lerp_scalar_weight", lambda a, b: sg.lerp(a, b, 0.25) * 3.0, _pair()),
    ("lerp_scalar_large", lambda a, b: sg.lerp(a, b, 0.75) * 3.0, _pair()),
    ("lerp_tensor", lambda a, b: sg.lerp(a, b * 2.0, b) + 1.0, _pair()),
    ("clamp_tensor", lambda a, b: sg.clamp(a, min=b, max=b + 1.0) * a, _pair()),
    ("clamp_tensor_min", lambda a, b: sg.clamp(a * 2.0, min=b) + 1.0, _edges),
    ("clamp_tensor_max", lambda a, b: sg.clamp(a * 2.0, max=b) + 1.0, _edges),
]
NUMPY_CALLS = [(name, (lambda n: lambda a, b: getattr(sg, n)(a) * 2.0)(name), values)
               for name, values in [("sin", _pair()), ("cos", _pair()), ("tan", _pair(-1, 1)),
                                    ("asin", _pair(-0.6, 0.6)), ("acos", _pair(-0.6, 0.6)), ("atan", _pair()),
                                    ("sinh", _pair()), ("cosh", _pair()), ("asinh", _pair()),
                                    ("acosh", _pair(2.2, 3)), ("atanh", _pair(-0.6, 0.6)), ("exp2", _pair()),
                                    ("log2", _pair(0.2, 3)), ("log10", _pair(0.2, 3)), ("log1p", _pair(-0.5, 3)),
                                    ("expm1", _pair()), ("erf", _pair())]]
NUMPY_CALLS += [("atan2", lambda a, b: sg.atan2(a, b) * 2.0, _pair()),
                ("logaddexp", lambda a, b: sg.logaddexp(a, b) * 2.0, _pair()),
                ("norm", lambda a, b: a / a.norm(dim=1, keepdim=True), _pair(0.5, 2))]


@pytest.mark.parametrize("name,op,inputs", EXACT, ids=[c[0] for c in EXACT])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_exact_op_joins_a_kernel_and_replays_bit_for_bit(name, op, inputs, dtype):
    plan = replay_matches_eager(op, inputs, dtype)
    op_name = {"round_negative_decimals": "round_decimals", "lerp_scalar_large": "lerp_scalar_weight",
               "clamp_tensor_min": "clamp_tensor", "clamp_tensor_max": "clamp_tensor"}.get(name, name)
    assert op_name not in unfused_ops(plan) and "fused" in unfused_ops(plan)


@pytest.mark.parametrize("name,op,inputs", NUMPY_CALLS, ids=[c[0] for c in NUMPY_CALLS])
def test_numpy_call_op_replays_bit_for_bit(name, op, inputs):
    replay_matches_eager(op, inputs, np.float32)


def test_special_namespace():
    x = sg.tensor([0.5, -1.0])
    np.testing.assert_array_equal(sg.special.erf(x).numpy(), sg.erf(x).numpy())
    np.testing.assert_allclose(sg.special.expm1(x).numpy(), torch.special.expm1(torch.tensor([0.5, -1.0])).numpy())
    assert {"erf", "exp2", "expm1", "log1p", "round", "logsumexp", "expit"} <= set(dir(sg.special))
