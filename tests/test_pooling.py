"""Pooling and upsampling against PyTorch: max_pool1d/2d (ceil_mode, dilation, indices),
avg_pool1d/2d, adaptive_avg_pool1d/2d, max_unpool2d and interpolate (nearest, bilinear): values,
gradients, double backward, node names, errors, modules, and a replayed training step."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.ops import OPS
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(5)


def R(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def distinct(*shape):
    """No ties inside any pooling window, so the argmax (and its gradient) is unambiguous."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) - n / 2) / 7.0


def call(name, *args, **kw):
    return lambda lib, *xs: getattr(lib.nn.functional, name)(*xs, *args, **kw)


def unpool(kernel, stride=None, padding=0, output_size=None):
    def fn(lib, x, scale):
        values, indices = lib.nn.functional.max_pool2d(x, kernel, stride, padding, return_indices=True)
        return lib.nn.functional.max_unpool2d(values * scale, indices, kernel, stride, padding, output_size)
    return fn


CASES = [
    ("max2d_ceil", call("max_pool2d", 3, 2, 1, ceil_mode=True), [distinct(2, 3, 8, 7)]),
    ("max2d_dilation", call("max_pool2d", 3, 2, 1, dilation=2), [distinct(2, 3, 9, 8)]),
    ("max2d_all_options", call("max_pool2d", (2, 3), 2, 1, dilation=(2, 1), ceil_mode=True, return_indices=True),
     [distinct(2, 3, 8, 9)]),
    ("max1d", call("max_pool1d", 2), [distinct(2, 3, 8)]),
    ("max1d_all_options", call("max_pool1d", 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
     [distinct(2, 3, 10)]),
    ("max1d_unbatched", call("max_pool1d", 2, dilation=2), [distinct(3, 9)]),
    ("avg2d", call("avg_pool2d", 2), [R(2, 3, 6, 8)]),
    ("avg2d_padded", call("avg_pool2d", 3, 2, 1), [R(2, 3, 7, 8)]),
    ("avg2d_ceil_exclude_pad", call("avg_pool2d", 3, 2, 1, ceil_mode=True, count_include_pad=False), [R(2, 3, 8, 8)]),
    ("avg2d_ceil_include_pad", call("avg_pool2d", 3, 2, 1, ceil_mode=True), [R(2, 3, 8, 7)]),
    ("avg2d_divisor_override", call("avg_pool2d", (2, 3), (1, 2), (1, 1), divisor_override=5), [R(3, 7, 8)]),
    ("avg1d", call("avg_pool1d", 3, 2, 1, ceil_mode=True, count_include_pad=False), [R(2, 3, 8)]),
    ("avg1d_unbatched", call("avg_pool1d", 2), [R(3, 7)]),
    ("adaptive2d", call("adaptive_avg_pool2d", (3, 4)), [R(2, 3, 7, 9)]),
    ("adaptive2d_upsizing", call("adaptive_avg_pool2d", (5, 7)), [R(2, 3, 3, 4)]),
    ("adaptive2d_mean", call("adaptive_avg_pool2d", 1), [R(2, 3, 3, 4)]),
    ("adaptive2d_none", call("adaptive_avg_pool2d", (None, 2)), [R(3, 3, 5)]),
    ("adaptive1d", call("adaptive_avg_pool1d", 3), [R(2, 3, 7)]),
    ("unpool", unpool(2), [distinct(2, 3, 6, 6), np.array(2.0)]),
    ("unpool_output_size", unpool(3, 2, 1, (2, 3, 8, 7)), [distinct(2, 3, 8, 7), np.array(-1.5)]),
    ("nearest2d_twice", call("interpolate", scale_factor=2), [R(2, 3, 4, 5)]),
    ("nearest2d_size", call("interpolate", size=(7, 3)), [R(2, 3, 4, 5)]),
    ("nearest2d_scale", call("interpolate", scale_factor=1.7), [R(2, 3, 4, 5)]),
    ("nearest2d_scales", call("interpolate", scale_factor=(0.6, 2.5)), [R(2, 3, 6, 5)]),
    ("nearest1d", call("interpolate", size=7), [R(2, 3, 4)]),
    ("nearest3d", call("interpolate", scale_factor=1.5), [R(1, 2, 3, 4, 5)]),
    ("bilinear", call("interpolate", scale_factor=1.7, mode="bilinear"), [R(2, 3, 4, 5)]),
    ("bilinear_align_corners", call("interpolate", scale_factor=1.7, mode="bilinear", align_corners=True),
     [R(2, 3, 4, 5)]),
    ("bilinear_size_down", call("interpolate", size=(3, 9), mode="bilinear"), [R(2, 3, 6, 5)]),
    ("bilinear_single_row", call("interpolate", size=(1, 9), mode="bilinear", align_corners=True), [R(2, 3, 6, 5)]),
    ("linear", call("interpolate", scale_factor=2.3, mode="linear"), [R(2, 3, 5)]),
    ("trilinear", call("interpolate", size=(3, 5, 2), mode="trilinear", align_corners=True), [R(1, 2, 2, 3, 4)]),
    ("area2d", call("interpolate", size=(2, 3), mode="area"), [R(2, 3, 5, 7)]),
    ("area1d", call("interpolate", scale_factor=0.5, mode="area"), [R(2, 3, 7)]),
    ("bilinear_recompute", call("interpolate", scale_factor=0.6, mode="bilinear", recompute_scale_factor=True),
     [R(2, 3, 6, 5)]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if c[0].startswith(("nearest", "max2d"))],
                         ids=[i for i in IDS if i.startswith(("nearest", "max2d"))])
def test_float32_values_equal_torch_bit_for_bit(name, fn, arrays):
    """Gathers and maxima, with PyTorch's float32 source indices: the same numbers, not close ones."""
    x = arrays[0].astype(np.float32)
    expected = fn(torch, torch.tensor(x))
    got = fn(sg, sg.tensor(x))
    first = lambda out: out[0] if isinstance(out, tuple) else out
    np.testing.assert_array_equal(first(got).numpy(), first(expected).numpy())


TINY = [
    ("avg2d", call("avg_pool2d", 2, 1, 1, ceil_mode=True, count_include_pad=False), [R(1, 1, 3, 3)]),
    ("adaptive2d", call("adaptive_avg_pool2d", (2, 3)), [R(1, 1, 3, 4)]),
    ("bilinear", call("interpolate", size=(3, 4), mode="bilinear"), [R(1, 1, 2, 3)]),
    ("nearest", call("interpolate", scale_factor=(1.5, 0.7)), [R(1, 1, 2, 4)]),
    ("trilinear", call("interpolate", scale_factor=1.5, mode="trilinear"), [R(1, 1, 2, 2, 3)]),
    ("max1d", call("max_pool1d", 2, 1, 1, dilation=2, ceil_mode=True), [distinct(1, 2, 5)]),
]


@pytest.mark.parametrize("name,fn,arrays", TINY, ids=[c[0] for c in TINY])
def test_against_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


def _double(name, *args, **kw):
    def fn(lib, x, g):
        y = getattr(lib.nn.functional, name)(x, *args, **kw)
        gx, = lib.autograd.grad(y, x, g, create_graph=True)
        return gx, gx * x  # the product gives x a real second-order path (these maps are linear in x)
    return fn


DOUBLE = [
    ("avg_pool2d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, R(2, 2, 7, 6)),
    ("adaptive_avg_pool2d", ((3, 2),), {}, R(2, 2, 7, 5)),
    ("interpolate", (), {"scale_factor": 1.5}, R(2, 2, 3, 4)),
    ("interpolate", (), {"size": (5, 3), "mode": "bilinear", "align_corners": True}, R(2, 2, 3, 4)),
    ("max_pool2d", (3, 2, 1), {"dilation": 2, "ceil_mode": True}, distinct(2, 2, 7, 7)),
]


@pytest.mark.parametrize("name,args,kw,x", DOUBLE, ids=["avg", "adaptive", "nearest", "bilinear", "max"])
def test_double_backward(name, args, kw, x):
    y = getattr(torch.nn.functional, name)(torch.tensor(x), *args, **kw)
    compare(_double(name, *args, **kw), [x, R(*y.shape)], atol=1e-10, rtol=1e-8)


def test_max_unpool2d_double_backward_is_a_view_of_a_gather():
    x, g = distinct(1, 2, 4, 4), R(1, 2, 4, 4)

    def fn(lib, x, g):
        values, indices = lib.nn.functional.max_pool2d(x, 2, return_indices=True)
        y = lib.nn.functional.max_unpool2d(values, indices, 2)
        gv, = lib.autograd.grad(y, values, g, create_graph=True)
        return gv
    compare(fn, [x, g], atol=1e-12)


def test_pooling_nodes_keep_pytorch_saved_values():
    x = sg.randn(2, 3, 7, 7, requires_grad=True)
    node = sg.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=4).grad_fn
    assert node.name() == "AvgPool2DBackward0"
    assert (node._saved_kernel_size, node._saved_stride, node._saved_padding) == ((3, 3), (2, 2), (1, 1))
    assert node._saved_ceil_mode is True and node._saved_count_include_pad is True and node._saved_divisor_override == 4
    node = sg.nn.functional.max_pool2d(x, 2, dilation=2, ceil_mode=True).grad_fn
    assert node._saved_dilation == (2, 2) and node._saved_ceil_mode is True
    node = sg.nn.functional.interpolate(x, scale_factor=2.0, mode="bilinear").grad_fn
    assert node.name() == "UpsampleBilinear2DBackward0" and node._saved_output_size == (14, 14)
    assert node._saved_scales == (2.0, 2.0) and node._saved_align_corners is False


def _out_samples():
    x, g = R(2, 3, 7, 6), R(2, 3, 4, 3)
    avg = {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
           "count_include_pad": False, "divisor_override": None}
    up = {"mode": "bilinear", "output_size": (9, 5), "scales": (None, None), "align_corners": False}
    indices = np.array(OPS["max_pool2d"].forward(distinct(2, 3, 4, 4), kernel_size=(2, 2), stride=(2, 2),
                                                 padding=(0, 0))[1])
    return [
        ("avg_pool2d", [x], avg),
        ("avg_pool2d_backward", [R(2, 3, 4, 4)], {"input_size": (7, 6), **avg}),
        ("adaptive_avg_pool2d", [x], {"output_size": (3, 4)}),
        ("adaptive_avg_pool2d_backward", [g], {"input_size": (7, 6)}),
        ("upsample", [x], up),
        ("upsample_backward", [R(2, 3, 9, 5)], {"input_size": (7, 6), **up}),
        ("max_unpool2d", [R(2, 3, 2, 2), indices], {"output_size": (4, 4)}),
    ]


@pytest.mark.parametrize("name,arrays,attrs", _out_samples(), ids=[s[0] for s in _out_samples()])
def test_forward_writes_into_out_and_may_overwrite_its_input(name, arrays, attrs):
    forward = OPS[name].forward
    expected = forward(*arrays, **attrs)
    out = np.empty(expected.shape, expected.dtype)
    assert forward(*arrays, out=out, **attrs) is out
    np.testing.assert_array_equal(out, expected)
    if arrays[0].shape == expected.shape:
        first = arrays[0].copy()
        forward(first, *arrays[1:], out=first, **attrs)
        np.testing.assert_array_equal(first, expected)


# ---- errors -----------------------------------------------------------------------------------------

def F(name, x, *args, **kw):
    return lambda lib: getattr(lib.nn.functional, name)(lib.tensor(x), *args, **kw)


def _unpool_call(values_shape, indices_transform=lambda i: i, **kw):
    def fn(lib):
        values, indices = lib.nn.functional.max_pool2d(lib.tensor(distinct(2, 3, 6, 6)), 2, return_indices=True)
        return lib.nn.functional.max_unpool2d(values[values_shape], indices_transform(indices), 2, **kw)
    return fn


X1, X2 = R(2, 3, 6), R(2, 3, 6, 6)
ERROR_CASES = [
    ("max1d_rank", F("max_pool1d", R(2, 3, 4, 5), 2)),
    ("max1d_rank1", F("max_pool1d", R(5), 2)),
    ("max1d_output_too_small", F("max_pool1d", R(2, 3, 2), 3)),
    ("max1d_padding", F("max_pool1d", X1, 3, padding=2)),
    ("max1d_kernel_zero", F("max_pool1d", X1, 0)),
    ("max1d_stride_zero", F("max_pool1d", X1, 2, stride=0)),
    ("max1d_dilation_zero", F("max_pool1d", X1, 2, dilation=0)),
    ("max1d_kernel_length", F("max_pool1d", X1, (2, 2))),
    ("max2d_dilation_zero", F("max_pool2d", X2, 2, dilation=0)),
    ("max2d_dilated_padding", F("max_pool2d", X2, 3, padding=2, dilation=2)),
    ("max2d_dilated_too_small", F("max_pool2d", R(2, 3, 4, 4), 3, dilation=2)),
    ("max2d_effective_padding", F("max_pool2d", X2, 2, padding=2, dilation=3)),
    ("avg2d_rank", F("avg_pool2d", R(3, 6), 2)),
    ("avg2d_output_too_small", F("avg_pool2d", R(2, 3, 2, 2), 3)),
    ("avg2d_padding", F("avg_pool2d", X2, 3, padding=2)),
    ("avg2d_kernel_zero", F("avg_pool2d", X2, 0)),
    ("avg2d_stride_zero", F("avg_pool2d", X2, 2, stride=0)),
    ("avg2d_divisor_zero", F("avg_pool2d", X2, 2, divisor_override=0)),
    ("avg2d_kernel_length", F("avg_pool2d", X2, (2, 2, 2))),
    ("avg1d_rank", F("avg_pool1d", R(2, 3, 4, 5), 2)),
    ("avg1d_output_too_small", F("avg_pool1d", R(2, 3, 2), 3)),
    ("avg1d_padding", F("avg_pool1d", X1, 3, padding=2)),
    ("avg1d_kernel_length", F("avg_pool1d", X1, (2, 2))),
    ("avg1d_kernel_zero", F("avg_pool1d", X1, 0)),
    ("adaptive2d_rank", F("adaptive_avg_pool2d", R(3, 6), 2)),
    ("adaptive2d_size_length", F("adaptive_avg_pool2d", X2, (2, 2, 2))),
    ("adaptive2d_empty", F("adaptive_avg_pool2d", R(2, 3, 0, 6), 2)),
    ("adaptive1d_rank", F("adaptive_avg_pool1d", R(2, 3, 4, 5), 2)),
    ("adaptive1d_size_length", F("adaptive_avg_pool1d", X1, (2, 2))),
    ("unpool_bad_index", lambda lib: lib.nn.functional.max_unpool2d(  # one bad index: PyTorch names any one
        lib.tensor(R(1, 1, 1, 1)), lib.tensor(np.array([[[[40]]]])), 2)),
    ("unpool_output_size", _unpool_call(..., output_size=(9, 9))),
    ("unpool_indices_shape", _unpool_call(..., lambda i: i[:, :, :2])),
    ("unpool_rank", _unpool_call((0, 0), lambda i: i[0, 0])),
    ("interpolate_size_and_scale", F("interpolate", X2, size=4, scale_factor=2)),
    ("interpolate_neither", F("interpolate", X2)),
    ("interpolate_unknown_mode", F("interpolate", X2, size=4, mode="foo")),
    ("interpolate_bilinear_3d", F("interpolate", X1, size=4, mode="bilinear")),
    ("interpolate_linear_4d", F("interpolate", X2, size=4, mode="linear")),
    ("interpolate_trilinear_4d", F("interpolate", X2, size=4, mode="trilinear")),
    ("interpolate_nearest_align_corners", F("interpolate", X2, size=4, align_corners=True)),
    ("interpolate_size_length", F("interpolate", X2, size=(4, 4, 4))),
    ("interpolate_scale_length", F("interpolate", X2, scale_factor=(2, 2, 2))),
    ("interpolate_rank2", F("interpolate", R(3, 4), size=4)),
    ("interpolate_size_zero", F("interpolate", X2, size=0)),
]


@pytest.mark.parametrize("name,fn", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name, fn):
    same_error(fn)


@pytest.mark.parametrize("call_", [
    lambda: sg.nn.functional.interpolate(sg.randn(1, 1, 4, 4), scale_factor=2, mode="lanczos"),
    lambda: sg.nn.functional.interpolate(sg.randn(1, 1, 4, 4), scale_factor=2, mode="bilinear", antialias=True),
], ids=["lanczos", "antialias"])
def test_unbuilt_interpolation_modes_are_refused_with_a_way_out(call_):
    with pytest.raises(NotImplementedError, match=r"staticgrad's interpolate does not support .*; use"):
        call_()


# ---- modules ------------------------------------------------------------------------------------

MODULES = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 11)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 9, 8)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 9)),
    ("AvgPool2d", ((2, 3),), {"padding": 1, "ceil_mode": True, "divisor_override": 3}, (2, 3, 7, 8)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 9)),
    ("AdaptiveAvgPool2d", ((3, None),), {}, (2, 3, 7, 8)),
    ("Upsample", (), {"scale_factor": 2}, (2, 3, 4, 3)),
    ("Upsample", (), {"size": (5, 7), "mode": "bilinear", "align_corners": True}, (2, 3, 4, 3)),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, (2, 3, 4, 3)),
    ("UpsamplingBilinear2d", ((3, 5),), {}, (2, 3, 4, 3)),
]


@pytest.mark.parametrize("kind,args,kwargs,shape", MODULES, ids=[f"{m[0]}_{i}" for i, m in enumerate(MODULES)])
def test_modules_match_torch(kind, args, kwargs, shape):
    s, t = getattr(sg.nn, kind)(*args, **kwargs), getattr(torch.nn, kind)(*args, **kwargs)
    assert repr(s) == repr(t)
    x = distinct(*shape).astype(np.float32)
    np.testing.assert_allclose(s(sg.tensor(x)).numpy(), t(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-6)


def test_max_unpool2d_module_inverts_max_pool2d_module():
    x = distinct(2, 3, 6, 7).astype(np.float32)
    outputs = []
    for lib in (sg, torch):
        pool, unpool_ = lib.nn.MaxPool2d(2, return_indices=True), lib.nn.MaxUnpool2d(2)
        assert repr(unpool_) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
        values, indices = pool(lib.tensor(x))
        outputs.append(unpool_(values, indices, output_size=x.shape).numpy())
    np.testing.assert_array_equal(*outputs)


# ---- replay -------------------------------------------------------------------------------------

def pooling_model(lib):
    return lib.nn.Sequential(
        lib.nn.Conv2d(2, 4, 3, padding=1), lib.nn.ReLU(),
        lib.nn.MaxPool2d(3, stride=2, padding=1, dilation=1, ceil_mode=True),
        lib.nn.Upsample(scale_factor=2, mode="bilinear"),
        lib.nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        lib.nn.Upsample(scale_factor=1.5),
        lib.nn.AdaptiveAvgPool2d((2, 3)), lib.nn.Flatten(), lib.nn.Linear(24, 3))


def test_training_step_replay_equals_eager_and_trains_like_torch():
    torch.manual_seed(0)
    t_model = pooling_model(torch).double()
    models = [pooling_model(sg).to(sg.float64) for _ in range(2)]
    for m in models:
        m.load_state_dict({k: v.detach().numpy() for k, v in t_model.state_dict().items()})
    t_step = training_step(torch, t_model, torch.optim.SGD(t_model.parameters(), lr=0.05, momentum=0.9))
    eager = training_step(sg, models[0], sg.optim.SGD(models[0].parameters(), lr=0.05, momentum=0.9))
    compiled = sg.compile(training_step(sg, models[1], sg.optim.SGD(models[1].parameters(), lr=0.05, momentum=0.9)))
    data = np.random.default_rng(3)
    for _ in range(5):
        x, y = data.standard_normal((3, 2, 8, 8)), data.standard_normal((3, 3))
        lt = t_step(torch.tensor(x), torch.tensor(y))
        le, lc = eager(sg.tensor(x), sg.tensor(y)), compiled(sg.tensor(x), sg.tensor(y))
        assert lc.item() == le.item()
        np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-10)
    assert compiled.stats.replays >= 3
    for pe, pc in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
        np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())


def test_unpooling_model_replay_equals_eager():
    """max_pool2d's indices feed max_unpool2d inside the compiled step."""
    class Model(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = sg.nn.Conv1d(2, 2, 3, padding=1)
            self.pool, self.unpool = sg.nn.MaxPool2d(2, return_indices=True), sg.nn.MaxUnpool2d(2)
            self.head = sg.nn.Linear(2 * 6 * 6, 3)

        def forward(self, x):
            x = self.conv(x.flatten(2)).view(x.shape)
            values, indices = self.pool(x)
            x = self.unpool(sg.nn.functional.max_pool1d(values.flatten(2), 1).view(values.shape), indices)
            return self.head(x.flatten(1))

    sg.manual_seed(1)
    m_eager, m_comp = Model(), Model()
    m_comp.load_state_dict(m_eager.state_dict())
    eager = training_step(sg, m_eager, sg.optim.SGD(m_eager.parameters(), lr=0.1))
    compiled = sg.compile(training_step(sg, m_comp, sg.optim.SGD(m_comp.parameters(), lr=0.1)))
    data = np.random.default_rng(4)
    for _ in range(4):
        x = data.standard_normal((2, 2, 6, 6)).astype(np.float32)
        y = data.standard_normal((2, 3)).astype(np.float32)
        assert compiled(sg.tensor(x), sg.tensor(y)).item() == eager(sg.tensor(x), sg.tensor(y)).item()
    assert compiled.stats.replays >= 2
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())


def test_compiled_model_forward_and_backward_equal_eager():
    """compile(model): the recorded forward and backward programs through every new layer kind."""
    class Model(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = sg.nn.Conv2d(2, 4, 3, padding=2, dilation=2, groups=2)
            self.up = sg.nn.ConvTranspose2d(4, 2, 2, stride=2)
            self.avg, self.max = sg.nn.AvgPool2d(2, ceil_mode=True), sg.nn.MaxPool2d(2, ceil_mode=True)
            self.resize = sg.nn.Upsample(scale_factor=1.5, mode="bilinear")
            self.adaptive = sg.nn.AdaptiveAvgPool2d((3, 2))

        def forward(self, x):
            return self.adaptive(self.resize(self.max(self.avg(self.up(sg.relu(self.conv(x)))))))

    sg.manual_seed(0)
    eager, twin = Model(), Model()
    twin.load_state_dict(eager.state_dict())
    compiled = sg.compile(twin)
    data = np.random.default_rng(0)
    for _ in range(4):
        x = data.standard_normal((2, 2, 7, 7)).astype(np.float32)
        xe, xc = sg.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
        ye, yc = eager(xe), compiled(xc)
        np.testing.assert_array_equal(yc.detach().numpy(), ye.detach().numpy())
        (ye * ye).sum().backward()
        (yc * yc).sum().backward()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
        for pe, pc in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())
            pe.grad = pc.grad = None
    assert compiled.stats.replays == 3
