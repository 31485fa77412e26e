"""unique, unique_consecutive, bincount, histc, searchsorted and bucketize against PyTorch: values,
dtypes, result tuples and errors; the ones whose result size depends on the values refuse to be traced,
the others replay eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, same_error

rng = np.random.default_rng(41)
NAN = np.nan

UNIQUE = [
    ("sorted", lambda lib, a: lib.unique(a), [np.array([3., 1., 2., 3., 1., 5.])]),
    ("unsorted_flag", lambda lib, a: lib.unique(a, sorted=False), [np.array([3, 1, 2, 3, 1, 5])]),
    ("inverse_counts", lambda lib, a: lib.unique(a, return_inverse=True, return_counts=True),
     [np.array([[3., 1.], [2., 3.], [1., 5.]])]),
    ("counts", lambda lib, a: a.unique(return_counts=True), [np.array([2, 2, 2, 7])]),
    ("dim0", lambda lib, a: lib.unique(a, dim=0, return_inverse=True, return_counts=True),
     [np.array([[1, 2], [1, 2], [0, 5]])]),
    ("dim1", lambda lib, a: lib.unique(a, dim=1, return_inverse=True), [np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]])]),
    ("nans_kept_apart", lambda lib, a: lib.unique(a, return_counts=True), [np.array([1., NAN, NAN, 1.])]),
    ("zero_dim", lambda lib, a: lib.unique(a, return_inverse=True), [np.array(3.0)]),
    ("bool", lambda lib, a: lib.unique(a), [np.array([True, False, True])]),
    ("consecutive", lambda lib, a: lib.unique_consecutive(a, return_inverse=True, return_counts=True),
     [np.array([1, 1, 2, 2, 3, 1, 1, 2])]),
    ("consecutive_2d", lambda lib, a: a.unique_consecutive(return_counts=True), [np.array([[1, 1], [2, 1]])]),
    ("consecutive_dim", lambda lib, a: lib.unique_consecutive(a, dim=0, return_inverse=True, return_counts=True),
     [np.array([[1, 2], [1, 2], [0, 5], [1, 2]])]),
    ("consecutive_empty", lambda lib, a: lib.unique_consecutive(a, return_counts=True), [np.zeros(0)]),
]


@pytest.mark.parametrize("name,fn,arrays", UNIQUE, ids=[c[0] for c in UNIQUE])
def test_unique_matches_torch(name, fn, arrays):
    compare(fn, arrays, requires_grad=[False], grad=False)


def test_unique_of_a_tensor_that_requires_grad_has_no_derivative():
    compare(lambda lib, a: lib.unique(a), [np.array([2.0, 1.0, 2.0])], grad=False)
    same_error(lambda lib: lib.unique(lib.tensor([2.0, 1.0], requires_grad=True)).sum().backward())


BINCOUNT = [
    ("plain", lambda lib, a: lib.bincount(a), [np.array([1, 1, 3])]),
    ("minlength", lambda lib, a: a.bincount(minlength=6), [np.array([1, 1, 3])]),
    ("weights", lambda lib, a, w: lib.bincount(a, w), [np.array([0, 4, 4]), np.array([0.5, 1.0, 2.0])]),
    ("weights_float32", lambda lib, a, w: lib.bincount(a, weights=w),
     [np.array([2, 0, 2]), np.array([0.5, 1.0, 2.0], np.float32)]),
    ("weights_int", lambda lib, a, w: lib.bincount(a, weights=w), [np.array([2, 0, 2]), np.array([3, 1, 2])]),
    ("empty", lambda lib, a: lib.bincount(a), [np.zeros(0, np.int64)]),
    ("uint8", lambda lib, a: lib.bincount(a), [np.array([0, 2, 2], np.uint8)]),
]


@pytest.mark.parametrize("name,fn,arrays", BINCOUNT, ids=[c[0] for c in BINCOUNT])
def test_bincount_matches_torch(name, fn, arrays):
    compare(fn, arrays, requires_grad=[False] * len(arrays), grad=False)


HISTC = [
    ("data_range", lambda lib, a: lib.histc(a, bins=4), [np.array([1., 2, 1, 4, 5])]),
    ("given_range", lambda lib, a: lib.histc(a, bins=4, min=0, max=3), [np.array([1., 2, 1, 4, 5, 3, -1])]),
    ("constant", lambda lib, a: lib.histc(a, bins=3), [np.array([2., 2.])]),
    ("default_bins", lambda lib, a: a.histc(), [rng.standard_normal(200)]),
    ("float32_edges", lambda lib, a: lib.histc(a, bins=7, min=-1, max=1), [rng.uniform(-1.2, 1.2, 500)
                                                                           .astype(np.float32)]),
    ("boundaries", lambda lib, a: lib.histc(a, bins=10, min=0, max=1), [np.linspace(0, 1, 11)]),
    ("requires_grad", lambda lib, a: lib.histc(a, bins=3), [np.array([1.0, 2.0, 3.0])]),
]


@pytest.mark.parametrize("name,fn,arrays", HISTC, ids=[c[0] for c in HISTC])
def test_histc_matches_torch(name, fn, arrays):
    compare(fn, arrays, grad=False)


SEARCH = [
    ("left", lambda lib, s, v: lib.searchsorted(s, v), [np.array([1, 3, 5, 7, 9]), np.array([3, 6, 9, 0, 10])]),
    ("right", lambda lib, s, v: lib.searchsorted(s, v, right=True), [np.array([1, 3, 5, 7, 9]),
                                                                     np.array([[3, 6], [9, 0]])]),
    ("side", lambda lib, s, v: lib.searchsorted(s, v, side="right"), [np.array([1., 3., 3., 9.]),
                                                                      np.array([3., 2.5])]),
    ("scalar", lambda lib, s: lib.searchsorted(s, 6), [np.array([1, 3, 5, 7, 9])]),
    ("batched", lambda lib, s, v: lib.searchsorted(s, v), [np.array([[1, 3, 5], [2, 4, 6]]), np.array([[3], [5]])]),
    ("batched_right", lambda lib, s, v: lib.searchsorted(s, v, right=True),
     [np.array([[1., 3., 5.], [2., 4., 6.]]), np.array([[3., 0., 5.], [6., 2., 9.]])]),
    ("int32", lambda lib, s, v: lib.searchsorted(s, v, out_int32=True), [np.array([1, 3, 5]), np.array([4])]),
    ("sorter", lambda lib, s, v, o: lib.searchsorted(s, v, sorter=o),
     [np.array([5, 1, 3]), np.array([2, 4]), np.array([1, 2, 0])]),
    ("bucketize", lambda lib, v, b: lib.bucketize(v, b), [np.array([3, 6, 9]), np.array([1, 3, 5, 7, 9])]),
    ("bucketize_right", lambda lib, v, b: lib.bucketize(v, b, right=True), [np.array([[3., 6.], [9., 1.]]),
                                                                            np.array([1., 3., 5., 7., 9.])]),
    ("bucketize_scalar", lambda lib, b: lib.bucketize(4, b), [np.array([1, 3, 5, 7, 9])]),
]


@pytest.mark.parametrize("name,fn,arrays", SEARCH, ids=[c[0] for c in SEARCH])
def test_searchsorted_and_bucketize_match_torch(name, fn, arrays):
    compare(fn, arrays, requires_grad=[False] * len(arrays), grad=False)


ERRORS = [
    ("bincount_negative", lambda lib: lib.bincount(lib.tensor([-1]))),
    ("bincount_2d", lambda lib: lib.bincount(lib.tensor([[1]]))),
    ("bincount_float", lambda lib: lib.bincount(lib.tensor([1.0]))),
    ("bincount_weights_length", lambda lib: lib.bincount(lib.tensor([1, 2]), weights=lib.tensor([1.0]))),
    ("histc_int", lambda lib: lib.histc(lib.tensor([1, 2]), bins=3)),
    ("histc_min_above_max", lambda lib: lib.histc(lib.tensor([1.0]), bins=3, min=2, max=1)),
    ("searchsorted_shapes", lambda lib: lib.searchsorted(lib.tensor([[1, 2], [3, 4]]), lib.tensor([[1], [2], [3]]))),
    ("searchsorted_side", lambda lib: lib.searchsorted(lib.tensor([1, 2]), lib.tensor([1]), side="middle")),
    ("searchsorted_opposites", lambda lib: lib.searchsorted(lib.tensor([1, 2]), lib.tensor([1]), right=True,
                                                           side="left")),
    ("bucketize_2d", lambda lib: lib.bucketize(lib.tensor([1]), lib.tensor([[1, 2]]))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


# ---- compiled functions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [lambda x: sg.unique(x), lambda x: sg.unique_consecutive(x),
                                lambda x: sg.bincount(x.long())])
def test_value_sized_results_refuse_to_be_traced(fn):
    compiled = sg.compile(fn)
    with pytest.raises(sg.TraceError, match="depends on the values"):
        compiled(sg.tensor([1.0, 2.0, 2.0, 3.0]))


def test_fixed_shape_results_replay_eager():
    boundaries = sg.tensor([0.0, 0.5, 1.0, 1.5])

    def step(x):
        return (sg.bucketize(x, boundaries), sg.searchsorted(boundaries, x, right=True),
                sg.histc(x, bins=5, min=0.0, max=2.0), sg.histc(x, bins=3))  # the last: the data's range

    compiled = sg.compile(step)
    for call in range(4):
        x = sg.tensor(rng.uniform(-0.2, 2.2, size=(3, 7)))
        for ours, eager in zip(compiled(x), step(x)):
            assert ours.dtype == eager.dtype and np.array_equal(ours.numpy(), eager.numpy()), call
    assert compiled.stats.replays >= 2
