"""LSTMCell and LSTM against PyTorch from identical weights: outputs, gradients of inputs, initial
states and every parameter; finite differences; a small sequence model trained eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.families import as_tensors, bench_model, build
from staticgrad.bench.families import training_step as family_step
from staticgrad.bench.measure import peak_bytes
from staticgrad.bench.models import training_step
from staticgrad.nn.rnn import lstm_cell
from tests.oracle import compare, finite_difference_check, same_error

torch = pytest.importorskip("torch")

TOLERANCES = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}


def copy_weights(t_module, s_module) -> None:
    s_module.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()})


def flat(out):
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in flat(o)]
    return [out]


def check_module(t_module, s_module, arrays, call, dtype):
    """``call(module, *inputs)`` in both libraries; outputs, then the gradients of every input and every
    parameter for sum(w * output), must agree."""
    tol = TOLERANCES[dtype]
    t_module, s_module = t_module.to(getattr(torch, dtype)), s_module.to(getattr(sg, dtype))
    copy_weights(t_module, s_module)
    arrays = [a.astype(dtype) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    s_in = [sg.tensor(a, requires_grad=True) for a in arrays]
    t_out, s_out = flat(call(t_module, *t_in)), flat(call(s_module, *s_in))
    assert len(t_out) == len(s_out)
    rng = np.random.default_rng(0)
    t_loss, s_loss = 0, 0
    for t, s in zip(t_out, s_out):
        assert tuple(s.shape) == tuple(t.shape) and s.dtype.is_floating_point
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), **tol)
        w = rng.standard_normal(tuple(t.shape)).astype(dtype)
        t_loss = t_loss + (t * torch.tensor(w)).sum()
        s_loss = s_loss + (s * sg.tensor(w)).sum()
    t_loss.backward()
    s_loss.backward()
    for i, (t, s) in enumerate(zip(t_in, s_in)):
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), err_msg=f"gradient of input {i}", **tol)
    t_params, s_params = dict(t_module.named_parameters()), dict(s_module.named_parameters())
    assert list(s_params) == list(t_params)
    for name, t in t_params.items():
        assert tuple(s_params[name].shape) == tuple(t.shape), name
        np.testing.assert_allclose(s_params[name].grad.numpy(), t.grad.numpy(), err_msg=name, **tol)


def randn(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


# ---- LSTMCell -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
def test_lstm_cell_matches_torch(dtype, batched, with_state):
    batch = (4,) if batched else ()
    arrays = [randn(*batch, 3)] + ([randn(*batch, 5, seed=1), randn(*batch, 5, seed=2)] if with_state else [])
    call = (lambda m, x, h, c: m(x, (h, c))) if with_state else (lambda m, x: m(x))
    check_module(torch.nn.LSTMCell(3, 5), sg.nn.LSTMCell(3, 5), arrays, call, dtype)


def test_lstm_cell_without_bias_matches_torch():
    cell = sg.nn.LSTMCell(3, 5, bias=False)
    assert [n for n, _ in cell.named_parameters()] == ["weight_ih", "weight_hh"] and cell.bias_ih is None
    arrays = [randn(2, 3), randn(2, 5, seed=1), randn(2, 5, seed=2)]
    check_module(torch.nn.LSTMCell(3, 5, bias=False), cell, arrays, lambda m, x, h, c: m(x, (h, c)), "float64")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lstm_cell_function_matches_torch_lstm_cell(dtype):
    shapes = [(4, 3), (4, 5), (4, 5), (20, 3), (20, 5), (20,), (20,)]
    arrays = [randn(*s, seed=i).astype(dtype) for i, s in enumerate(shapes)]

    def f(lib, x, h, c, w_ih, w_hh, b_ih, b_hh):
        cell = torch.lstm_cell if lib is torch else lstm_cell
        return cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)

    compare(f, arrays, **TOLERANCES[dtype])


def test_lstm_cell_gradients_match_finite_differences():
    shapes = [(2, 3), (2, 2), (2, 2), (8, 3), (8, 2), (8,), (8,)]
    arrays = [randn(*s, seed=i) for i, s in enumerate(shapes)]

    def f(x, h, c, w_ih, w_hh, b_ih, b_hh):
        return sg.stack(lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh))

    finite_difference_check(f, arrays)


def test_lstm_cell_parameters_and_init_follow_torch():
    sg.manual_seed(0)
    cell = sg.nn.LSTMCell(3, 16)
    shapes = {n: tuple(p.shape) for n, p in cell.named_parameters()}
    assert shapes == {n: tuple(p.shape) for n, p in torch.nn.LSTMCell(3, 16).named_parameters()}
    values = np.concatenate([p.detach().numpy().ravel() for p in cell.parameters()])
    assert np.abs(values).max() <= 0.25 and np.abs(values).max() > 0.24, "uniform(-1/sqrt(16), 1/sqrt(16))"
    assert repr(cell) == repr(torch.nn.LSTMCell(3, 16)) == "LSTMCell(3, 16)"


# ---- LSTM -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_state", [True, False])
def test_lstm_matches_torch(dtype, num_layers, batch_first, with_state):
    x = randn(2, 5, 3) if batch_first else randn(5, 2, 3)
    arrays = [x] + ([randn(num_layers, 2, 4, seed=1), randn(num_layers, 2, 4, seed=2)] if with_state else [])
    call = (lambda m, x, h, c: m(x, (h, c))) if with_state else (lambda m, x: m(x))
    check_module(torch.nn.LSTM(3, 4, num_layers=num_layers, batch_first=batch_first),
                 sg.nn.LSTM(3, 4, num_layers=num_layers, batch_first=batch_first), arrays, call, dtype)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_state", [True, False])
def test_unbatched_lstm_matches_torch(batch_first, with_state):
    arrays = [randn(6, 3)] + ([randn(2, 4, seed=1), randn(2, 4, seed=2)] if with_state else [])
    call = (lambda m, x, h, c: m(x, (h, c))) if with_state else (lambda m, x: m(x))
    check_module(torch.nn.LSTM(3, 4, num_layers=2, batch_first=batch_first),
                 sg.nn.LSTM(3, 4, num_layers=2, batch_first=batch_first), arrays, call, "float64")


def test_lstm_without_bias_matches_torch():
    arrays = [randn(5, 2, 3)]
    check_module(torch.nn.LSTM(3, 4, num_layers=2, bias=False), sg.nn.LSTM(3, 4, num_layers=2, bias=False),
                 arrays, lambda m, x: m(x), "float64")


def test_lstm_parameters_repr_and_all_weights_follow_torch():
    s, t = sg.nn.LSTM(3, 4, num_layers=2, batch_first=True), torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)
    assert {n: tuple(p.shape) for n, p in s.named_parameters()} == {n: tuple(p.shape) for n, p in t.named_parameters()}
    assert repr(s) == repr(t)
    assert [[tuple(w.shape) for w in layer] for layer in s.all_weights] == \
           [[tuple(w.shape) for w in layer] for layer in t.all_weights]


@pytest.mark.parametrize("case", [
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(2, 2, 2, 3)),
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 2, 2)),
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 2, 3), (lib.zeros(1, 3, 4), lib.zeros(1, 2, 4))),
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 2, 3), (lib.zeros(2, 4), lib.zeros(2, 4))),
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 3), (lib.zeros(1, 1, 4), lib.zeros(1, 1, 4))),
    lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 2, 3, dtype=lib.float64)),
    lambda lib: lib.nn.LSTM(3, 4, dropout=2.0),
    lambda lib: lib.nn.LSTMCell(3, 4)(lib.zeros(1, 2, 3)),
    lambda lib: lib.nn.LSTMCell(3, 4)(lib.zeros(2, 3), (lib.zeros(1, 2, 4), lib.zeros(2, 4))),
    lambda lib: lib.nn.LSTMCell(3, 4)(lib.zeros(2, 5)),
], ids=["input_4d", "input_size", "hidden_size", "hx_rank_batched", "hx_rank_unbatched", "dtype", "dropout_range",
        "cell_input_3d", "cell_hx_3d", "cell_input_size"])
def test_bad_inputs_raise_torch_errors(case):
    same_error(case)


# ---- a sequence model trained eagerly, against torch, and compiled ---------------------------------

def sequence_model(lib):
    class Model(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lib.nn.LSTM(3, 6, num_layers=2, batch_first=True)
            self.head = lib.nn.Linear(6, 2)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return Model()


def sequences(n, dtype="float32", seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((4, 7, 3)).astype(dtype), rng.standard_normal((4, 2)).astype(dtype))
            for _ in range(n)]


def train(lib, model, data, compiled=False):
    step = training_step(lib, model, lib.optim.Adam(model.parameters(), lr=0.01))
    run = sg.compile(step) if compiled else step
    losses = [run(lib.tensor(x), lib.tensor(y)).item() for x, y in data]
    return losses, run


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sequence_model_trains_like_torch(dtype):
    t_model, s_model = sequence_model(torch).to(getattr(torch, dtype)), sequence_model(sg).to(getattr(sg, dtype))
    copy_weights(t_model, s_model)
    data = sequences(1, dtype) * 5
    t_losses, _ = train(torch, t_model, data)
    s_losses, _ = train(sg, s_model, data)
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(s_losses, t_losses, **tol)
    assert s_losses[-1] < s_losses[0]
    t_params = dict(t_model.named_parameters())
    for name, p in s_model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), t_params[name].detach().numpy(), err_msg=name, **tol)


def test_compiled_sequence_model_replays_like_eager():
    sg.manual_seed(0)
    eager_model, compiled_model = sequence_model(sg), sequence_model(sg)
    compiled_model.load_state_dict(eager_model.state_dict())
    data = sequences(7)
    eager_losses, _ = train(sg, eager_model, data)
    compiled_losses, run = train(sg, compiled_model, data, compiled=True)
    assert run.stats.replays >= 3
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-6)
    for (name, pe), pc in zip(eager_model.named_parameters(), compiled_model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


def test_lstm_replay_arena_stays_under_eager_peak():
    """The LSTM's per-step gradients add up as they come: unbind's backward stacks its pieces once
    (UnbindBackward0) and the W_hh gradient sum is not deferred into one late kernel, so the planned
    arena of the bench LSTM's step stays below what its eager step allocates."""
    bench = bench_model("lstm")
    data = as_tensors(sg, bench.batches(3))
    eager = family_step(sg, bench, *build(sg, bench))
    compiled = sg.compile(family_step(sg, bench, *build(sg, bench)))
    for x, y in data:
        eager(x, y)
        compiled(x, y)
    plan = next(p for p in compiled.plans if p.replayable)
    assert plan.program.arena_bytes < peak_bytes(lambda: eager(*data[0]))
