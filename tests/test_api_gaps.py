"""Small gaps of the PyTorch API people paste, each against torch: ``out=`` of torch.bernoulli and
torch.multinomial, the factories' size argument (negative and non-integer sizes), and pickling the
elementwise math functions."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import staticgrad as sg
from staticgrad._eager import math_functions
from staticgrad.errors import TraceError
from tests.oracle import same_error
from tests.replay_check import same_bits

torch = pytest.importorskip("torch")

LIBS = (torch, sg)


# ---- out= of bernoulli and multinomial -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_bernoulli_writes_the_draw_into_out_in_its_dtype(dtype):
    p = sg.tensor(np.linspace(0.0, 1.0, 12).reshape(3, 4))
    out = sg.full((3, 4), 7, dtype=getattr(sg, dtype))
    sg.manual_seed(3)
    expected = sg.bernoulli(p).numpy()
    sg.manual_seed(3)
    assert sg.bernoulli(p, out=out) is out
    assert out.dtype == getattr(sg, dtype) and tuple(out.shape) == (3, 4)
    np.testing.assert_array_equal(out.numpy(), expected.astype(out.numpy().dtype))
    assert out.numpy()[0, 0] == 0 and out.numpy()[2, 3] == 1
    t_out = torch.full((3, 4), 7, dtype=getattr(torch, dtype))
    assert torch.bernoulli(torch.tensor(p.numpy()), out=t_out) is t_out and t_out.dtype == getattr(torch, dtype)


def test_multinomial_writes_the_draw_into_out():
    weights = sg.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 1.0]])
    for replacement in (False, True):
        sg.manual_seed(5)
        expected = sg.multinomial(weights, 2, replacement).numpy()
        out = sg.full((2, 2), -1, dtype=sg.int64)
        sg.manual_seed(5)
        assert sg.multinomial(weights, 2, replacement=replacement, out=out) is out
        np.testing.assert_array_equal(out.numpy(), expected)
    one_row = sg.empty(3, dtype=sg.int64)
    assert sorted(sg.multinomial(sg.ones(3), 3, out=one_row).tolist()) == [0, 1, 2]


RESIZES = {
    "bernoulli-from-empty": (lambda lib, out: lib.bernoulli(lib.full((2, 3), 0.5), out=out), "float32", (0,)),
    "bernoulli-from-larger": (lambda lib, out: lib.bernoulli(lib.full((2, 3), 0.5), out=out), "float32", (8,)),
    "bernoulli-to-0-dim": (lambda lib, out: lib.bernoulli(lib.tensor(0.5), out=out), "float32", (3,)),
    "multinomial-from-empty": (lambda lib, out: lib.multinomial(lib.ones(2, 5), 3, out=out), "int64", (0,)),
    "multinomial-from-larger": (lambda lib, out: lib.multinomial(lib.ones(2, 5), 3, out=out), "int64", (2, 5)),
}


@pytest.mark.parametrize("name", list(RESIZES))
def test_out_of_another_shape_is_resized_like_torch(name):
    call, dtype, shape = RESIZES[name]
    shapes = []
    for lib in LIBS:
        out = lib.zeros(shape, dtype=getattr(lib, dtype))
        alias = out.view(-1)  # a view taken before the call sees the result's first elements, as in torch
        assert call(lib, out) is out
        shapes.append(tuple(out.shape))
        if alias.numel():
            np.testing.assert_array_equal(alias[:out.numel()].numpy(), out.reshape(-1).numpy())
    assert shapes[0] == shapes[1]


OUT_ERRORS = {
    "bernoulli-p-and-out": lambda lib: lib.bernoulli(lib.ones(2), 0.5, out=lib.ones(2)),
    "bernoulli-out-not-a-tensor": lambda lib: lib.bernoulli(lib.ones(2), out=3),
    "bernoulli-input-requires-grad": lambda lib: lib.bernoulli(lib.ones(2, requires_grad=True), out=lib.ones(2)),
    "bernoulli-out-requires-grad": lambda lib: lib.bernoulli(lib.ones(2), out=lib.ones(2, requires_grad=True)),
    "bernoulli-out-non-leaf": lambda lib: lib.bernoulli(lib.ones(2), out=lib.ones(2, requires_grad=True) * 1),
    "bernoulli-long-input-out-requires-grad": lambda lib: lib.bernoulli(
        lib.ones(2, dtype=lib.int64), out=lib.ones(2, requires_grad=True)),
    "bernoulli-long-input": lambda lib: lib.bernoulli(lib.ones(2, dtype=lib.int64), out=lib.ones(2)),
    "bernoulli-bad-p": lambda lib: lib.bernoulli(lib.tensor([0.5, 2.0]), out=lib.ones(2)),
    "multinomial-float-out": lambda lib: lib.multinomial(lib.ones(3), 2, out=lib.ones(2)),
    "multinomial-int32-out": lambda lib: lib.multinomial(lib.ones(3), 2, out=lib.ones(2, dtype=lib.int32)),
    "multinomial-float-out-zero-samples": lambda lib: lib.multinomial(lib.ones(3), 0, out=lib.ones(2)),
    "multinomial-float-out-3d": lambda lib: lib.multinomial(lib.ones(2, 2, 3), 1, out=lib.ones(2)),
    "multinomial-float-out-long-input": lambda lib: lib.multinomial(
        lib.ones(3, dtype=lib.int64), 1, out=lib.ones(2)),
    "multinomial-out-not-a-tensor": lambda lib: lib.multinomial(lib.ones(3), 2, out=[1]),
    "multinomial-float-samples-and-out": lambda lib: lib.multinomial(
        lib.ones(3), 2.0, out=lib.ones(2, dtype=lib.int64)),
    "multinomial-too-many-with-out": lambda lib: lib.multinomial(lib.ones(3), 4, out=lib.ones(4, dtype=lib.int64)),
}


@pytest.mark.parametrize("name", list(OUT_ERRORS))
def test_out_errors_match_torch(name):
    error = same_error(OUT_ERRORS[name])
    with pytest.raises(type(error)) as t_error:
        OUT_ERRORS[name](torch)
    # the whole message, also past its first line (torch's "Could this error message be improved?" aside)
    assert str(error) == str(t_error.value).split("  (Could this error message be improved?")[0]


def test_out_with_inputs_that_require_grad_is_allowed_under_no_grad():
    for lib in LIBS:
        with lib.no_grad():
            out = lib.ones(3)
            assert lib.bernoulli(lib.full((3,), 0.5, requires_grad=True), out=out) is out
        assert out.grad_fn is None and not out.requires_grad


def test_the_methods_have_no_out_argument_like_torch():
    for lib in LIBS:
        with pytest.raises(TypeError):
            lib.ones(2).bernoulli(out=lib.ones(2))
        with pytest.raises(TypeError):
            lib.ones(2).multinomial(1, out=lib.ones(1, dtype=lib.int64))


_KEPT_VIEWS = []


def _small_with_a_view():
    target = sg.zeros(4)
    _KEPT_VIEWS.append(target[1:])   # a view that would have to see the grown storage
    return target


@pytest.mark.parametrize("out", [
    lambda: sg.zeros(2, 3)[0],  # a view: its storage cannot grow as torch's would
    lambda: sg.zeros(4, 2).t(),  # not contiguous
    _small_with_a_view,  # too few elements, and a view of it would have to see the new memory
], ids=["view", "non-contiguous", "too-small-and-viewed"])
def test_resizes_numpy_cannot_follow_are_refused_with_what_to_pass(out):
    target = out()
    with pytest.raises(NotImplementedError, match=r"Pass an out tensor of shape \[2, 3\], or a new empty one"):
        sg.bernoulli(sg.full((2, 3), 0.5), out=target)
    assert tuple(target.shape) != (2, 3)


def test_a_too_small_out_that_shares_nothing_grows_as_torchs():
    for lib in LIBS:
        target = lib.zeros(4)
        assert lib.bernoulli(lib.full((2, 3), 0.5), out=target) is target and tuple(target.shape) == (2, 3)


def _drawing_into(p, out):
    sg.bernoulli(p, out=out)
    picks = sg.multinomial(p, 2, out=sg.empty(2, dtype=sg.int64))
    return out * 2 + 1, picks


def test_compiled_draws_into_out_replay_as_eager():
    compiled = sg.compile(_drawing_into)
    rng = np.random.default_rng(0)
    for call in range(4):
        p = sg.tensor(rng.uniform(0.05, 0.95, 6))
        eager_out, replay_out = sg.zeros(6), sg.zeros(6)
        sg.manual_seed(call)
        eager = _drawing_into(p, eager_out)
        sg.manual_seed(call)
        replayed = compiled(p, replay_out)
        for k, (got, want) in enumerate(zip(replayed, eager)):
            same_bits(got.numpy(), want.numpy(), f"output {k} of call {call}")
        same_bits(replay_out.numpy(), eager_out.numpy(), f"out of call {call}")
    assert compiled.stats.traces == 1 and compiled.stats.replays == 3, compiled.stats


def test_resizing_out_inside_a_compiled_function_is_refused():
    compiled = sg.compile(lambda p: sg.bernoulli(p, out=sg.empty(0)) + 1)
    with pytest.raises(TraceError, match=r"resizing its out tensor from \[0\] to \[3\]"):
        compiled(sg.full((3,), 0.5))


# ---- the factories' size argument --------------------------------------------------------------------

class _Index:
    def __index__(self):
        return 2


SIZE_ERRORS = {}
for _factory in ("zeros", "ones", "empty", "rand", "randn"):
    SIZE_ERRORS.update({
        f"{_factory}-negative": lambda lib, f=_factory: getattr(lib, f)(-1, 2),
        f"{_factory}-negative-tuple": lambda lib, f=_factory: getattr(lib, f)((2, -3)),
        f"{_factory}-float": lambda lib, f=_factory: getattr(lib, f)(2.0),
        f"{_factory}-float-second": lambda lib, f=_factory: getattr(lib, f)(2, 3.0),
        f"{_factory}-float-in-tuple": lambda lib, f=_factory: getattr(lib, f)((2, 3, 4.5)),
        f"{_factory}-float-first-in-list": lambda lib, f=_factory: getattr(lib, f)([2.0, 3]),
        f"{_factory}-float-then-int": lambda lib, f=_factory: getattr(lib, f)(2.0, 3),
        f"{_factory}-float-before-negative": lambda lib, f=_factory: getattr(lib, f)((-1, 2.0)),
    })
SIZE_ERRORS.update({
    "zeros-nothing": lambda lib: lib.zeros(),
    "ones-numpy-float": lambda lib: lib.ones(np.float64(2)),
    "ones-bool-first": lambda lib: lib.ones((True, 2)),
    "ones-bool": lambda lib: lib.ones(True),
    "ones-float-tensor": lambda lib: lib.ones(lib.tensor(2.0)),
    "ones-tensor-of-sizes": lambda lib: lib.ones(lib.tensor([2, 3])),
    "ones-float-tensor-second": lambda lib: lib.ones(2, lib.tensor(2.0)),
    "ones-string": lambda lib: lib.ones(2, "3"),
    "ones-nested": lambda lib: lib.ones([[2, 3]]),
    "ones-tuple-second": lambda lib: lib.ones(2, (3,)),
    "ones-tuple-then-int": lambda lib: lib.ones((2,), 3),
    "empty-numpy-negative": lambda lib: lib.empty(np.int64(-4)),
    "zeros-several-negative": lambda lib: lib.zeros(2, -1, -3),
    "full-negative": lambda lib: lib.full([-1, 2], 1.0),
    "full-negative-int-fill": lambda lib: lib.full((2, -1), 1),
    "full-float": lambda lib: lib.full((2, 3.5), 1.0),
    "full-float-first": lambda lib: lib.full((2.0,), 1.0),
    "full-int-not-a-tuple": lambda lib: lib.full(2, 1.0),
    "full-float-not-a-tuple": lambda lib: lib.full(2.0, 1.0),
    "rand-negative-with-generator": lambda lib: lib.rand(-1, generator=lib.Generator()),
    "randn-float-then-negative": lambda lib: lib.randn(2, 3.0, -1),
    "rand-nothing": lambda lib: lib.rand(),
    "rand-tuple-then-int": lambda lib: lib.rand((2,), 3),
    "randn-float-then-int-with-dtype": lambda lib: lib.randn(2.0, 3, dtype=lib.float64),
    "rand-float-then-int-with-generator": lambda lib: lib.rand(2.0, 3, generator=lib.Generator()),
    "randint-float-with-generator": lambda lib: lib.randint(0, 3, (2.0,), generator=lib.Generator()),
    "randint-negative": lambda lib: lib.randint(3, (-1, 2)),
    "randint-negative-keyword": lambda lib: lib.randint(0, 3, size=(2, -2)),
    "randint-float": lambda lib: lib.randint(0, 3, (2.0,)),
    "randint-int-size": lambda lib: lib.randint(0, 3, 2),
    "randint-no-size": lambda lib: lib.randint(3),
    "randint-float-size-keyword": lambda lib: lib.randint(0, 3, size=2.0),
    "new_zeros-negative": lambda lib: lib.ones(2).new_zeros(-1, 2),
    "new_ones-float": lambda lib: lib.ones(2).new_ones(2.0),
    "new_empty-float-in-tuple": lambda lib: lib.ones(2).new_empty((2, 3.0)),
    "new_empty-nothing": lambda lib: lib.ones(2).new_empty(),
    "new_zeros-float-then-int": lambda lib: lib.ones(2).new_zeros(2.0, 3),
    "new_full-negative": lambda lib: lib.ones(2).new_full((-1, 2), 1.0),
    "new_full-int": lambda lib: lib.ones(2).new_full(2, 1.0),
    "new_full-float-first": lambda lib: lib.ones(2).new_full((2.0,), 1.0),
})


@pytest.mark.parametrize("name", list(SIZE_ERRORS))
def test_bad_sizes_raise_torchs_error(name):
    with pytest.raises(Exception) as t_error:
        SIZE_ERRORS[name](torch)
    with pytest.raises(Exception) as s_error:
        SIZE_ERRORS[name](sg)
    assert type(s_error.value) is type(t_error.value)
    assert str(s_error.value) == str(t_error.value)  # word for word, the argument forms' torch names included


GOOD_SIZES = {
    "varargs": lambda lib: lib.zeros(2, 3),
    "tuple": lambda lib: lib.ones((2, 3)),
    "list": lambda lib: lib.empty([4]),
    "size-object": lambda lib: lib.rand(lib.ones(2, 3).shape),
    "empty-tuple": lambda lib: lib.randn(()),
    "zero": lambda lib: lib.zeros(0, 3),
    "numpy-ints": lambda lib: lib.ones(np.int64(2), np.int32(3)),
    "int-tensors": lambda lib: lib.zeros(2, lib.tensor(3)),
    "one-element-tensor": lambda lib: lib.zeros(lib.tensor([3])),
    "index-object": lambda lib: lib.zeros(_Index(), _Index()),
    "bool-after-the-first": lambda lib: lib.zeros(2, True),
    "full": lambda lib: lib.full((2, 3), 1.5),
    "randint-high-size": lambda lib: lib.randint(3, (2, 4)),
    "randint-low-high-size": lambda lib: lib.randint(1, 3, (5,)),
    "randint-keywords": lambda lib: lib.randint(low=1, high=3, size=(2,)),
    "randint-high-keyword": lambda lib: lib.randint(0, high=3, size=(2, 2)),
    "new_zeros": lambda lib: lib.ones(2).new_zeros(3, 1),
    "new_full": lambda lib: lib.ones(2).new_full([2], 0.5),
}


@pytest.mark.parametrize("name", list(GOOD_SIZES))
def test_good_sizes_give_torchs_shape(name):
    t_result, s_result = GOOD_SIZES[name](torch), GOOD_SIZES[name](sg)
    assert tuple(s_result.shape) == tuple(t_result.shape)
    assert str(s_result.dtype).replace("staticgrad.", "") == str(t_result.dtype).replace("torch.", "")


def test_compiled_factories_with_good_sizes_replay_as_eager():
    def f(x):
        return x + sg.ones(x.shape[0], 3) * 2 + sg.full((1, 3), 0.5) + sg.zeros((x.shape[0], 1))

    compiled = sg.compile(f)
    for rows in (2, 2, 4, 4):
        x = sg.tensor(np.arange(rows * 3, dtype=np.float32).reshape(rows, 3))
        same_bits(compiled(x).numpy(), f(x).numpy(), f"rows={rows}")
    assert compiled.stats.replays >= 2, compiled.stats


# ---- pickling the elementwise math functions ---------------------------------------------------------

MATH = sorted(math_functions.FUNCTIONS)
MATH_INPLACE = sorted(math_functions.INPLACE)


@pytest.mark.parametrize("name", MATH)
def test_math_functions_pickle_by_reference_to_staticgrad(name):
    function = getattr(sg, name)
    assert getattr(function, "__wrapped__", function) is math_functions.FUNCTIONS[name]   # (out= wraps some)
    assert pickle.loads(pickle.dumps(function)) is function
    assert "<locals>" not in function.__qualname__
    if hasattr(torch, name):
        assert pickle.loads(pickle.dumps(getattr(torch, name))) is getattr(torch, name)


@pytest.mark.parametrize("name", MATH_INPLACE)
def test_in_place_math_methods_pickle_by_reference_to_tensor(name):
    method = getattr(sg.Tensor, name)
    assert method is math_functions.INPLACE[name]
    assert pickle.loads(pickle.dumps(method)) is method


class _Scaled(sg.nn.Module):
    """A module holding an activation function as an attribute (the pattern that pickles it)."""

    def __init__(self, activation):
        super().__init__()
        self.linear = sg.nn.Linear(3, 2)
        self.activation = activation

    def forward(self, x):
        return self.activation(self.linear(x))


@pytest.mark.parametrize("name", ["sin", "atan2", "arcsinh", "floor"])
def test_objects_holding_a_math_function_pickle_and_deepcopy(name):
    holder = {"fn": getattr(sg, name), "pair": (getattr(sg, name), sg.cos)}
    assert pickle.loads(pickle.dumps(holder)) == holder
    assert copy.deepcopy(holder)["fn"] is getattr(sg, name)
    model = _Scaled(sg.sin)
    x = sg.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert clone.activation is sg.sin
        np.testing.assert_array_equal(clone(x).detach().numpy(), model(x).detach().numpy())


# ---- linspace(out=) and the factories' size= keyword ------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linspace_writes_into_out_in_its_dtype(dtype):
    for lib in LIBS:
        out = lib.empty(5, dtype=getattr(lib, dtype))
        assert lib.linspace(-1, 3, 5, out=out) is out
        assert out.dtype == getattr(lib, dtype)
    out, t_out = sg.empty(0, dtype=getattr(sg, dtype)), torch.empty(0, dtype=getattr(torch, dtype))
    sg.linspace(0.5, 2, 7, out=out)
    torch.linspace(0.5, 2, 7, out=t_out)
    np.testing.assert_array_equal(out.numpy(), t_out.numpy())


def test_linspace_out_errors_are_torchs():
    same_error(lambda lib: lib.linspace(0, 1, 5, out=lib.empty(5, dtype=lib.float64), dtype=lib.float32))
    same_error(lambda lib: lib.linspace(0, 1, 5, out=lib.empty(5, requires_grad=True)))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_factories_take_size_by_keyword(name):
    for size in ((2, 3), [4], sg.Size([2, 2]), ()):
        made = getattr(sg, name)(size=size, dtype=sg.float64)
        assert tuple(made.shape) == tuple(size) and made.dtype == sg.float64
        assert tuple(getattr(torch, name)(size=tuple(size)).shape) == tuple(size)
    if name in ("zeros", "ones"):
        np.testing.assert_array_equal(getattr(sg, name)(size=(2,)).numpy(), getattr(torch, name)(size=(2,)).numpy())


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("call", ["both", "int", "float", "negative"])
def test_factories_size_keyword_errors_are_torchs(name, call):
    arguments = {"both": ((2,), {"size": (2, 3)}), "int": ((), {"size": 3}),
                 "float": ((), {"size": (2.0,)}), "negative": ((), {"size": (2, -1)})}[call]
    same_error(lambda lib: getattr(lib, name)(*arguments[0], **arguments[1]))
