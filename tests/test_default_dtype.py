"""set_default_dtype / get_default_dtype against PyTorch: which dtypes it takes (and its errors),
every place the default float dtype decides a dtype (factories, tensor() from Python floats,
int -> float promotion, Python float scalars with integer tensors, layers' parameters, printing),
and compiled functions: a plan traced under one default dtype retraces under another, so a replay
always computes what eager computes."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, torch
from tests.replay_check import same_bits

DEFAULTS = ["float64", "float16"]  # the float32 default is what the rest of the suite runs under


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    """Every test leaves both libraries at their float32 default, whatever it set or raised."""
    yield
    sg.set_default_dtype(sg.float32)
    torch.set_default_dtype(torch.float32)


def _set_both(name: str) -> None:
    sg.set_default_dtype(getattr(sg, name))
    torch.set_default_dtype(getattr(torch, name))


def _name(dtype) -> str:
    return str(dtype).split(".")[-1]


# ---- which dtypes it takes ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_get_default_dtype_returns_what_was_set(name):
    assert sg.get_default_dtype() is sg.float32
    sg.set_default_dtype(getattr(sg, name))
    assert sg.get_default_dtype() is getattr(sg, name)


@pytest.mark.parametrize("name", ["int64", "int32", "int8", "uint8", "bool"])
def test_non_float_dtype_raises_torchs_type_error(name):
    with pytest.raises(TypeError) as expected:
        torch.set_default_dtype(getattr(torch, name))
    with pytest.raises(TypeError) as got:
        sg.set_default_dtype(getattr(sg, name))
    assert str(got.value) == str(expected.value)
    assert sg.get_default_dtype() is sg.float32


@pytest.mark.parametrize("value", ["float64", float, None, np.float64, np.dtype(np.float64)],
                         ids=["str", "python_float", "none", "numpy_type", "numpy_dtype"])
def test_non_dtype_object_raises_torchs_type_error(value):
    with pytest.raises(TypeError) as expected:
        torch.set_default_dtype(value)
    with pytest.raises(TypeError) as got:
        sg.set_default_dtype(value)
    assert str(got.value) == str(expected.value)


# ---- what the default decides, eagerly ----------------------------------------------------------------

INTS = np.array([1, 2, 3])
FLOAT32S = np.array([0.5, -1.25, 2.0], dtype=np.float32)

# (id, function of (lib, *tensors), input arrays): deterministic results, compared in dtype and value
CASES = [
    ("tensor_list", lambda lib: lib.tensor([1.5, -2.25]), []),
    ("tensor_scalar", lambda lib: lib.tensor(1.5), []),
    ("tensor_empty", lambda lib: lib.tensor([]), []),
    ("tensor_int_and_float", lambda lib: lib.tensor([np.int64(1), 2.5]), []),
    ("tensor_float64_numpy_scalar", lambda lib: lib.tensor([np.float64(0.1), 0.2]), []),
    ("tensor_ints_stay_int64", lambda lib: lib.tensor([1, 2]), []),
    ("as_tensor", lambda lib: lib.as_tensor([1.5, 2.0]), []),
    ("zeros", lambda lib: lib.zeros(2, 3), []),
    ("ones", lambda lib: lib.ones(3), []),
    ("empty_shape_and_dtype", lambda lib: lib.empty(2).fill_(1.5), []),
    ("full_float_fill", lambda lib: lib.full((2,), 1.5), []),
    ("full_int_fill_stays_int64", lambda lib: lib.full((2,), 3), []),
    ("arange_float_args", lambda lib: lib.arange(0.0, 2.0, 0.5), []),
    ("arange_int_args_stays_int64", lambda lib: lib.arange(4), []),
    ("linspace", lambda lib: lib.linspace(0, 1, 5), []),
    ("eye", lambda lib: lib.eye(3), []),
    ("Tensor_sizes", lambda lib: lib.Tensor(2, 3).fill_(1.5), []),
    ("Tensor_data", lambda lib: lib.Tensor([1.0, 2.0]), []),
    ("dtype_python_float_is_float64", lambda lib: lib.zeros(2, dtype=float), []),
    ("zeros_like_follows_input", lambda lib, x: lib.zeros_like(x), [FLOAT32S]),
    ("ones_like_follows_input", lambda lib, x: lib.ones_like(x), [INTS]),
    ("full_like_follows_input", lambda lib, x: lib.full_like(x, 2.5), [FLOAT32S]),
    ("true_division", lambda lib, x: x / 2, [INTS]),
    ("true_divide_two_ints", lambda lib, x: lib.true_divide(x, x + 1), [INTS]),
    ("reverse_division", lambda lib, x: 2.5 / x, [INTS]),
    ("sqrt_of_ints", lambda lib, x: lib.sqrt(x), [INTS]),
    ("exp_of_ints", lambda lib, x: lib.exp(x), [INTS]),
    ("sigmoid_of_ints", lambda lib, x: lib.sigmoid(x), [INTS]),
    ("reciprocal_of_ints", lambda lib, x: lib.reciprocal(x), [INTS]),
    ("ints_times_python_float", lambda lib, x: x * 1.5, [INTS]),
    ("ints_plus_python_float", lambda lib, x: x + 0.25, [INTS]),
    ("ints_pow_python_float", lambda lib, x: x ** 0.5, [INTS]),
    ("python_float_pow_ints", lambda lib, x: 2.0 ** x, [INTS]),
    ("ints_plus_0dim_default_float", lambda lib, x: x + lib.tensor(1.5), [INTS]),
    ("where_with_python_float", lambda lib, x: lib.where(x > 1, x, 1.5), [INTS]),
    ("clamp_ints_with_float_bound", lambda lib, x: lib.clamp(x, 1.5), [INTS]),
    ("isclose_ints_computes_in_default", lambda lib: lib.isclose(lib.tensor([100000000]), lib.tensor([100000001]),
                                                                 rtol=0, atol=0.5), []),
    ("float32_with_python_float_stays", lambda lib, x: x * 2.5, [FLOAT32S]),
    ("float_method_is_float32", lambda lib, x: x.float(), [INTS]),
]


@pytest.mark.parametrize("default", DEFAULTS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_default_dtype_decides_as_in_torch(case, default):
    _, fn, arrays = case
    _set_both(default)
    compare(fn, arrays, grad=False, rtol=1e-3 if default == "float16" else 1e-5)


RANDOM = [
    ("rand", lambda lib: lib.rand(2, 3)),
    ("randn", lambda lib: lib.randn(4)),
    ("randint_stays_int64", lambda lib: lib.randint(0, 5, (3,))),
    ("rand_like_follows_input", lambda lib: lib.rand_like(lib.zeros(2, dtype=lib.float32))),
]


@pytest.mark.parametrize("default", DEFAULTS)
@pytest.mark.parametrize("case", RANDOM, ids=[c[0] for c in RANDOM])
def test_random_draws_take_the_default_dtype(case, default):
    _, fn = case
    _set_both(default)
    got, want = fn(sg), fn(torch)
    assert _name(got.dtype) == _name(want.dtype) and tuple(got.shape) == tuple(want.shape)


def test_float16_rand_stays_below_one_and_randn_is_normal():
    sg.set_default_dtype(sg.float16)
    uniform = sg.rand(20000).numpy()
    normal = sg.randn(20000).numpy()
    assert uniform.dtype == normal.dtype == np.float16
    assert uniform.min() >= 0 and uniform.max() < 1 and abs(float(uniform.astype(np.float64).mean()) - 0.5) < 0.02
    assert abs(float(normal.astype(np.float64).std()) - 1) < 0.05


LAYERS = [
    ("Linear", lambda nn: nn.Linear(3, 2)),
    ("Conv2d", lambda nn: nn.Conv2d(1, 2, 3)),
    ("Embedding", lambda nn: nn.Embedding(4, 3)),
    ("LayerNorm", lambda nn: nn.LayerNorm(3)),
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(3)),
    ("GroupNorm", lambda nn: nn.GroupNorm(1, 2)),
    ("LSTM", lambda nn: nn.LSTM(3, 2)),
    ("GRUCell", lambda nn: nn.GRUCell(3, 2)),
    ("MultiheadAttention", lambda nn: nn.MultiheadAttention(4, 2)),
]


@pytest.mark.parametrize("default", DEFAULTS)
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layers_make_parameters_and_buffers_of_the_default_dtype(case, default):
    _, make = case
    _set_both(default)
    ours, theirs = make(sg.nn), make(torch.nn)
    want = {name: _name(t.dtype) for name, t in [*theirs.named_parameters(), *theirs.named_buffers()]}
    got = {name: _name(t.dtype) for name, t in [*ours.named_parameters(), *ours.named_buffers()]}
    assert got == want


def test_empty_parameter_and_square_mask_take_the_default_dtype():
    _set_both("float64")
    assert _name(sg.nn.Parameter().dtype) == _name(torch.nn.Parameter().dtype) == "float64"
    mask = sg.nn.Transformer.generate_square_subsequent_mask(3)
    assert _name(mask.dtype) == _name(torch.nn.Transformer.generate_square_subsequent_mask(3).dtype)


def test_linear_under_float64_trains_like_torch():
    """A layer made under the float64 default computes, and differentiates, in float64."""
    _set_both("float64")
    ours, theirs = sg.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ours.weight.data = sg.tensor(theirs.weight.detach().numpy().copy())
    ours.bias.data = sg.tensor(theirs.bias.detach().numpy().copy())
    x = np.array([[0.1, -0.2, 0.3], [1.0, 2.0, -0.5]])
    y_ours, y_theirs = ours(sg.tensor(x)), theirs(torch.tensor(x))
    y_ours.sum().backward()
    y_theirs.sum().backward()
    np.testing.assert_allclose(y_ours.detach().numpy(), y_theirs.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)
    assert ours.weight.grad.dtype == sg.float64


OPTIMIZERS = ["Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta"]


@pytest.mark.parametrize("default", DEFAULTS)
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_step_counter_dtype_and_updates_match_torch(name, default):
    """``state["step"]`` is float64 under the float64 default and float32 otherwise (float32
    parameters under a float16 default included), and the updates match PyTorch's."""
    _set_both(default)
    ours = sg.nn.Parameter(sg.ones(2, dtype=sg.float32))
    theirs = torch.nn.Parameter(torch.ones(2, dtype=torch.float32))
    opt_ours, opt_theirs = getattr(sg.optim, name)([ours], lr=0.1), getattr(torch.optim, name)([theirs], lr=0.1)
    for i in range(3):
        g = np.array([0.3, -0.7], dtype=np.float32) * (i + 1)
        ours.grad, theirs.grad = sg.tensor(g), torch.tensor(g)
        opt_ours.step()
        opt_theirs.step()
    assert _name(opt_ours.state[ours]["step"].dtype) == _name(opt_theirs.state[theirs]["step"].dtype)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("default", DEFAULTS)
def test_repr_hides_the_default_dtype_and_shows_float32(default):
    _set_both(default)
    for make in (lambda lib: lib.tensor([1.5, 2.0]), lambda lib: lib.tensor([1.5], dtype=lib.float32),
                 lambda lib: lib.zeros(0)):
        assert repr(make(sg)).replace("staticgrad.", "torch.") == repr(make(torch))


# ---- compiled functions ---------------------------------------------------------------------------------

def test_compiled_factory_follows_the_default_dtype_of_each_call():
    """``zeros(3)`` inside a compiled function: after set_default_dtype the plan retraces and the
    result has eager's dtype; switching back replays the first plan."""
    @sg.compile
    def shift(x):
        return x + sg.zeros(3), sg.ones(3) * 2

    x = sg.tensor([1, 2, 3])
    for default, traces in [("float32", 1), ("float32", 1), ("float64", 2), ("float64", 2), ("float32", 2),
                            ("float16", 3)]:
        sg.set_default_dtype(getattr(sg, default))
        got = shift(x)
        assert [t.dtype for t in got] == [getattr(sg, default)] * 2
        assert shift.stats.traces == traces
        for g, e in zip(got, shift.fn(x)):
            same_bits(g.numpy(), e.numpy(), f"replay vs eager under {default}")
    assert shift.stats.replays == 3


def test_compiled_int_promotion_replays_eager_on_new_inputs():
    @sg.compile
    def scale(x, w):
        return (x / 2 + x * 0.5) * w, sg.sqrt(x)

    rng = np.random.default_rng(3)
    for default in ["float64", "float32", "float64"]:
        sg.set_default_dtype(getattr(sg, default))
        w = sg.tensor(rng.standard_normal(4).astype(np.float32))
        for _ in range(3):
            x = sg.tensor(rng.integers(0, 9, size=4))
            got, want = scale(x, w), scale.fn(x, w)
            for g, e in zip(got, want):
                assert g.dtype == e.dtype
                same_bits(g.numpy(), e.numpy(), f"replay vs eager under {default}")
    assert scale.stats.traces == 2 and scale.stats.replays == 7


class _Shift(sg.nn.Module):
    """A module whose forward makes a default-dtype tensor and promotes an int input."""

    def __init__(self):
        super().__init__()
        self.weight = sg.nn.Parameter(sg.tensor([0.5, -1.0, 2.0], dtype=sg.float64))

    def forward(self, x):
        return (x * self.weight + sg.ones(3)).sum(), x / 2


def test_compiled_module_retraces_under_another_default_dtype():
    eager, compiled = _Shift(), sg.compile(_Shift())
    x = sg.tensor([1, 2, 3])
    for default, traces in [("float32", 1), ("float32", 1), ("float64", 2), ("float64", 2)]:
        sg.set_default_dtype(getattr(sg, default))
        (loss_c, half_c), (loss_e, half_e) = compiled(x), eager(x)
        loss_c.backward()
        loss_e.backward()
        assert half_c.dtype == half_e.dtype == getattr(sg, default)
        same_bits(loss_c.detach().numpy(), loss_e.detach().numpy(), f"loss under {default}")
        same_bits(half_c.numpy(), half_e.numpy(), f"x / 2 under {default}")
        same_bits(compiled.weight.grad.numpy(), eager.weight.grad.numpy(), f"gradient under {default}")
        assert compiled.stats.traces == traces


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_compiled_training_step_made_under_float64_replays_eager(optimizer):
    """A model built under the float64 default, trained by a compiled step: the replay's outputs,
    gradients, parameters and optimizer state equal eager's bit for bit."""
    _set_both("float64")
    sg.manual_seed(1)
    eager_model = sg.nn.Linear(3, 2)
    compiled_model = sg.nn.Linear(3, 2)
    compiled_model.load_state_dict(eager_model.state_dict())

    def make_step(model):
        opt = getattr(sg.optim, optimizer)(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = ((model(x) - sg.ones(2)) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return step, opt

    (eager, eager_opt), (compiled, compiled_opt) = make_step(eager_model), make_step(compiled_model)
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(0)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 3)))
        same_bits(compiled(x).detach().numpy(), eager(x).detach().numpy(), f"loss of call {call}")
        for p_c, p_e in zip(compiled_model.parameters(), eager_model.parameters()):
            assert p_c.dtype == sg.float64
            same_bits(p_c.grad.numpy(), p_e.grad.numpy(), f"gradient of call {call}")
            same_bits(p_c.detach().numpy(), p_e.detach().numpy(), f"parameter after call {call}")
            for key, value in eager_opt.state[p_e].items():
                same_bits(compiled_opt.state[p_c][key].numpy(), value.numpy(), f"{key} after call {call}")
    first_steps = 1 if optimizer == "SGD" else 2  # Adam's first step makes its state: the second traces again
    assert compiled.stats.traces == first_steps and compiled.stats.replays == 4 - first_steps


def test_set_default_dtype_inside_a_compiled_function_is_refused():
    @sg.compile
    def switch(x):
        sg.set_default_dtype(sg.float64)
        return x * 2

    with pytest.raises(sg.TraceError, match="set_default_dtype"):
        switch(sg.ones(2))
    assert sg.get_default_dtype() is sg.float32


def test_set_default_dtype_inside_a_compiled_function_runs_eagerly_with_fallback():
    @sg.compile(fallback="eager")
    def switch(x):
        sg.set_default_dtype(sg.float64)
        return x * sg.ones(2)

    with pytest.warns(RuntimeWarning, match="set_default_dtype"):
        assert switch(sg.ones(2, dtype=sg.float32)).dtype == sg.float64
    sg.set_default_dtype(sg.float32)
    assert switch(sg.ones(2, dtype=sg.float32)).dtype == sg.float64  # eager again: it changes the default
    assert switch.stats.replays == 0
