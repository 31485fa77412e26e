"""Bitwise and logical ops against PyTorch: ``&``, ``|``, ``^``, ``~``, ``<<``, ``>>`` on integer and
boolean tensors (bitwise on integers, where ``&`` once meant logical_and), with numbers on either
side, in place, the shifts' out-of-range counts, the float refusals, logical_or/xor; no gradient;
and a compiled function replays them bit for bit."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error

torch = pytest.importorskip("torch")

DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool"]


def _array(dtype: str, seed: int, shape=(3, 4)):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)


def _same(t, s):
    assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (s.dtype, t.dtype)
    assert tuple(s.shape) == tuple(t.shape)
    assert np.array_equal(s.numpy(), t.numpy())


BINARY = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}


@pytest.mark.parametrize("other", DTYPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY)
def test_binary_operators_on_tensors_as_torch(op, dtype, other):
    a, b = _array(dtype, 0), _array(other, 1, (4,))
    _same(BINARY[op](torch.tensor(a), torch.tensor(b)), BINARY[op](sg.tensor(a), sg.tensor(b)))
    name = "bitwise_" + op
    _same(getattr(torch, name)(torch.tensor(a), torch.tensor(b)), getattr(sg, name)(sg.tensor(a), sg.tensor(b)))


NUMBERS = [3, -2, True, False, 0]


@pytest.mark.parametrize("number", NUMBERS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(BINARY) + ["lshift", "rshift"])
def test_a_number_on_either_side_promotes_as_torch(op, dtype, number):
    fn = {**BINARY, "lshift": operator.lshift, "rshift": operator.rshift}[op]
    a = _array(dtype, 2)
    if op in ("lshift", "rshift"):
        a = np.abs(a.astype(np.int64)).astype(dtype) if dtype != "bool" else a
        if isinstance(number, bool) or number < 0:
            number = 2
    _same(fn(torch.tensor(a), number), fn(sg.tensor(a), number))
    if op not in ("lshift", "rshift") or (dtype != "bool" and np.all(a < 60)):
        _same(fn(number, torch.tensor(np.clip(a, 0, 8).astype(dtype))),
              fn(number, sg.tensor(np.clip(a, 0, 8).astype(dtype))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_invert_is_bitwise_on_integers_and_logical_on_bools(dtype):
    a = _array(dtype, 3)
    _same(~torch.tensor(a), ~sg.tensor(a))
    _same(torch.bitwise_not(torch.tensor(a)), sg.bitwise_not(sg.tensor(a)))
    t, s = torch.tensor(a), sg.tensor(a)
    t.bitwise_not_()
    s.bitwise_not_()
    _same(t, s)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_shifts_follow_torch_for_every_count(dtype):
    values = np.array([-8, -1, 0, 1, 5, 100], dtype=np.int64)
    values = values.astype(dtype) if dtype != "uint8" else np.abs(values).astype(dtype)
    counts = np.array([-3, -1, 0, 1, 7, 8, 31, 32, 63, 64, 70], dtype=np.int64)
    for count in counts:
        for fn in (operator.lshift, operator.rshift):
            t = fn(torch.tensor(values), torch.tensor(np.full(6, count, dtype=dtype if dtype != "uint8" else "int64")))
            s = fn(sg.tensor(values), sg.tensor(np.full(6, count, dtype=dtype if dtype != "uint8" else "int64")))
            _same(t, s)
            _same(fn(torch.tensor(values), int(count)), fn(sg.tensor(values), int(count)))


@pytest.mark.parametrize("op", ["iand", "ior", "ixor", "ilshift", "irshift"])
def test_in_place_operators_write_into_the_tensor(op):
    a, b = np.abs(_array("int64", 4)) % 7, np.abs(_array("int64", 5, (4,))) % 7
    t, s = torch.tensor(a), sg.tensor(a)
    t_id, s_id = id(t), id(s)
    t = getattr(operator, op)(t, torch.tensor(b))
    s = getattr(operator, op)(s, sg.tensor(b))
    assert id(t) == t_id and id(s) == s_id
    _same(t, s)
    t = getattr(operator, op)(t, 2)
    s = getattr(operator, op)(s, 2)
    _same(t, s)


ERRORS = {
    "float and": lambda lib: lib.ones(2) & lib.ones(2),
    "double or": lambda lib: lib.ones(2, dtype=lib.float64) | 1,
    "half xor": lambda lib: lib.ones(2, dtype=lib.float16) ^ lib.ones(2, dtype=lib.float16),
    "int and float number": lambda lib: lib.tensor([1, 2]) & 1.5,
    "float lshift": lambda lib: lib.ones(2) << 1,
    "float rshift": lambda lib: lib.ones(2) >> lib.tensor([1, 1]),
    "float bitwise_not": lambda lib: lib.bitwise_not(lib.ones(2)),
    "float invert": lambda lib: ~lib.ones(2),
    "shapes": lambda lib: lib.tensor([1, 2]) & lib.tensor([1, 2, 3]),
    "logical_or shapes": lambda lib: lib.logical_or(lib.ones(2), lib.ones(3)),
    "in place promotes": lambda lib: lib.tensor([True]).__iand__(lib.tensor([3])),
    "not a tensor": lambda lib: lib.bitwise_and([1], lib.tensor([1])),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_are_torchs(case):
    same_error(lambda lib: ERRORS[case](lib))


@pytest.mark.parametrize("fn", ["logical_or", "logical_xor"])
@pytest.mark.parametrize("dtypes", [("float64", "int64"), ("bool", "bool"), ("float32", "bool"), ("int32", "uint8")])
def test_logical_or_and_xor_give_bools_and_no_gradient(fn, dtypes):
    a = np.array([0.0, 1.5, -2.0, 0.0]).astype(dtypes[0])
    b = np.array([0, 0, 3, 1]).astype(dtypes[1])
    t_a, s_a = torch.tensor(a), sg.tensor(a)
    if a.dtype.kind == "f":
        t_a.requires_grad_(True)
        s_a.requires_grad_(True)
    t, s = getattr(torch, fn)(t_a, torch.tensor(b)), getattr(sg, fn)(s_a, sg.tensor(b))
    _same(t, s)
    assert not s.requires_grad and s.grad_fn is None and not t.requires_grad
    _same(getattr(torch.tensor(a), fn)(torch.tensor(b)), getattr(sg.tensor(a), fn)(sg.tensor(b)))


def test_a_compiled_function_replays_bitwise_ops_bit_for_bit():
    def f(a, b, w):
        bits = ((a & b) | (a ^ 3)) ^ (~b)
        mask = (bits << 2) >> 1
        keep = sg.logical_or(mask > 8, sg.logical_xor(a > 2, b > 2))
        return (w * keep.to(w.dtype)).sum() + mask.sum().to(w.dtype)

    compiled = sg.compile(f)
    w = sg.ones(3, 4, requires_grad=True)
    for seed in range(4):
        a, b = sg.tensor(np.abs(_array("int64", seed)) % 16), sg.tensor(np.abs(_array("int64", seed + 9)) % 16)
        eager, replayed = f(a, b, w), compiled(a, b, w)
        assert eager.detach().numpy().tobytes() == replayed.detach().numpy().tobytes()
    assert compiled.stats.replays >= 2
