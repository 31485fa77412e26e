"""PyTorch's bitwise and logical functions and operators over the op table: ``&``, ``|``, ``^``, ``~``,
``<<``, ``>>`` (and their in-place and reflected forms), ``bitwise_and/or/xor/not``, the shifts,
``logical_or`` and ``logical_xor``. On integer tensors ``&`` is bitwise (``3 & 5 == 1``), on boolean
ones logical, as in PyTorch; a Python number operand takes part in type promotion."""

from __future__ import annotations

import numpy as np

from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.functions import as_scalar, is_scalar, require_tensor
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes

_COMMUTATIVE = ("bitwise_and", "bitwise_or", "bitwise_xor")


def _invalid_arguments(name: str, input, other) -> TypeError:
    return TypeError(f"{name}() received an invalid combination of arguments - got ({type(input).__name__}, "
                     f"{type(other).__name__}), but expected one of:")


def _binary(name: str, input, other):
    """``name`` on (tensor, tensor), (tensor, number) or (number, tensor); a number takes part in
    type promotion as a Python number (``3 & bool_tensor`` is int64, ``3 & uint8_tensor`` uint8)."""
    if isinstance(input, Tensor):
        if isinstance(other, Tensor):
            return dispatch(OPS[name], (input, other), {})
        if not is_scalar(other):
            raise _invalid_arguments(name, input, other)
        return dispatch(OPS[name + "_scalar"], (input,), {"other": as_scalar(other)})
    if not is_scalar(input) or not isinstance(other, Tensor):
        raise _invalid_arguments(name, input, other)
    if name in _COMMUTATIVE:
        return dispatch(OPS[name + "_scalar"], (other,), {"other": as_scalar(input)})
    return dispatch(OPS[name], (_wrapped_number(as_scalar(input), other), other), {})


def _wrapped_number(number, other: Tensor) -> Tensor:
    """A number shifted by a tensor, as a 0-dim tensor: in the tensor's integer dtype (wrapping, as
    C does), else of the number's own kind."""
    if other.dtype.category == _dtypes.INT:
        dtype = other._data.dtype
        number = np.asarray(number).astype(dtype).item()
    elif isinstance(number, bool):
        dtype = np.dtype(np.bool_)
    elif isinstance(number, int):
        dtype = np.dtype(np.int64)
    else:
        dtype = _dtypes.default_float().np
    return dispatch(OPS["full"], (), {"shape": (), "value": number, "dtype": dtype})


def _inplace(name: str, input, other):
    if isinstance(other, Tensor):
        return dispatch_inplace(OPS[name], input, (other,), {})
    return dispatch_inplace(OPS[name + "_scalar"], input, (), {"other": as_scalar(other)})


def _public(name: str):
    def function(input, other):
        return _binary(name, input, other)

    def method_inplace(self, other):
        return _inplace(name, self, other)

    function.__name__ = function.__qualname__ = name
    method_inplace.__name__ = method_inplace.__qualname__ = name + "_"
    return function, method_inplace


bitwise_and, bitwise_and_ = _public("bitwise_and")
bitwise_or, bitwise_or_ = _public("bitwise_or")
bitwise_xor, bitwise_xor_ = _public("bitwise_xor")
bitwise_left_shift, bitwise_left_shift_ = _public("bitwise_left_shift")
bitwise_right_shift, bitwise_right_shift_ = _public("bitwise_right_shift")


def bitwise_not(input):
    require_tensor(input, "bitwise_not")
    return dispatch(OPS["bitwise_not"], (input,), {})


def bitwise_not_(input):
    return dispatch_inplace(OPS["bitwise_not"], input, (), {})


def _invert(self):
    """``~t``: PyTorch's TypeError for a float tensor (the operator, unlike bitwise_not, says so)."""
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)


def logical_or(input, other):
    require_tensor(input, "logical_or")
    require_tensor(other, "logical_or", "other", 2)
    return dispatch(OPS["logical_or"], (input, other), {})


def logical_xor(input, other):
    require_tensor(input, "logical_xor")
    require_tensor(other, "logical_xor", "other", 2)
    return dispatch(OPS["logical_xor"], (input, other), {})


def _reflected(function):
    def method(self, other):
        return function(other, self)
    return method


METHODS = {
    "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor, "__invert__": _invert,
    "__lshift__": bitwise_left_shift, "__rshift__": bitwise_right_shift,
    "__rand__": _reflected(bitwise_and), "__ror__": _reflected(bitwise_or), "__rxor__": _reflected(bitwise_xor),
    "__rlshift__": _reflected(bitwise_left_shift), "__rrshift__": _reflected(bitwise_right_shift),
    "__iand__": bitwise_and_, "__ior__": bitwise_or_, "__ixor__": bitwise_xor_,
    "__ilshift__": bitwise_left_shift_, "__irshift__": bitwise_right_shift_,
    "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "bitwise_left_shift": bitwise_left_shift, "bitwise_right_shift": bitwise_right_shift,
    "bitwise_and_": bitwise_and_, "bitwise_or_": bitwise_or_, "bitwise_xor_": bitwise_xor_,
    "bitwise_not_": bitwise_not_, "bitwise_left_shift_": bitwise_left_shift_,
    "bitwise_right_shift_": bitwise_right_shift_,
    "logical_or": logical_or, "logical_xor": logical_xor,
}
