"""The LSTM layer op (staticgrad.ops.rnn_layer) and nn.LSTM built on it: values and gradients against
PyTorch (stacked, bidirectional, batch_first, unbatched, given or default state, no bias), finite
differences of the op, PyTorch's autograd node structure (one MkldnnRnnLayerBackward0 per layer and
direction), and compiled training steps that replay eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.nn.rnn import lstm_layer
from tests.oracle import finite_difference_check
from tests.test_bitexact import adam, run_twins, same_bytes, tensors
from tests.test_rnn import check_module, randn

torch = pytest.importorskip("torch")

CONFIGS = {
    "one_layer": dict(),
    "two_layers": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "two_layers_bidirectional": dict(num_layers=2, bidirectional=True),
    "bidirectional_no_bias": dict(num_layers=2, bidirectional=True, bias=False),
}


def _state_shape(kwargs, batch):
    return ((2 if kwargs.get("bidirectional") else 1) * kwargs.get("num_layers", 1),) + batch + (4,)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_state", [True, False])
def test_lstm_matches_torch(config, batch_first, with_state):
    kwargs = dict(CONFIGS[config], batch_first=batch_first)
    x = randn(2, 5, 3) if batch_first else randn(5, 2, 3)
    state = [randn(*_state_shape(kwargs, (2,)), seed=s) for s in (1, 2)] if with_state else []
    call = (lambda m, x, h, c: m(x, (h, c))) if with_state else (lambda m, x: m(x))
    check_module(torch.nn.LSTM(3, 4, **kwargs), sg.nn.LSTM(3, 4, **kwargs), [x] + state, call, "float64")


@pytest.mark.parametrize("config", ["two_layers_bidirectional", "bidirectional_no_bias"])
@pytest.mark.parametrize("with_state", [True, False])
def test_unbatched_lstm_matches_torch(config, with_state):
    kwargs = CONFIGS[config]
    state = [randn(*_state_shape(kwargs, ()), seed=s) for s in (1, 2)] if with_state else []
    call = (lambda m, x, h, c: m(x, (h, c))) if with_state else (lambda m, x: m(x))
    check_module(torch.nn.LSTM(3, 4, **kwargs), sg.nn.LSTM(3, 4, **kwargs), [randn(6, 3)] + state, call, "float64")


def test_float32_lstm_matches_torch():
    kwargs = dict(num_layers=2, bidirectional=True, batch_first=True)
    arrays = [randn(3, 7, 3)] + [randn(*_state_shape(kwargs, (3,)), seed=s) for s in (1, 2)]
    check_module(torch.nn.LSTM(3, 4, **kwargs), sg.nn.LSTM(3, 4, **kwargs), arrays,
                 lambda m, x, h, c: m(x, (h, c)), "float32")


@pytest.mark.parametrize("needs", ["input", "h0", "c0", "weights"])
def test_only_the_inputs_that_require_grad_get_one(needs):
    """Each input alone requiring a gradient: the backward computes just that one, as torch does."""
    t_lstm, s_lstm = torch.nn.LSTM(3, 4, bidirectional=True).double(), sg.nn.LSTM(3, 4, bidirectional=True).double()
    s_lstm.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in t_lstm.state_dict().items()})
    arrays = {"input": randn(5, 2, 3), "h0": randn(2, 2, 4, seed=1), "c0": randn(2, 2, 4, seed=2)}
    grads = {}
    for lib, lstm in ((torch, t_lstm), (sg, s_lstm)):
        lstm.requires_grad_(needs == "weights")
        ins = {k: lib.tensor(v, requires_grad=(k == needs)) for k, v in arrays.items()}
        out, (h, c) = lstm(ins["input"], (ins["h0"], ins["c0"]))
        (out.sin().sum() + h.sum() * 2 + c.cos().sum()).backward()
        grads[lib] = ([ins[needs].grad] if needs != "weights" else [p.grad for p in lstm.parameters()])
        assert all(t.grad is None for k, t in ins.items() if k != needs)
    for s, t in zip(grads[sg], grads[torch]):
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_layer_op_gradients_match_finite_differences(reverse):
    shapes = [(3, 2, 2), (8, 2), (8, 2), (8,), (8,), (2, 2), (2, 2)]
    arrays = [randn(*s, seed=i) for i, s in enumerate(shapes)]

    def f(x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        output, h, c = lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse=reverse)
        return sg.cat([output.flatten(), h.flatten(), c.flatten()])

    finite_difference_check(f, arrays)


# ---- autograd nodes ---------------------------------------------------------------------------------

def graph_of(fn, depth: int = 4):
    """A node's name and, recursively, its next functions (None for an edge with no node)."""
    if fn is None:
        return None
    name = "AccumulateGrad" if fn.name().endswith("AccumulateGrad") else fn.name()
    if depth == 0:
        return name
    return name, tuple((graph_of(n, depth - 1), nr) for n, nr in fn.next_functions)


NODE_CASES = {
    "batch_first": (dict(batch_first=True), (2, 3, 4), False, False),
    "stacked_bidirectional_with_state": (dict(num_layers=2, bidirectional=True), (3, 2, 4), True, True),
    "no_bias_batch_first_input_grad": (dict(bias=False, bidirectional=True, batch_first=True), (2, 3, 4), True, False),
    "unbatched": (dict(), (3, 4), True, False),
}


@pytest.mark.parametrize("case", list(NODE_CASES))
def test_node_structure_matches_torch(case):
    """float32, where PyTorch runs its mkldnn layer op (in float64 it unrolls the steps instead)."""
    kwargs, shape, input_grad, with_state = NODE_CASES[case]
    graphs = {}
    for lib in (torch, sg):
        lstm = lib.nn.LSTM(4, 5, **kwargs)
        x = lib.zeros(*shape, requires_grad=input_grad)
        if with_state:
            state = tuple(lib.zeros(4, 2, 5, requires_grad=True) for _ in range(2))
            out, (h, c) = lstm(x, state)
        else:
            out, (h, c) = lstm(x)
        graphs[lib] = [graph_of(t.grad_fn) for t in (out, h, c)]
    assert graphs[sg] == graphs[torch]
    assert "MkldnnRnnLayerBackward0" in str(graphs[sg][0])


def test_layer_node_saves_what_torch_shows():
    for lib in (torch, sg):
        out, _ = lib.nn.LSTM(4, 5, bidirectional=True)(lib.zeros(3, 2, 4))
        node = out.grad_fn.next_functions[1][0]
        assert node.name() == "MkldnnRnnLayerBackward0" and node._saved_reverse is True
        assert tuple(node._saved_input.shape) == (3, 2, 4) and tuple(node._saved_result0.shape) == (3, 2, 5)
        assert tuple(node._saved_weight1.shape) == (20, 5) and tuple(node._saved_hx_.shape) == (2, 5)
        assert tuple(node._saved_weight2.shape) == tuple(node._saved_weight3.shape) == (20,)


# ---- compiled ------------------------------------------------------------------------------------

def bidirectional_model(lib):
    class Model(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lib.nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True, dropout=0.25)
            self.head = lib.nn.Linear(10, 2)

        def forward(self, x):
            out, (h, c) = self.lstm(x)
            return self.head(out[:, -1]) + h.sum(0)[:, :2] * c.mean(0)[:, :2]

    return Model()


def test_bidirectional_stacked_lstm_with_dropout_replays_eager_bit_for_bit():
    rng = np.random.default_rng(3)
    data = tensors([(rng.standard_normal((4, 6, 3), dtype=np.float32), rng.standard_normal((4, 2), dtype=np.float32))
                    for _ in range(3)])

    def make():
        sg.manual_seed(0)
        return bidirectional_model(sg)

    run_twins(make, adam, lambda m, o: training_step(sg, m, o), data, steps=8, seed=11)


def test_input_gradient_alone_replays_eager_bit_for_bit():
    """Frozen weights, a gradient for the input only: the layer backward has a single result, which
    a replay writes into its planned buffer."""
    sg.manual_seed(0)
    lstm = sg.nn.LSTM(3, 4, bidirectional=True)
    lstm.requires_grad_(False)

    def input_grad(x, h0, c0):
        out, (h, _) = lstm(x, (h0, c0))
        return sg.autograd.grad((out * out).sum() + h.sum(), x)[0]

    compiled = sg.compile(input_grad)
    rng = np.random.default_rng(4)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 2, 3), dtype=np.float32), requires_grad=True)
        h0, c0 = (sg.tensor(rng.standard_normal((2, 2, 4), dtype=np.float32)) for _ in range(2))
        same_bytes(compiled(x, h0, c0).numpy(), input_grad(x, h0, c0).numpy(), f"input gradient of call {call}")
    assert compiled.stats.replays >= 2, compiled.stats
