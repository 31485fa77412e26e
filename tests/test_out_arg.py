"""PyTorch's out= keyword: values, dtypes, resizing, version counters, autograd refusals and memory
overlap, each against PyTorch; and out= inside a compiled function."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch

import staticgrad as sg
from staticgrad._eager.out_arg import FAMILIES, ORDER_DEPENDENT

A = (np.arange(1, 17, dtype=np.float32).reshape(4, 4) / 20 + 0.05)   # in (0, 1): every domain holds
B = A[::-1].copy()
INDEX = np.array([[3, 2, 1, 0], [0, 1, 2, 3], [1, 1, 2, 2], [3, 3, 0, 0]])

SPECIAL = {   # public name -> arguments from (lib, a, b): the rest take (a,) or (a, b)
    "acosh": lambda L, a, b: (a + 1,),
    "clamp": lambda L, a, b: (a, 0.2, 0.6),
    "where": lambda L, a, b: (a > 0.4, a, b),
    "lerp": lambda L, a, b: (a, b, 0.3),
    "addcmul": lambda L, a, b: (a, a, b), "addcdiv": lambda L, a, b: (a, a, b), "addmm": lambda L, a, b: (a, a, b),
    "cumsum": lambda L, a, b: (a, 0), "cumprod": lambda L, a, b: (a, 1), "logcumsumexp": lambda L, a, b: (a, 0),
    "gather": lambda L, a, b: (a, 1, L.tensor(INDEX)), "take_along_dim": lambda L, a, b: (a, L.tensor(INDEX), 1),
    "index_select": lambda L, a, b: (a, 0, L.tensor([3, 1, 2, 0])),
    "cat": lambda L, a, b: ([a[:1], a[1:]],), "stack": lambda L, a, b: ([a[0], a[1], a[2], a[3]],),
    "vstack": lambda L, a, b: ([a[:2], a[2:]],), "hstack": lambda L, a, b: ([a[:, :1], a[:, 1:]],),
    "outer": lambda L, a, b: (a[0], a[1]), "mv": lambda L, a, b: (a, b[0]), "dot": lambda L, a, b: (a[0], b[0]),
    "diff": lambda L, a, b: (a,), "cross": lambda L, a, b: (a[:3], b[:3], 0), "kron": lambda L, a, b: (a[:2, :2], b),
    "bmm": lambda L, a, b: (a.reshape(2, 2, 4), b.reshape(2, 4, 2)),
    **{name: (lambda L, a, b: (a, 0)) for name in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "nansum",
                                                   "nanmean", "std", "var")},
    "all": lambda L, a, b: (a > 0.3, 0), "any": lambda L, a, b: (a > 0.3, 1),
}
BINARY = {"add", "sub", "mul", "div", "atan2", "copysign", "eq", "ge", "gt", "le", "lt", "ne", "fmax", "fmin", "fmod",
          "hypot", "logaddexp", "logaddexp2", "logical_and", "logical_or", "logical_xor", "maximum", "minimum",
          "nextafter", "pow", "remainder", "floor_divide", "heaviside", "xlogy", "matmul", "mm"}


def _args(name, lib, a, b):
    if name in SPECIAL:
        return SPECIAL[name](lib, a, b)
    return (a, b) if name in BINARY else (a,)


def _both(name, make_out):
    """(staticgrad's result or error, torch's) of ``name`` with out made by make_out(lib, a, b, expected)."""
    results = []
    for lib in (sg, torch):
        a, b = lib.tensor(A.copy()), lib.tensor(B.copy())
        fn = getattr(lib, name)
        expected = fn(*_args(name, lib, a.clone(), b.clone()))
        out = make_out(lib, a, b, expected)
        try:
            returned = fn(*_args(name, lib, a, b), out=out)
            results.append(("ok", returned is out, out.detach().numpy().copy()))
        except RuntimeError as exc:
            results.append(("error", str(exc)))
    return results


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_out_of_the_result_s_shape_gets_torch_s_values_and_is_returned(name):
    mine, theirs = _both(name, lambda lib, a, b, expected: lib.empty(expected.shape, dtype=expected.dtype))
    assert mine[0] == theirs[0] == "ok" and mine[1] and theirs[1]
    assert mine[2].dtype == theirs[2].dtype
    np.testing.assert_allclose(mine[2], theirs[2], rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(n for n, f in FAMILIES.items() if f != ORDER_DEPENDENT))
@pytest.mark.parametrize("overlap", ["partial", "full", "elsewhere"])
def test_an_out_sharing_memory_with_an_input_is_judged_as_torch_judges_it(name, overlap):
    """partial: out is the first input transposed (or shifted); full: the first input itself;
    elsewhere: another part of the first input's memory than the one it reads."""
    def make_out(lib, a, b, expected):
        n = expected.numel()
        flat = a.reshape(-1)
        if overlap == "full" and tuple(expected.shape) == tuple(a.shape):
            return a
        if overlap == "partial" and tuple(expected.shape) == (4, 4):
            return a.t()
        if overlap == "partial":
            return flat[1:n + 1].reshape(expected.shape) if n < 16 else lib.empty(expected.shape)
        return lib.empty(expected.shape, dtype=expected.dtype)
    mine, theirs = _both(name, make_out)
    assert mine[0] == theirs[0], (mine, theirs)
    if mine[0] == "error":
        assert mine[1] == theirs[1]
    else:
        np.testing.assert_allclose(mine[2], theirs[2], rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(n for n, f in FAMILIES.items() if f == ORDER_DEPENDENT))
def test_an_order_dependent_op_refuses_an_out_over_its_input(name):
    memory = sg.zeros(64)   # the input's memory and more: the out starts where the input does
    a, b = memory[:16].reshape(4, 4), sg.tensor(B.copy())
    a.copy_(sg.tensor(A))
    expected = getattr(sg, name)(*_args(name, sg, a, b))
    if expected.dtype == sg.bool:
        pytest.skip("its input is a comparison's fresh result: an out cannot share its memory")
    out = memory[:expected.numel()].reshape(expected.shape)
    with pytest.raises(RuntimeError, match=rf"staticgrad's {name}\(out=...\) does not take an out that shares memory"):
        getattr(sg, name)(*_args(name, sg, a, b), out=out)
    assert np.array_equal(a.numpy(), A)   # nothing written


@pytest.mark.parametrize("lib", [sg, torch], ids=["staticgrad", "torch"])
def test_an_expanded_out_is_refused(lib):
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        lib.add(lib.ones(4), 1, out=lib.zeros(1).expand(4))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        lib.add(lib.ones(4, 4), 1, out=lib.zeros(4, 1).expand(4, 4))


def test_version_dtype_and_refusals_as_torch():
    for lib in (sg, torch):
        out = lib.zeros(3, dtype=lib.float64)
        assert lib.add(lib.ones(3), 1, out=out) is out and out._version == 1 and out.dtype == lib.float64
        assert out.tolist() == [2.0, 2.0, 2.0]
        assert lib.eq(lib.ones(3), 1, out=lib.zeros(3)).tolist() == [1.0, 1.0, 1.0]   # bool into float
    messages = []
    for lib in (sg, torch):
        errors = []
        for call in (lambda lib=lib: lib.add(lib.ones(3), 1.5, out=lib.zeros(3, dtype=lib.int64)),
                     lambda lib=lib: lib.exp(lib.ones(3, requires_grad=True), out=lib.zeros(3)),
                     lambda lib=lib: lib.add(lib.ones(3), 1, out=lib.zeros(3, requires_grad=True)),
                     lambda lib=lib: lib.sum(lib.ones(3, requires_grad=True), 0, out=lib.zeros(()))):
            with pytest.raises(RuntimeError) as info:
                call()
            errors.append(str(info.value))
        with pytest.raises(TypeError) as info:
            lib.add(lib.ones(3), 1, out=[1])
        errors.append(str(info.value))
        with lib.no_grad():   # no graph is asked for: allowed
            out = lib.zeros(3)
            lib.mul(lib.ones(3, requires_grad=True), 2, out=out)
            assert out.tolist() == [2.0, 2.0, 2.0] and not out.requires_grad
        messages.append(errors)
    assert messages[0] == messages[1]


def test_an_out_of_another_shape_is_resized_as_torch_resizes_it():
    for lib in (sg, torch):
        empty = lib.empty(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lib.add(lib.ones(2, 3), 1, out=empty)   # empty: resized without a word
        assert tuple(empty.shape) == (2, 3) and empty.tolist() == [[2.0] * 3] * 2
    texts = []
    for lib in (sg, torch):
        out = lib.zeros(5)
        with pytest.warns(UserWarning) as caught:
            lib.mul(lib.ones(2, 2), 3, out=out)
        assert tuple(out.shape) == (2, 2) and out.tolist() == [[3.0, 3.0]] * 2
        texts.append(str(caught[0].message))
    assert texts[1].startswith(texts[0])   # PyTorch's adds where in its C++ it warned
    with pytest.raises(RuntimeError, match=r"staticgrad's add\(out=...\) cannot resize a view"):
        sg.add(sg.ones(2, 3), 1, out=sg.zeros(4, 4)[:2])


def test_functions_keep_their_names_and_run_as_before_without_out():
    assert sg.add.__name__ == "add" and sg.sum.__name__ == "sum"
    assert pickle.loads(pickle.dumps(sg.add)) is sg.add and pickle.loads(pickle.dumps(sg.exp)) is sg.exp
    assert sg.add(sg.ones(2), 1).tolist() == [2.0, 2.0]
    x = sg.ones(3, requires_grad=True)
    sg.exp(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(np.ones(3, np.float32)))


def test_out_inside_a_compiled_function_replays_eager_bits():
    def step(x, buffer):
        sg.mul(x, 3, out=buffer)
        sg.add(buffer, x, out=buffer)
        return sg.exp(buffer, out=sg.empty(x.shape)) * 2

    compiled = sg.compile(step)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = sg.tensor(rng.standard_normal((3, 5)).astype(np.float32))
        eager_buffer, compiled_buffer = sg.zeros(3, 5), sg.zeros(3, 5)
        expected = step(x, eager_buffer)
        got = compiled(x, compiled_buffer)
        assert got.numpy().tobytes() == expected.numpy().tobytes()
        assert compiled_buffer.numpy().tobytes() == eager_buffer.numpy().tobytes()
    assert compiled.stats.replays >= 2


def test_an_out_resized_inside_a_compiled_function_is_refused():
    def f(x, buffer):
        sg.add(x, 1, out=buffer)
        return buffer * 2

    with pytest.raises(sg.TraceError, match=r"add\(out=...\) resizes its out tensor"):
        sg.compile(f)(sg.ones(2, 3), sg.empty(0))
