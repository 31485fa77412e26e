"""conv1d, conv3d, grouped / dilated / even-kernel "same" conv2d and conv_transpose1d/2d/3d against
PyTorch: values, gradients, double backward, node names, errors, the modules, and a compiled
training step through them replayed equal to eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.ops import OPS
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(11)


def R(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def call(name, **kw):
    return lambda lib, *xs: getattr(lib.nn.functional, name)(*xs, **kw)


CASES = [
    ("conv1d", call("conv1d"), [R(2, 3, 9), R(4, 3, 3), R(4)]),
    ("conv1d_all_options", call("conv1d", stride=2, padding=2, dilation=2), [R(2, 4, 11), R(6, 4, 3), R(6)]),
    ("conv1d_groups", call("conv1d", stride=2, padding=1, groups=2), [R(2, 4, 11), R(6, 2, 3)]),
    ("conv1d_depthwise_unbatched", call("conv1d", groups=3, padding="same"), [R(3, 8), R(6, 1, 3), R(6)]),
    ("conv1d_same_even", call("conv1d", padding="same"), [R(2, 3, 7), R(2, 3, 4), R(2)]),
    ("conv2d_groups_dilation", call("conv2d", stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
     [R(2, 4, 7, 8), R(6, 2, 3, 2), R(6)]),
    ("conv2d_dilation", call("conv2d", dilation=2), [R(1, 2, 7, 7), R(3, 2, 3, 3), R(3)]),
    ("conv2d_same_even", call("conv2d", padding="same"), [R(2, 4, 7, 8), R(5, 4, 2, 3), R(5)]),
    ("conv2d_same_dilated", call("conv2d", padding="same", dilation=(2, 1)), [R(2, 4, 7, 8), R(5, 4, 2, 3)]),
    ("conv2d_depthwise_unbatched", call("conv2d", groups=3), [R(3, 5, 5), R(6, 1, 3, 3), R(6)]),
    ("conv3d", call("conv3d"), [R(2, 2, 4, 5, 4), R(3, 2, 2, 3, 2), R(3)]),
    ("conv3d_all_options", call("conv3d", stride=(2, 1, 1), padding=1, dilation=(1, 1, 2), groups=2),
     [R(2, 4, 5, 4, 6), R(6, 2, 3, 2, 3), R(6)]),
    ("conv3d_unbatched_valid", call("conv3d", padding="valid"), [R(2, 3, 3, 4), R(2, 2, 2, 2, 3)]),
    ("conv_transpose1d", call("conv_transpose1d", stride=2, padding=1, output_padding=1),
     [R(2, 4, 5), R(4, 3, 3), R(3)]),
    ("conv_transpose1d_unbatched", call("conv_transpose1d", dilation=2), [R(4, 5), R(4, 2, 3)]),
    ("conv_transpose2d", call("conv_transpose2d"), [R(2, 3, 4, 5), R(3, 2, 3, 3), R(2)]),
    ("conv_transpose2d_all_options",
     call("conv_transpose2d", stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2)),
     [R(2, 4, 5, 4), R(4, 3, 3, 2), R(6)]),
    ("conv_transpose3d", call("conv_transpose3d", stride=2, dilation=2, output_padding=1),
     [R(1, 2, 3, 2, 3), R(2, 3, 2, 2, 3)]),
]
IDS = [c[0] for c in CASES]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # PyTorch warns that an even "same" kernel pads a copy of the input
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-4, rtol=1e-4)


TINY = [
    ("conv1d", call("conv1d", stride=2, padding=1, dilation=2, groups=2), [R(1, 2, 6), R(2, 1, 2), R(2)]),
    ("conv3d", call("conv3d", padding=(0, 1, 0), groups=2), [R(1, 2, 2, 2, 3), R(2, 1, 1, 2, 2)]),
    ("conv_transpose2d", call("conv_transpose2d", stride=2, padding=1, output_padding=1, dilation=(1, 2)),
     [R(1, 2, 2, 3), R(2, 1, 2, 2), R(1)]),
]


@pytest.mark.parametrize("name,fn,arrays", TINY, ids=[c[0] for c in TINY])
def test_against_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


# ---- double backward --------------------------------------------------------------------------

def _double_backward(name, **kw):
    def fn(lib, x, w, g):
        y = getattr(lib.nn.functional, name)(x, w, **kw)
        gx, gw = lib.autograd.grad(y, (x, w), g, create_graph=True)
        return gx, gw
    return fn


DOUBLE = [
    ("conv1d", {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, [R(2, 4, 9), R(4, 2, 3)]),
    ("conv2d", {"stride": (2, 1), "dilation": (1, 2), "groups": 2}, [R(1, 2, 6, 7), R(4, 1, 2, 2)]),
    # (PyTorch's double backward refuses a transposed convolution with output_padding.)
    ("conv_transpose2d", {"stride": 2, "padding": 1, "groups": 2}, [R(2, 4, 3, 3), R(4, 1, 3, 3)]),
    ("conv_transpose3d", {"stride": (1, 2, 1), "dilation": 2}, [R(1, 2, 2, 3, 2), R(2, 2, 2, 2, 2)]),
]


@pytest.mark.parametrize("name,kw,arrays", DOUBLE, ids=[c[0] for c in DOUBLE])
def test_double_backward(name, kw, arrays):
    y = getattr(torch.nn.functional, name)(*[torch.tensor(a) for a in arrays], **kw)
    compare(_double_backward(name, **kw), arrays + [R(*y.shape)], atol=1e-10, rtol=1e-8, double=True)


def test_convolution_nodes_keep_pytorch_saved_values():
    x, w = sg.randn(2, 4, 6, requires_grad=True), sg.randn(4, 3, 3, requires_grad=True)
    y = sg.nn.functional.conv_transpose1d(x, w, stride=2, output_padding=1, groups=2)
    node = y.grad_fn
    assert node.name() == "ConvolutionBackward0"
    assert node._saved_input is x and node._saved_weight is w
    assert (node._saved_stride, node._saved_padding, node._saved_dilation) == ((2,), (0,), (1,))
    assert node._saved_groups == 2 and node._saved_transposed is True and node._saved_output_padding == (1,)


def _out_samples():
    geometry = {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "groups": 2}
    plain = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    x, w, b = R(2, 4, 7, 6), R(6, 2, 3, 2), R(6)
    g = OPS["convolution"].forward(x, w, transposed=False, output_padding=(0, 0), **geometry)
    return [
        ("convolution", [x, w, b], {"transposed": False, "output_padding": (0, 0), **geometry}),
        ("convolution", [g, w], {"transposed": True, "output_padding": (0, 1), **geometry}),
        ("convolution", [R(2, 3, 5, 5), R(3, 3, 3, 3), R(3)], {"transposed": False, "output_padding": (0, 0),
                                                              **plain}),
        ("convolution_weight_grad", [g, x], {"kernel_size": (3, 2), **geometry}),
    ]


@pytest.mark.parametrize("name,arrays,attrs", _out_samples(), ids=["conv", "transposed", "same_size", "weight_grad"])
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

def F(name, *arrays, **kw):
    return lambda lib: getattr(lib.nn.functional, name)(*[lib.tensor(a.astype(np.float32)) for a in arrays], **kw)


X1, X2, X3 = R(2, 4, 6), R(2, 4, 6, 6), R(2, 4, 5, 5, 5)
ERROR_CASES = [
    ("conv1d_rank", F("conv1d", X2, R(4, 4, 3))),
    ("conv1d_weight_rank", F("conv1d", X1, R(4, 4, 3, 3))),
    ("conv3d_rank", F("conv3d", X1, R(4, 4, 3, 3, 3))),
    ("conv1d_group_channels", F("conv1d", X1, R(4, 3, 3), groups=2)),
    ("conv1d_group_outputs", F("conv1d", X1, R(3, 2, 3), groups=2)),
    ("conv2d_group_outputs", F("conv2d", X2, R(3, 2, 3, 3), groups=2)),
    ("conv1d_groups_zero", F("conv1d", X1, R(4, 2, 3), groups=0)),
    ("conv1d_dilation_zero", F("conv1d", X1, R(4, 4, 3), dilation=0)),
    ("conv1d_dilation_length", F("conv1d", X1, R(4, 4, 3), dilation=(1, 2))),
    ("conv1d_stride_length", F("conv1d", X1, R(4, 4, 3), stride=(1, 2))),
    ("conv1d_stride_zero", F("conv1d", X1, R(4, 4, 3), stride=0)),
    ("conv1d_padding_negative", F("conv1d", X1, R(4, 4, 3), padding=-1)),
    ("conv1d_dilated_kernel_too_large", F("conv1d", X1, R(4, 4, 3), dilation=3)),
    ("conv2d_dilated_kernel_too_large", F("conv2d", X2, R(4, 4, 3, 3), dilation=3)),
    ("conv3d_dilated_kernel_too_large", F("conv3d", X3, R(4, 4, 3, 3, 3), dilation=3)),
    ("conv3d_channels", F("conv3d", X3, R(4, 3, 3, 3, 3))),
    ("conv1d_bias_size", F("conv1d", X1, R(3, 4, 3), R(4))),
    ("conv1d_same_strided", F("conv1d", X1, R(3, 4, 3), stride=2, padding="same")),
    ("transpose_channels", F("conv_transpose2d", X2, R(3, 4, 3, 3))),
    ("transpose_unbatched_channels", F("conv_transpose2d", X2[0], R(3, 4, 3, 3))),
    ("transpose_output_padding", F("conv_transpose2d", X2, R(4, 3, 3, 3), output_padding=1)),
    ("transpose_output_padding_strided", F("conv_transpose2d", X2, R(4, 3, 3, 3), stride=2, output_padding=2)),
    ("transpose_groups", F("conv_transpose2d", X2, R(4, 3, 3, 3), groups=3)),
    ("transpose_bias", F("conv_transpose2d", X2, R(4, 3, 3, 3), R(4))),
    ("transpose_padding_string", F("conv_transpose2d", X2, R(4, 3, 3, 3), padding="same")),
]


@pytest.mark.parametrize("name,fn", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name, fn):
    same_error(fn)


@pytest.mark.parametrize("name,weight,bias", [
    ("conv1d", R(4, 4, 3), None),
    ("conv1d", R(4, 4, 3).astype(np.float32), R(4)),
    ("conv_transpose1d", R(4, 4, 3).astype(np.float32), R(4)),
], ids=["weight", "bias", "transposed_bias"])
def test_dtype_mismatch_matches_torch(name, weight, bias):
    def fn(lib):
        extra = () if bias is None else (lib.tensor(bias),)
        return getattr(lib.nn.functional, name)(lib.tensor(X1.astype(np.float32)), lib.tensor(weight), *extra)
    same_error(fn)


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Conv1d(4, 4, 3, groups=3),
    lambda lib: lib.nn.Conv3d(4, 6, 3, groups=4),
    lambda lib: lib.nn.Conv1d(4, 6, 3, groups=0),
    lambda lib: lib.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
    lambda lib: lib.nn.Conv1d(4, 6, 3, stride=2, padding="same"),
], ids=["in_groups", "out_groups", "groups_zero", "transpose_padding_mode", "same_strided"])
def test_module_errors_match_torch(make):
    same_error(make)


def test_unknown_padding_mode_names_the_known_ones():
    """As PyTorch, the message prints a set (whose order varies between processes): compare its items."""
    messages = []
    for lib in (torch, sg):
        with pytest.raises(ValueError) as info:
            lib.nn.Conv2d(4, 6, 3, padding_mode="foo")
        messages.append(str(info.value))
    parse = lambda m: (sorted(m[m.index("{") + 1:m.index("}")].split(", ")), m[m.index("}"):])
    assert parse(messages[1]) == parse(messages[0])


# ---- modules ------------------------------------------------------------------------------------

MODULES = [
    ("Conv1d", (4, 6, 3), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, (2, 4, 11)),
    ("Conv1d", (3, 2, 4), {"padding": "same", "bias": False}, (3, 7)),
    ("Conv2d", (4, 6, (3, 2)), {"dilation": (2, 1), "groups": 2, "padding": "same"}, (2, 4, 7, 6)),
    ("Conv3d", (2, 4, 3), {"stride": (1, 2, 1), "padding": 1, "groups": 2}, (1, 2, 4, 5, 4)),
    ("ConvTranspose1d", (4, 6, 3), {"stride": 2, "output_padding": 1, "groups": 2}, (2, 4, 5)),
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 2, "bias": False},
     (2, 4, 4, 3)),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, (1, 2, 2, 3, 2)),
    ("Conv1d", (2, 3, 3), {"padding": 2, "padding_mode": "reflect"}, (2, 2, 7)),
    ("Conv1d", (2, 3, 4), {"padding": "same", "padding_mode": "circular", "dilation": 2}, (2, 2, 9)),
    ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 2, 5, 6)),
    ("Conv2d", (2, 4, (3, 2)), {"padding": (1, 2), "padding_mode": "replicate", "stride": 2, "groups": 2},
     (1, 2, 6, 5)),
    ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "circular", "bias": False}, (2, 5, 5)),
    ("Conv2d", (2, 3, (2, 3)), {"padding": "same", "padding_mode": "reflect"}, (1, 2, 5, 5)),
    ("Conv3d", (2, 2, 3), {"padding": 1, "padding_mode": "replicate"}, (1, 2, 3, 4, 4)),
]


@pytest.mark.parametrize("kind,args,kwargs,shape", MODULES, ids=[f"{m[0]}_{i}" for i, m in enumerate(MODULES)])
def test_modules_match_torch(kind, args, kwargs, shape):
    s, t = getattr(sg.nn, kind)(*args, **kwargs), getattr(torch.nn, kind)(*args, **kwargs)
    assert repr(s) == repr(t)
    shapes = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    assert shapes(s) == shapes(t)
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                 "padding_mode", "transposed", "output_padding"):
        assert getattr(s, attr) == getattr(t, attr), attr
    s.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = R(*shape).astype(np.float32)
    np.testing.assert_allclose(s(sg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               atol=1e-5, rtol=1e-5)
    if kwargs.get("padding_mode", "zeros") != "zeros":  # the padded convolution's gradients too, in float64
        s.double(), t.double()
        x64 = R(*shape)
        xs, xt = sg.tensor(x64, requires_grad=True), torch.tensor(x64, requires_grad=True)
        s(xs).square().sum().backward()
        t(xt).square().sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), atol=1e-10)
        np.testing.assert_allclose(s.weight.grad.numpy(), t.weight.grad.numpy(), atol=1e-10)


def test_conv_transpose_output_size_picks_the_output_padding():
    s, t = sg.nn.ConvTranspose2d(3, 2, 3, stride=3), torch.nn.ConvTranspose2d(3, 2, 3, stride=3)
    s.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = R(2, 3, 4, 4).astype(np.float32)
    for size in ([12, 13], (2, 2, 14, 12)):
        expected = t(torch.tensor(x), output_size=size).detach().numpy()
        np.testing.assert_allclose(s(sg.tensor(x), output_size=size).detach().numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match=r"requested an output size of \[15, 12\], but valid sizes range from"):
        s(sg.tensor(x), output_size=[15, 12])


def test_transposed_bias_is_initialised_from_the_weight_fan_in():
    m = sg.nn.ConvTranspose2d(8, 2, 3, groups=2)
    bound = 1 / np.sqrt(1 * 3 * 3)  # fan_in = weight.size(1) * kernel = (out_channels / groups) * 9
    assert tuple(m.weight.shape) == (8, 1, 3, 3) and tuple(m.bias.shape) == (2,)
    assert np.abs(m.bias.detach().numpy()).max() <= bound


def test_plain_conv2d_keeps_its_own_op():
    x, w = R(1, 2, 5, 5), R(3, 2, 3, 3)
    plain = sg.nn.functional.conv2d(sg.tensor(x), sg.tensor(w), padding="same").numpy()
    np.testing.assert_array_equal(plain, OPS["conv2d"].forward(x, w, stride=(1, 1), padding=(1, 1)))
    grouped = sg.nn.functional.conv2d(sg.tensor(x, requires_grad=True), sg.tensor(R(4, 1, 3, 3)), groups=2)
    assert grouped.grad_fn.name() == "ConvolutionBackward0" and grouped.grad_fn._saved_groups == 2


# ---- replay -------------------------------------------------------------------------------------

class Model(sg.nn.Module):
    """A 1-D branch and a 2-D encoder-decoder with every convolution kind."""

    def __init__(self):
        super().__init__()
        self.branch = sg.nn.Conv1d(2, 4, 3, padding="same", dilation=2, groups=2)
        self.down = sg.nn.Conv2d(2, 4, 3, stride=2, padding=1, groups=2)
        self.mid = sg.nn.Conv3d(1, 1, (1, 3, 3), padding=(0, 1, 1))
        self.up = sg.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
        self.head = sg.nn.Linear(2 * 8 * 8 + 4 * 8, 3)

    def forward(self, x):
        line = self.branch(x.mean(dim=2))
        grid = sg.relu(self.down(x))
        grid = self.mid(grid.unsqueeze(1)).squeeze(1)
        grid = self.up(sg.tanh(grid))
        return self.head(sg.cat([grid.flatten(1), line.flatten(1)], 1))


def test_training_step_replay_equals_eager():
    sg.manual_seed(0)
    m_eager = Model()
    m_comp = Model()
    m_comp.load_state_dict(m_eager.state_dict())
    eager = training_step(sg, m_eager, sg.optim.SGD(m_eager.parameters(), lr=0.05, momentum=0.9))
    compiled = sg.compile(training_step(sg, m_comp, sg.optim.SGD(m_comp.parameters(), lr=0.05, momentum=0.9)))
    data = np.random.default_rng(3)
    for _ in range(5):
        x = data.standard_normal((3, 2, 8, 8)).astype(np.float32)
        y = data.standard_normal((3, 3)).astype(np.float32)
        le, lc = eager(sg.tensor(x), sg.tensor(y)), compiled(sg.tensor(x), sg.tensor(y))
        assert lc.item() == le.item()
    assert compiled.stats.replays >= 3
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
        np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())
