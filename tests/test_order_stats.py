"""Order statistics, NaN-aware reductions, quantiles and distances (median, nanmedian, kthvalue, mode,
aminmax, nansum, nanmean, quantile, nanquantile, dist, cdist, pdist, renorm) against PyTorch in float64
and float32: values, indices, gradients, double backward and node names; finite differences; PyTorch's
errors; replay equals eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import replay_matches_eager

rng = np.random.default_rng(31)


def R(*shape):
    return rng.standard_normal(shape)


def with_nans(*shape):
    x = R(*shape)
    x.flat[::5] = np.nan
    return x


SELECTING = [
    ("median_all", lambda lib, a: lib.median(a), [R(3, 5)]),
    ("median_even", lambda lib, a: a.median(), [R(4, 2)]),
    ("median_dim", lambda lib, a: lib.median(a, 1), [R(3, 5)]),
    ("median_dim_keepdim", lambda lib, a: a.median(0, keepdim=True), [R(4, 3)]),
    ("median_nan", lambda lib, a: lib.median(a, dim=-1), [with_nans(3, 4)]),
    ("nanmedian_all", lambda lib, a: lib.nanmedian(a), [with_nans(3, 5)]),
    ("nanmedian_dim", lambda lib, a: a.nanmedian(1), [with_nans(4, 5)]),
    ("kthvalue", lambda lib, a: lib.kthvalue(a, 2), [R(3, 5)]),
    ("kthvalue_dim_keepdim", lambda lib, a: a.kthvalue(3, 0, True), [R(4, 3)]),
    ("mode", lambda lib, a: lib.mode(a), [np.array([[3., 1., 2., 1., 3., 5.], [2., 2., 7., 7., 1., 0.]])]),
    ("mode_dim", lambda lib, a: a.mode(0), [np.array([[1., 2.], [1., 3.], [4., 3.]])]),
    ("aminmax", lambda lib, a: lib.aminmax(a), [R(3, 4)]),
    ("aminmax_dim", lambda lib, a: lib.aminmax(a, dim=1, keepdim=True), [R(3, 4)]),
    ("aminmax_method", lambda lib, a: a.aminmax(dim=-2), [R(3, 4)]),
    ("aminmax_ties", lambda lib, a: lib.aminmax(a, dim=0), [np.array([[1.0, 2.0], [1.0, 2.0], [0.5, 3.0]])]),
    ("median_ties", lambda lib, a: lib.median(a), [np.array([1.0, 1.0, 1.0, 2.0])]),
]


@pytest.mark.parametrize("name,fn,arrays", SELECTING, ids=[c[0] for c in SELECTING])
def test_selecting_reductions_match_torch(name, fn, arrays):
    compare(fn, arrays, double=True, atol=1e-12, rtol=1e-12)
    compare(fn, [a.astype(np.float32) for a in arrays])


def test_results_are_named_tuples_like_torch():
    x = sg.tensor([[1.0, 3.0, 2.0]])
    assert sg.median(x, 1)._fields == ("values", "indices") and type(sg.median(x, 1)).__name__ == "median"
    assert sg.aminmax(x)._fields == ("min", "max")
    assert type(sg.mode(x)).__name__ == "mode" and type(sg.kthvalue(x, 1)).__name__ == "kthvalue"


def test_integer_inputs_select_with_indices():
    values = np.array([[4, 1, 3, 5], [0, 9, 7, 2]])  # no ties: median's index among equal values is PyTorch's own
    for fn in (lambda lib, a: lib.median(a, 1), lambda lib, a: lib.kthvalue(a, 3),
               lambda lib, a: lib.aminmax(a), lambda lib, a: lib.median(a), lambda lib, a: lib.nansum(a, 1)):
        compare(fn, [values], grad=False)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8])
def test_kthvalue_among_ties_reports_torch_index(dtype):
    """Rows of few distinct values (and NaN in float rows): the index kthvalue reports among equal values
    is the one PyTorch's quickselect ends on, for every k, along either dim (a stable sort's differed in
    most such rows)."""
    rng = np.random.default_rng(3)
    for trial in range(40):
        n = int(rng.integers(1, 24))
        a = rng.integers(0, 3, (3, n)).astype(dtype)
        if np.dtype(dtype).kind == "f" and trial % 3 == 0:
            a[trial % 3, rng.integers(0, n)] = np.nan
        k = int(rng.integers(1, n + 1))
        for dim, t in ((1, a), (0, np.ascontiguousarray(a.T))):
            expected = torch.kthvalue(torch.tensor(t), k, dim=dim)
            got = sg.kthvalue(sg.tensor(t), k, dim=dim)
            np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy(), err_msg=f"{t} k={k}")
            np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())


NAN_REDUCTIONS = [
    ("nansum", lambda lib, a: lib.nansum(a), [with_nans(3, 4)]),
    ("nansum_dim", lambda lib, a: lib.nansum(a, 1, keepdim=True), [with_nans(3, 4)]),
    ("nansum_dims", lambda lib, a: a.nansum((0, 2)), [with_nans(3, 4, 2)]),
    ("nanmean", lambda lib, a: lib.nanmean(a), [with_nans(3, 4)]),
    ("nanmean_dim", lambda lib, a: a.nanmean(dim=0), [with_nans(3, 4)]),
    ("nansum_no_nan", lambda lib, a: lib.nansum(a, -1), [R(3, 4)]),
    ("nanmean_all_nan_row", lambda lib, a: lib.nanmean(a, 1), [np.array([[np.nan, np.nan], [1.0, np.nan]])]),
]


@pytest.mark.parametrize("name,fn,arrays", NAN_REDUCTIONS, ids=[c[0] for c in NAN_REDUCTIONS])
def test_nan_reductions_match_torch(name, fn, arrays):
    compare(fn, arrays, double=True, atol=1e-12, rtol=1e-12)
    compare(fn, [a.astype(np.float32) for a in arrays])


QUANTILES = [
    ("scalar", lambda lib, a: lib.quantile(a, 0.3), [R(3, 5)]),
    ("dim", lambda lib, a: lib.quantile(a, 0.75, dim=1), [R(3, 5)]),
    ("dim_keepdim", lambda lib, a: a.quantile(0.5, dim=0, keepdim=True), [R(4, 3)]),
    ("all_keepdim", lambda lib, a: lib.quantile(a, 0.2, keepdim=True), [R(3, 4)]),
    ("tensor_q", lambda lib, a: lib.quantile(a, lib.tensor([0.1, 0.5, 1.0], dtype=lib.float64), dim=1), [R(3, 5)]),
    ("tensor_q_keepdim", lambda lib, a: lib.quantile(a, lib.tensor([0.0, 0.9], dtype=lib.float64), dim=0,
                                                     keepdim=True), [R(3, 5)]),
    ("tensor_q_all", lambda lib, a: lib.quantile(a, lib.tensor([0.25, 0.6], dtype=lib.float64)), [R(2, 3)]),
    ("nan", lambda lib, a: lib.quantile(a, 0.4, dim=1), [with_nans(3, 5)]),
    ("nanquantile", lambda lib, a: lib.nanquantile(a, 0.4, dim=1), [with_nans(3, 5)]),
    ("nanquantile_all", lambda lib, a: a.nanquantile(0.7), [with_nans(3, 5)]),
] + [(f"interpolation_{mode}", (lambda m: lambda lib, a: lib.quantile(a, 0.35, dim=1, interpolation=m))(mode),
      [R(3, 6)]) for mode in ("linear", "lower", "higher", "midpoint", "nearest")]


@pytest.mark.parametrize("name,fn,arrays", QUANTILES, ids=[c[0] for c in QUANTILES])
def test_quantile_matches_torch(name, fn, arrays):
    compare(fn, arrays, double=True, atol=1e-12, rtol=1e-12)


def test_quantile_in_float32():
    compare(lambda lib, a: lib.quantile(a, lib.tensor([0.1, 0.5]), dim=1), [R(3, 5).astype(np.float32)])


DISTANCES = [
    ("dist", lambda lib, a, b: lib.dist(a, b), [R(3, 4), R(3, 4)]),
    ("dist_p1_broadcast", lambda lib, a, b: lib.dist(a, b, 1), [R(3, 4), R(4)]),
    ("dist_p3", lambda lib, a, b: a.dist(b, p=3), [R(3, 4), R(3, 4)]),
    ("dist_inf", lambda lib, a, b: lib.dist(a, b, float("inf")), [R(3, 4), R(3, 4)]),
    ("cdist", lambda lib, a, b: lib.cdist(a, b), [R(3, 4), R(5, 4)]),
    ("cdist_p1", lambda lib, a, b: lib.cdist(a, b, p=1), [R(3, 4), R(5, 4)]),
    ("cdist_p_half", lambda lib, a, b: lib.cdist(a, b, p=1.5), [R(3, 4), R(5, 4)]),
    ("cdist_inf", lambda lib, a, b: lib.cdist(a, b, p=float("inf")), [R(3, 4), R(5, 4)]),
    ("cdist_batched", lambda lib, a, b: lib.cdist(a, b), [R(2, 3, 4), R(1, 5, 4)]),
    ("cdist_mm", lambda lib, a, b: lib.cdist(a, b), [R(30, 4), R(5, 4)]),
    ("cdist_mm_batched", lambda lib, a, b: lib.cdist(a, b), [R(2, 26, 3), R(2, 4, 3)]),
    ("cdist_mm_forced", lambda lib, a, b: lib.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
     [R(3, 4), R(5, 4)]),
    ("cdist_no_mm", lambda lib, a, b: lib.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
     [R(30, 4), R(5, 4)]),
    ("pdist", lambda lib, a: lib.pdist(a), [R(5, 3)]),
    ("pdist_p1", lambda lib, a: lib.pdist(a, 1), [R(4, 3)]),
    ("pdist_p3", lambda lib, a: lib.pdist(a, p=3), [R(4, 3)]),
    ("renorm", lambda lib, a: lib.renorm(a, 2, 0, 1.0), [R(3, 4)]),
    ("renorm_dim1_p1", lambda lib, a: a.renorm(1, 1, 1.5), [R(3, 4, 2)]),
    ("renorm_p3", lambda lib, a: a.renorm(3, -1, 0.8), [R(3, 4)]),
]


@pytest.mark.parametrize("name,fn,arrays", DISTANCES, ids=[c[0] for c in DISTANCES])
def test_distances_match_torch(name, fn, arrays):
    # PyTorch has no double backward for cdist and pdist (other than cdist's matrix-product form)
    double = not name.startswith(("pdist", "dist_inf")) and (not name.startswith("cdist") or "_mm" in name)
    compare(fn, arrays, double=double and name != "cdist_no_mm", atol=1e-10, rtol=1e-10)
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fn,arrays", [c for c in DISTANCES if "inf" not in c[0]],
                         ids=[c[0] for c in DISTANCES if "inf" not in c[0]])
def test_distance_gradients_match_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *ts: fn(sg, *ts), arrays)


@pytest.mark.parametrize("fn", [lambda a: sg.median(a), lambda a: sg.median(a, 1)[0], lambda a: sg.kthvalue(a, 2)[0],
                                lambda a: sg.aminmax(a, dim=0)[1], lambda a: sg.quantile(a, 0.3, dim=1),
                                lambda a: sg.nanmean(a, 1), lambda a: sg.nansum(a)])
def test_selecting_gradients_match_finite_differences(fn):
    finite_difference_check(fn, [R(3, 5)])


def test_renorm_in_place():
    compare(lambda lib, a: (a * 1).renorm_(2, 0, 0.5), [R(3, 4)])


ERRORS = [
    ("kthvalue_k", lambda lib: lib.kthvalue(lib.ones(2, 3), 4)),
    ("quantile_q_range", lambda lib: lib.quantile(lib.ones(3), 1.5)),
    ("quantile_q_tensor_range", lambda lib: lib.quantile(lib.ones(3), lib.tensor([0.5, 2.0]))),
    ("quantile_q_dtype", lambda lib: lib.quantile(lib.ones(3), lib.tensor([0.5], dtype=lib.float64))),
    ("quantile_int", lambda lib: lib.quantile(lib.tensor([1, 2]), 0.5)),
    ("quantile_interpolation", lambda lib: lib.quantile(lib.ones(3), 0.5, interpolation="cubic")),
    ("quantile_q_2d", lambda lib: lib.quantile(lib.ones(3), lib.ones(2, 2) * 0.5)),
    ("quantile_empty", lambda lib: lib.quantile(lib.ones(0), 0.5)),
    ("nanmean_int", lambda lib: lib.nanmean(lib.tensor([1, 2]))),
    ("cdist_columns", lambda lib: lib.cdist(lib.ones(2, 3), lib.ones(2, 4))),
    ("cdist_1d", lambda lib: lib.cdist(lib.ones(3), lib.ones(2, 3))),
    ("cdist_int", lambda lib: lib.cdist(lib.ones(2, 3, dtype=lib.int64), lib.ones(2, 3, dtype=lib.int64))),
    ("cdist_negative_p", lambda lib: lib.cdist(lib.ones(2, 3), lib.ones(2, 3), p=-1)),
    ("pdist_3d", lambda lib: lib.pdist(lib.ones(2, 3, 4))),
    ("renorm_maxnorm", lambda lib: lib.renorm(lib.ones(2, 3), 2, 0, -1.0)),
    ("renorm_1d", lambda lib: lib.renorm(lib.ones(3), 2, 0, 1.0)),
    ("aminmax_empty", lambda lib: lib.aminmax(lib.ones(0))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


# ---- replay ----------------------------------------------------------------------------------------------

def _inputs(rng):
    return rng.standard_normal((4, 6)), rng.standard_normal((4, 6))


REPLAYED = [
    ("median", lambda a, b: sg.median(a, 1).values.unsqueeze(1) * b),
    ("median_all", lambda a, b: sg.median(a) * b),
    ("kthvalue", lambda a, b: sg.kthvalue(a, 2, 1, keepdim=True).values * b),
    ("aminmax", lambda a, b: (sg.aminmax(a, dim=1, keepdim=True).max - sg.aminmax(a).min) * b),
    ("nansum", lambda a, b: sg.nansum(a, 0) * b),
    ("nanmean", lambda a, b: sg.nanmean(a, 1, keepdim=True) * b),
    ("quantile", lambda a, b: sg.quantile(a, 0.3, dim=1, keepdim=True) * b),
    ("dist", lambda a, b: sg.dist(a, b) * b),
    ("cdist", lambda a, b: sg.cdist(a, b).sum(1, keepdim=True) * b),
    ("pdist", lambda a, b: sg.pdist(a).sum() * b),
    ("renorm", lambda a, b: sg.renorm(a, 2, 0, 1.0) * b),
]


@pytest.mark.parametrize("name,op", REPLAYED, ids=[c[0] for c in REPLAYED])
def test_replay_matches_eager_bit_for_bit(name, op):
    replay_matches_eager(op, _inputs, np.float32)


def test_compiled_quantile_with_a_tensor_q_checks_q_on_every_replay():
    compiled = sg.compile(lambda x, q: sg.quantile(x, q, dim=1))
    for call in range(3):
        x, q = sg.tensor(R(3, 5)), sg.tensor(np.array([0.1, 0.5 + 0.1 * call]))
        assert compiled(x, q).numpy().tobytes() == sg.quantile(x, q, dim=1).numpy().tobytes(), call
    assert compiled.stats.replays >= 1
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        compiled(sg.tensor(R(3, 5)), sg.tensor(np.array([0.1, 1.5])))
