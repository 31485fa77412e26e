"""group_norm and instance_norm in float16 and on empty inputs, against PyTorch's CPU kernels:
float16 computes in float32 and rounds every result (output, statistics, gradients) to float16, so
values and gradients agree bit for bit but for rare one-ulp differences of the forward; empty
inputs give PyTorch's shapes, nodes, running statistics and errors; compiled steps replay eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error, torch
from tests.replay_check import same_bits


def _half_arrays(shape, channels, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.uniform(0.5, 4) + rng.uniform(-2, 2)
    w, b = rng.standard_normal(channels), rng.standard_normal(channels)
    g = rng.standard_normal(shape)
    return [a.astype(np.float16) for a in (x, w, b, g)]


def _ulps(ours, theirs) -> float:
    """The largest difference in float16 units in the last place of ``theirs``."""
    theirs = np.asarray(theirs)
    return float(np.max(np.abs(ours.astype(np.float64) - theirs) / np.spacing(np.abs(theirs)), initial=0))


def _same_up_to_rounding(ours, theirs, what, exact_fraction=0.98):
    assert ours.dtype == np.float16 and theirs.dtype == np.float16, what
    assert _ulps(ours, theirs) <= 1, f"{what}: more than one ulp apart"
    assert np.mean(ours == theirs) >= exact_fraction, f"{what}: {np.mean(ours == theirs):.3f} of the bits agree"


def _run(lib, fn, arrays, grads_of):
    """``fn(lib, x, w, b)`` and the gradients of (x, w, b) that ``grads_of`` names, from grad g."""
    x, w, b, g = arrays
    leaves = [lib.tensor(a, requires_grad=name in grads_of) for name, a in zip("xwb", (x, w, b))]
    y = fn(lib, *leaves)
    y.backward(lib.tensor(g), retain_graph=True)
    return y, [t.grad.numpy() for name, t in zip("xwb", leaves) if name in grads_of]


def _bias_only(lib, x, w, b):
    """PyTorch 2.13's float16 backward with a bias and no weight fails ("tensor does not have a
    device"); a weight of ones (times 1 is exact) stands in for it on PyTorch's side."""
    weight = lib.ones(x.shape[1], dtype=x.dtype) if lib is torch else None
    return lib.nn.functional.group_norm(x, 6, weight, b)


GROUP_CASES = {
    "affine": (lambda lib, x, w, b: lib.nn.functional.group_norm(x, 3, w, b), "xwb"),
    "weight_only": (lambda lib, x, w, b: lib.nn.functional.group_norm(x, 2, w), "xw"),
    "bias_only": (_bias_only, "xb"),
    "plain": (lambda lib, x, w, b: lib.nn.functional.group_norm(x, 1), "x"),
}


@pytest.mark.parametrize("shape", [(2, 6, 3, 4), (3, 6, 33), (1, 6, 70)])
@pytest.mark.parametrize("case", list(GROUP_CASES))
def test_float16_group_norm_matches_torch(case, shape):
    fn, grads_of = GROUP_CASES[case]
    arrays = _half_arrays(shape, shape[1], seed=len(case) + shape[-1])
    (t_y, t_grads), (s_y, s_grads) = (_run(lib, fn, arrays, grads_of) for lib in (torch, sg))
    assert s_y.dtype == sg.float16 and s_y.grad_fn.name() == t_y.grad_fn.name() == "NativeGroupNormBackward0"
    for slot in ("_saved_result1", "_saved_result2"):  # mean and rstd: float32 values rounded to float16
        ours, theirs = (getattr(y.grad_fn, slot).detach().numpy() for y in (s_y, t_y))
        np.testing.assert_array_equal(ours, theirs)
    _same_up_to_rounding(s_y.detach().numpy(), t_y.detach().numpy(), "output")
    for name, s, t in zip(grads_of, s_grads, t_grads):
        _same_up_to_rounding(s, t, f"gradient of {name}", exact_fraction=0.99)


def test_torch_float16_group_norm_backward_with_bias_alone_fails():
    """Why the bias-only case above gives PyTorch a weight of ones: should this start passing, compare directly."""
    x = torch.ones(2, 4, 3, dtype=torch.float16, requires_grad=True)
    y = torch.nn.functional.group_norm(x, 2, None, torch.zeros(4, dtype=torch.float16, requires_grad=True))
    with pytest.raises(RuntimeError, match="tensor does not have a device"):
        y.sum().backward()


def test_float16_group_norm_module_and_double_backward_match_torch():
    """GroupNorm built in float16, and a second derivative. With create_graph PyTorch computes the
    first derivative with a composite of float16 ops (each rounded), staticgrad with its float32
    formula: they agree to float16's precision, not bit for bit."""
    x, _, _, g = _half_arrays((2, 4, 9), 4, seed=3)
    results = {}
    for lib in (torch, sg):
        norm = lib.nn.GroupNorm(2, 4, dtype=lib.float16)
        with lib.no_grad():
            norm.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, 4).astype(np.float16)))
        xt = lib.tensor(x, requires_grad=True)
        y = norm(xt)
        (gx,) = lib.autograd.grad((y * lib.tensor(g)).sum(), xt, create_graph=True)
        (gx * gx).sum().backward()
        results[lib] = (y.detach().numpy(), gx.detach().numpy(), xt.grad.numpy(), norm.weight.grad.numpy())
        assert xt.grad.dtype == lib.float16
    _same_up_to_rounding(results[sg][0], results[torch][0], "output")
    for what, s, t in zip(("first derivative", "second derivative of x", "second derivative of weight"),
                          results[sg][1:], results[torch][1:]):
        assert s.dtype == t.dtype == np.float16
        np.testing.assert_allclose(s.astype(np.float64), t, rtol=2e-2, atol=5e-3 * np.abs(t).max(), err_msg=what)


@pytest.mark.parametrize("use_input_stats", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 17), (4, 8, 33), (3, 2, 5, 7)])
def test_float16_instance_norm_matches_torch(shape, use_input_stats):
    arrays = _half_arrays(shape, shape[1], seed=shape[-1])
    rng = np.random.default_rng(shape[1])
    stats = rng.standard_normal(shape[1]).astype(np.float16), rng.uniform(0.5, 2, shape[1]).astype(np.float16)
    results = {}
    for lib in (torch, sg):
        running = [lib.tensor(a) for a in stats]

        def fn(lib, x, w, b, running=running):
            return lib.nn.functional.instance_norm(x, *running, w, b, use_input_stats=use_input_stats)

        y, grads = _run(lib, fn, arrays, "xwb")
        assert y.grad_fn.name() == "ViewBackward0"
        assert y.grad_fn.next_functions[0][0].name() == "NativeBatchNormBackward0"
        results[lib] = [y.detach().numpy()] + grads + [t.numpy() for t in running]
    names = ["output", "gradient of x", "gradient of weight", "gradient of bias", "running mean", "running var"]
    for name, s, t in zip(names, results[sg], results[torch]):
        _same_up_to_rounding(s, t, name, exact_fraction=0.98 if name == "gradient of x" else 1.0)


# ---- empty inputs ---------------------------------------------------------------------------------

def _graph(fn):
    """A node's name and, recursively, its next functions' (PyTorch's repeat shows up as one
    RepeatBackward0 node, staticgrad's as the ops it is made of: the weight and bias branches stop there)."""
    if fn is None:
        return None
    name = fn.name().split("::")[-1]
    if name.endswith("AccumulateGrad") or name == "SelectBackward0":
        return name
    return name, tuple(_graph(n) for n, _ in fn.next_functions)


EMPTY_CASES = {
    "no_spatial": ((2, 3, 0), {}),
    "no_spatial_affine": ((2, 3, 0), {"weight": 2.0, "bias": 0.5}),
    "no_spatial_weight_only": ((2, 3, 0), {"weight": 2.0}),
    "no_spatial_running_stats": ((2, 3, 0), {"running_mean": 0.25, "running_var": 2.0}),
    "no_spatial_eval": ((2, 3, 0), {"running_mean": 0.25, "running_var": 2.0, "use_input_stats": False}),
    "no_batch": ((0, 3, 4), {}),
    "no_batch_running_stats": ((0, 3, 4), {"running_mean": 0.25, "running_var": 2.0}),
    "no_channels": ((2, 0, 4), {"running_mean": 0.25, "running_var": 2.0}),
    "no_spatial_float16": ((2, 3, 0, 2), {"weight": 2.0, "bias": 0.5, "dtype": "float16"}),
}


def _empty_call(lib, shape, kwargs):
    dtype = getattr(lib, kwargs.get("dtype", "float32"))
    x = lib.zeros(shape, dtype=dtype, requires_grad=True)
    args = {k: (lib.full((shape[1],), v, dtype=dtype, requires_grad=k in ("weight", "bias")) if k != "use_input_stats"
                else v) for k, v in kwargs.items() if k != "dtype"}
    y = lib.nn.functional.instance_norm(x, **args)
    y.sum().backward()
    return x, y, args


@pytest.mark.parametrize("case", list(EMPTY_CASES))
def test_empty_instance_norm_matches_torch(case):
    shape, kwargs = EMPTY_CASES[case]
    (_, t_y, t_args), (s_x, s_y, s_args) = (_empty_call(lib, shape, kwargs) for lib in (torch, sg))
    assert tuple(s_y.shape) == tuple(t_y.shape) == shape and s_y.dtype.is_floating_point
    assert str(s_y.dtype).split(".")[-1] == str(t_y.dtype).split(".")[-1]
    assert _graph(s_y.grad_fn) == _graph(t_y.grad_fn)
    assert tuple(s_x.grad.shape) == shape
    for key, t in t_args.items():
        if key == "use_input_stats":
            continue
        s = s_args[key]
        values = (s.grad, t.grad) if key in ("weight", "bias") else (s, t)
        np.testing.assert_array_equal(values[0].numpy(), values[1].numpy(), err_msg=key)  # NaN where torch has NaN


@pytest.mark.parametrize("kwargs", [{"weight": 2.0}, {"bias": 0.5}])
def test_empty_batch_with_affine_parameters_raises_like_torch(kwargs):
    same_error(lambda lib: _empty_call(lib, (0, 3, 4), kwargs))


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0)])
def test_empty_instance_norm_modules_match_torch(shape):
    for kwargs in ({}, {"affine": True, "track_running_stats": True}):
        outs = {}
        for lib in (torch, sg):
            norm = lib.nn.InstanceNorm1d(3, **kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    outs[lib] = (tuple(norm(lib.zeros(shape)).shape), norm.running_mean)
                except IndexError as error:
                    outs[lib] = (str(error), None)
        assert outs[sg][0] == outs[torch][0], kwargs
        if outs[torch][1] is not None:
            np.testing.assert_array_equal(outs[sg][1].numpy(), outs[torch][1].numpy())


@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 4, 0)])
def test_empty_group_norm_matches_torch(shape):
    for lib in (torch, sg):
        x = lib.zeros(shape, requires_grad=True)
        y = lib.nn.functional.group_norm(x, 2, lib.ones(4), lib.zeros(4))
        y.sum().backward()
        assert tuple(y.shape) == shape and y.grad_fn.name() == "NativeGroupNormBackward0"
        assert tuple(x.grad.shape) == shape


# ---- compiled --------------------------------------------------------------------------------------

def _norm_layer(norm: str):
    sg.manual_seed(0)
    if norm == "group":
        return sg.nn.GroupNorm(2, 4, dtype=sg.float16)
    return sg.nn.InstanceNorm1d(4, affine=True, track_running_stats=True, dtype=sg.float16)


@pytest.mark.bitexact
@pytest.mark.parametrize("norm", ["group", "instance"])
def test_float16_norm_gradients_replay_eager_bit_for_bit(norm):
    """A compiled loss-and-gradients function (running statistics updated too) on new float16
    inputs gives eager's bits. (No optimizer step and a float32 loss: staticgrad's float16 SGD and
    Adam updates and float16 mean replay a one-ulp different value now and then, with or without a norm.)"""
    layers = [_norm_layer(norm) for _ in range(2)]
    with sg.no_grad():
        for layer in layers:
            layer.weight.copy_(sg.tensor(np.linspace(0.5, 1.5, 4).astype(np.float16)))

    def make_step(layer):
        def step(x, y):
            layer.weight.grad = layer.bias.grad = None
            out = layer(x)
            loss = ((out - y) * (out - y)).float().sum()
            loss.backward()
            return loss, out, layer.weight.grad, layer.bias.grad
        return step

    eager, compiled = make_step(layers[0]), sg.compile(make_step(layers[1]))
    rng = np.random.default_rng(6)
    for call in range(4):
        x, y = (sg.tensor(rng.standard_normal((3, 4, 6)).astype(np.float16)) for _ in range(2))
        for what, a, b in zip(("loss", "output", "weight grad", "bias grad"), eager(x, y), compiled(x, y)):
            same_bits(b.detach().numpy(), a.detach().numpy(), f"{what} of call {call}")
        if norm == "instance":
            for key in ("running_mean", "running_var"):
                same_bits(getattr(layers[1], key).numpy(), getattr(layers[0], key).numpy(), f"{key} of call {call}")
    assert compiled.stats.replays >= 2, compiled.stats
