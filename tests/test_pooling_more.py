"""3-D pooling, adaptive max pooling, adaptive_avg_pool3d, lp pooling, pixel_shuffle / unshuffle,
unfold / fold and interpolate's nearest-exact, bicubic, area (3-D) modes against PyTorch in float64 and
float32: values, indices, gradients, double backward and node names; finite differences; errors;
replay equals eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error
from tests.replay_check import replay_matches_eager

rng = np.random.default_rng(61)


def R(*shape):
    return rng.standard_normal(shape)


def F(lib):
    return lib.nn.functional


CASES = [
    ("max_pool3d", lambda lib, x: F(lib).max_pool3d(x, 2), [R(1, 2, 4, 5, 6)]),
    ("max_pool3d_indices", lambda lib, x: F(lib).max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0),
                                                            return_indices=True), [R(2, 2, 4, 5, 6)]),
    ("max_pool3d_dilation_ceil", lambda lib, x: F(lib).max_pool3d(x, 2, stride=2, dilation=(1, 2, 1),
                                                                  ceil_mode=True), [R(1, 1, 5, 6, 7)]),
    ("max_pool3d_unbatched", lambda lib, x: F(lib).max_pool3d(x, 3, 1, 1), [R(2, 3, 4, 5)]),
    ("avg_pool3d", lambda lib, x: F(lib).avg_pool3d(x, 2), [R(1, 2, 4, 5, 6)]),
    ("avg_pool3d_padding", lambda lib, x: F(lib).avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False,
                                                            ceil_mode=True), [R(1, 2, 5, 6, 7)]),
    ("avg_pool3d_divisor", lambda lib, x: F(lib).avg_pool3d(x, (1, 2, 3), divisor_override=4), [R(2, 3, 4, 6)]),
    ("adaptive_avg_pool3d", lambda lib, x: F(lib).adaptive_avg_pool3d(x, (2, 3, 4)), [R(1, 2, 5, 7, 9)]),
    ("adaptive_avg_pool3d_none", lambda lib, x: F(lib).adaptive_avg_pool3d(x, (None, 2, 3)), [R(2, 3, 5, 7)]),
    ("adaptive_max_pool2d", lambda lib, x: F(lib).adaptive_max_pool2d(x, (2, 3)), [R(2, 3, 5, 7)]),
    ("adaptive_max_pool2d_indices", lambda lib, x: F(lib).adaptive_max_pool2d(x, 3, return_indices=True),
     [R(1, 2, 7, 5)]),
    ("adaptive_max_pool1d", lambda lib, x: F(lib).adaptive_max_pool1d(x, 4, return_indices=True), [R(2, 3, 9)]),
    ("lp_pool2d", lambda lib, x: F(lib).lp_pool2d(x, 2, 2), [R(1, 2, 4, 6)]),
    ("lp_pool2d_p3_stride", lambda lib, x: F(lib).lp_pool2d(x.abs() + 0.1, 3, (2, 3), stride=1), [R(1, 2, 4, 6)]),
    ("lp_pool1d", lambda lib, x: F(lib).lp_pool1d(x, 2, 3), [R(2, 3, 7)]),
    ("pixel_shuffle", lambda lib, x: F(lib).pixel_shuffle(x, 2), [R(2, 8, 3, 4)]),
    ("pixel_shuffle_3d", lambda lib, x: F(lib).pixel_shuffle(x, 3), [R(9, 2, 2)]),
    ("pixel_unshuffle", lambda lib, x: F(lib).pixel_unshuffle(x, 2), [R(1, 2, 4, 6)]),
    ("unfold", lambda lib, x: F(lib).unfold(x, 2), [R(2, 3, 4, 5)]),
    ("unfold_options", lambda lib, x: F(lib).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
     [R(1, 2, 5, 6)]),
    ("unfold_unbatched", lambda lib, x: F(lib).unfold(x, 3, padding=1), [R(2, 4, 4)]),
    ("fold", lambda lib, x: F(lib).fold(x, (4, 5), 2), [R(2, 12, 12)]),
    ("fold_options", lambda lib, x: F(lib).fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
     [R(1, 12, 12)]),
    ("fold_unbatched", lambda lib, x: F(lib).fold(x, 3, 2), [R(8, 4)]),
    ("nearest_exact_2d", lambda lib, x: F(lib).interpolate(x, scale_factor=1.7, mode="nearest-exact"),
     [R(1, 2, 5, 6)]),
    ("nearest_exact_down", lambda lib, x: F(lib).interpolate(x, size=(3, 4), mode="nearest-exact"), [R(1, 2, 7, 9)]),
    ("nearest_exact_1d", lambda lib, x: F(lib).interpolate(x, size=4, mode="nearest-exact"), [R(1, 2, 7)]),
    ("nearest_exact_3d", lambda lib, x: F(lib).interpolate(x, size=(3, 5, 2), mode="nearest-exact"),
     [R(1, 1, 2, 3, 4)]),
    ("bicubic", lambda lib, x: F(lib).interpolate(x, size=(7, 9), mode="bicubic"), [R(1, 2, 5, 6)]),
    ("bicubic_align_corners", lambda lib, x: F(lib).interpolate(x, size=(7, 9), mode="bicubic", align_corners=True),
     [R(1, 2, 5, 6)]),
    ("bicubic_down_scale", lambda lib, x: F(lib).interpolate(x, scale_factor=0.6, mode="bicubic"), [R(2, 1, 8, 9)]),
    ("area_3d", lambda lib, x: F(lib).interpolate(x, size=(2, 3, 4), mode="area"), [R(1, 2, 4, 5, 7)]),
    ("trilinear", lambda lib, x: F(lib).interpolate(x, scale_factor=1.5, mode="trilinear"), [R(1, 2, 2, 3, 4)]),
]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64_with_double_backward(name, fn, arrays):
    # The poolings' gradients are linear in the incoming gradient alone: PyTorch's depend on the input
    # only formally (a zero second derivative), staticgrad's not at all; double backward is compared
    # where it is not zero.
    linear = name.startswith(("max_pool", "avg_pool", "adaptive", "area"))
    compare(fn, arrays, double=not linear, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if "max" not in c[0]],
                         ids=[c[0] for c in CASES if "max" not in c[0]])
def test_gradient_matches_finite_differences(name, fn, arrays):
    finite_difference_check(lambda x: fn(sg, x), [a[..., :4] if a.ndim > 3 else a for a in arrays])


def test_max_pooling_with_nans_and_ties_picks_pytorchs_index():
    x = np.zeros((1, 1, 2, 4, 4))
    x[0, 0, 0, 0, 1] = x[0, 0, 1, 1, 0] = np.nan
    x[0, 0, :, 2:, 2:] = 3.0
    compare(lambda lib, a: F(lib).max_pool3d(a, 2, return_indices=True), [x], grad=False)
    compare(lambda lib, a: F(lib).adaptive_max_pool2d(a, 2, return_indices=True), [x[0]], grad=False)


MODULES = [
    ("MaxPool3d", lambda lib, x: lib.nn.MaxPool3d(2, return_indices=True)(x), [R(1, 1, 4, 4, 4)]),
    ("AvgPool3d", lambda lib, x: lib.nn.AvgPool3d(2, stride=1)(x), [R(1, 1, 3, 4, 4)]),
    ("AdaptiveAvgPool3d", lambda lib, x: lib.nn.AdaptiveAvgPool3d(2)(x), [R(1, 1, 3, 4, 5)]),
    ("AdaptiveMaxPool1d", lambda lib, x: lib.nn.AdaptiveMaxPool1d(3)(x), [R(1, 2, 7)]),
    ("AdaptiveMaxPool2d", lambda lib, x: lib.nn.AdaptiveMaxPool2d((2, None))(x), [R(1, 2, 5, 3)]),
    ("LPPool1d", lambda lib, x: lib.nn.LPPool1d(2, 3, stride=2)(x), [R(1, 2, 7)]),
    ("LPPool2d", lambda lib, x: lib.nn.LPPool2d(1, 2)(x), [R(1, 2, 4, 4)]),
    ("PixelShuffle", lambda lib, x: lib.nn.PixelShuffle(2)(x), [R(1, 4, 2, 2)]),
    ("PixelUnshuffle", lambda lib, x: lib.nn.PixelUnshuffle(2)(x), [R(1, 1, 4, 4)]),
    ("Unfold", lambda lib, x: lib.nn.Unfold(2, stride=2)(x), [R(1, 2, 4, 4)]),
    ("Fold", lambda lib, x: lib.nn.Fold((4, 4), 2, stride=2)(x), [R(1, 8, 4)]),
]


@pytest.mark.parametrize("name,fn,arrays", MODULES, ids=[c[0] for c in MODULES])
def test_modules_match_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-10)


ERRORS = [
    ("max_pool3d_rank", lambda lib: F(lib).max_pool3d(lib.ones(2, 3, 4), 2)),
    ("pixel_shuffle_channels", lambda lib: F(lib).pixel_shuffle(lib.ones(1, 3, 2, 2), 2)),
    ("pixel_shuffle_rank", lambda lib: F(lib).pixel_shuffle(lib.ones(4, 2), 2)),
    ("pixel_unshuffle_height", lambda lib: F(lib).pixel_unshuffle(lib.ones(1, 1, 3, 4), 2)),
    ("unfold_rank", lambda lib: F(lib).unfold(lib.ones(2, 3), 2)),
    ("fold_rank", lambda lib: F(lib).fold(lib.ones(1, 2, 3, 4), 3, 2)),
    ("interpolate_bicubic_3d", lambda lib: F(lib).interpolate(lib.ones(1, 1, 4), size=3, mode="bicubic")),
    ("interpolate_nearest_exact_align", lambda lib: F(lib).interpolate(lib.ones(1, 1, 4), size=3,
                                                                       mode="nearest-exact", align_corners=True)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


def _images(rng):
    return rng.standard_normal((2, 4, 4, 6)), rng.standard_normal((2, 4, 4, 6))


REPLAYED = [
    ("max_pool3d", lambda a, b: F(sg).max_pool3d(a, 2, stride=1, padding=1)[:, :2, :4, :6] * b[:, :2]),
    ("avg_pool3d", lambda a, b: F(sg).avg_pool3d(a, 2, stride=1)[:, :, :, :4] * b[:, :3, :3, :4]),
    ("adaptive_max_pool2d", lambda a, b: F(sg).adaptive_max_pool2d(a, (4, 6)) * b),
    ("adaptive_avg_pool3d", lambda a, b: F(sg).adaptive_avg_pool3d(a, (2, 3, 4)) * b[:, :2, :3, :4]),
    ("pixel_shuffle", lambda a, b: F(sg).pixel_unshuffle(F(sg).pixel_shuffle(a, 2), 2) * b),
    ("unfold_fold", lambda a, b: F(sg).fold(F(sg).unfold(a, 2, padding=1), (4, 6), 2, padding=1) * b),
    ("bicubic", lambda a, b: F(sg).interpolate(a, size=(4, 6), mode="bicubic") * b),
    ("nearest_exact", lambda a, b: F(sg).interpolate(a, size=(4, 6), mode="nearest-exact") * b),
]


@pytest.mark.parametrize("name,op", REPLAYED, ids=[c[0] for c in REPLAYED])
def test_replay_matches_eager_bit_for_bit(name, op):
    replay_matches_eager(op, _images, np.float32)
