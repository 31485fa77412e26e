"""F.grid_sample (4-D and 5-D input; bilinear, nearest and (4-D) bicubic; zeros, border and
reflection padding; align_corners) and F.affine_grid (2-D and 3-D) against PyTorch: values and gradients of input,
grid and theta in float64 and float32, node names, finite differences, errors and warnings, and
traced-and-replayed steps bit for bit equal to eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import replay_matches_eager

rng = np.random.default_rng(61)


def F(lib):
    return lib.nn.functional


def _grid(*shape, spread=1.3):
    grid = rng.uniform(-spread, spread, shape)
    grid[0, 0, :3] = [[-1.0, -1.0], [1.0, 1.0], [0.0, 0.5]]  # the corners and a pixel centre exactly
    return grid


MODES = [(mode, padding, align) for mode in ("bilinear", "nearest") for padding in ("zeros", "border", "reflection")
         for align in (False, True)]


@pytest.mark.parametrize("mode,padding,align", MODES, ids=["-".join(map(str, m)) for m in MODES])
def test_grid_sample_matches_torch(mode, padding, align):
    def run(lib, x, g):
        return F(lib).grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
    arrays = [rng.standard_normal((2, 3, 4, 5)), _grid(2, 3, 6, 2)]
    compare(run, arrays, atol=1e-12, rtol=1e-12)
    compare(run, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode,padding,align", MODES, ids=["-".join(map(str, m)) for m in MODES])
def test_volumetric_grid_sample_matches_torch(mode, padding, align):
    def run(lib, x, g):
        return F(lib).grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
    grid = rng.uniform(-1.3, 1.3, (2, 2, 3, 2, 3))
    grid[0, 0, 0, :2] = [[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]]
    arrays = [rng.standard_normal((2, 3, 3, 4, 5)), grid]
    compare(run, arrays, atol=1e-12, rtol=1e-12)
    compare(run, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


def test_volumetric_grid_sample_gradients_match_finite_differences():
    grid = rng.uniform(-0.9, 0.9, (1, 2, 1, 2, 3))
    finite_difference_check(lambda x, g: F(sg).grid_sample(x, g, padding_mode="reflection", align_corners=True),
                            [rng.standard_normal((1, 2, 2, 3, 3)), grid])


def test_volumetric_spatial_transformer_replays_eager_bit_for_bit():
    theta = sg.tensor((np.eye(3, 4)[None] + 0.1 * rng.standard_normal((2, 3, 4))).astype(np.float32))
    replay_matches_eager(lambda a, b: F(sg).grid_sample(
        a, F(sg).affine_grid(theta + b.mean() * 0.0, (2, 3, 2, 3, 4), align_corners=False) + b * 0.1,
        align_corners=False), lambda r: (r.standard_normal((2, 3, 2, 3, 4)), r.standard_normal((2, 2, 3, 4, 3))))


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_bicubic_grid_sample_matches_torch(padding, align):
    def run(lib, x, g):
        return F(lib).grid_sample(x, g, mode="bicubic", padding_mode=padding, align_corners=align)
    arrays = [rng.standard_normal((2, 3, 4, 5)), _grid(2, 3, 4, 2, spread=1.4)]
    compare(run, arrays, atol=1e-12, rtol=1e-12)
    compare(run, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


def test_bicubic_gradients_match_finite_differences_and_replay():
    grid = rng.uniform(-0.9, 0.9, (1, 2, 3, 2))
    finite_difference_check(lambda x, g: F(sg).grid_sample(x, g, mode="bicubic", padding_mode="border",
                                                           align_corners=False),
                            [rng.standard_normal((1, 2, 4, 4)), grid])
    replay_matches_eager(lambda a, b: F(sg).grid_sample(a, b + a.mean() * 0.1, mode="bicubic", align_corners=True),
                         lambda r: (r.standard_normal((2, 3, 4, 5)), r.uniform(-1.1, 1.1, (2, 3, 4, 2))))


def test_bicubic_second_derivative_is_refused():
    x = sg.tensor(rng.standard_normal((1, 1, 4, 4)), requires_grad=True)
    g = sg.tensor(_grid(1, 2, 3, 2), requires_grad=True)
    y = F(sg).grid_sample(x, g, mode="bicubic", align_corners=False)
    (grad_g,) = sg.autograd.grad(y.pow(2).sum(), [g], create_graph=True)
    with pytest.raises(RuntimeError, match="mode='bicubic' has no second derivative"):
        grad_g.sum().backward()


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_gradients_match_finite_differences(padding):
    grid = rng.uniform(-0.9, 0.9, (1, 2, 3, 2))  # away from the clipping kinks
    finite_difference_check(lambda x, g: F(sg).grid_sample(x, g, padding_mode=padding, align_corners=False),
                            [rng.standard_normal((1, 2, 3, 4)), grid])


def test_grid_sample_on_integer_like_and_wide_grids():
    arrays = [rng.standard_normal((1, 1, 3, 3)), np.array([[[[-3.0, 2.5], [0.5, -0.5], [4.25, -2.0]]]])]
    for padding in ("zeros", "border", "reflection"):
        for align in (False, True):
            compare(lambda lib, x, g, padding=padding, align=align: F(lib).grid_sample(
                x, g, padding_mode=padding, align_corners=align), arrays, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("volumetric", [False, True], ids=["4d", "5d"])
@pytest.mark.parametrize("mode,padding,align", MODES, ids=["-".join(map(str, m)) for m in MODES])
def test_second_derivatives_match_torch(mode, padding, align, volumetric):
    """d/d(input, grid, grad_output) of <v, grad_input> + <u, grad_grid>, the grads taken with a grad_output
    that requires grad (PyTorch's GridSampler2DBackwardBackward0 / GridSampler3DBackwardBackward0)."""
    if volumetric:
        shapes = [(2, 3, 3, 4, 5), (2, 2, 3, 2, 3), (2, 3, 2, 3, 2)]
        arrays = [rng.standard_normal(shapes[0]), rng.uniform(-1.3, 1.3, shapes[1]), rng.standard_normal(shapes[2])]
    else:
        shapes = [(2, 3, 4, 5), (2, 3, 4, 2)]
        arrays = [rng.standard_normal(shapes[0]), _grid(*shapes[1]), rng.standard_normal((2, 3, 3, 4))]
    weights = [rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])]
    results = []
    for lib in (torch, sg):
        x, g, go = (lib.tensor(a, requires_grad=True) for a in arrays)
        y = F(lib).grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
        grad_x, grad_g = lib.autograd.grad(y, [x, g], go, create_graph=True)
        loss = (grad_x * lib.tensor(weights[0])).sum() + (grad_g * lib.tensor(weights[1])).sum()
        second = lib.autograd.grad(loss, [x, g, go], allow_unused=True, materialize_grads=True)
        results.append(([t.detach().numpy() for t in second],
                        grad_g.grad_fn.name() if lib is sg else type(grad_g.grad_fn).__name__))
    for mine, theirs in zip(results[1][0], results[0][0]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
    assert results[1][1] == results[0][1] == f"GridSampler{3 if volumetric else 2}DBackwardBackward0"


@pytest.mark.parametrize("wanted", [(0,), (1,), (0, 1)])
def test_second_derivative_of_one_gradient_matches_finite_differences(wanted):
    go = sg.tensor(rng.standard_normal((1, 2, 2, 3)))
    arrays = [rng.standard_normal((1, 2, 3, 4)), rng.uniform(-0.9, 0.9, (1, 2, 3, 2))]

    def first(x, g, create_graph=False):
        grads = sg.autograd.grad(F(sg).grid_sample(x, g, padding_mode="border", align_corners=False), [x, g], go,
                                 create_graph=create_graph)
        return sum((grads[k] * (k + 1.5)).sum() for k in wanted)

    leaves = [sg.tensor(a, requires_grad=True) for a in arrays]
    analytic = sg.autograd.grad(first(*leaves, create_graph=True), leaves, allow_unused=True, materialize_grads=True)
    eps = 1e-6
    for i, array in enumerate(arrays):
        numeric = np.zeros_like(array)
        for idx in np.ndindex(array.shape):
            values = []
            for step in (eps, -eps):
                moved = [a.copy() for a in arrays]
                moved[i][idx] += step
                values.append(float(first(*(sg.tensor(a, requires_grad=True) for a in moved)).item()))
            numeric[idx] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(analytic[i].numpy(), numeric, atol=1e-5, rtol=1e-4, err_msg=f"input {i}")


def test_gradient_penalty_step_replays_eager_bit_for_bit():
    def penalty(a, b):
        y = F(sg).grid_sample(a, b, padding_mode="reflection", align_corners=True)
        (grad,) = sg.autograd.grad(y.pow(2).sum(), [a], create_graph=True)
        return grad
    replay_matches_eager(penalty, lambda r: (r.standard_normal((2, 3, 4, 5)), r.uniform(-1.1, 1.1, (2, 3, 4, 2))))


def test_third_derivative_is_refused():
    x = sg.tensor(rng.standard_normal((1, 1, 3, 3)), requires_grad=True)
    g = sg.tensor(_grid(1, 2, 3, 2), requires_grad=True)
    (grad_g,) = sg.autograd.grad(F(sg).grid_sample(x, g, align_corners=False).pow(2).sum(), [g], create_graph=True)
    (second,) = sg.autograd.grad(grad_g.pow(2).sum(), [g], create_graph=True)
    with pytest.raises(RuntimeError, match="no third derivative"):
        second.sum().backward()


def _theta(*shape):
    return rng.standard_normal(shape)


AFFINE = [("2d", (3, 2, 5, 4), _theta(3, 2, 3), False), ("2d_align", (2, 1, 3, 6), _theta(2, 2, 3), True),
          ("2d_unit", (1, 1, 1, 3), _theta(1, 2, 3), False), ("3d", (2, 1, 3, 2, 4), _theta(2, 3, 4), False),
          ("3d_align", (1, 2, 2, 3, 2), _theta(1, 3, 4), True)]


@pytest.mark.parametrize("name,size,theta,align", AFFINE, ids=[a[0] for a in AFFINE])
def test_affine_grid_matches_torch(name, size, theta, align):
    def run(lib, t):
        return F(lib).affine_grid(t, size, align_corners=align)
    compare(run, [theta], atol=1e-12, rtol=1e-12, double=True)
    compare(run, [theta.astype(np.float32)], atol=1e-6, rtol=1e-5)
    finite_difference_check(lambda t: run(sg, t), [theta])


def test_spatial_transformer_matches_torch():
    def run(lib, x, t):
        grid = F(lib).affine_grid(t, tuple(x.shape), align_corners=False)
        return F(lib).grid_sample(x, grid, padding_mode="border", align_corners=False)
    compare(run, [rng.standard_normal((2, 3, 5, 4)), _theta(2, 2, 3) * 0.5], atol=1e-12, rtol=1e-12)


ERRORS = [
    ("mode", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2), mode="area",
                                            align_corners=False)),
    ("padding", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2), padding_mode="wrap",
                                               align_corners=False)),
    ("dtype", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2, dtype=lib.float64),
                                             align_corners=False)),
    ("rank", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2), lib.zeros(1, 2, 1), align_corners=False)),
    ("grid_rank", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2, 2),
                                                 align_corners=False)),
    ("ranks_differ", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2, 3),
                                                    align_corners=False)),
    ("batch", lambda lib: F(lib).grid_sample(lib.zeros(2, 1, 2, 2), lib.zeros(1, 2, 2, 2), align_corners=False)),
    ("last_dim", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 3), align_corners=False)),
    ("empty", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 0, 2), lib.zeros(1, 2, 2, 2), align_corners=False)),
    ("bicubic_5d", lambda lib: F(lib).grid_sample(lib.zeros(1, 1, 2, 2, 2), lib.zeros(1, 2, 2, 2, 3), mode="bicubic",
                                                  align_corners=False)),
    ("long_input", lambda lib: F(lib).grid_sample(lib.ones(1, 1, 2, 2, dtype=lib.int64), lib.zeros(1, 2, 2, 2),
                                                  align_corners=False)),
    ("bool_input_5d", lambda lib: F(lib).grid_sample(lib.ones(1, 1, 2, 2, 2, dtype=lib.bool),
                                                     lib.zeros(1, 2, 2, 2, 3, dtype=lib.bool), align_corners=False)),
    ("input_rank", lambda lib: F(lib).grid_sample(lib.zeros(2, 1, 2, 2), lib.zeros(1, 2, 3), align_corners=False)),
    ("theta_shape", lambda lib: F(lib).affine_grid(lib.zeros(2, 3, 3), (2, 1, 3, 4), align_corners=False)),
    ("theta_shape_3d", lambda lib: F(lib).affine_grid(lib.zeros(2, 2, 3), [2, 1, 3, 4, 5], align_corners=False)),
    ("size_rank", lambda lib: F(lib).affine_grid(lib.zeros(2, 2, 3), [2, 1, 3, 4, 5, 6], align_corners=False)),
    ("size_empty", lambda lib: F(lib).affine_grid(lib.zeros(2, 2, 3), (2, 1, 0, 4), align_corners=False)),
    ("theta_int", lambda lib: F(lib).affine_grid(lib.zeros(2, 2, 3, dtype=lib.int64), (2, 1, 3, 4),
                                                 align_corners=False)),
    ("theta_batch", lambda lib: F(lib).affine_grid(lib.zeros(3, 2, 3), (2, 1, 3, 4), align_corners=False)),
]


@pytest.mark.parametrize("name,make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, make):
    same_error(make)


def test_warnings_match_torch():
    for lib in (torch, sg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            F(lib).affine_grid(lib.zeros(1, 2, 3), (1, 1, 2, 2))
            F(lib).grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2))
            F(lib).affine_grid(lib.zeros(1, 2, 3), (1, 1, 1, 2), align_corners=True)
        messages = [str(c.message) for c in caught]
        if lib is torch:
            expected = messages
        else:
            assert messages == expected


def test_grid_sample_replays_eager_bit_for_bit():
    grid = sg.tensor(_grid(2, 3, 4, 2).astype(np.float32))
    plan = replay_matches_eager(lambda a, b: F(sg).grid_sample(a, b + grid, padding_mode="reflection",
                                                               align_corners=False),
                                lambda r: (r.standard_normal((2, 3, 4, 5)), r.uniform(-0.2, 0.2, (2, 3, 4, 2))))
    assert "grid_sampler_2d" in {op.op for op in plan.graph.ops}


def test_affine_grid_replays_eager_bit_for_bit():
    replay_matches_eager(lambda a, b: F(sg).affine_grid(a, (2, 1, 3, 4), align_corners=True) * b,
                         lambda r: (r.standard_normal((2, 2, 3)), r.standard_normal((2, 3, 4, 2))))


def test_grid_sample_with_both_gradients_replays_eager_bit_for_bit():
    replay_matches_eager(lambda a, b: F(sg).grid_sample(a, b + a.mean() * 0.1, mode="bilinear", align_corners=True),
                         lambda r: (r.standard_normal((2, 3, 4, 5)), r.uniform(-1.1, 1.1, (2, 3, 4, 2))))
    replay_matches_eager(lambda a, b: F(sg).grid_sample(b, a * 0.3, padding_mode="border", align_corners=False),
                         lambda r: (r.uniform(-1.1, 1.1, (2, 3, 4, 2)), r.standard_normal((2, 3, 4, 5))))


def test_volumetric_grid_gradient_and_spatial_transformer():
    replay_matches_eager(lambda a, b: F(sg).grid_sample(b, a * 0.3 + b.mean() * 0.0, padding_mode="border",
                                                        align_corners=True),
                         lambda r: (r.uniform(-1.1, 1.1, (2, 2, 3, 2, 3)), r.standard_normal((2, 3, 3, 4, 2))))

    def run(lib, x, t):
        grid = F(lib).affine_grid(t, tuple(x.shape), align_corners=True)
        return F(lib).grid_sample(x, grid, padding_mode="reflection", align_corners=True)
    compare(run, [rng.standard_normal((2, 2, 3, 4, 3)), _theta(2, 3, 4) * 0.5], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("which", ["input", "grid"])
def test_second_derivative_through_one_gradient_matches_torch(which):
    arrays = [rng.standard_normal((1, 2, 3, 4)), _grid(1, 3, 3, 2), rng.standard_normal((1, 2, 3, 3))]
    results = []
    for lib in (torch, sg):
        x = lib.tensor(arrays[0], requires_grad=which == "input")
        g = lib.tensor(arrays[1], requires_grad=True)
        go = lib.tensor(arrays[2], requires_grad=True)
        y = F(lib).grid_sample(x if which == "input" else x * 1.0, g, align_corners=False)
        (first,) = lib.autograd.grad(y, [x if which == "input" else g], go, create_graph=True)
        second = lib.autograd.grad(first.pow(2).sum(), [g, go], allow_unused=True, materialize_grads=True)
        results.append([t.detach().numpy() for t in second])
    for mine, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
