"""Casts and integer division: floor_divide, remainder, fmod, div's rounding modes, ``//`` and ``%``,
PyTorch's integer ``**``, ``Tensor.type``, ``.to`` and ``.view(dtype)``: values, dtypes, gradients and
node names against PyTorch (float64 and float32, integer dtypes), PyTorch's errors, and compiled
functions using them (the float forms fused) equal to eager bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 4)) * 5
B = RNG.standard_normal((3, 4)) * 2 + np.sign(RNG.standard_normal((3, 4))) * 0.5
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 7.5, -7.5, 4.0, -4.0, 1e300, 3.0])
SPECIAL_OTHER = np.array([2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, 2.0, -2.0, -2.0, 2.0, 1e-300, 0.0])
INTS = np.array([[7, -7, 5, -5, 0, 3], [2, 9, -9, 1, -1, 8]], dtype=np.int32)
INT_DIVISORS = np.array([[2, 2, -3, -3, 4, 1], [-1, 4, 4, -2, 3, -5]], dtype=np.int32)

FLOAT_BINARY = [
    ("floor_divide", lambda lib, a, b: lib.floor_divide(a, b)),
    ("floordiv_operator", lambda lib, a, b: a // b),
    ("floordiv_scalar", lambda lib, a, b: a // 1.5),
    ("rfloordiv_scalar", lambda lib, a, b: 2.5 // b),
    ("remainder", lambda lib, a, b: lib.remainder(a, b)),
    ("mod_operator", lambda lib, a, b: a % b),
    ("mod_scalar", lambda lib, a, b: a % -1.5),
    ("rmod_scalar", lambda lib, a, b: 2.5 % b),
    ("remainder_method", lambda lib, a, b: a.remainder(b)),
    ("fmod", lambda lib, a, b: lib.fmod(a, b)),
    ("fmod_scalar", lambda lib, a, b: a.fmod(-1.5)),
    ("div_floor", lambda lib, a, b: lib.div(a, b, rounding_mode="floor")),
    ("div_trunc", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc")),
    ("div_trunc_scalar", lambda lib, a, b: a.div(2.5, rounding_mode="trunc")),
    ("div_floor_number_first", lambda lib, a, b: lib.div(3.0, b, rounding_mode="floor")),
]


@pytest.mark.parametrize("fn", [c[1] for c in FLOAT_BINARY], ids=[c[0] for c in FLOAT_BINARY])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_division_matches_torch_bit_for_bit(fn, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for a, b in ((A, B), (SPECIAL, SPECIAL_OTHER)):
            t = fn(torch, torch.tensor(a.astype(dtype)), torch.tensor(b.astype(dtype)))
            s = fn(sg, sg.tensor(a.astype(dtype)), sg.tensor(b.astype(dtype)))
            assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
            np.testing.assert_array_equal(s.numpy(), t.numpy())   # NaN where torch has NaN
            assert np.array_equal(np.signbit(s.numpy()), np.signbit(t.numpy())) or np.isnan(t.numpy()).any()


DIFFERENTIABLE = [c for c in FLOAT_BINARY if c[0].startswith(("remainder", "mod", "fmod", "div"))]


@pytest.mark.parametrize("fn", [c[1] for c in DIFFERENTIABLE], ids=[c[0] for c in DIFFERENTIABLE])
def test_gradients_and_node_names_match_torch(fn):
    compare(fn, [A, B], atol=1e-12, rtol=1e-10, double=True)


@pytest.mark.parametrize("fn", [lambda a, b: sg.remainder(a, b), lambda a, b: sg.fmod(a, b), lambda a, b: a % 1.7],
                         ids=["remainder", "fmod", "mod_scalar"])
def test_gradients_match_finite_differences(fn):
    finite_difference_check(fn, [A, B], eps=1e-7)


@pytest.mark.parametrize("fn", [lambda x: x // 2.0, lambda x: 3.0 // x, lambda x: x // x, lambda x: 2.5 % x],
                         ids=["floordiv", "rfloordiv", "floordiv_tensors", "rmod"])
def test_ops_without_derivative_have_torch_not_implemented_node(fn):
    for lib in (torch, sg):
        y = fn(lib.tensor([7.0, -7.0], requires_grad=True))
        assert y.grad_fn.name() == "torch::autograd::NotImplemented"
    same_error(lambda lib: fn(lib.tensor([7.0, -7.0], requires_grad=True)).sum().backward())


INTEGER = [
    ("floor_divide", lambda lib, a, b: lib.floor_divide(a, b)),
    ("floordiv_operator", lambda lib, a, b: a // b),
    ("floordiv_scalar", lambda lib, a, b: a // 2),
    ("floordiv_float_scalar", lambda lib, a, b: a // 2.5),
    ("rfloordiv", lambda lib, a, b: 7 // b),
    ("rfloordiv_float", lambda lib, a, b: 7.5 // b),
    ("remainder", lambda lib, a, b: a % b),
    ("remainder_scalar", lambda lib, a, b: lib.remainder(a, -3)),
    ("rmod", lambda lib, a, b: 7 % b),
    ("fmod", lambda lib, a, b: lib.fmod(a, b)),
    ("div_floor", lambda lib, a, b: lib.div(a, b, rounding_mode="floor")),
    ("div_trunc", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc")),
    ("div_trunc_scalar", lambda lib, a, b: lib.div(a, -2, rounding_mode="trunc")),
    ("mixed_widths", lambda lib, a, b: a.to(lib.int8) // b.to(lib.int16)),
    ("int_with_float_tensor", lambda lib, a, b: a % b.to(lib.float32)),
    ("pow_int", lambda lib, a, b: a ** 3),
    ("pow_int_zero", lambda lib, a, b: a ** 0),
    ("pow_int_float", lambda lib, a, b: a ** 0.5),
    ("pow_int_negative_float", lambda lib, a, b: lib.pow(a, -1.0)),
    ("pow_tensors_negative", lambda lib, a, b: a ** b),
    ("pow_int8_wraps", lambda lib, a, b: a.to(lib.int8) ** 7),
    ("rpow_int", lambda lib, a, b: 2 ** b),
    ("rpow_negative_base", lambda lib, a, b: (-1) ** b),
    ("rpow_zero_base", lambda lib, a, b: 0 ** b),
    ("rpow_float", lambda lib, a, b: 2.5 ** b),
    ("pow_bool", lambda lib, a, b: (a > 0) ** 2),
    ("pow_int_tensor_float_exponent", lambda lib, a, b: a ** lib.tensor(2.5)),
]


@pytest.mark.parametrize("fn", [c[1] for c in INTEGER], ids=[c[0] for c in INTEGER])
def test_integer_arithmetic_matches_torch(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        compare(fn, [INTS, INT_DIVISORS], grad=False, atol=0, rtol=1e-6)


def test_integer_overflow_wraps_like_torch():
    for lib_fn in (lambda lib: lib.tensor([2 ** 63 - 1, -2 ** 63]) // -1,
                   lambda lib: lib.tensor([-128], dtype=lib.int8) // -1,
                   lambda lib: lib.tensor([-2 ** 63]) % -1,
                   lambda lib: lib.tensor([2, 3]) ** 62):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert lib_fn(sg).tolist() == lib_fn(torch).tolist()


ERRORS = [
    ("floordiv_int_zero", lambda lib: lib.tensor([7, -7]) // 0),
    ("floordiv_int_zero_tensor", lambda lib: lib.tensor([7, -7]) // lib.tensor([1, 0])),
    ("mod_int_zero", lambda lib: lib.tensor([7, -7]) % 0),
    ("fmod_int_zero", lambda lib: lib.fmod(lib.tensor([7, -7]), 0)),
    ("rmod_int_zero", lambda lib: 7 % lib.tensor([1, 0])),
    ("div_trunc_int_zero", lambda lib: lib.div(lib.tensor([3]), 0, rounding_mode="trunc")),
    ("div_bad_mode", lambda lib: lib.div(lib.tensor([3.0]), 2, rounding_mode="round")),
    ("floordiv_bool", lambda lib: lib.tensor([True]) // lib.tensor([True])),
    ("mod_bool", lambda lib: lib.tensor([True]) % lib.tensor([True])),
    ("pow_negative_int", lambda lib: lib.tensor([1, 2]) ** -1),
    ("pow_negative_int_function", lambda lib: lib.pow(lib.tensor([1, 2]), -2)),
    ("pow_bool_negative", lambda lib: lib.tensor([True]) ** -2),
    ("fmod_number_first", lambda lib: lib.fmod(7, lib.tensor([1, 2]))),
    ("floordiv_shapes", lambda lib: lib.ones(2, 3) // lib.ones(4)),
    ("type_bad_name", lambda lib: lib.ones(2).type("foo")),
    ("type_python_float", lambda lib: lib.ones(2).type(float)),
    ("type_cuda", lambda lib: lib.ones(2).type("torch.cuda.FloatTensor")),
    ("to_cuda", lambda lib: lib.ones(2).to("cuda")),
    ("to_bad_device", lambda lib: lib.ones(2).to("foo")),
    ("to_ordinal", lambda lib: lib.ones(2).to(3)),
    ("view_wider_size", lambda lib: lib.ones(2, 3).view(lib.float64)),
    ("view_wider_stride", lambda lib: lib.ones(2, 3)[:, :2].view(lib.float64)),
    ("view_wider_offset", lambda lib: lib.ones(2, 3)[:, 1:].view(lib.float64)),
    ("view_narrower_last_stride", lambda lib: lib.ones(2, 3).t().view(lib.int16)),
    ("view_zero_dim", lambda lib: lib.tensor(1.0).view(lib.int16)),
]


@pytest.mark.parametrize("fn", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_match_torch(fn):
    same_error(fn)


def test_messages_that_name_torch_types_match_torch():
    for call in (lambda lib: lib.ones(2).type("torch.float64"), lambda lib: lib.ones(2).to(lib.float64, lib.float32)):
        with pytest.raises(Exception) as t_info:
            call(torch)
        with pytest.raises(type(t_info.value)) as s_info:
            call(sg)
        assert str(s_info.value).split("\n")[0] == str(t_info.value).split("\n")[0]


# ---- casts ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                                   "bool"])
def test_type_without_argument_names_the_tensor_type_like_torch(dtype):
    data = np.array([1, 0, 2])
    t, s = torch.tensor(data).to(getattr(torch, dtype)), sg.tensor(data).to(getattr(sg, dtype))
    assert s.type() == t.type()
    assert s.type(t.type()).dtype == s.dtype and s.type(t.type()) is s


CASTS = [
    ("type_dtype", lambda lib, x: x.type(lib.int32)),
    ("type_string", lambda lib, x: x.type("torch.DoubleTensor")),
    ("type_keyword", lambda lib, x: x.type(dtype=lib.float32)),
    ("to_dtype", lambda lib, x: x.to(lib.float32)),
    ("to_keyword", lambda lib, x: x.to(dtype=lib.int64)),
    ("to_other_tensor", lambda lib, x: x.to(lib.ones(1, dtype=lib.int8))),
    ("to_device_dtype", lambda lib, x: x.to("cpu", lib.float32)),
    ("to_device_keyword_dtype", lambda lib, x: x.to("cpu", dtype=lib.int16)),
    ("to_device_object", lambda lib, x: x.to(lib.device("cpu"), lib.int32)),
    ("to_python_float", lambda lib, x: x.to(lib.float32).to(float)),
    ("to_python_int", lambda lib, x: x.to(int)),
    ("to_copy", lambda lib, x: x.to(lib.float64, copy=True)),
    ("to_non_blocking", lambda lib, x: x.to(lib.float32, non_blocking=True)),
    ("to_nothing", lambda lib, x: x.to("cpu")),
    ("view_int32", lambda lib, x: x.to(lib.float32).view(lib.int32)),
    ("view_int16", lambda lib, x: x.to(lib.float32).view(lib.int16)),
    ("view_uint8", lambda lib, x: x.view(lib.uint8)),
    ("view_keyword", lambda lib, x: x.view(dtype=lib.int64)),
    ("view_float32_as_float64", lambda lib, x: x.to(lib.float32).view(lib.float64)),
    ("view_transposed_same_size", lambda lib, x: x.t().view(lib.int64)),
    ("view_bool_uint8", lambda lib, x: (x > 0).view(lib.uint8)),
    ("view_same_dtype", lambda lib, x: x.view(lib.float64)),
]


@pytest.mark.parametrize("fn", [c[1] for c in CASTS], ids=[c[0] for c in CASTS])
def test_casts_match_torch(fn):
    x = np.array([[1.5, -2.5, 3.0, 4.25], [0.0, -0.0, 1e10, -7.0]])
    compare(fn, [x], atol=0, rtol=0)


def test_to_and_type_return_the_tensor_itself_when_nothing_changes():
    x = sg.ones(2)
    assert x.to(sg.float32) is x and x.to("cpu") is x and x.type(sg.float32) is x
    assert x.to(sg.float32, copy=True) is not x


def test_view_dtype_shares_memory_and_version_without_gradient():
    for lib in (torch, sg):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.view(lib.int32)
        assert not y.requires_grad and y.grad_fn is None
    x = sg.tensor([1.0, 2.0])
    y = x.view(sg.int32)
    x.add_(1.0)
    assert y.tolist() == sg.tensor([2.0, 3.0]).view(sg.int32).tolist() and y._version == x._version


# ---- traced and replayed ----------------------------------------------------------------------------------

def _fused_ops(compiled) -> set:
    plan = next(p for p in compiled.plans if p.replayable)
    names = set()
    for op in plan.graph.ops:
        if op.op == "fused":
            for loop in op.attr_dict["kernel"].loops:
                names |= {name for name, _, _ in loop.body}
    return names


FUSED = [
    ("floor_divide", lambda x, y: (x * 3.0) // (y + 0.5), {"floor_divide"}),
    ("floor_divide_scalar", lambda x, y: (x * 3.0) // 0.7 + y, {"floor_divide_scalar"}),
    ("remainder", lambda x, y: (x * 3.0) % (y + 0.5), {"remainder"}),
    ("remainder_scalar", lambda x, y: (x * 3.0) % -0.7 + y, {"remainder_scalar"}),
    ("fmod", lambda x, y: sg.fmod(x * 3.0, y + 0.5), {"fmod"}),
    ("div_floor", lambda x, y: sg.div(x * 3.0, y + 0.5, rounding_mode="floor"), {"div_mode"}),
    ("div_trunc_scalar", lambda x, y: sg.div(x * 3.0, 0.7, rounding_mode="trunc") - y, {"div_mode_scalar"}),
]


@pytest.mark.parametrize("fn, fused", [c[1:] for c in FUSED], ids=[c[0] for c in FUSED])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_replay_equals_eager_bit_for_bit(fn, fused, dtype):
    compiled = sg.compile(fn)
    rng = np.random.default_rng(11)
    for _ in range(4):
        x, y = (rng.standard_normal((6, 7)).astype(dtype) for _ in range(2))
        x[0, :3] = [0.0, -0.0, np.inf]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected, got = fn(sg.tensor(x), sg.tensor(y)), compiled(sg.tensor(x), sg.tensor(y))
        assert got.numpy().tobytes() == expected.numpy().tobytes()
    assert compiled.stats.replays >= 2
    assert fused <= _fused_ops(compiled), "the op joins a fused kernel"


def _step_replays_eager(fn, make_input, backward=True, calls=4):
    """fn(x, p) with a captured parameter p, forward and backward compiled, equals eager."""
    start = np.random.default_rng(2).standard_normal((3, 4))
    p_eager, p_comp = sg.tensor(start.copy(), requires_grad=True), sg.tensor(start.copy(), requires_grad=True)

    def step_for(p):
        def step(x):
            out = fn(x, p)
            if backward:
                (out * out).sum().backward()
            return out.detach()
        return step

    eager, compiled = step_for(p_eager), sg.compile(step_for(p_comp))
    rng = np.random.default_rng(4)
    for _ in range(calls):
        x = make_input(rng)
        p_eager.grad = p_comp.grad = None
        expected, got = eager(sg.tensor(x)), compiled(sg.tensor(x))
        assert got.dtype == expected.dtype and got.numpy().tobytes() == expected.numpy().tobytes()
        if backward:
            assert p_comp.grad.numpy().tobytes() == p_eager.grad.numpy().tobytes()
    assert compiled.stats.replays >= calls - 2


def _floats(rng):
    return rng.standard_normal((3, 4)) * 4


def _ints(rng):
    return rng.integers(-20, 20, (3, 4))


STEPS = [
    ("remainder_grad", lambda x, p: sg.remainder(x, p + 3.0) * p, _floats, True),
    ("fmod_grad", lambda x, p: sg.fmod(x * p, 1.3), _floats, True),
    ("div_floor_grad", lambda x, p: sg.div(x, p + 3.0, rounding_mode="floor") + p, _floats, True),
    ("int_floordiv", lambda x, p: (x // 3) * 2 + x % -4, _ints, False),
    ("int_trunc", lambda x, p: sg.div(x, 3, rounding_mode="trunc") - sg.fmod(x, 5), _ints, False),
    ("int_pow", lambda x, p: x ** 2 + 2 ** (x % 5) + x ** (x % 3), _ints, False),
    ("cast_chain", lambda x, p: (x * p).to(sg.float32).type(sg.float64).to("cpu", sg.int32).to(p), _floats, False),
    ("type_cast_grad", lambda x, p: (x * p).type(sg.float32).to(dtype=sg.float64), _floats, True),
    ("view_dtype", lambda x, p: (x * 2.0).view(sg.int64) // 7, _floats, False),
    ("view_dtype_narrow", lambda x, p: (x * 2.0).to(sg.float32).view(sg.int16) % 9, _floats, False),
]


@pytest.mark.parametrize("fn, make_input, backward", [c[1:] for c in STEPS], ids=[c[0] for c in STEPS])
def test_compiled_step_replays_eager(fn, make_input, backward):
    _step_replays_eager(fn, make_input, backward)
