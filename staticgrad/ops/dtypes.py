"""Tensor dtypes and PyTorch's type-promotion rules, over NumPy dtypes."""

from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type: prints and compares like ``torch.float32``."""

    __slots__ = ("category", "is_floating_point", "itemsize", "name", "np", "tensor_type")

    def __init__(self, name: str, np_dtype, category: int, tensor_type: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = category == FLOAT
        self.itemsize = self.np.itemsize
        self.category = category
        self.tensor_type = tensor_type

    def __repr__(self) -> str:
        return f"staticgrad.{self.name}"

    def __reduce__(self):
        return (from_numpy_dtype, (self.np.str,))


BOOL, INT, FLOAT = 0, 1, 2

float32 = DType("float32", np.float32, FLOAT, "FloatTensor")
float64 = DType("float64", np.float64, FLOAT, "DoubleTensor")
float16 = DType("float16", np.float16, FLOAT, "HalfTensor")
int64 = DType("int64", np.int64, INT, "LongTensor")
int32 = DType("int32", np.int32, INT, "IntTensor")
int16 = DType("int16", np.int16, INT, "ShortTensor")
int8 = DType("int8", np.int8, INT, "CharTensor")
uint8 = DType("uint8", np.uint8, INT, "ByteTensor")
bool_ = DType("bool", np.bool_, BOOL, "BoolTensor")

ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_)
_BY_NUMPY = {d.np: d for d in ALL}


class _DefaultFloat:
    """The default float dtype (``staticgrad.set_default_dtype``): one process-wide value, as in
    PyTorch. Read through ``default_float``; set only by ``set_default_float``."""

    dtype = float32


def default_float() -> DType:
    """The dtype of float tensors made without a dtype, and of integer inputs promoted to float."""
    return _DefaultFloat.dtype


def set_default_float(dtype: DType) -> None:
    """Make ``dtype`` (a float DType; callers check) the default float dtype."""
    _DefaultFloat.dtype = dtype


def from_numpy_dtype(np_dtype) -> DType:
    """The DType for a NumPy dtype; unsupported ones raise TypeError naming the type."""
    try:
        return _BY_NUMPY[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types are: "
            "float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        ) from None


def to_numpy_dtype(dtype) -> np.dtype:
    """Accept a DType, a NumPy dtype or a Python type (float, int, bool) and give a NumPy dtype."""
    if isinstance(dtype, DType):
        return dtype.np
    if dtype is float:  # Python's float is a double, whatever the default dtype (as in PyTorch)
        return float64.np
    if dtype is int:
        return int64.np
    if dtype is bool:
        return bool_.np
    return from_numpy_dtype(dtype).np


def category_of(np_dtype: np.dtype) -> int:
    kind = np_dtype.kind
    return FLOAT if kind == "f" else BOOL if kind == "b" else INT


def scalar_category(value) -> int:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    return FLOAT


def result_type(dim_dtypes, zero_dim_dtypes=(), scalars=()) -> np.dtype:
    """PyTorch's promotion: dimensioned tensors outrank 0-dim tensors, which outrank Python
    scalars, except that a higher category (bool < int < float) always wins."""
    result = None
    result_cat = -1
    for group in (dim_dtypes, zero_dim_dtypes):
        if not group:
            continue
        cat = max(category_of(d) for d in group)
        members = [d for d in group if category_of(d) == cat]  # float32 with int64 stays float32
        group_type = members[0]
        for d in members[1:]:
            group_type = np.promote_types(group_type, d)
        if result is None or cat > result_cat:
            result, result_cat = group_type, cat
    if scalars:
        cat = max(scalar_category(s) for s in scalars)
        if cat > result_cat:
            result = default_float().np if cat == FLOAT else int64.np if cat == INT else bool_.np
    return result


def floating_result(np_dtype: np.dtype) -> np.dtype:
    """Ops such as exp, div and mean give the default float type for integer inputs."""
    return np_dtype if np_dtype.kind == "f" else default_float().np
