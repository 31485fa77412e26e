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

    @property
    def is_signed(self) -> bool:
        """Holds negative values (floats and signed integers), as ``torch.dtype.is_signed``."""
        return self.np.kind in "fi"

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
# PyTorch's "shell" unsigned types: made, converted, printed and compared for equality, while most
# arithmetic refuses them (``WIDE_UNSIGNED_OPS`` lists the ops that take them)
uint16 = DType("uint16", np.uint16, INT, "UInt16Tensor")
uint32 = DType("uint32", np.uint32, INT, "UInt32Tensor")
uint64 = DType("uint64", np.uint64, INT, "UInt64Tensor")

ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_, uint16, uint32, uint64)
_BY_NUMPY = {d.np: d for d in ALL}
WIDE_UNSIGNED = frozenset((uint16.np, uint32.np, uint64.np))

# The ops PyTorch runs on uint16/32/64 tensors (the others raise NotImplementedError): views,
# copies and casts, creation, equality, mul, true division, sums, bitwise and/or/xor, sort, cat/stack,
# where, reading with index tensors, and rounding and NaN tests (which change no integer).
# KERNEL_NAMES: PyTorch's kernel name in the refusal.
WIDE_UNSIGNED_OPS = frozenset((
    "alias", "detach", "expand", "permute", "reshape_alias", "select", "slice", "split", "split_with_sizes",
    "squeeze", "t", "transpose", "unbind", "unsqueeze", "view", "unsafe_view", "diagonal", "unfold",
    "view_dtype", "clone", "checked_clone", "copy", "to_dtype", "contiguous", "fill", "full", "zeros_like",
    "randint", "eq", "eq_scalar", "ne", "ne_scalar", "mul", "mul_scalar", "mul_scalar_cpp", "div", "div_scalar",
    "div_scalar_cpp", "sum", "prod", "cumsum", "cumprod", "all", "any", "bitwise_and", "bitwise_and_scalar",
    "bitwise_or", "bitwise_or_scalar", "bitwise_xor", "bitwise_xor_scalar", "sort", "argsort", "unique",
    "unique_consecutive", "cat", "stack", "where", "repeat", "roll", "index_put0", "floor", "ceil", "round",
    "trunc", "isnan", "isfinite", "isinf", "isposinf", "isneginf", "nan_to_num",
) + tuple(f"index{n}" for n in range(9)))
KERNEL_NAMES = {
    "add": "add_stub", "add_scalar": "add_stub", "sub": "add_stub", "sub_scalar": "add_stub", "rsub_scalar": "add_stub",
    "add_scalar_cpp": "add_stub", "sub_scalar_cpp": "add_stub",
    "lt": "lt_cpu", "lt_scalar": "lt_cpu", "le": "le_cpu", "le_scalar": "le_cpu", "gt": "gt_cpu",
    "gt_scalar": "gt_cpu", "ge": "ge_cpu", "ge_scalar": "ge_cpu", "neg": "neg_cpu", "abs": "abs_cpu",
    "sign": "sign_cpu", "amax": "max_all", "amin": "min_all", "max_dim": "max_all", "min_dim": "min_all",
    "argmax": "argmax_cpu", "argmin": "argmin_cpu", "arange": "arange_cpu", "linspace": "linspace_cpu",
    "flip": "flip_cpu", "nonzero": "nonzero_count_cpu", "isin": "isin_default_cpu", "topk": "topk_cpu",
    "maximum": "maximum_cpu", "minimum": "minimum_cpu", "clamp": "clamp_scalar_cpu", "pow": "pow",
    "pow_scalar": "pow", "remainder": "remainder_cpu", "remainder_scalar": "remainder_cpu",
    "floor_divide": "div_floor_cpu", "floor_divide_scalar": "div_floor_cpu", "bitwise_not": "bitwise_not_cpu",
    "bitwise_left_shift": "lshift_cpu", "bitwise_left_shift_scalar": "lshift_cpu",
    "bitwise_right_shift": "rshift_cpu", "bitwise_right_shift_scalar": "rshift_cpu", "mm": "addmm_impl_cpu_",
    "masked_fill": "masked_fill", "masked_fill_tensor": "masked_fill", "gather": "scatter_gather_tensor_cpu",
    "tril": "tril", "triu": "triu", "eye": "eye", "rand": "check_uniform_bounds", "randperm": "randperm",
    "index_select": "index_select", "relu": "clamp_min_scalar_cpu", "clamp_min": "clamp_min_scalar_cpu",
    "clamp_max": "clamp_max_scalar_cpu", "logical_not": "logical_not_cpu", "logical_and": "logical_and_cpu",
    "logical_or": "logical_or_cpu", "logical_xor": "logical_xor_cpu", "sgn": "sign_cpu",
    "count_nonzero": "nonzero_count_cpu", **{f"index_put{n}": "index_put" for n in range(1, 9)},
}


# The C++ type names PyTorch's messages show for dtypes (lerp's dtype check, masks, clamp_, cauchy_).
CPP_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
                  "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
                  "bool": "bool", "uint16": "short unsigned int", "uint32": "unsigned int",
                  "uint64": "long unsigned int"}


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
            "float64, float32, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8, and bool."
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
    check_wide_unsigned(dim_dtypes, zero_dim_dtypes)
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


def _promote_pair(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's promotion of two dtypes, as far as its refusal of uint16/32/64 goes: they promote
    with a float type only (the float wins), with no other integer type nor bool."""
    if a == b:
        return a
    if (a in WIDE_UNSIGNED or b in WIDE_UNSIGNED) and a.kind != "f" and b.kind != "f":
        raise RuntimeError("Promotion for uint16, uint32, uint64 types is not supported, attempted to "
                           f"promote {scalar_type_name(a)} and {scalar_type_name(b)}")
    if a.kind == "f" and b.kind != "f":
        return a
    if b.kind == "f" and a.kind != "f":
        return b
    return np.promote_types(a, b)


def check_wide_unsigned(dim_dtypes, zero_dim_dtypes=()) -> None:
    """Raise PyTorch's RuntimeError where its promotion meets uint16/32/64 with another integer or
    bool type: folding the dimensioned tensors' dtypes in order, then the 0-dim ones', then joining
    a bool result of the first with the second (the one join across the two that promotes)."""
    if not any(d in WIDE_UNSIGNED for d in dim_dtypes) and not any(d in WIDE_UNSIGNED for d in zero_dim_dtypes):
        return
    results = []
    for group in (dim_dtypes, zero_dim_dtypes):
        state = None
        for d in group:
            state = d if state is None else _promote_pair(state, d)
        results.append(state)
    dims, zeros = results
    if dims is not None and zeros is not None and dims.kind == "b":
        _promote_pair(dims, zeros)


def scalar_type_name(np_dtype) -> str:
    """PyTorch's ScalarType name of a dtype (Float, Long, UInt16)."""
    return from_numpy_dtype(np_dtype).tensor_type[:-6]


def refuse_wide_unsigned(op_name: str, np_dtype) -> None:
    """PyTorch's NotImplementedError for an op it does not run on uint16/32/64."""
    if op_name not in WIDE_UNSIGNED_OPS:
        raise NotImplementedError(f'"{KERNEL_NAMES.get(op_name, op_name)}" not implemented for '
                                  f"'{scalar_type_name(np_dtype)}'")


def floating_result(np_dtype: np.dtype) -> np.dtype:
    """Ops such as exp, div and mean give the default float type for integer inputs."""
    return np_dtype if np_dtype.kind == "f" else default_float().np
