"""Rarer relatives of the supported layers: adaptive_max_pool3d, lp_pool3d, channel_shuffle,
local_response_norm, triplet_margin_with_distance_loss, F.pdist and the deprecated F.upsample* aliases,
with their modules, against PyTorch (values, gradients, node names, errors, warnings)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(83)


def R(*shape):
    return rng.standard_normal(shape)


def F(lib):
    return lib.nn.functional


CASES = [
    ("adaptive_max_pool3d", lambda lib, x: F(lib).adaptive_max_pool3d(x, (2, 3, 2), return_indices=True),
     [R(1, 2, 5, 7, 4)]),
    ("adaptive_max_pool3d_unbatched", lambda lib, x: F(lib).adaptive_max_pool3d(x, 2), [R(2, 3, 4, 5)]),
    ("lp_pool3d", lambda lib, x: F(lib).lp_pool3d(x, 2, 2), [R(1, 2, 4, 4, 6)]),
    ("lp_pool3d_stride", lambda lib, x: F(lib).lp_pool3d(x.abs() + 0.1, 3, (2, 1, 2), stride=1), [R(1, 1, 3, 3, 4)]),
    ("channel_shuffle", lambda lib, x: F(lib).channel_shuffle(x, 2), [R(2, 6, 3, 2)]),
    ("channel_shuffle_3d", lambda lib, x: F(lib).channel_shuffle(x, 3), [R(1, 6, 4)]),
    ("local_response_norm_3d", lambda lib, x: F(lib).local_response_norm(x, 2), [R(2, 5, 4)]),
    ("local_response_norm_4d", lambda lib, x: F(lib).local_response_norm(x, 3, alpha=0.1, beta=0.5, k=2.0),
     [R(2, 5, 3, 4)]),
    ("local_response_norm_5d", lambda lib, x: F(lib).local_response_norm(x, 4), [R(1, 6, 2, 3, 2)]),
    ("triplet_with_distance", lambda lib, a, p, n: F(lib).triplet_margin_with_distance_loss(a, p, n),
     [R(4, 3), R(4, 3), R(4, 3)]),
    ("triplet_with_cosine", lambda lib, a, p, n: F(lib).triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda x, y: 1.0 - F(lib).cosine_similarity(x, y), margin=0.5, swap=True,
        reduction="none"), [R(4, 3), R(4, 3), R(4, 3)]),
    ("pdist", lambda lib, x: F(lib).pdist(x, 1.5), [R(4, 3)]),
]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, arrays):
    double = not name.startswith(("adaptive_max", "channel", "pdist"))  # linear gradients, or none in PyTorch
    compare(fn, arrays, double=double, atol=1e-10, rtol=1e-10)
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if "max" not in c[0]],
                         ids=[c[0] for c in CASES if "max" not in c[0]])
def test_gradient_matches_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


MODULES = [
    ("AdaptiveMaxPool3d", lambda lib, x: lib.nn.AdaptiveMaxPool3d((1, 2, None))(x), [R(1, 1, 3, 4, 5)]),
    ("LPPool3d", lambda lib, x: lib.nn.LPPool3d(2, 2)(x), [R(1, 1, 2, 4, 4)]),
    ("ChannelShuffle", lambda lib, x: lib.nn.ChannelShuffle(2)(x), [R(1, 4, 2, 2)]),
    ("LocalResponseNorm", lambda lib, x: lib.nn.LocalResponseNorm(3)(x), [R(2, 4, 3, 3)]),
    ("TripletMarginWithDistanceLoss", lambda lib, a, p, n: lib.nn.TripletMarginWithDistanceLoss(margin=0.3)(a, p, n),
     [R(2, 3), R(2, 3), R(2, 3)]),
]


@pytest.mark.parametrize("name,fn,arrays", MODULES, ids=[c[0] for c in MODULES])
def test_modules_match_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name,kwargs", [("upsample", {"mode": "bilinear"}), ("upsample_nearest", {}),
                                         ("upsample_bilinear", {})])
def test_deprecated_upsample_aliases_warn_and_interpolate_like_torch(name, kwargs):
    x = R(1, 2, 3, 4)
    results = []
    for lib in (torch, sg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(F(lib), name)(lib.tensor(x), scale_factor=2, **kwargs)
        results.append((out.numpy(), [str(w.message) for w in caught]))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12, atol=1e-12)
    assert results[1][1] == [m for m in results[0][1] if "deprecated" in m]


ERRORS = [
    ("channel_shuffle_groups", lambda lib: F(lib).channel_shuffle(lib.ones(1, 5, 2), 2)),
    ("channel_shuffle_rank", lambda lib: F(lib).channel_shuffle(lib.ones(4, 2), 2)),
    ("local_response_norm_rank", lambda lib: F(lib).local_response_norm(lib.ones(4, 2), 2)),
    ("triplet_with_distance_margin", lambda lib: F(lib).triplet_margin_with_distance_loss(
        lib.ones(2), lib.ones(2), lib.ones(2), margin=0.0)),
    ("triplet_with_distance_dims", lambda lib: F(lib).triplet_margin_with_distance_loss(
        lib.ones(2, 2), lib.ones(2), lib.ones(2))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)
