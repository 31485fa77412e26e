"""Names the example training scripts needed: ``Tensor.new_zeros/new_ones/new_empty/new_full/new_tensor``,
``Tensor.uniform_/normal_`` and LSTM dropout between layers, each against PyTorch and replayed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error
from tests.replay_check import same_bits

torch = pytest.importorskip("torch")


# ---- Tensor.new_* ------------------------------------------------------------------------------

NEW_CALLS = {
    "zeros_varargs": lambda lib, t: t.new_zeros(2, 3),
    "zeros_tuple": lambda lib, t: t.new_zeros((2, 3)),
    "zeros_dtype": lambda lib, t: t.new_zeros(2, dtype=lib.int64),
    "ones": lambda lib, t: t.new_ones(4),
    "ones_grad": lambda lib, t: t.new_ones(2, 2, dtype=lib.float64, requires_grad=True),
    "full_int_value": lambda lib, t: t.new_full((2,), 3),
    "full_float_value": lambda lib, t: t.new_full((3, 1), 2.5),
    "full_dtype": lambda lib, t: t.new_full((2,), 7, dtype=lib.int32),
    "empty_shape": lambda lib, t: t.new_empty(3, 2).fill_(0),
    "tensor_ints": lambda lib, t: t.new_tensor([1, 2, 3]),
    "tensor_floats": lambda lib, t: t.new_tensor([[1.5, -2.0]]),
    "tensor_dtype": lambda lib, t: t.new_tensor([1.5, 2.5], dtype=lib.float64),
}


@pytest.mark.parametrize("source", ["float32", "float64", "int64"])
@pytest.mark.parametrize("call", NEW_CALLS)
def test_new_factories_follow_the_source_dtype_as_torch(call, source):
    t_out = NEW_CALLS[call](torch, torch.zeros(2, dtype=getattr(torch, source)))
    s_out = NEW_CALLS[call](sg, sg.zeros(2, dtype=getattr(sg, source)))
    assert str(s_out.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1]
    assert tuple(s_out.shape) == tuple(t_out.shape)
    assert s_out.requires_grad == t_out.requires_grad
    np.testing.assert_array_equal(s_out.detach().numpy(), t_out.detach().numpy())


def test_new_tensor_from_a_tensor_copies_detached_and_warns_as_torch():
    for lib in (torch, sg):
        source = lib.ones(2, requires_grad=True)
        with pytest.warns(UserWarning, match="To copy construct from a tensor"):
            copy = lib.zeros(1, dtype=lib.float64).new_tensor(source)
        assert not copy.requires_grad and copy.dtype == lib.float64
        copy.add_(1)
        assert source.detach().numpy().tolist() == [1.0, 1.0]


# ---- Tensor.uniform_ / normal_ -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_uniform_and_normal_refill_in_place_with_the_requested_distribution(dtype):
    t = sg.zeros(20000, dtype=getattr(sg, dtype))
    assert t.uniform_(-2, 3) is t and t.dtype == getattr(sg, dtype)
    values = t.numpy().astype(np.float64)
    assert values.min() >= -2 and values.max() <= 3
    assert abs(values.mean() - 0.5) < 0.05 and abs(values.std() - 5 / np.sqrt(12)) < 0.05
    assert t.normal_(1.0, 2.0) is t
    values = t.numpy().astype(np.float64)
    assert abs(values.mean() - 1.0) < 0.06 and abs(values.std() - 2.0) < 0.06


def test_uniform_and_normal_read_a_generator_reproducibly():
    def draw(seed):
        g = sg.Generator().manual_seed(seed)
        return np.concatenate([sg.empty(5).uniform_(0, 1, generator=g).numpy(),
                               sg.empty(5).normal_(generator=g).numpy()])
    np.testing.assert_array_equal(draw(3), draw(3))
    assert not np.array_equal(draw(3), draw(4))


def test_refilled_tensor_has_torch_node_names_and_a_zero_gradient():
    for lib in (torch, sg):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        assert y.uniform_(-1, 1).grad_fn.name() == "UniformBackward0"
        z = x * 3
        assert z.normal_().grad_fn.name() == "NormalBackward0"
        (y + z).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3, dtype=np.float32))


@pytest.mark.parametrize("case", [
    lambda lib: lib.ones(2, requires_grad=True).uniform_(),
    lambda lib: lib.ones(2, requires_grad=True).normal_(),
    lambda lib: lib.ones(2, dtype=lib.int64).uniform_(),
    lambda lib: lib.ones(2, dtype=lib.int32).uniform_(),
    lambda lib: lib.ones(2, dtype=lib.bool).uniform_(),
    lambda lib: lib.ones(2, dtype=lib.int64).normal_(),
    lambda lib: lib.ones(2).uniform_(2, 1),
    lambda lib: lib.ones(2).normal_(0, -1.5),
], ids=["uniform_leaf", "normal_leaf", "uniform_long", "uniform_int", "uniform_bool", "normal_long",
        "uniform_bounds", "normal_std"])
def test_bad_refills_raise_torch_errors(case):
    same_error(case)


def test_refill_in_a_compiled_function_is_redrawn_on_replay_as_eager_draws():
    def f(x):
        noise = (x * 1).uniform_(-1, 1)
        scale = (x * 1).normal_(0.5, 0.1)
        return x * 2 + noise * scale

    compiled = sg.compile(f)
    rng = np.random.default_rng(0)
    outputs = []
    for call in range(4):
        x = sg.tensor(rng.standard_normal((3, 4)).astype(np.float32))
        sg.manual_seed(100 + call)
        eager = f(x)
        sg.manual_seed(100 + call)
        replayed = compiled(x)
        same_bits(replayed.numpy(), eager.numpy(), f"call {call}")
        outputs.append(replayed.numpy() - 2 * x.numpy())
    assert compiled.stats.replays >= 2, compiled.stats
    assert not np.array_equal(outputs[-1], outputs[-2])


# ---- LSTM dropout between layers ---------------------------------------------------------------

def _twins(dropout, num_layers=2):
    t_lstm = torch.nn.LSTM(3, 4, num_layers=num_layers, dropout=dropout).double()
    s_lstm = sg.nn.LSTM(3, 4, num_layers=num_layers, dropout=dropout).to(sg.float64)
    s_lstm.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in t_lstm.state_dict().items()})
    return t_lstm, s_lstm


def _run(lib, lstm, x):
    inp = lib.tensor(x, requires_grad=True)
    out, (h, c) = lstm(inp)
    (out.sum() + (h * c).sum()).backward()
    return [out.detach().numpy(), h.detach().numpy(), inp.grad.numpy(), lstm.weight_ih_l0.grad.numpy()]


@pytest.mark.parametrize("mode", ["eval", "train_p1"])
def test_lstm_dropout_matches_torch_where_it_is_deterministic(mode):
    """In eval mode dropout is off; with p=1 in training every inner layer's output is zeroed.
    Both are deterministic, so outputs and gradients must equal PyTorch's."""
    t_lstm, s_lstm = _twins(1.0 if mode == "train_p1" else 0.5)
    if mode == "eval":
        t_lstm.eval()
        s_lstm.eval()
    x = np.random.default_rng(1).standard_normal((5, 2, 3))
    for t_value, s_value in zip(_run(torch, t_lstm, x), _run(sg, s_lstm, x)):
        np.testing.assert_allclose(s_value, t_value, rtol=1e-10, atol=1e-12)


def test_lstm_dropout_draws_a_new_mask_each_training_call():
    _, s_lstm = _twins(0.5)
    x = sg.tensor(np.random.default_rng(2).standard_normal((6, 2, 3)))
    assert not np.array_equal(s_lstm(x)[0].detach().numpy(), s_lstm(x)[0].detach().numpy())


def test_lstm_dropout_repr_and_one_layer_warning_follow_torch():
    t_lstm, s_lstm = _twins(0.25)
    assert repr(s_lstm) == repr(t_lstm)
    messages = {}
    for lib in (torch, sg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.LSTM(3, 4, dropout=0.2)
        messages[lib.__name__] = [str(w.message) for w in caught if w.category is UserWarning]
    assert messages["staticgrad"] == messages["torch"] and len(messages["torch"]) == 1


def test_lstm_with_dropout_replays_a_training_step_as_eager():
    """p=1 keeps the step deterministic while the dropout op is recorded and replayed."""
    _, eager_lstm = _twins(1.0)
    _, compiled_lstm = _twins(1.0)
    compiled_lstm.load_state_dict(eager_lstm.state_dict())

    def make_step(lstm):
        opt = sg.optim.SGD(lstm.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            out, (h, c) = lstm(x)
            loss = (out * out).mean() + (h * c).sum()
            loss.backward()
            opt.step()
            return loss
        return step

    eager, compiled = make_step(eager_lstm), sg.compile(make_step(compiled_lstm))
    rng = np.random.default_rng(3)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 2, 3)))
        same_bits(compiled(x).detach().numpy(), eager(x).detach().numpy(), f"loss of call {call}")
        same_bits(compiled_lstm.weight_hh_l1.detach().numpy(), eager_lstm.weight_hh_l1.detach().numpy(),
                  f"weights after call {call}")
    assert compiled.stats.replays >= 2, compiled.stats
