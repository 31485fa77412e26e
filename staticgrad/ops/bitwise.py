"""Bitwise and logical ops: bitwise_and/or/xor/not, the shifts, logical_or/xor. Integer and boolean
ops have no gradient, as in PyTorch. The bitwise ops run on integer and boolean tensors only and
refuse floats with PyTorch's NotImplementedError (its kernel's name and the dtype); shifts by a
negative count or by the type's width or more give 0 (``>>`` of a negative value gives -1), as
PyTorch's kernels define them where C leaves them undefined."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.elementwise import broadcast_error
from staticgrad.ops.registry import OpDef, register

_FLOAT_NAMES = {"f2": "Half", "f4": "Float", "f8": "Double"}


def integer_only(kernel: str, dtype: np.dtype) -> None:
    """PyTorch's refusal of a bitwise kernel on a float dtype."""
    if dtype.kind == "f":
        raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{_FLOAT_NAMES[dtype.str[1:]]}'")


def _binary(kernel: str, ufunc):
    def forward(a, b, out=None):
        integer_only(kernel, a.dtype)
        return ufunc(a, b, out=out)
    return forward


def _binary_scalar(kernel: str, ufunc):
    def forward(a, out=None, other=0):
        integer_only(kernel, a.dtype)
        return ufunc(a, np.asarray(other).astype(a.dtype), out=out)  # a number wraps into the dtype, as in C
    return forward


def _shift(kernel: str, left: bool):
    def forward(a, b, out=None):
        integer_only(kernel, a.dtype)
        b = np.asarray(b)
        if a.dtype.kind == "b":  # bool << bool: PyTorch shifts them as integers
            a, b = a.astype(np.uint8), b.astype(np.uint8)
        bits = a.dtype.itemsize * 8
        outside = (b < 0) | (b >= bits)
        count = np.clip(b, 0, bits - 1).astype(a.dtype)
        shifted = np.left_shift(a, count) if left else np.right_shift(a, count)
        if np.any(outside):
            fill = 0 if left or a.dtype.kind == "u" else np.where(a < 0, -1, 0)
            shifted = np.where(outside, np.asarray(fill, dtype=a.dtype), shifted)
        if out is None:
            return np.asarray(shifted)
        np.copyto(out, shifted, casting="unsafe")
        return out
    return forward


def _shift_scalar(kernel: str, left: bool):
    binary = _shift(kernel, left)

    def forward(a, out=None, other=0):
        return binary(a, np.asarray(other), out=out)
    return forward


for _name, _kernel, _ufunc in (("bitwise_and", "bitwise_and", np.bitwise_and),
                               ("bitwise_or", "bitwise_or", np.bitwise_or),
                               ("bitwise_xor", "bitwise_xor", np.bitwise_xor)):
    register(OpDef(_name, _binary(_kernel, _ufunc), "elementwise", dtype_rule="promote", explain=broadcast_error))
    register(OpDef(_name + "_scalar", _binary_scalar(_kernel, _ufunc), "elementwise", dtype_rule="promote"))

for _name, _kernel, _left in (("bitwise_left_shift", "lshift", True), ("bitwise_right_shift", "rshift", False)):
    register(OpDef(_name, _shift(_kernel, _left), "elementwise", dtype_rule="promote", explain=broadcast_error))
    register(OpDef(_name + "_scalar", _shift_scalar(_kernel, _left), "elementwise", dtype_rule="promote"))


def _bitwise_not(a, out=None):
    integer_only("bitwise_not", a.dtype)
    return (np.logical_not if a.dtype.kind == "b" else np.invert)(a, out=out)


register(OpDef("bitwise_not", _bitwise_not, "elementwise", dtype_rule="same"))
register(OpDef("logical_or", lambda a, b, out=None: np.logical_or(a, b, out=out), "elementwise",
               dtype_rule="bool", explain=broadcast_error))
register(OpDef("logical_xor", lambda a, b, out=None: np.logical_xor(a, b, out=out), "elementwise",
               dtype_rule="bool", explain=broadcast_error))
