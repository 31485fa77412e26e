"""The CNN family against PyTorch: conv2d and max_pool2d (values, gradients, double backward,
node names, errors), the Conv2d / MaxPool2d modules, and a small CNN trained eagerly and replayed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.ops import OPS
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(2024)


def R(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def distinct(*shape):
    """No ties inside any pooling window, so the argmax (and its gradient) is unambiguous."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) - n / 2) / 7.0


conv = lambda **kw: lambda lib, *xs: lib.nn.functional.conv2d(*xs, **kw)
pool = lambda *args, **kw: lambda lib, x: lib.nn.functional.max_pool2d(x, *args, **kw)

CONV_CASES = [
    ("3x3", conv(), [R(2, 3, 7, 6), R(4, 3, 3, 3), R(4)]),
    ("3x3_no_bias", conv(), [R(2, 3, 7, 6), R(4, 3, 3, 3)]),
    ("stride2_pad1", conv(stride=2, padding=1), [R(2, 3, 7, 6), R(4, 3, 3, 3), R(4)]),
    ("pad2_no_bias", conv(padding=2), [R(1, 2, 5, 5), R(3, 2, 3, 3)]),
    ("rect_kernel", conv(stride=(2, 1), padding=(1, 0)), [R(3, 2, 6, 7), R(5, 2, 3, 2), R(5)]),
    ("stride_leaves_rows_unread", conv(stride=3), [R(2, 2, 8, 8), R(3, 2, 3, 3), R(3)]),
    ("1x1_batch4", conv(), [R(4, 5, 3, 3), R(2, 5, 1, 1), R(2)]),
    ("kernel_fills_padded_input", conv(padding=1), [R(2, 2, 3, 2), R(3, 2, 5, 4), R(3)]),
    ("same", conv(padding="same"), [R(2, 3, 5, 6), R(4, 3, 3, 5), R(4)]),
    ("valid", conv(padding="valid"), [R(2, 3, 5, 6), R(4, 3, 3, 3)]),
    ("unbatched", conv(stride=2, padding=1), [R(3, 6, 6), R(4, 3, 3, 3), R(4)]),
]

POOL_CASES = [
    ("k2", pool(2), [distinct(2, 3, 6, 8)]),
    ("k2_odd_size", pool(2), [distinct(2, 3, 7, 5)]),
    ("k3_s1_p1", pool(3, 1, 1), [distinct(2, 2, 6, 5)]),
    ("k3_s2_p1", pool(3, stride=2, padding=1), [distinct(2, 2, 7, 7)]),
    ("k3_default_stride", pool(3), [distinct(1, 2, 9, 7)]),
    ("rect", pool((2, 3), (1, 2), (1, 1)), [distinct(2, 2, 5, 6)]),
    ("unbatched", pool(2, 1), [distinct(3, 4, 5)]),
    ("with_indices", pool(3, 2, 1, return_indices=True), [distinct(2, 3, 6, 6)]),
]

CASES = CONV_CASES + POOL_CASES
IDS = [c[0] for c in CONV_CASES] + ["pool_" + c[0] for c in POOL_CASES]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if c[0] != "with_indices"],
                         ids=[i for i in IDS if i != "pool_with_indices"])
def test_against_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


# ---- double backward --------------------------------------------------------------------------

def _conv_double_backward(stride, padding):
    def fn(lib, x, w, b, g):
        y = lib.nn.functional.conv2d(x, w, b, stride=stride, padding=padding)
        gx, gw, gb = lib.autograd.grad(y, (x, w, b), g, create_graph=True)
        return gx, gw, (gb * gb).sum()  # gb's own node is SumBackward1 here, PyTorch's ConvolutionBackwardBackward0
    return fn


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), ((1, 2), (2, 0))])
def test_conv2d_double_backward(stride, padding):
    x, w, b = R(2, 3, 6, 7), R(4, 3, 3, 2), R(4)
    y_shape = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=padding).shape
    compare(_conv_double_backward(stride, padding), [x, w, b, R(*y_shape)], atol=1e-10, rtol=1e-8)


def test_conv2d_double_backward_float32():
    x, w, b = R(2, 3, 5, 5), R(4, 3, 3, 3), R(4)
    arrays = [a.astype(np.float32) for a in (x, w, b, R(2, 4, 3, 3))]
    compare(_conv_double_backward(2, 1), arrays, atol=1e-4, rtol=1e-4)


def test_conv2d_triple_backward():
    def fn(lib, x, w):
        y = lib.nn.functional.conv2d(x, w, padding=1)
        gx, = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        gw, = lib.autograd.grad((gx * gx).sum(), w, create_graph=True)
        return gw
    compare(fn, [R(1, 2, 4, 4), R(3, 2, 3, 3)], atol=1e-9, rtol=1e-8)


@pytest.mark.parametrize("kernel,stride,padding", [(2, None, 0), (3, 1, 1)])
def test_max_pool2d_double_backward(kernel, stride, padding):
    def fn(lib, x, g):
        p = lib.nn.functional.max_pool2d(x, kernel, stride, padding)
        gx, = lib.autograd.grad(p, x, g, create_graph=True)
        # PyTorch gives x a zero gradient through gx, staticgrad none: the product adds a real one.
        return gx, gx * x
    x = distinct(2, 2, 6, 6)
    out_shape = torch.nn.functional.max_pool2d(torch.tensor(x), kernel, stride, padding).shape
    compare(fn, [x, R(*out_shape)], atol=1e-10, rtol=1e-8)


# ---- node records -----------------------------------------------------------------------------

def test_node_names_and_saved_values_match_torch():
    x = sg.randn(2, 3, 6, 6, requires_grad=True)
    w = sg.randn(4, 3, 3, 3, requires_grad=True)
    y = sg.nn.functional.conv2d(x, w, sg.randn(4), stride=2, padding=1)
    assert y.grad_fn.name() == "ConvolutionBackward0"
    assert y.grad_fn._saved_stride == (2, 2) and y.grad_fn._saved_padding == (1, 1)
    assert y.grad_fn._saved_input is x and y.grad_fn._saved_weight is w
    p, indices = sg.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)
    assert p.grad_fn.name() == "MaxPool2DWithIndicesBackward0" and indices.grad_fn is None
    assert p.grad_fn._saved_kernel_size == (3, 3) and tuple(p.grad_fn._saved_self_sym_sizes) == (2, 3, 6, 6)
    assert np.array_equal(p.grad_fn._saved_result1.detach().numpy(), indices.numpy())


def test_conv2d_saves_only_what_its_double_backward_needs():
    x = sg.randn(1, 2, 4, 4, requires_grad=True)
    w = sg.randn(3, 2, 3, 3)
    y = sg.nn.functional.conv2d(x, w)
    gx, = sg.autograd.grad(y, x, sg.randn(1, 3, 2, 2, requires_grad=True), create_graph=True)
    assert gx.grad_fn.name() == "ConvolutionBackwardBackward0"
    assert gx.grad_fn._saved_weight is not None
    assert gx.grad_fn._saved_grad_output is None, "the weight needs no gradient: grad_output not kept"


# ---- forwards write into out ------------------------------------------------------------------

def _out_samples():
    x, w, b = R(2, 3, 6, 6), R(3, 3, 3, 3), R(3)
    geometry = {"stride": (1, 1), "padding": (1, 1)}
    strided = {"stride": (2, 1), "padding": (1, 0)}
    g = R(2, 3, 3, 4)
    indices = OPS["max_pool2d"].forward(distinct(2, 3, 6, 6), kernel_size=(3, 3), stride=(2, 2),
                                         padding=(1, 1))[1]
    return [
        ("conv2d", [x, w, b], geometry),
        ("conv2d", [x, w], geometry),
        ("conv2d", [x, w, b], strided),
        ("conv2d_input_grad", [R(2, 3, 6, 6), w], {"input_size": (6, 6), **geometry}),
        ("conv2d_input_grad", [g, w], {"input_size": (6, 6), **strided}),
        ("conv2d_weight_grad", [g, x], {"kernel_size": (3, 3), **strided}),
        ("max_pool2d_backward", [R(2, 3, 3, 3), indices], {"input_size": (6, 6)}),
    ]


@pytest.mark.parametrize("name,arrays,attrs", _out_samples(),
                         ids=["conv2d", "conv2d_no_bias", "conv2d_strided", "input_grad", "input_grad_strided",
                              "weight_grad_strided", "max_pool2d_backward"])
def test_forward_writes_into_out(name, arrays, attrs):
    forward = OPS[name].forward
    expected = forward(*arrays, **attrs)
    for dtype in (np.float64, np.float32):
        cast = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
        out = np.empty(expected.shape, dtype)
        assert forward(*cast, out=out, **attrs) is out
        np.testing.assert_array_equal(out, forward(*cast, **attrs))


@pytest.mark.parametrize("name,arrays,attrs", [_out_samples()[i] for i in (0, 1, 3)],
                         ids=["conv2d", "conv2d_no_bias", "input_grad"])
def test_forward_may_write_over_its_first_input(name, arrays, attrs):
    expected = OPS[name].forward(*arrays, **attrs)
    first = arrays[0].copy()
    OPS[name].forward(first, *arrays[1:], out=first, **attrs)
    np.testing.assert_allclose(first, expected, rtol=1e-15)


def test_max_pool2d_is_a_two_output_op():
    values, indices = OPS["max_pool2d"].forward(distinct(1, 2, 4, 4), kernel_size=(2, 2), stride=(2, 2),
                                                padding=(0, 0))
    assert values.shape == indices.shape == (1, 2, 2, 2) and indices.dtype == np.int64


# ---- errors ---------------------------------------------------------------------------------------

F_conv = lambda *a, **kw: lambda lib: lib.nn.functional.conv2d(*[lib.tensor(x) for x in a], **kw)
F_pool = lambda x, *a, **kw: lambda lib: lib.nn.functional.max_pool2d(lib.tensor(x), *a, **kw)
X, W = R(2, 3, 6, 6).astype(np.float32), R(4, 3, 3, 3).astype(np.float32)

ERROR_CASES = [
    ("conv_rank2", F_conv(R(3, 6).astype(np.float32), W)),
    ("conv_rank5", F_conv(R(1, 2, 3, 6, 6).astype(np.float32), W)),
    ("conv_unbatched_kernel_too_large", F_conv(X[0, :, :2], W)),
    ("conv_channels", F_conv(X, R(4, 2, 3, 3).astype(np.float32))),
    ("conv_channels_unbatched", F_conv(X[0], R(4, 2, 3, 3).astype(np.float32))),
    ("conv_kernel_too_large", F_conv(X, R(4, 3, 7, 3).astype(np.float32))),
    ("conv_kernel_too_large_padded", F_conv(X, R(4, 3, 9, 9).astype(np.float32), padding=1)),
    ("conv_bias_size", F_conv(X, W, R(5).astype(np.float32))),
    ("conv_bias_rank", F_conv(X, W, R(4, 1).astype(np.float32))),
    ("conv_stride_zero", F_conv(X, W, stride=0)),
    ("conv_stride_negative", F_conv(X, W, stride=(1, -1))),
    ("conv_padding_negative", F_conv(X, W, padding=-1)),
    ("conv_stride_length", F_conv(X, W, stride=(1, 2, 3))),
    ("conv_padding_length", F_conv(X, W, padding=[1, 2, 3])),
    ("conv_dtype_weight", F_conv(X, W.astype(np.float64))),
    ("conv_dtype_bias", F_conv(X, W, R(4))),
    ("conv_same_strided", F_conv(X, W, stride=2, padding="same")),
    ("conv_bad_padding_string", F_conv(X, W, padding="full")),
    ("pool_rank2", F_pool(R(3, 6), 2)),
    ("pool_rank5", F_pool(R(1, 2, 3, 6, 6), 2)),
    ("pool_empty_plane", F_pool(R(2, 3, 0, 6), 2)),
    ("pool_pad_too_large", F_pool(R(2, 3, 6, 6), 3, padding=2)),
    ("pool_pad_too_large_width", F_pool(R(2, 3, 6, 6), (3, 1), padding=(1, 1))),
    ("pool_pad_negative", F_pool(R(2, 3, 6, 6), 2, padding=-1)),
    ("pool_output_too_small", F_pool(R(2, 3, 6, 6), 7)),
    ("pool_kernel_length", F_pool(R(2, 3, 6, 6), (1, 2, 3))),
    ("pool_stride_length", F_pool(R(2, 3, 6, 6), 2, stride=(1, 2, 3))),
    ("pool_padding_length", F_pool(R(2, 3, 6, 6), 2, padding=(1, 1, 1))),
    ("pool_stride_zero", F_pool(R(2, 3, 6, 6), 2, stride=0)),
    ("pool_kernel_zero", F_pool(R(2, 3, 6, 6), 0)),
    ("pool_kernel_negative", F_pool(R(2, 3, 6, 6), -1)),
    ("pool_stride_negative", F_pool(R(2, 3, 6, 6), 2, stride=-1)),
]


@pytest.mark.parametrize("name,fn", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name, fn):
    same_error(fn)


def test_conv2d_weight_of_wrong_rank_says_what_it_expects():
    # PyTorch's message here speaks of a stride list; staticgrad names the weight's expected layout.
    with pytest.raises(RuntimeError, match=r"Expected 4D weight \(out_channels, in_channels, kH, kW\) for conv2d, "
                                           r"but got weight of size \[4, 3, 3\]"):
        sg.nn.functional.conv2d(sg.randn(2, 3, 6, 6), sg.randn(4, 3, 3))


def test_conv2d_module_errors_match_torch():
    same_error(lambda lib: lib.nn.Conv2d(3, 4, 3, stride=2, padding="same"))
    with pytest.raises(ValueError, match="Invalid padding string 'full', should be one of"):  # PyTorch prints a set
        sg.nn.Conv2d(3, 4, 3, padding="full")


# ---- modules ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs", [
    ((3, 4, 3), {}),
    ((3, 4, (3, 5)), {"stride": 2, "padding": 1, "bias": False}),
    ((1, 2, 3), {"padding": "same"}),
    ((1, 2, 3), {"stride": (2, 1), "padding": (0, 1)}),
])
def test_conv2d_module_matches_torch(args, kwargs):
    s, t = sg.nn.Conv2d(*args, **kwargs), torch.nn.Conv2d(*args, **kwargs)
    assert repr(s) == repr(t)
    shapes = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    assert shapes(s) == shapes(t)
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                 "padding_mode"):
        assert getattr(s, attr) == getattr(t, attr), attr
    s.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = R(2, args[0], 7, 6).astype(np.float32)
    np.testing.assert_allclose(s(sg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               atol=1e-5, rtol=1e-5)


def test_conv2d_default_init_has_pytorch_bounds():
    m = sg.nn.Conv2d(8, 16, (3, 5))
    fan_in = 8 * 3 * 5
    weight_bound = math.sqrt(2.0 / (1 + 5)) * math.sqrt(3.0 / fan_in)  # kaiming_uniform_(a=sqrt(5))
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert m.weight.dtype == sg.float32 and w.shape == (16, 8, 3, 5)
    assert np.abs(w).max() <= weight_bound and np.abs(w).max() > 0.9 * weight_bound
    assert np.abs(b).max() <= 1 / math.sqrt(fan_in) and np.abs(b).max() > 0.5 / math.sqrt(fan_in)
    assert abs(w.std() - weight_bound / math.sqrt(3)) < 0.1 * weight_bound


@pytest.mark.parametrize("args,kwargs", [((2,), {}), (((2, 3),), {"stride": 1, "padding": 1}), ((3, 2, 1), {})])
def test_max_pool2d_module_matches_torch(args, kwargs):
    s, t = sg.nn.MaxPool2d(*args, **kwargs), torch.nn.MaxPool2d(*args, **kwargs)
    assert repr(s) == repr(t)
    x = distinct(2, 3, 7, 8).astype(np.float32)
    np.testing.assert_array_equal(s(sg.tensor(x)).numpy(), t(torch.tensor(x)).numpy())


# ---- a small CNN: eager training against PyTorch, then replayed ------------------------------------

def small_cnn(lib):
    return lib.nn.Sequential(
        lib.nn.Conv2d(2, 4, 3, padding=1), lib.nn.ReLU(), lib.nn.MaxPool2d(2),
        lib.nn.Conv2d(4, 6, 3, stride=2, padding=1), lib.nn.ReLU(), lib.nn.MaxPool2d(2, stride=1),
        lib.nn.Flatten(), lib.nn.Linear(6, 3))


def cnn_batches(n, dtype, batch=5, seed=7):
    data = np.random.default_rng(seed)
    return [(data.standard_normal((batch, 2, 8, 8)).astype(dtype), data.standard_normal((batch, 3)).astype(dtype))
            for _ in range(n)]


def twin_models(dtype):
    torch.manual_seed(0)
    t_model = small_cnn(torch).to(getattr(torch, np.dtype(dtype).name))
    s_model = small_cnn(sg).to(getattr(sg, np.dtype(dtype).name))
    s_model.load_state_dict({k: v.detach().numpy() for k, v in t_model.state_dict().items()})
    return t_model, s_model


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_small_cnn_trains_like_torch(dtype, tol):
    t_model, s_model = twin_models(dtype)
    t_step = training_step(torch, t_model, torch.optim.SGD(t_model.parameters(), lr=0.05, momentum=0.9))
    s_step = training_step(sg, s_model, sg.optim.SGD(s_model.parameters(), lr=0.05, momentum=0.9))
    for x, y in cnn_batches(5, dtype):
        t_loss = t_step(torch.tensor(x), torch.tensor(y))
        s_loss = s_step(sg.tensor(x), sg.tensor(y))
        np.testing.assert_allclose(s_loss.item(), t_loss.item(), rtol=tol)
    for (name, t), s in zip(t_model.named_parameters(), s_model.parameters()):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol, err_msg=name)


def test_small_cnn_replay_equals_eager():
    _, m_eager = twin_models(np.float32)
    _, m_comp = twin_models(np.float32)
    eager = training_step(sg, m_eager, sg.optim.SGD(m_eager.parameters(), lr=0.05, momentum=0.9))
    compiled = sg.compile(training_step(sg, m_comp, sg.optim.SGD(m_comp.parameters(), lr=0.05, momentum=0.9)))
    for x, y in cnn_batches(6, np.float32):
        le, lc = eager(sg.tensor(x), sg.tensor(y)), compiled(sg.tensor(x), sg.tensor(y))
        assert lc.item() == le.item()
    assert compiled.stats.replays >= 3
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):  # replay runs the same kernels: bit for bit
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
        np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())
