"""Every op: forward, gradient and node name against PyTorch (float64), gradient against finite
differences, and float32 results against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad
from tests.oracle import compare, finite_difference_check

rng = np.random.default_rng(1234)


def R(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, size=shape)


def P(*shape):
    return rng.uniform(0.5, 2.0, size=shape)


def away_from_zero(*shape):
    values = rng.uniform(0.2, 2.0, size=shape)
    return values * rng.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    """Values with no ties (max/min/relu have no gradient ambiguity)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) - n / 2) / 3.0 + 0.05


def I(*shape, high=5):
    return rng.integers(0, high, size=shape)


CASES = [
    # arithmetic with broadcasting and Python scalars
    ("add", lambda lib, a, b: a + b, [R(3, 4), R(3, 4)]),
    ("add_broadcast_row", lambda lib, a, b: a + b, [R(3, 4), R(4)]),
    ("add_broadcast_both", lambda lib, a, b: a + b, [R(2, 1, 4), R(3, 1)]),
    ("add_alpha", lambda lib, a, b: lib.add(a, b, alpha=2.5), [R(3, 4), R(1, 4)]),
    ("add_scalar", lambda lib, a: a + 2.5, [R(3)]),
    ("radd_scalar", lambda lib, a: 2.5 + a, [R(3)]),
    ("sub", lambda lib, a, b: a - b, [R(2, 3), R(3)]),
    ("sub_alpha", lambda lib, a, b: lib.sub(a, b, alpha=0.5), [R(2, 3), R(2, 3)]),
    ("sub_scalar", lambda lib, a: a - 1.5, [R(4)]),
    ("rsub_scalar", lambda lib, a: 1.0 - a, [R(4)]),
    ("mul", lambda lib, a, b: a * b, [R(3, 4), R(3, 1)]),
    ("mul_scalar", lambda lib, a: a * 3.0, [R(3)]),
    ("rmul_scalar", lambda lib, a: 3.0 * a, [R(3)]),
    ("div", lambda lib, a, b: a / b, [R(3, 4), P(4)]),
    ("div_scalar", lambda lib, a: a / 4.0, [R(3)]),
    ("rdiv_scalar", lambda lib, a: 2.0 / a, [P(3)]),
    ("neg", lambda lib, a: -a, [R(2, 3)]),
    ("pow_2", lambda lib, a: a ** 2, [R(2, 3)]),
    ("pow_3", lambda lib, a: a ** 3, [R(2, 3)]),
    ("pow_half", lambda lib, a: a ** 0.5, [P(2, 3)]),
    ("pow_negative", lambda lib, a: a ** -1.5, [P(5)]),
    ("pow_0", lambda lib, a: a ** 0, [R(3)]),
    ("rpow", lambda lib, a: 2.0 ** a, [R(4)]),
    ("pow_tensor", lambda lib, a, b: a ** b, [P(3, 2), R(2)]),
    ("maximum", lambda lib, a, b: lib.maximum(a, b), [distinct(3, 4), distinct(3, 4) + 0.01]),
    ("minimum", lambda lib, a, b: lib.minimum(a, b), [distinct(3, 4), distinct(3, 4) + 0.01]),
    # unary
    ("exp", lambda lib, a: a.exp(), [R(3, 2)]),
    ("log", lambda lib, a: a.log(), [P(3, 2)]),
    ("tanh", lambda lib, a: a.tanh(), [R(3, 2)]),
    ("tanh_fn", lambda lib, a: lib.tanh(a), [R(5)]),
    ("relu", lambda lib, a: a.relu(), [away_from_zero(3, 4)]),
    ("sigmoid", lambda lib, a: a.sigmoid(), [R(3, 4)]),
    ("sqrt", lambda lib, a: a.sqrt(), [P(3, 4)]),
    ("rsqrt", lambda lib, a: a.rsqrt(), [P(3)]),
    ("reciprocal", lambda lib, a: a.reciprocal(), [P(3, 4)]),
    ("abs", lambda lib, a: a.abs(), [away_from_zero(3, 4)]),
    ("clamp", lambda lib, a: a.clamp(-0.5, 0.7), [distinct(4, 3)]),
    ("clamp_min", lambda lib, a: a.clamp(min=0.1), [distinct(4, 3)]),
    ("square", lambda lib, a: a.square(), [R(4)]),
    # reductions
    ("sum_all", lambda lib, a: a.sum(), [R(3, 4)]),
    ("sum_dim0", lambda lib, a: a.sum(0), [R(3, 4)]),
    ("sum_dim_neg_keepdim", lambda lib, a: a.sum(-1, keepdim=True), [R(2, 3, 4)]),
    ("sum_dims", lambda lib, a: a.sum(dim=(0, 2)), [R(2, 3, 4)]),
    ("mean_all", lambda lib, a: a.mean(), [R(3, 4)]),
    ("mean_dim", lambda lib, a: a.mean(1), [R(3, 4)]),
    ("mean_dims_keepdim", lambda lib, a: a.mean((0, 1), keepdim=True), [R(2, 3, 4)]),
    ("max_all", lambda lib, a: a.max(), [distinct(3, 4)]),
    ("max_dim", lambda lib, a: a.max(1), [distinct(3, 4)]),
    ("min_dim_keepdim", lambda lib, a: a.min(0, keepdim=True), [distinct(3, 4)]),
    ("amax", lambda lib, a: a.amax(1), [distinct(3, 4)]),
    ("softmax", lambda lib, a: lib.softmax(a, -1), [R(3, 5)]),
    ("softmax_dim0", lambda lib, a: lib.softmax(a, 0), [R(3, 5)]),
    ("log_softmax", lambda lib, a: lib.log_softmax(a, 1), [R(2, 3, 4)]),
    ("logsumexp", lambda lib, a: a.logsumexp(1), [R(3, 4)]),
    ("gather", lambda lib, a: a.gather(1, lib.tensor([[0, 2], [1, 1], [3, 0]])), [R(3, 4)]),
    # matrix products: every rank combination of matmul
    ("mm", lambda lib, a, b: a @ b, [R(3, 4), R(4, 5)]),
    ("matmul_batched", lambda lib, a, b: a @ b, [R(2, 3, 4), R(2, 4, 5)]),
    ("matmul_3d_2d", lambda lib, a, b: a @ b, [R(2, 3, 4), R(4, 5)]),
    ("matmul_2d_3d", lambda lib, a, b: a @ b, [R(3, 4), R(2, 4, 5)]),
    ("matmul_broadcast_batch", lambda lib, a, b: a @ b, [R(2, 1, 3, 4), R(5, 4, 2)]),
    ("matmul_1d_2d", lambda lib, a, b: a @ b, [R(4), R(4, 5)]),
    ("matmul_2d_1d", lambda lib, a, b: a @ b, [R(3, 4), R(4)]),
    ("matmul_1d_1d", lambda lib, a, b: a @ b, [R(4), R(4)]),
    ("matmul_3d_1d", lambda lib, a, b: a @ b, [R(2, 3, 4), R(4)]),
    ("bmm", lambda lib, a, b: lib.bmm(a, b), [R(2, 3, 4), R(2, 4, 2)]),
    ("addmm", lambda lib, c, a, b: lib.addmm(c, a, b), [R(5), R(3, 4), R(4, 5)]),
    ("addmm_scaled", lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=2.0), [R(3, 5), R(3, 4), R(4, 5)]),
    ("linear_2d", lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [R(3, 4), R(5, 4), R(5)]),
    ("linear_3d", lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [R(2, 3, 4), R(5, 4), R(5)]),
    ("linear_1d", lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [R(4), R(5, 4), R(5)]),
    ("linear_no_bias", lambda lib, x, w: lib.nn.functional.linear(x, w), [R(2, 3, 4), R(5, 4)]),
    # shapes
    ("reshape", lambda lib, a: a.reshape(4, 3), [R(3, 4)]),
    ("reshape_infer", lambda lib, a: a.reshape(-1, 2), [R(3, 4)]),
    ("view", lambda lib, a: a.view(2, 6), [R(3, 4)]),
    ("transpose", lambda lib, a: a.transpose(0, 2), [R(2, 3, 4)]),
    ("t", lambda lib, a: a.t(), [R(3, 4)]),
    ("T", lambda lib, a: a.T, [R(3, 4)]),
    ("mT", lambda lib, a: a.mT, [R(2, 3, 4)]),
    ("permute", lambda lib, a: a.permute(2, 0, 1), [R(2, 3, 4)]),
    ("unsqueeze", lambda lib, a: a.unsqueeze(1), [R(3, 4)]),
    ("squeeze", lambda lib, a: a.squeeze(), [R(3, 1, 4)]),
    ("squeeze_dim", lambda lib, a: a.squeeze(1), [R(3, 1, 4)]),
    ("expand", lambda lib, a: a.expand(2, 3, 4), [R(3, 1)]),
    ("flatten", lambda lib, a: a.flatten(), [R(2, 3, 4)]),
    ("flatten_1", lambda lib, a: a.flatten(1), [R(2, 3, 4)]),
    ("cat", lambda lib, a, b: lib.cat([a, b], 1), [R(2, 3), R(2, 2)]),
    ("stack", lambda lib, a, b: lib.stack([a, b], 1), [R(2, 3), R(2, 3)]),
    ("narrow", lambda lib, a: a.narrow(1, 1, 2), [R(3, 4)]),
    ("where", lambda lib, c, a, b: lib.where(c > 0, a, b), [R(3, 4), R(3, 4), R(4)]),
    ("where_scalar", lambda lib, c, a: lib.where(c > 0, a, 0.0), [R(3, 4), R(3, 4)]),
    # indexing
    ("select", lambda lib, a: a[1], [R(3, 4)]),
    ("slice", lambda lib, a: a[1:3], [R(4, 4)]),
    ("full_slice", lambda lib, a: a[:], [R(4, 4)]),
    ("select_and_slice", lambda lib, a: a[0, 1:3, ::2], [R(2, 4, 5)]),
    ("ellipsis", lambda lib, a: a[..., 1], [R(2, 3, 4)]),
    ("none_index", lambda lib, a: a[:, None, 2], [R(3, 4)]),
    ("negative_index", lambda lib, a: a[-1, -2:], [R(3, 4)]),
    # losses
    ("mse_loss", lambda lib, a, b: lib.nn.functional.mse_loss(a, b), [R(4, 3), R(4, 3)]),
    ("mse_loss_sum", lambda lib, a, b: lib.nn.functional.mse_loss(a, b, reduction="sum"), [R(4, 3), R(4, 3)]),
    ("mse_loss_none", lambda lib, a, b: lib.nn.functional.mse_loss(a, b, reduction="none"), [R(4, 3), R(4, 3)]),
    # copies and types
    ("clone", lambda lib, a: a.clone(), [R(3)]),
    ("to_float32", lambda lib, a: a.to(lib.float32) * 1.0, [R(3)]),
]

IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_double_backward_against_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-9, rtol=1e-7, double=True)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-4)


FD_SKIP = {"max_dim", "min_dim_keepdim", "to_float32"}  # outputs that are not one float64 tensor


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if c[0] not in FD_SKIP],
                         ids=[i for i in IDS if i not in FD_SKIP])
def test_against_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(staticgrad, *xs), arrays)


INDEX_CASES = [
    ("index_tensor", lambda lib, a, i: a[i], [R(5, 3), I(4, high=5)]),
    ("index_list", lambda lib, a: a[[0, 2, 2]], [R(4, 3)]),
    ("index_second_dim", lambda lib, a, i: a[:, i], [R(3, 5), I(4, high=5)]),
    ("index_mask", lambda lib, a: a[a > 0], [R(4, 3)]),
    ("index_two_tensors", lambda lib, a, i, j: a[i, j], [R(4, 5), I(3, high=4), I(3, high=5)]),
    ("index_slice_then_tensor", lambda lib, a, i: a[1:3, i], [R(4, 5), I(2, high=5)]),
]


@pytest.mark.parametrize("name,fn,arrays", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_advanced_indexing(name, fn, arrays):
    compare(fn, arrays, requires_grad=[True] + [False] * (len(arrays) - 1), atol=1e-10)


def test_integer_and_bool_results():
    compare(lambda lib, a, b: (a > b, a.argmax(1), a.argmin(), (a == b).sum()), [R(3, 4), R(4)], grad=False)
    compare(lambda lib, a: (a * 2, a + 1, a.sum(0)), [I(3, 4)], requires_grad=[False], grad=False)


def test_type_promotion_follows_pytorch():
    compare(lambda lib, a, b: a + b, [I(3), R(3)], requires_grad=[False, True])
    compare(lambda lib, a: a * 2.5, [I(3)], requires_grad=[False], grad=False)
    compare(lambda lib, a: a / 2, [I(3)], requires_grad=[False], grad=False)
    compare(lambda lib, a, b: a + b, [R(3).astype(np.float32), R().astype(np.float64)])
    compare(lambda lib, a, b: a * b, [R(3).astype(np.float32), R(3).astype(np.float64)], atol=1e-6)
    compare(lambda lib, a: a.exp(), [I(3)], requires_grad=[False], grad=False, rtol=1e-6)
    compare(lambda lib, a, b: a * b, [R(3).astype(np.float32), I(3)], requires_grad=[True, False])
    compare(lambda lib, a, b: a + b, [I(3).astype(np.int8), I(3).astype(np.uint8)], requires_grad=[False, False],
            grad=False)


def test_every_forward_writes_into_out():
    """The runtime hands each non-view op a preallocated ``out``: every forward must fill it."""
    from staticgrad.ops import OPS

    checked = 0
    for name, op in OPS.items():
        if op.kind in ("view",):
            continue
        sample = _sample_call(name)
        if sample is None:
            continue
        arrays, attrs = sample
        expected = op.forward(*arrays, **attrs)
        if isinstance(expected, tuple):
            continue
        out = np.empty_like(np.asarray(expected))
        returned = op.forward(*arrays, out=out, **attrs)
        assert returned is out, f"{name} did not return its out argument"
        np.testing.assert_array_equal(out, expected, err_msg=name)
        checked += 1
    assert checked > 60


def _sample_call(name):
    a, b = R(3, 4), R(3, 4)
    unary = {"neg", "exp", "tanh", "sigmoid", "relu", "abs", "sign", "clone", "logical_not", "zeros_like"}
    positive = {"log", "sqrt", "reciprocal"}
    if name in unary:
        return [a], {}
    if name in positive:
        return [P(3, 4)], {}
    if name in {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                "logical_and", "tanh_backward", "sigmoid_backward", "copy"}:
        return [a, b], {}
    if name == "pow":
        return [P(3, 4), b], {}
    if name.startswith("bitwise_"):  # integer-only ops
        ints = np.arange(12, dtype=np.int64).reshape(3, 4)
        if name == "bitwise_not":
            return [ints], {}
        return ([ints], {"other": 3}) if name.endswith("_scalar") else ([ints, ints[::-1] % 5], {})
    if name in {"logical_or", "logical_xor"}:
        return [a, b], {}
    if name.endswith("_scalar") and name not in {"rpow_scalar", "pow_scalar"}:
        return [a], {"other": 1.5}
    if name == "pow_scalar":
        return [P(3, 4)], {"exponent": 1.5}
    if name == "rpow_scalar":
        return [a], {"base": 2.0}
    if name == "threshold_backward":
        return [a, b], {"threshold": 0.0}
    if name == "clamp":
        return [a], {"min": -0.5, "max": 0.5}
    if name in {"sum", "mean", "amax", "amin"}:
        return [a], {"dim": (1,), "keepdim": False}
    if name in {"argmax", "argmin"}:
        return [a], {"dim": 1, "keepdim": False}
    if name == "sum_to_size":
        return [a], {"shape": (4,)}
    if name in {"softmax", "log_softmax"}:
        return [a], {"dim": 1}
    if name in {"softmax_backward", "log_softmax_backward"}:
        return [a, b], {"dim": 1}
    if name in {"mm", "bmm"}:
        return ([R(3, 4), R(4, 2)] if name == "mm" else [R(2, 3, 4), R(2, 4, 2)]), {}
    if name == "addmm":
        return [R(2), R(3, 4), R(4, 2)], {"alpha": 1, "beta": 1}
    if name == "mv":
        return [R(3, 4), R(4)], {}
    if name == "dot":
        return [R(4), R(4)], {}
    if name == "mse_loss":
        return [a, b], {"reduction": 1}
    if name == "mse_loss_backward":
        return [np.asarray(1.0), a, b], {"reduction": 1}
    if name == "full":
        return [], {"shape": (2, 3), "value": 1.5, "dtype": np.dtype(np.float32)}
    if name == "fill":
        return [a], {"value": 2.0}
    if name == "to_dtype":
        return [a], {"dtype": np.dtype(np.float32), "self_dtype": a.dtype}
    if name == "where":
        return [a > 0, a, b], {}
    if name == "cat":
        return [a, b], {"dim": 0, "sizes": (3, 3)}
    if name == "stack":
        return [a, b], {"dim": 0}
    return None
