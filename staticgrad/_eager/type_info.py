"""What PyTorch tells about dtypes: finfo and iinfo (a dtype's limits), promote_types, result_type
and can_cast (PyTorch's promotion and casting rules, the ones every op here follows)."""

from __future__ import annotations

import numpy as np

from staticgrad._eager.tensor import Tensor
from staticgrad.ops import dtypes as _dtypes


def _dtype_of(value):
    return value if isinstance(value, _dtypes.DType) else _dtypes.from_numpy_dtype(np.dtype(value))


class finfo:
    """A float dtype's limits: bits, eps, max, min, tiny (= smallest_normal), resolution."""

    def __init__(self, type=None):
        dtype = _dtypes.default_float() if type is None else _dtype_of(type)
        if not dtype.is_floating_point:
            raise TypeError("staticgrad.finfo() requires a floating point input type. Use staticgrad.iinfo to "
                            "handle 'staticgrad.finfo'")
        info = np.finfo(dtype.np)
        self.bits, self.eps = info.bits, float(info.eps)
        self.max, self.min = float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -info.precision
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """An integer dtype's limits: bits, max, min."""

    def __init__(self, type):
        dtype = _dtype_of(type)
        if dtype.category != _dtypes.INT:
            raise TypeError("staticgrad.iinfo() requires an integer input type. Use staticgrad.finfo to handle "
                            "'staticgrad.iinfo'")
        info = np.iinfo(dtype.np)
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def promote_types(type1, type2):
    """The dtype two tensors of these dtypes promote to."""
    return _dtypes.from_numpy_dtype(_dtypes.result_type([_dtype_of(type1).np, _dtype_of(type2).np]))


def result_type(tensor1, tensor2):
    """The dtype an op on these two operands (tensors or numbers) computes in."""
    dims, zeros, scalars = [], [], []
    for value in (tensor1, tensor2):
        if isinstance(value, Tensor):
            (dims if value._data.ndim else zeros).append(value._data.dtype)
        else:
            scalars.append(value)
    return _dtypes.from_numpy_dtype(_dtypes.result_type(dims, zeros, scalars))


def can_cast(from_, to) -> bool:
    """Whether PyTorch's type promotion allows casting ``from_`` to ``to`` (never to a lower kind)."""
    return _dtype_of(from_).category <= _dtype_of(to).category
