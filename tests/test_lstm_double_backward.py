"""Second derivatives through the LSTM layer op (MkldnnRnnLayerBackward0): a backward with
create_graph=True computes the layer's gradients with differentiable table ops, so a gradient
penalty differentiates again. Against PyTorch's float64 LSTM (which unrolls its steps) and float32
one (whose mkldnn node has a differentiable backward of its own), against central differences
of the first derivatives, the plain backward's fast path, and a compiled gradient-penalty step."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.nn.rnn import lstm_layer
from tests.test_rnn import copy_weights

torch = pytest.importorskip("torch")

CONFIGS = {
    "one_layer": dict(),
    "two_layers_bidirectional": dict(num_layers=2, bidirectional=True),
    "batch_first_no_bias": dict(batch_first=True, bias=False),
}


def _arrays(kwargs, seed=0):
    rng = np.random.default_rng(seed)
    directions = 2 if kwargs.get("bidirectional") else 1
    x = rng.standard_normal((2, 4, 3) if kwargs.get("batch_first") else (4, 2, 3))
    state = [rng.standard_normal((directions * kwargs.get("num_layers", 1), 2, 5)) * 0.5 for _ in range(2)]
    return [x] + state


def _penalty_grads(lib, lstm, arrays, dtype):
    """d/d(inputs, parameters) of ||d loss / d(x, h0, c0)||^2 + ||d loss / d weight_hh_l0||^2, and the first
    derivatives themselves."""
    inputs = [lib.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out, (h, c) = lstm(inputs[0], (inputs[1], inputs[2]))
    loss = (out.sin() * out).sum() + (h * h).sum() + c.cos().sum()
    params = list(lstm.parameters())
    first = lib.autograd.grad(loss, inputs + [lstm.weight_hh_l0], create_graph=True)
    penalty = sum((g * g).sum() for g in first)
    second = lib.autograd.grad(penalty, inputs + params)
    return [g.detach().numpy() for g in first], [g.numpy() for g in second]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_gradient_penalty_matches_torch_float64(config):
    kwargs = CONFIGS[config]
    t_lstm, s_lstm = torch.nn.LSTM(3, 5, **kwargs).double(), sg.nn.LSTM(3, 5, **kwargs).double()
    copy_weights(t_lstm, s_lstm)
    arrays = _arrays(kwargs)
    (s_first, s_second), (t_first, t_second) = (_penalty_grads(lib, m, arrays, np.float64)
                                                for lib, m in ((sg, s_lstm), (torch, t_lstm)))
    for i, (s, t) in enumerate(zip(s_first, t_first)):
        np.testing.assert_allclose(s, t, rtol=1e-10, atol=1e-12, err_msg=f"first derivative {i}")
    for i, (s, t) in enumerate(zip(s_second, t_second)):
        np.testing.assert_allclose(s, t, rtol=1e-9, atol=1e-11, err_msg=f"second derivative {i}")


def test_gradient_penalty_matches_torch_float32():
    """PyTorch's float32 LSTM runs its mkldnn layer op and differentiates its own formula; both
    agree to float32 rounding."""
    kwargs = CONFIGS["two_layers_bidirectional"]
    t_lstm, s_lstm = torch.nn.LSTM(3, 5, **kwargs), sg.nn.LSTM(3, 5, **kwargs)
    copy_weights(t_lstm, s_lstm)
    arrays = _arrays(kwargs, seed=1)
    (s_first, s_second), (t_first, t_second) = (_penalty_grads(lib, m, arrays, np.float32)
                                                for lib, m in ((sg, s_lstm), (torch, t_lstm)))
    for s, t in zip(s_first + s_second, t_first + t_second):
        assert s.dtype == t.dtype == np.float32
        np.testing.assert_allclose(s, t, rtol=1e-4, atol=1e-5)


LAYER_SHAPES = [(3, 2, 2), (8, 2), (8, 2), (8,), (8,), (2, 2), (2, 2)]


def _layer_first_derivatives(arrays, reverse, weights, create_graph):
    """The gradients of sum(weights * (output, h_n, c_n)) with respect to the layer's seven inputs,
    concatenated, and the input tensors."""
    inputs = [sg.tensor(a, requires_grad=True) for a in arrays]
    output, h, c = lstm_layer(*inputs, reverse=reverse)
    flat = sg.cat([output.flatten(), h.flatten(), (c * c).flatten()])
    grads = sg.autograd.grad((flat * sg.tensor(weights)).sum(), inputs, create_graph=create_graph)
    return sg.cat([g.flatten() for g in grads]), inputs


@pytest.mark.parametrize("reverse", [False, True])
def test_layer_second_derivatives_match_finite_differences(reverse):
    """gradgradcheck's question: the derivative of the (create_graph) first derivatives, against
    central differences of the first derivatives (computed by the plain, fast backward)."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s) * 0.7 for s in LAYER_SHAPES]
    weights = rng.standard_normal(3 * 2 * 2 + 2 * 2 * 2)
    first, inputs = _layer_first_derivatives(arrays, reverse, weights, create_graph=True)
    projection = rng.standard_normal(tuple(first.shape))
    analytic = sg.autograd.grad((first * sg.tensor(projection)).sum(), inputs)
    eps = 1e-6
    for i, base in enumerate(arrays):
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            values = []
            for step in (eps, -eps):
                moved = [a.copy() for a in arrays]
                moved[i][idx] += step
                values.append(float((_layer_first_derivatives(moved, reverse, weights, False)[0].numpy()
                                     * projection).sum()))
            numeric[idx] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(analytic[i].numpy(), numeric, rtol=1e-5, atol=1e-7, err_msg=f"input {i}")


def test_create_graph_first_derivatives_equal_the_fast_backward():
    """The differentiable path gives the plain backward's gradients (to rounding), and the plain
    backward's gradients carry no graph."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in LAYER_SHAPES]
    weights = rng.standard_normal(20)
    slow, _ = _layer_first_derivatives(arrays, False, weights, create_graph=True)
    fast, _ = _layer_first_derivatives(arrays, False, weights, create_graph=False)
    assert slow.requires_grad and not fast.requires_grad and fast.grad_fn is None
    np.testing.assert_allclose(slow.detach().numpy(), fast.numpy(), rtol=1e-12, atol=1e-13)


def test_second_derivative_reaches_the_incoming_gradient():
    """A gradient flowing into the layer that itself depends on a leaf: the double backward
    differentiates through it too (d/dv of <grad_x(v), u>), as PyTorch does."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 2, 2)), rng.standard_normal((4, 2, 2))]
    results = {}
    for lib in (torch, sg):
        lstm = lib.nn.LSTM(2, 2).double()
        if lib is sg:
            copy_weights(results["lstm"], lstm)
        else:
            results["lstm"] = lstm
        x, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        out, _ = lstm(x)
        (gx,) = lib.autograd.grad(out, x, grad_outputs=v.sum(0).expand(3, 2, 2) * out, create_graph=True)
        results[lib] = [g.numpy() for g in lib.autograd.grad(gx.pow(3).sum(), (x, v))]
    for s, t in zip(results[sg], results[torch]):
        np.testing.assert_allclose(s, t, rtol=1e-9, atol=1e-11)


@pytest.mark.bitexact
def test_compiled_gradient_penalty_step_replays_eager_bit_for_bit():
    def make():
        sg.manual_seed(0)
        lstm = sg.nn.LSTM(3, 4, bidirectional=True)
        return lstm, sg.optim.SGD(lstm.parameters(), lr=0.01)

    def make_step(lstm, opt):
        def step(x):
            opt.zero_grad()
            out, _ = lstm(x)
            (gx,) = sg.autograd.grad(out.tanh().sum(), x, create_graph=True)
            loss = out.square().mean() + (gx * gx).sum()
            loss.backward()
            opt.step()
            return loss
        return step

    (eager_lstm, eager_opt), (lstm, opt) = make(), make()
    eager, compiled = make_step(eager_lstm, eager_opt), sg.compile(make_step(lstm, opt))
    rng = np.random.default_rng(5)
    for call in range(4):
        x = rng.standard_normal((5, 2, 3)).astype(np.float32)
        a, b = (fn(sg.tensor(x, requires_grad=True)) for fn in (eager, compiled))
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes(), f"loss of call {call}"
        for (name, p), q in zip(eager_lstm.named_parameters(), lstm.parameters()):
            assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes(), f"{name} after call {call}"
    assert compiled.stats.replays >= 2, compiled.stats
