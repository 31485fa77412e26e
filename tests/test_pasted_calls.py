"""Commonly pasted PyTorch calls whose edge cases staticgrad had wrong: subtraction with bool tensors,
reductions over no elements, mm of a vector, == None, sign of bools, min/max(other=), flip(dims=),
arange's range checks, a zero slice step. Each compares values, dtypes and errors with PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error, torch


def _same(fn):
    """``fn(lib)`` gives equal values, dtypes and shapes in both libraries (a tensor, number or tuple)."""
    expected, got = fn(torch), fn(sg)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for t, s in zip(expected, got):
        if hasattr(t, "numpy"):
            assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and tuple(s.shape) == tuple(t.shape)
            np.testing.assert_array_equal(s.numpy(), t.numpy())
        else:
            assert type(s) is type(t) and s == t


BOOL_SUBTRACTIONS = {
    "bool_minus_bool": lambda lib: lib.tensor([True, False]) - lib.tensor([True, True]),
    "int_minus_true": lambda lib: lib.tensor([1, 2]) - True,
    "true_minus_int": lambda lib: True - lib.tensor([1, 2]),
    "bool_minus_int": lambda lib: lib.tensor([True]) - 2,
    "float_minus_bool_tensor": lambda lib: lib.tensor([1.0]) - lib.tensor([True]),
    "true_minus_bool": lambda lib: True - lib.tensor([True]),
    "sub_": lambda lib: lib.tensor([1.0]).sub_(lib.tensor([True])),
    "torch_sub": lambda lib: lib.sub(lib.tensor([True]), lib.tensor([1.0]), alpha=2),
}


@pytest.mark.parametrize("name", list(BOOL_SUBTRACTIONS))
def test_subtraction_with_bools_is_refused_as_torch(name):
    same_error(BOOL_SUBTRACTIONS[name])


EMPTY_ERRORS = {
    f"{name}_{form}": (lambda lib, name=name, call=call: call(getattr(lib, name), lib))
    for name in ("amax", "amin", "argmax", "argmin")
    for form, call in (("all", lambda f, lib: f(lib.zeros(0, 3))), ("dim0", lambda f, lib: f(lib.zeros(0, 3), dim=0)),
                       ("1d", lambda f, lib: f(lib.zeros(0))))
}


@pytest.mark.parametrize("name", list(EMPTY_ERRORS))
def test_reductions_over_no_elements_refused_as_torch(name):
    same_error(EMPTY_ERRORS[name])


def test_reductions_over_no_elements_that_have_a_value():
    _same(lambda lib: lib.logsumexp(lib.zeros(0, 3), dim=0))
    _same(lambda lib: lib.logsumexp(lib.zeros(0), dim=0))
    _same(lambda lib: lib.amax(lib.zeros(0, 3), dim=1))
    _same(lambda lib: lib.argmax(lib.zeros(3, 0, 2), dim=2))


def test_mm_of_a_vector_is_refused_as_torch():
    same_error(lambda lib: lib.mm(lib.ones(3), lib.ones(3, 2)))
    same_error(lambda lib: lib.mm(lib.ones(2, 3), lib.ones(3)))


def test_equality_with_none_and_sequences_is_pythons():
    _same(lambda lib: lib.tensor([1, 2]) == None)  # noqa: E711
    _same(lambda lib: lib.tensor([1, 2]) != None)  # noqa: E711
    _same(lambda lib: lib.tensor([1, 2]) == [1, 2])
    _same(lambda lib: lib.tensor([1, 2]) != (1, 2))
    _same(lambda lib: lib.tensor([1, 2]) == lib.tensor([1, 3]))
    _same(lambda lib: lib.tensor([1, 2]) == 2)


def test_sign_of_bools_min_max_other_and_flip_dims_keyword():
    _same(lambda lib: lib.tensor([True, False]).sign())
    _same(lambda lib: lib.sign(lib.tensor([True, False])))
    _same(lambda lib: lib.min(lib.tensor([1.0, 3.0]), other=lib.tensor([2.0, 0.0])))
    _same(lambda lib: lib.max(lib.tensor([1.0, 3.0]), other=lib.tensor([2.0, 0.0])))
    _same(lambda lib: lib.arange(6.0).reshape(2, 3).flip(dims=(0, 1)))
    _same(lambda lib: lib.arange(6.0).reshape(2, 3).flip(1))
    same_error(lambda lib: lib.arange(6.0).flip())
    same_error(lambda lib: lib.arange(6.0).flip(0, dims=[0]))


@pytest.mark.parametrize("args", [(0, 5, -1), (5, 0, 1), (0, 5, 0), (0.0, 1.0, 0.0), (float("nan"),), (0, float("inf")),
                                  (0.5, float("-inf"), -1)])
def test_arange_range_checks_as_torch(args):
    same_error(lambda lib: lib.arange(*args))


def test_arange_empty_and_reversed_ranges_still_work():
    _same(lambda lib: lib.arange(0, 0, 1))
    _same(lambda lib: lib.arange(5, 0, -2))


def test_zero_and_negative_slice_steps_refused_as_torch():
    same_error(lambda lib: lib.arange(6)[::0])
    same_error(lambda lib: lib.arange(6)[::-1])


def _u8(lib, values):
    return lib.tensor(values, dtype=lib.uint8)


UINT8_INDICES = {
    "rows": lambda lib: lib.arange(12.0).reshape(3, 4)[_u8(lib, [1, 0, 2])],
    "columns": lambda lib: lib.arange(12.0).reshape(3, 4)[:, _u8(lib, [1, 0, 1, 1])],
    "zero_dim_one": lambda lib: lib.arange(12.0).reshape(3, 4)[_u8(lib, 1)],
    "zero_dim_zero": lambda lib: lib.arange(12.0).reshape(3, 4)[_u8(lib, 0)],
    "whole": lambda lib: lib.arange(12.0).reshape(3, 4)[_u8(lib, [[1, 0, 1, 1], [0, 0, 0, 1], [1, 1, 1, 1]])],
}


@pytest.mark.parametrize("name", list(UINT8_INDICES))
def test_a_uint8_index_is_a_mask_with_a_warning_as_torch(name):
    """PyTorch reads a uint8 index tensor as a mask of its nonzero elements (deprecated, with a warning);
    staticgrad took its values as indices."""
    with pytest.warns(UserWarning, match="indexing with dtype .*uint8 is now deprecated"):
        _same(UINT8_INDICES[name])


MASK_MISMATCHES = {
    "rows": lambda lib: lib.arange(12.0).reshape(3, 4)[lib.tensor([True, False])],
    "second_dim": lambda lib: lib.arange(24.0).reshape(2, 3, 4)[:, lib.tensor([True, False])],
    "after_an_int": lambda lib: lib.arange(24.0).reshape(2, 3, 4)[0, :, lib.tensor([True, False])],
    "two_dims": lambda lib: lib.arange(24.0).reshape(2, 3, 4)[lib.ones(2, 4, dtype=lib.bool)],
    "uint8": lambda lib: lib.arange(4)[_u8(lib, [3])],
}


@pytest.mark.parametrize("name", list(MASK_MISMATCHES))
def test_mask_of_the_wrong_shape_raises_torchs_error(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(MASK_MISMATCHES[name])


def test_a_leafs_node_names_itself_as_torchs():
    names = []
    for lib in (torch, sg):
        node = (lib.ones(2, requires_grad=True) * 2).grad_fn.next_functions[0][0]
        names.append((node.name(), type(node).__name__))
    assert names[1] == names[0] == ("torch::autograd::AccumulateGrad", "AccumulateGrad")


GATHERS = {
    "past_the_end": lambda lib: lib.arange(12.0).reshape(3, 4).gather(1, lib.tensor([[0], [1], [4]])),
    "negative": lambda lib: lib.arange(12.0).reshape(3, 4).gather(1, lib.tensor([[0], [1], [-1]])),
    "rows": lambda lib: lib.arange(12.0).reshape(3, 4).gather(0, lib.tensor([[5]])),
    "float_index": lambda lib: lib.arange(12.0).reshape(3, 4).gather(1, lib.tensor([[0.0]])),
    "uint8_index": lambda lib: lib.arange(12.0).reshape(3, 4).gather(1, lib.tensor([[0]], dtype=lib.uint8)),
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_gather_refuses_indices_as_torch(name):
    """Out-of-range indices (a negative one too, which NumPy would have wrapped around) and non-integer ones."""
    same_error(GATHERS[name])


def test_gather_in_range_and_int32_indices():
    _same(lambda lib: lib.arange(12.0).reshape(3, 4).gather(1, lib.tensor([[0], [1], [3]])))
    _same(lambda lib: lib.arange(12.0).reshape(3, 4).gather(0, lib.tensor([[2, 0, 1, 2]], dtype=lib.int32)))


SOFTMAX_OF_INTEGERS = {
    "softmax_last": lambda lib: lib.arange(6).reshape(2, 3).softmax(1),
    "softmax_first": lambda lib: lib.arange(6).reshape(2, 3).softmax(0),
    "softmax_negative_dim": lambda lib: lib.arange(6).reshape(2, 3).softmax(-1),
    "log_softmax_last": lambda lib: lib.arange(6).reshape(2, 3).log_softmax(1),
    "log_softmax_first": lambda lib: lib.arange(6).reshape(2, 3).log_softmax(0),
    "int32": lambda lib: lib.arange(6, dtype=lib.int32).softmax(0),
    "bool": lambda lib: lib.tensor([True]).softmax(0),
    "zero_dim": lambda lib: lib.tensor(3).softmax(0),
    "functional": lambda lib: lib.nn.functional.softmax(lib.arange(6), dim=0),
}


@pytest.mark.parametrize("name", list(SOFTMAX_OF_INTEGERS))
def test_softmax_of_integers_is_refused_as_torch(name):
    same_error(SOFTMAX_OF_INTEGERS[name])


def test_softmax_of_integers_cast_by_dtype_runs():
    np.testing.assert_allclose(sg.arange(6).softmax(0, dtype=sg.float32).numpy(),
                               torch.arange(6).softmax(0, dtype=torch.float32).numpy(), rtol=1e-6)


OUT_OF_RANGE_NUMBERS = {
    "uint8_plus_negative": lambda lib: lib.tensor([1, 2, 3], dtype=lib.uint8) + -3,
    "negative_plus_uint8": lambda lib: -3 + lib.tensor([1, 2, 3], dtype=lib.uint8),
    "uint8_minus_negative": lambda lib: lib.tensor([1, 2, 3], dtype=lib.uint8) - -3,
    "negative_minus_uint8": lambda lib: -3 - lib.tensor([1, 2, 3], dtype=lib.uint8),
    "uint8_times_negative": lambda lib: lib.tensor([1, 2, 3], dtype=lib.uint8) * -3,
    "uint8_floordiv_negative": lambda lib: lib.tensor([1, 2, 3], dtype=lib.uint8) // -3,
    "negative_floordiv_uint8": lambda lib: -3 // lib.tensor([1, 2, 3], dtype=lib.uint8),
    "uint8_mod_negative": lambda lib: lib.tensor([1, 2, 3], dtype=lib.uint8) % -3,
    "negative_mod_uint8": lambda lib: -3 % lib.tensor([1, 2, 3], dtype=lib.uint8),
    "int8_plus_200": lambda lib: lib.tensor([1, -2], dtype=lib.int8) + 200,
    "uint8_in_place": lambda lib: lib.tensor([1, 2], dtype=lib.uint8).add_(-1).mul_(300),
}


@pytest.mark.parametrize("name", list(OUT_OF_RANGE_NUMBERS))
def test_a_number_outside_an_integer_dtype_wraps_as_torch(name):
    _same(OUT_OF_RANGE_NUMBERS[name])


# ---- bool tensors with Python bools: + and ** stay bool ------------------------------------------

BOOL_WITH_PYTHON_BOOLS = {
    "plus_true": lambda lib: lib.tensor([True, False]) + True,
    "plus_false": lambda lib: lib.tensor([True, False]) + False,
    "true_plus": lambda lib: True + lib.tensor([True, False]),
    "add_alpha_true": lambda lib: lib.add(lib.tensor([True, False]), True, alpha=True),
    "add_in_place": lambda lib: lib.tensor([False, False]).add_(True),
    "pow_true": lambda lib: lib.tensor([True, False]) ** True,
    "pow_false": lambda lib: lib.tensor([True, False]).pow(False),
    "pow_two_is_int": lambda lib: lib.tensor([True, False]) ** 2,
    "plus_one_is_int": lambda lib: lib.tensor([True, False]) + 1,
    "int_plus_true": lambda lib: lib.tensor([1, 2]) + True,
}


@pytest.mark.parametrize("case", list(BOOL_WITH_PYTHON_BOOLS))
def test_bool_tensors_with_python_bools_keep_pytorch_dtypes(case):
    """A bool tensor plus (or to the power of) a Python bool is a bool tensor in PyTorch (a logical or);
    staticgrad gave int64 (True + True = 2) or int8."""
    _same(BOOL_WITH_PYTHON_BOOLS[case])


def test_a_python_bool_base_to_a_bool_tensor_power_is_refused_as_pytorch():
    same_error(lambda lib: lib.pow(True, lib.tensor([True, False])))


@pytest.mark.parametrize("values", [[True, False], [True, True], [[True], [False]], [False], True])
def test_bool_tensors_print_as_pytorch(values):
    """PyTorch right-aligns bools to the widest shown: tensor([ True, False])."""
    assert repr(sg.tensor(values)) == repr(torch.tensor(values))


INTS_WITH_BOOL_TENSORS = {
    "int_floor_divided_by_bools": lambda lib: 2 // lib.tensor([True, True]),
    "int_modulo_bools": lambda lib: 3 % lib.tensor([True]),
    "where_int_else_bools": lambda lib: lib.where(lib.tensor([True, False]), 2, lib.tensor([True, False])),
    "where_bools_else_int": lambda lib: lib.where(lib.tensor([True, False]), lib.tensor([True, False]), 3),
}


@pytest.mark.parametrize("case", list(INTS_WITH_BOOL_TENSORS))
def test_python_ints_with_bool_tensors_promote_to_int64(case):
    """A Python int wrapped next to a bool tensor is an int64 number, as PyTorch wraps it: where(b, 2, b)
    gave bools (2 made True) and 2 // bool_tensor refused a bool kernel."""
    _same(INTS_WITH_BOOL_TENSORS[case])
