"""var, std, var_mean, std_mean, prod, any, all, the scans (cumsum, cumprod, cummax, cummin,
logcumsumexp), isclose, allclose, the value tests and max/min's axis alias: values, gradients,
double backward and node names against PyTorch in float64; finite differences; integer dtypes;
PyTorch's errors; and each op traced and replayed equal to eager, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4))
X3 = RNG.standard_normal((2, 3, 4))
WITH_ZEROS = np.array([[0.5, 0.0, 2.0, -1.5], [1.5, -0.7, 0.0, 0.0], [0.3, 1.2, -2.0, 0.9]])

# (id, function of (lib, x), input): each differentiable twice in PyTorch
DIFFERENTIABLE = [
    ("var", lambda lib, x: lib.var(x), X),
    ("var_dim", lambda lib, x: x.var(1), X),
    ("var_dims_keepdim", lambda lib, x: lib.var(x, (0, 2), keepdim=True), X3),
    ("var_unbiased_false", lambda lib, x: lib.var(x, 0, False), X),
    ("var_correction", lambda lib, x: lib.var(x, dim=1, correction=2), X),
    ("var_correction_float", lambda lib, x: x.var(correction=0.5), X),
    ("var_positional_unbiased", lambda lib, x: lib.var(x, False), X),
    ("var_axis", lambda lib, x: x.var(axis=-1), X3),
    ("std", lambda lib, x: lib.std(x), X),
    ("std_dim_keepdim", lambda lib, x: x.std(dim=-1, keepdim=True), X3),
    ("std_correction0", lambda lib, x: lib.std(x, (0, 1), correction=0), X3),
    ("var_mean", lambda lib, x: lib.var_mean(x, 1), X),
    ("var_mean_all", lambda lib, x: lib.var_mean(x, unbiased=False), X3),
    ("std_mean", lambda lib, x: lib.std_mean(x, dim=(0, 2), keepdim=True), X3),
    ("std_mean_var_only", lambda lib, x: lib.std_mean(x, 0)[0], X),
    ("var_mean_mean_only", lambda lib, x: lib.var_mean(x, 0)[1], X),
    ("prod", lambda lib, x: lib.prod(x), X),
    ("prod_dim", lambda lib, x: x.prod(1), X),
    ("prod_dim_keepdim", lambda lib, x: lib.prod(x, 0, keepdim=True), X3),
    ("prod_one_zero", lambda lib, x: lib.prod(x[0]), WITH_ZEROS),
    ("prod_two_zeros", lambda lib, x: lib.prod(x[1]), WITH_ZEROS),
    ("prod_dim_zeros", lambda lib, x: x.prod(1), WITH_ZEROS),
    ("prod_dim0_zeros", lambda lib, x: x.prod(0), WITH_ZEROS),
    ("prod_all_zeros", lambda lib, x: x.prod(), WITH_ZEROS),
    ("prod_axis", lambda lib, x: x.prod(axis=0), X),
    ("cumsum", lambda lib, x: lib.cumsum(x, 0), X),
    ("cumsum_last", lambda lib, x: x.cumsum(-1), X3),
    ("cumsum_axis", lambda lib, x: x.cumsum(axis=1), X3),
    ("cumprod", lambda lib, x: lib.cumprod(x, 1), X),
    ("cumprod_dim0", lambda lib, x: x.cumprod(0), X3),
    ("cumprod_zeros", lambda lib, x: lib.cumprod(x, 1), WITH_ZEROS),
    ("cumprod_zeros_dim0", lambda lib, x: lib.cumprod(x, 0), WITH_ZEROS),
    ("cummax", lambda lib, x: lib.cummax(x, 1).values, X),
    ("cummin", lambda lib, x: x.cummin(0).values, X3),
    ("logcumsumexp", lambda lib, x: lib.logcumsumexp(x, 1), X),
    ("logcumsumexp_dim0", lambda lib, x: x.logcumsumexp(0), X3),
    ("max_axis", lambda lib, x: lib.max(x, axis=1).values, X),
    ("min_axis_keepdim", lambda lib, x: x.min(axis=0, keepdim=True).values, X),
]


@pytest.mark.parametrize("fn, x", [c[1:] for c in DIFFERENTIABLE], ids=[c[0] for c in DIFFERENTIABLE])
def test_values_gradients_and_second_derivatives_match_torch(fn, x):
    compare(fn, [x], atol=1e-10, rtol=1e-9, double=True)


@pytest.mark.parametrize("fn, x", [c[1:] for c in DIFFERENTIABLE if "max" not in c[0] and "min" not in c[0]],
                         ids=[c[0] for c in DIFFERENTIABLE if "max" not in c[0] and "min" not in c[0]])
def test_gradients_match_finite_differences(fn, x):
    finite_difference_check(lambda t: _first(fn(sg, t)), [x])


def test_var_over_an_empty_dim_list_reduces_every_dim_like_torch():
    # forward only: PyTorch's gradient for dim=[] divides by a count of 1 - correction (inf)
    compare(lambda lib, x: lib.var(x, dim=[]), [X], atol=1e-12, grad=False)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def test_cummax_and_cummin_return_named_values_and_indices_like_torch():
    x = np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 5.0, np.nan], [2.0, 1.0, 1.0, 4.0, 0.0, 0.0, -1.0]])
    for name in ("cummax", "cummin"):
        t_out, s_out = getattr(torch, name)(torch.tensor(x), 1), getattr(sg, name)(sg.tensor(x), 1)
        assert type(s_out).__name__ == name
        np.testing.assert_array_equal(s_out.values.numpy(), t_out.values.numpy())
        np.testing.assert_array_equal(s_out.indices.numpy(), t_out.indices.numpy())
        assert s_out.indices.dtype == sg.int64
    t_out, s_out = torch.tensor(3.0).cummax(0), sg.tensor(3.0).cummax(0)
    assert s_out.values.shape == () and s_out.indices.item() == t_out.indices.item() == 0


INTEGER = [
    ("prod_int32", lambda lib, x: lib.prod(x)),
    ("prod_dim_int32", lambda lib, x: x.prod(0)),
    ("prod_dtype", lambda lib, x: lib.prod(x, 1, dtype=lib.float64)),
    ("cumsum_int32", lambda lib, x: lib.cumsum(x, 1)),
    ("cumsum_dtype", lambda lib, x: lib.cumsum(x, 1, dtype=lib.float32)),
    ("cumprod_int32", lambda lib, x: x.cumprod(0)),
    ("cummax_int", lambda lib, x: lib.cummax(x, 1)),
    ("cummin_int", lambda lib, x: x.cummin(0)),
    ("any", lambda lib, x: lib.any(x)),
    ("all_dim_keepdim", lambda lib, x: x.all(1, keepdim=True)),
    ("any_dims", lambda lib, x: lib.any(x > 1, (0, 1))),
    ("all_axis", lambda lib, x: lib.all(x, axis=0)),
    ("any_uint8", lambda lib, x: lib.any(x.to(lib.uint8), 0)),
    ("isnan_int", lambda lib, x: lib.isnan(x)),
    ("isfinite_int", lambda lib, x: x.isfinite()),
    ("isinf_int", lambda lib, x: lib.isinf(x)),
    ("isclose_int", lambda lib, x: lib.isclose(x, x + 1, rtol=0.5)),
    ("isclose_int_exact", lambda lib, x: lib.isclose(x, x * 2, rtol=0, atol=0)),
    ("max_axis_int", lambda lib, x: lib.max(x, axis=0)),
    ("bool_cumsum", lambda lib, x: lib.cumsum(x > 0, 0)),
    ("bool_prod", lambda lib, x: lib.prod(x > 0)),
]


@pytest.mark.parametrize("fn", [c[1] for c in INTEGER], ids=[c[0] for c in INTEGER])
def test_integer_and_bool_inputs_match_torch(fn):
    x = np.array([[3, 0, -2, 1], [1, 4, 2, -1], [2, 2, 0, 5]], dtype=np.int32)
    compare(fn, [x], grad=False)


FLOAT_TESTS = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3.5])


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "isposinf", "isneginf"])
def test_value_tests_match_torch(name):
    compare(lambda lib, x: getattr(lib, name)(x), [FLOAT_TESTS], grad=False)
    compare(lambda lib, x: getattr(x, name)(), [FLOAT_TESTS.astype(np.float32)], grad=False)


@pytest.mark.parametrize("rtol, atol, equal_nan", [(1e-5, 1e-8, False), (1e-5, 1e-8, True), (0.0, 0.0, False),
                                                   (0.1, 0.0, False), (0.0, 1e-3, True)])
def test_isclose_and_allclose_match_torch(rtol, atol, equal_nan):
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1.0, 1.0, 0.0, 2.0])
    b = np.array([1.0 + 1e-9, np.nan, np.inf, np.inf, 1.05, 1.0005, 1e-9, np.nan])
    compare(lambda lib, x, y: lib.isclose(x, y, rtol, atol, equal_nan), [a, b], grad=False)
    compare(lambda lib, x, y: x.isclose(y[:1], rtol=rtol, atol=atol, equal_nan=equal_nan), [a, b], grad=False)
    for pair in ((a, b), (a, a), (a[:1], b[:1])):
        t_result = torch.allclose(torch.tensor(pair[0]), torch.tensor(pair[1]), rtol, atol, equal_nan)
        assert sg.allclose(sg.tensor(pair[0]), sg.tensor(pair[1]), rtol, atol, equal_nan) is t_result


ERRORS = [
    ("var_int", lambda lib: lib.var(lib.tensor([1, 2, 3]))),
    ("std_int", lambda lib: lib.tensor([1, 2]).std()),
    ("var_dim_range", lambda lib: lib.var(lib.ones(2, 3), 5)),
    ("var_both_corrections", lambda lib: lib.var(lib.ones(2, 3), unbiased=False, correction=1)),
    ("prod_tuple_dim", lambda lib: lib.prod(lib.ones(2, 3), (0, 1))),
    ("cumsum_no_dim", lambda lib: lib.cumsum(lib.ones(2, 3))),
    ("cumsum_dim_range", lambda lib: lib.ones(2, 3).cumsum(2)),
    ("cummax_dim_range", lambda lib: lib.cummax(lib.ones(2, 3), -3)),
    ("logcumsumexp_int", lambda lib: lib.logcumsumexp(lib.tensor([1, 2]), 0)),
    ("isclose_dtypes", lambda lib: lib.isclose(lib.tensor([1]), lib.tensor([1.0]))),
    ("isclose_float_dtypes", lambda lib: lib.isclose(lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64))),
    ("isclose_rtol", lambda lib: lib.isclose(lib.ones(2), lib.ones(2), rtol=-1)),
    ("isclose_atol", lambda lib: lib.isclose(lib.ones(2), lib.ones(2), atol=-1.0)),
    ("isclose_number", lambda lib: lib.isclose(lib.ones(2), 1.0)),
    ("allclose_number", lambda lib: lib.allclose(lib.ones(2), 1.0)),
    ("any_dim_range", lambda lib: lib.any(lib.ones(2), 1)),
]


@pytest.mark.parametrize("fn", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_match_torch(fn):
    same_error(fn)


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_no_degrees_of_freedom_warns_and_gives_nan_like_torch(name):
    with pytest.warns(UserWarning, match=rf"^{name}\(\): degrees of freedom is <= 0"):
        result = getattr(sg, name)(sg.tensor([1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(torch, name)(torch.tensor([1.0]))
    first = result[0] if isinstance(result, tuple) else result
    assert np.isnan(first.item()) and np.isnan((expected[0] if isinstance(expected, tuple) else expected).item())


def test_max_refuses_dim_and_axis_together():
    with pytest.raises(TypeError, match="axis"):
        sg.max(sg.ones(2, 3), 0, axis=0)


# ---- traced and replayed ------------------------------------------------------------------------------

def replays_like_eager(fn, shape, backward=True, calls=4, zeros=False):
    """``fn(x * p)`` with a captured parameter p: a compiled step (forward, and backward into p.grad)
    gives eager's outputs and gradients bit for bit on new inputs."""
    rng = np.random.default_rng(5)
    start = rng.standard_normal(shape)
    p_eager, p_comp = sg.tensor(start.copy(), requires_grad=True), sg.tensor(start.copy(), requires_grad=True)

    def step_for(p):
        def step(x):
            out = fn(x * p)
            values = out if isinstance(out, tuple) else (out,)
            if backward:
                sum(v.sum() * (i + 1.5) for i, v in enumerate(values) if v.requires_grad).backward()
            return tuple(v.detach() for v in values)
        return step

    eager, compiled = step_for(p_eager), sg.compile(step_for(p_comp))
    for _ in range(calls):
        x = rng.standard_normal(shape)
        if zeros:
            x[rng.random(shape) < 0.3] = 0.0
        p_eager.grad = p_comp.grad = None
        expected, got = eager(sg.tensor(x)), compiled(sg.tensor(x))
        for e, g in zip(expected, got):
            assert g.dtype == e.dtype and g.numpy().tobytes() == e.numpy().tobytes()
        if backward:
            assert p_comp.grad.numpy().tobytes() == p_eager.grad.numpy().tobytes()
    assert compiled.stats.replays >= calls - 2


REPLAYED = [
    ("var", lambda x: sg.var(x, 1), True),
    ("std_keepdim", lambda x: x.std(0, keepdim=True), True),
    ("var_mean", lambda x: sg.var_mean(x, 1, correction=0), True),
    ("std_mean", lambda x: sg.std_mean(x, 0), True),
    ("prod", lambda x: x.prod(), True),
    ("prod_dim", lambda x: sg.prod(x, 1), True),
    ("cumsum", lambda x: x.cumsum(1), True),
    ("cumprod", lambda x: sg.cumprod(x, 0), True),
    ("cummax", lambda x: sg.cummax(x, 1), True),
    ("cummin", lambda x: x.cummin(0), True),
    ("logcumsumexp", lambda x: sg.logcumsumexp(x, 1), True),
    ("max_axis", lambda x: sg.max(x, axis=1), True),
    ("any_all", lambda x: (sg.any(x > 1, 1), x.all(), sg.all(x > -1, 0, keepdim=True)), False),
    ("value_tests", lambda x: (sg.isnan(sg.log(x)), x.isfinite(), sg.isinf(1 / x), sg.isposinf(x),
                               sg.isneginf(x)), False),
    ("isclose", lambda x: sg.isclose(x, x * 1.0000001, rtol=1e-6), False),
]


@pytest.mark.parametrize("fn, backward", [c[1:] for c in REPLAYED], ids=[c[0] for c in REPLAYED])
def test_replay_equals_eager(fn, backward):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        replays_like_eager(fn, (3, 5), backward)


@pytest.mark.parametrize("fn", [lambda x: sg.prod(x, 1), lambda x: x.prod(), lambda x: sg.cumprod(x, 1)],
                         ids=["prod_dim", "prod", "cumprod"])
def test_replay_of_products_with_zeros_equals_eager(fn):
    replays_like_eager(fn, (4, 5), zeros=True)


def test_std_of_constant_rows_has_zero_gradient_and_no_warning_like_torch():
    rows = np.array([[2.0, 2.0, 2.0], [1.0, -1.0, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compare(lambda lib, x: x.std(1), [rows], atol=1e-12)
        compare(lambda lib, x: lib.std_mean(x, 1, correction=0)[0], [rows], atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_mean_of_all_values_is_numpys_bit_for_bit(dtype):
    """mean_of_all (eager mean() and the losses' mean) gives np.mean's bits: its division in double
    precision, rounded to the dtype, is what np.mean's NumPy-scalar division by its intp count does."""
    from staticgrad.ops.reductions import mean_of_all

    rng = np.random.default_rng(7)
    for _ in range(3000):
        a = (rng.standard_normal(int(rng.integers(1, 2000))) * 10 ** rng.uniform(-6, 6)).astype(dtype)
        expected, got = np.mean(a), mean_of_all(a.reshape(-1, 1) if a.size % 2 else a)
        assert type(got) is type(expected) and got.tobytes() == expected.tobytes()
