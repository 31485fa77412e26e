"""torch.bernoulli, Tensor.bernoulli_/exponential_/geometric_/log_normal_/cauchy_ and torch.multinomial:
the drawn distributions, dtypes and shapes, determinism under manual_seed and a Generator, PyTorch's
node names, zero gradients and errors, and compiled functions that re-draw on every replay exactly
as eager draws under the same seed."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error
from tests.replay_check import same_bits

torch = pytest.importorskip("torch")

N = 40000


# ---- distributions -------------------------------------------------------------------------------

def test_bernoulli_of_probabilities_draws_ones_at_those_rates_in_their_dtype():
    p = sg.tensor(np.repeat([0.0, 0.2, 0.9, 1.0], N // 4).reshape(4, -1), dtype=sg.float64)
    y = sg.bernoulli(p)
    assert y.dtype == sg.float64 and tuple(y.shape) == (4, N // 4)
    values = y.numpy()
    assert set(np.unique(values)) <= {0.0, 1.0}
    np.testing.assert_allclose(values.mean(axis=1), [0.0, 0.2, 0.9, 1.0], atol=0.02)
    assert values[0].max() == 0 and values[3].min() == 1


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "int8", "uint8", "bool"])
def test_bernoulli_refill_with_a_number_keeps_the_dtype(dtype):
    t = sg.full((N,), 7, dtype=getattr(sg, dtype)) if dtype != "bool" else sg.ones(N, dtype=sg.bool)
    assert t.bernoulli_(0.3) is t and t.dtype == getattr(sg, dtype)
    values = t.numpy().astype(np.float64)
    assert set(np.unique(values)) <= {0.0, 1.0} and abs(values.mean() - 0.3) < 0.02
    assert sg.ones(5).bernoulli_().dtype == sg.float32


def test_bernoulli_refill_with_a_tensor_broadcasts_the_probabilities_over_rows():
    t = sg.empty(N // 4, 4, dtype=sg.int64).bernoulli_(sg.tensor([0.0, 0.25, 0.75, 1.0]))
    np.testing.assert_allclose(t.numpy().mean(axis=0), [0.0, 0.25, 0.75, 1.0], atol=0.03)
    assert t.dtype == sg.int64


def test_bernoulli_with_a_number_p_draws_in_the_input_shape_and_dtype():
    y = sg.bernoulli(sg.zeros(N, dtype=sg.float64), 0.6)
    assert y.dtype == sg.float64 and abs(y.numpy().mean() - 0.6) < 0.02
    assert sg.tensor([0.5] * N).bernoulli(p=0.1).numpy().mean() < 0.13
    assert sg.bernoulli(sg.ones(3, dtype=sg.int64), 0.5).dtype == sg.int64


def test_continuous_refills_have_the_requested_distribution():
    lambd = 2.5
    e = sg.empty(N, dtype=sg.float64).exponential_(lambd).numpy()
    assert e.min() >= 0 and abs(e.mean() - 1 / lambd) < 0.01 and abs(e.std() - 1 / lambd) < 0.01
    assert sg.empty(N).exponential_().dtype == sg.float32
    logs = np.log(sg.empty(N, dtype=sg.float64).log_normal_(0.5, 0.25).numpy())
    assert abs(logs.mean() - 0.5) < 0.01 and abs(logs.std() - 0.25) < 0.01
    c = sg.empty(N, dtype=sg.float64).cauchy_(3.0, 2.0).numpy()
    q1, median, q3 = np.quantile(c, [0.25, 0.5, 0.75])
    assert abs(median - 3.0) < 0.05 and abs(q1 - 1.0) < 0.1 and abs(q3 - 5.0) < 0.1


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int16"])
def test_geometric_refill_counts_trials_to_the_first_success(dtype):
    g = sg.empty(N, dtype=getattr(sg, dtype)).geometric_(0.25)
    assert g.dtype == getattr(sg, dtype)
    values = g.numpy().astype(np.float64)
    assert values.min() >= 1 and np.all(values == np.round(values))
    assert abs(values.mean() - 4.0) < 0.1


def test_multinomial_with_replacement_draws_categories_at_their_weights():
    weights = sg.tensor([[1.0, 0.0, 3.0], [0.5, 0.5, 0.0]], dtype=sg.float64)  # unnormalised rows
    draws = sg.multinomial(weights, N // 2, replacement=True)
    assert draws.dtype == sg.int64 and tuple(draws.shape) == (2, N // 2)
    counts = np.stack([np.bincount(row, minlength=3) for row in draws.numpy()]) / (N // 2)
    np.testing.assert_allclose(counts, [[0.25, 0.0, 0.75], [0.5, 0.5, 0.0]], atol=0.02)
    assert counts[0, 1] == 0 and counts[1, 2] == 0


def test_multinomial_without_replacement_draws_distinct_categories_heavy_first():
    weights = sg.tensor([0.05, 0.9, 0.05, 0.0])
    firsts = []
    for _ in range(300):
        draw = sg.multinomial(weights, 3).numpy()
        assert draw.shape == (3,) and len(set(draw)) == 3 and 3 not in draw  # zero weight comes last
        firsts.append(draw[0])
    assert 0.8 < np.mean(np.array(firsts) == 1) < 0.97
    assert sorted(sg.multinomial(weights, 4).numpy()[3:]) == [3]  # all four: the zero-weight one last
    single = sg.multinomial(sg.ones(4, 5), 1)
    assert tuple(single.shape) == (4, 1) and single.dtype == sg.int64
    assert tuple(sg.multinomial(sg.ones(0, 3), 2).shape) == (0, 2)
    assert sg.ones(3).multinomial(2, True).shape == (2,)


# ---- determinism ---------------------------------------------------------------------------------

DRAWS = {
    "bernoulli": lambda g: sg.bernoulli(sg.full((6,), 0.5), generator=g),
    "bernoulli_p": lambda g: sg.bernoulli(sg.zeros(6), 0.5, generator=g),
    "bernoulli_": lambda g: sg.empty(6).bernoulli_(0.5, generator=g),
    "bernoulli_tensor": lambda g: sg.empty(6).bernoulli_(sg.full((6,), 0.5), generator=g),
    "exponential_": lambda g: sg.empty(6).exponential_(generator=g),
    "geometric_": lambda g: sg.empty(6).geometric_(0.2, generator=g),
    "log_normal_": lambda g: sg.empty(6).log_normal_(generator=g),
    "cauchy_": lambda g: sg.empty(6).cauchy_(generator=g),
    "multinomial": lambda g: sg.multinomial(sg.ones(50), 6, generator=g),
    "multinomial_replacement": lambda g: sg.multinomial(sg.ones(50), 6, True, generator=g),
}


@pytest.mark.parametrize("name", list(DRAWS))
def test_draws_repeat_under_a_seeded_generator_and_under_manual_seed(name):
    draw = DRAWS[name]
    first = draw(sg.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(draw(sg.Generator().manual_seed(5)).numpy(), first)
    assert any(not np.array_equal(draw(sg.Generator().manual_seed(s)).numpy(), first) for s in (6, 7, 8))
    sg.manual_seed(11)
    default = draw(None).numpy()
    sg.manual_seed(11)
    np.testing.assert_array_equal(draw(sg.default_generator).numpy(), default)


def test_a_generator_draw_leaves_the_default_stream_alone():
    sg.manual_seed(3)
    expected = sg.rand(4).numpy()
    sg.manual_seed(3)
    sg.empty(8).exponential_(generator=sg.Generator())
    sg.multinomial(sg.ones(5), 2, generator=sg.Generator())
    np.testing.assert_array_equal(sg.rand(4).numpy(), expected)


# ---- autograd: node names and zero gradients, as PyTorch's ---------------------------------------

REFILLS = {
    "bernoulli_": ("BernoulliBackward2", lambda lib, y: y.bernoulli_(0.5)),
    "exponential_": ("ExponentialBackward0", lambda lib, y: y.exponential_()),
    "geometric_": ("GeometricBackward0", lambda lib, y: y.geometric_(0.3)),
    "log_normal_": ("LogNormalBackward0", lambda lib, y: y.log_normal_()),
    "cauchy_": ("CauchyBackward0", lambda lib, y: y.cauchy_()),
}


@pytest.mark.parametrize("name", list(REFILLS))
def test_refills_have_torch_node_names_and_zero_gradients(name):
    node, refill = REFILLS[name]
    for lib in (torch, sg):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        y = refill(lib, x * 2)
        assert y.grad_fn.name() == node
        (y * 3).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))


def test_bernoulli_nodes_and_gradients_match_torch():
    for lib in (torch, sg):
        p = lib.full((3,), 0.4, dtype=lib.float64, requires_grad=True)
        y = lib.bernoulli(p)
        assert y.grad_fn.name() == "BernoulliBackward0"
        y.sum().backward()
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3))
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        q = lib.full((3,), 0.4, dtype=lib.float64, requires_grad=True)
        z = (x * 1).bernoulli_(q)
        assert z.grad_fn.name() == "BernoulliBackward1"
        z.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
        np.testing.assert_array_equal(q.grad.numpy(), np.zeros(3))
        w = lib.bernoulli(p, 0.5)
        assert w.requires_grad and w.grad_fn.name() == "torch::autograd::NotImplemented"
    same_error(lambda lib: lib.bernoulli(lib.ones(2, requires_grad=True), 0.5).sum().backward())


def test_multinomial_has_no_gradient():
    for lib in (torch, sg):
        draw = lib.multinomial(lib.ones(4, requires_grad=True), 2)
        assert not draw.requires_grad and draw.grad_fn is None


# ---- errors --------------------------------------------------------------------------------------

def _dtype_cases():
    for dtype in ("int8", "uint8", "int16", "int32", "int64", "bool"):
        yield f"exponential_{dtype}", lambda lib, d=dtype: lib.ones(2, dtype=getattr(lib, d)).exponential_()
        yield f"cauchy_{dtype}", lambda lib, d=dtype: lib.ones(2, dtype=getattr(lib, d)).cauchy_()
        yield f"log_normal_{dtype}", lambda lib, d=dtype: lib.ones(2, dtype=getattr(lib, d)).log_normal_()
        yield f"bernoulli_{dtype}", lambda lib, d=dtype: lib.bernoulli(lib.ones(2, dtype=getattr(lib, d)))
        yield f"multinomial_{dtype}", lambda lib, d=dtype: lib.multinomial(lib.ones(2, dtype=getattr(lib, d)), 1)


ERRORS = dict(_dtype_cases(), **{
    "bernoulli_p_above_one": lambda lib: lib.bernoulli(lib.tensor([0.5, 1.5])),
    "bernoulli_p_negative": lambda lib: lib.bernoulli(lib.tensor([-0.5, 0.5])),
    "bernoulli_p_nan": lambda lib: lib.bernoulli(lib.tensor([float("nan")])),
    "bernoulli_number_p": lambda lib: lib.bernoulli(lib.ones(2), 1.5),
    "bernoulli_tensor_p_tensor": lambda lib: lib.bernoulli(lib.ones(2), lib.ones(2)),
    "bernoulli_method_tensor_p": lambda lib: lib.ones(2).bernoulli(lib.ones(2)),
    "bernoulli__above_one": lambda lib: lib.ones(2).bernoulli_(1.5),
    "bernoulli__negative": lambda lib: lib.ones(2).bernoulli_(-0.1),
    "bernoulli__nan": lambda lib: lib.ones(2).bernoulli_(float("nan")),
    "bernoulli__leaf": lambda lib: lib.ones(2, requires_grad=True).bernoulli_(0.5),
    "bernoulli__tensor_out_of_range": lambda lib: lib.ones(2).bernoulli_(lib.tensor([0.5, 1.2])),
    "bernoulli__tensor_long": lambda lib: lib.ones(2).bernoulli_(lib.tensor([1, 0])),
    "bernoulli__tensor_shape": lambda lib: lib.ones(2, 3).bernoulli_(lib.tensor([0.5, 0.2])),
    "exponential_zero": lambda lib: lib.ones(2).exponential_(0),
    "exponential_negative": lambda lib: lib.ones(2).exponential_(-1.5),
    "exponential_nan": lambda lib: lib.ones(2).exponential_(float("nan")),
    "exponential_leaf": lambda lib: lib.ones(2, requires_grad=True).exponential_(),
    "geometric_zero": lambda lib: lib.ones(2).geometric_(0),
    "geometric_one": lambda lib: lib.ones(2).geometric_(1),
    "geometric_nan": lambda lib: lib.ones(2).geometric_(float("nan")),
    "geometric_bool": lambda lib: lib.ones(2, dtype=lib.bool).geometric_(0.5),
    "log_normal_zero_std": lambda lib: lib.ones(2).log_normal_(1, 0),
    "log_normal_negative_std": lambda lib: lib.ones(2).log_normal_(1, -0.5),
    "cauchy_zero_sigma": lambda lib: lib.ones(2).cauchy_(0, 0),
    "cauchy_negative_sigma": lambda lib: lib.ones(2).cauchy_(0, -2),
    "multinomial_too_many": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 3),
    "multinomial_zero_samples": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 0),
    "multinomial_negative_samples": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), -1),
    "multinomial_float_samples": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 2.0),
    "multinomial_bool_samples": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), True),
    "multinomial_0d": lambda lib: lib.multinomial(lib.tensor(1.0), 1),
    "multinomial_3d": lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    "multinomial_zero_row": lambda lib: lib.multinomial(lib.tensor([[0.0, 0.0], [1.0, 1.0]]), 1),
    "multinomial_zero_row_replacement": lambda lib: lib.multinomial(lib.tensor([[1.0, 1.0], [0.0, 0.0]]), 4, True),
    "multinomial_negative": lambda lib: lib.multinomial(lib.tensor([-1.0, 1.0]), 1),
    "multinomial_nan": lambda lib: lib.multinomial(lib.tensor([float("nan"), 1.0]), 2),
    "multinomial_inf": lambda lib: lib.multinomial(lib.tensor([float("inf"), 1.0]), 1),
    "multinomial_negative_replacement": lambda lib: lib.multinomial(lib.tensor([-1.0, 1.0]), 2, True),
    "multinomial_nan_replacement": lambda lib: lib.multinomial(lib.tensor([float("nan"), 1.0]), 2, True),
    "multinomial_inf_replacement": lambda lib: lib.multinomial(lib.tensor([float("inf"), 1.0]), 2, True),
    "multinomial_no_categories": lambda lib: lib.multinomial(lib.ones(2, 0), 1),
    "multinomial_no_categories_replacement": lambda lib: lib.multinomial(lib.ones(2, 0), 2, True),
})


@pytest.mark.parametrize("name", list(ERRORS))
def test_bad_draws_raise_torch_errors(name):
    same_error(ERRORS[name])


@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(2).bernoulli_(0.5, lib.Generator()),
    lambda lib: lib.ones(2).exponential_(1.0, lib.Generator()),
    lambda lib: lib.multinomial(lib.ones(2), 1, True, lib.Generator()),
    lambda lib: lib.ones(2).geometric_(),
], ids=["bernoulli_", "exponential_", "multinomial", "geometric_no_p"])
def test_generator_is_keyword_only_and_geometric_needs_p(call):
    for lib in (torch, sg):
        with pytest.raises(TypeError):
            call(lib)


def test_a_generator_must_be_a_generator():
    with pytest.raises(TypeError, match=r"generator must be a staticgrad\.Generator"):
        sg.multinomial(sg.ones(2), 1, generator=np.random.default_rng())


# ---- compiled functions re-draw on every replay, as eager draws ------------------------------------

def _step_function(x):
    keep = sg.bernoulli(x.sigmoid())
    mask = (x * 1).bernoulli_(0.7)
    noise = (x * 1).exponential_(2.0) + (x * 1).log_normal_(0.0, 0.5) + (x * 1).cauchy_().clamp(-5, 5)
    trials = (x * 1).geometric_(0.4)
    picks = sg.multinomial(x.abs() + 0.1, 3).double()
    return x * keep * mask + noise + trials, picks


def test_compiled_draws_are_redrawn_on_replay_as_eager_draws():
    compiled = sg.compile(_step_function)
    rng = np.random.default_rng(0)
    previous = None
    for call in range(4):
        x = sg.tensor(rng.standard_normal((3, 5)))
        sg.manual_seed(200 + call)
        eager = _step_function(x)
        sg.manual_seed(200 + call)
        replayed = compiled(x)
        for k, (got, want) in enumerate(zip(replayed, eager)):
            same_bits(got.numpy(), want.numpy(), f"output {k} of call {call}")
        sg.manual_seed(200 + call)
        current = [t.numpy() for t in compiled(x)]
        for got, want in zip(current, eager):
            same_bits(got, want.numpy(), f"second replay of call {call}")
        if previous is not None:
            assert not np.array_equal(current[0], previous[0])
        previous = [t.numpy() for t in compiled(x)]  # no reseed: new draws
        assert not np.array_equal(previous[0], current[0])
    assert compiled.stats.replays >= 6, compiled.stats


def test_compiled_draws_read_the_generator_they_were_given():
    g = sg.Generator()

    def f(x):
        return sg.multinomial(x, 4, replacement=True, generator=g), (x * 1).bernoulli_(0.5, generator=g)

    compiled = sg.compile(f)
    x = sg.tensor([0.1, 0.2, 0.3, 0.4])
    for call in range(3):
        g.manual_seed(call)
        eager = f(x)
        g.manual_seed(call)
        sg.manual_seed(999 + call)  # the default generator does not matter
        for got, want in zip(compiled(x), eager):
            same_bits(got.numpy(), want.numpy(), f"call {call}")
    assert compiled.stats.replays >= 1


def test_training_step_with_dropout_by_bernoulli_replays_as_eager():
    def make():
        w = sg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), requires_grad=True)
        opt = sg.optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            h = x @ w
            keep = sg.empty_like(h).bernoulli_(0.8)
            loss = (h * keep / 0.8).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return w, step

    w_eager, eager = make()
    w_comp, step = make()
    compiled = sg.compile(step)
    rng = np.random.default_rng(1)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
        sg.manual_seed(call)
        want = eager(x)
        sg.manual_seed(call)
        got = compiled(x)
        same_bits(got.detach().numpy(), want.detach().numpy(), f"loss of call {call}")
        same_bits(w_comp.detach().numpy(), w_eager.detach().numpy(), f"weight after call {call}")
    assert compiled.stats.replays >= 2


def test_replay_on_invalid_probabilities_raises_as_eager():
    compiled = sg.compile(lambda p: sg.multinomial(p, 2) * 1)
    compiled(sg.tensor([0.5, 0.5, 0.1]))
    compiled(sg.tensor([0.5, 0.2, 0.1]))
    with pytest.raises(RuntimeError, match="probability tensor contains either `inf`, `nan` or element < 0"):
        compiled(sg.tensor([0.5, -0.2, 0.1]))
    bern = sg.compile(lambda p: sg.bernoulli(p) + 1)
    bern(sg.tensor([0.5, 0.2]))
    bern(sg.tensor([0.5, 0.3]))
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        bern(sg.tensor([0.5, 1.3]))
