"""torch.sin ... torch.lerp, torch.clamp with tensor bounds and torch.norm: PyTorch's elementwise
math functions over the op table (staticgrad.ops.math_ops), their in-place forms and Tensor methods."""

from __future__ import annotations

import math

from staticgrad._eager import functions as fn
from staticgrad._eager.arguments import as_scalar
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.math_ops import kernel_not_implemented

# ---- transcendental functions: integer and bool inputs give the default float ------------------------

_ALIASES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
            "atanh": "arctanh"}
UNARY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "log2",
         "log10", "log1p", "expm1", "erf")


def _name_as_public(function, inplace, public: str) -> None:
    """Name ``function`` and ``inplace`` where users reach them (``staticgrad.sin``,
    ``staticgrad.Tensor.sin_``), so pickle stores them by reference as it does PyTorch's."""
    function.__name__ = function.__qualname__ = public
    inplace.__name__, inplace.__qualname__ = public + "_", f"Tensor.{public}_"
    function.__module__ = inplace.__module__ = "staticgrad"


def _unary(name: str, public: str, check=None):
    op = OPS[name]
    inplace_op = OPS.get(name + "_inplace", op)

    def function(input):
        fn.require_tensor(input, public)
        if check is not None:
            check(input)
        return dispatch(op, (input,), {})

    def inplace(input):
        if check is not None:
            check(input)
        return dispatch_inplace(inplace_op, input, (), {})

    _name_as_public(function, inplace, public)
    function.__doc__ = f"torch.{public}: elementwise, with PyTorch's gradient and dtype rules."
    return function, inplace


FUNCTIONS: dict = {}
INPLACE: dict = {}
for _name in UNARY:
    FUNCTIONS[_name], INPLACE[_name + "_"] = _unary(_name, _name)
    if _name in _ALIASES:
        FUNCTIONS[_ALIASES[_name]], INPLACE[_ALIASES[_name] + "_"] = _unary(_name, _ALIASES[_name])

sin, cos, tan, asin, acos, atan = (FUNCTIONS[n] for n in ("sin", "cos", "tan", "asin", "acos", "atan"))
arcsin, arccos, arctan = (FUNCTIONS[n] for n in ("arcsin", "arccos", "arctan"))
sinh, cosh, asinh, acosh, atanh = (FUNCTIONS[n] for n in ("sinh", "cosh", "asinh", "acosh", "atanh"))
arcsinh, arccosh, arctanh = (FUNCTIONS[n] for n in ("arcsinh", "arccosh", "arctanh"))
exp2, log2, log10, log1p, expm1, erf = (FUNCTIONS[n] for n in ("exp2", "log2", "log10", "log1p", "expm1", "erf"))


# ---- rounding: integer tensors come back unchanged, bool has no kernel -------------------------------

def _no_bool(kernel: str):
    def check(input):
        if input._data.dtype.kind == "b":
            raise kernel_not_implemented(kernel, input._data.dtype)
    return check


for _name in ("floor", "ceil", "trunc"):
    FUNCTIONS[_name], INPLACE[_name + "_"] = _unary(_name, _name, _no_bool(f"{_name}_vml_cpu"))
FUNCTIONS["fix"], INPLACE["fix_"] = _unary("trunc", "fix", _no_bool("trunc_vml_cpu"))
floor, ceil, trunc, fix = (FUNCTIONS[n] for n in ("floor", "ceil", "trunc", "fix"))


def _round_call(input, decimals):
    if decimals is None:
        _no_bool("round_vml_cpu")(input)
        return OPS["round"], {}
    if input._data.dtype.kind != "f":
        raise kernel_not_implemented("round_cpu", input._data.dtype)
    return OPS["round_decimals"], {"decimals": int(decimals)}


def round(input, *, decimals=None):
    """torch.round: halves to even; ``decimals`` (default 0) rounds to that many decimal places and,
    given at all, records PyTorch's RoundBackward1."""
    fn.require_tensor(input, "round")
    op, attrs = _round_call(input, decimals)
    return dispatch(op, (input,), attrs)


def round_(input, *, decimals=None):
    op, attrs = _round_call(input, decimals)
    return dispatch_inplace(op, input, (), attrs)


FUNCTIONS["round"], INPLACE["round_"] = round, round_


# ---- binary: copysign, atan2, logaddexp --------------------------------------------------------------

def copysign(input, other):
    """|input| with the sign of other (a tensor or a number)."""
    if not isinstance(input, Tensor):
        raise TypeError("copysign() received an invalid combination of arguments - got "
                        f"({_type_name(input)}, {_type_name(other)}), but expected one of:\n"
                        " * (Tensor input, Tensor other)\n * (Tensor input, Number other)")
    if isinstance(other, Tensor):
        return dispatch(OPS["copysign"], (input, other), {})
    return dispatch(OPS["copysign_scalar"], (input,), {"other": as_scalar(other)})


def copysign_(input, other):
    if isinstance(other, Tensor):
        return dispatch_inplace(OPS["copysign"], input, (other,), {})
    return dispatch_inplace(OPS["copysign_scalar"], input, (), {"other": as_scalar(other)})


def _tensor_pair(name: str):
    op = OPS[name]

    def function(input, other):
        fn.require_tensor(input, name)
        fn.require_tensor(other, name, "other", 2)
        return dispatch(op, (input, other), {})

    def inplace(input, other):
        fn.require_tensor(other, name + "_", "other", 1)
        return dispatch_inplace(op, input, (other,), {})

    _name_as_public(function, inplace, name)
    return function, inplace


atan2, atan2_ = _tensor_pair("atan2")
arctan2 = atan2
logaddexp, _ = _tensor_pair("logaddexp")
FUNCTIONS.update(copysign=copysign, atan2=atan2, arctan2=atan2, logaddexp=logaddexp)
INPLACE.update(copysign_=copysign_, atan2_=atan2_, arctan2_=atan2_)


# ---- lerp -------------------------------------------------------------------------------------------

def _type_name(value) -> str:
    """A type as PyTorch's argument errors print it."""
    return "Tensor" if isinstance(value, Tensor) else fn._type_name(value)


def _cpp_name(array) -> str:
    return fn._CPP_TYPE_NAMES.get(array.dtype.name, array.dtype.name)


def _lerp_call(input, end, weight):
    fn.require_tensor(end, "lerp", "end", 2)
    if end._data.dtype != input._data.dtype:
        raise RuntimeError(f"expected dtype {_cpp_name(input._data)} for `end` but got dtype {_cpp_name(end._data)}")
    if isinstance(weight, Tensor):
        if weight._data.dtype != input._data.dtype:
            raise RuntimeError(f"expected dtype {_cpp_name(input._data)} for `weight` but got dtype "
                               f"{_cpp_name(weight._data)}")
        if input._data.dtype.kind != "f":
            raise kernel_not_implemented("lerp_kernel_tensor", input._data.dtype)
        return OPS["lerp"], (end, weight), {}
    if input._data.dtype.kind != "f":
        raise kernel_not_implemented("lerp_kernel_scalar", input._data.dtype)
    return OPS["lerp_scalar_weight"], (end,), {"weight": as_scalar(weight)}


def lerp(input, end, weight):
    """input + weight * (end - input); weight a number (LerpBackward0) or a tensor (LerpBackward1)."""
    fn.require_tensor(input, "lerp")
    op, others, attrs = _lerp_call(input, end, weight)
    return dispatch(op, (input,) + others, attrs)


def lerp_(input, end, weight):
    op, others, attrs = _lerp_call(input, end, weight)
    return dispatch_inplace(op, input, others, attrs)


FUNCTIONS["lerp"], INPLACE["lerp_"] = lerp, lerp_


# ---- clamp: numbers (the clamp op) or tensors (clamp_tensor, ClampBackward0) --------------------------

def _clamp_tensor_call(min, max):
    """The bound tensors and attributes of clamp_tensor, or PyTorch's TypeError for a tensor bound
    mixed with a number."""
    if (min is not None and not isinstance(min, Tensor)) or (max is not None and not isinstance(max, Tensor)):
        got = ", ".join(f"{k}={_type_name(v)}" for k, v in sorted({"min": min, "max": max}.items()))
        raise TypeError(f"clamp() received an invalid combination of arguments - got (Tensor, {got}), but "
                        "expected one of:\n * (Tensor input, Tensor min = None, Tensor max = None)\n"
                        " * (Tensor input, Number min = None, Number max = None)")
    bounds = tuple(b for b in (min, max) if b is not None)
    return bounds, {"has_min": min is not None, "has_max": max is not None}


def clamp_tensor(input, min=None, max=None):
    """torch.clamp with tensor bounds that broadcast (ClampBackward0)."""
    bounds, attrs = _clamp_tensor_call(min, max)
    return dispatch(OPS["clamp_tensor"], (input,) + bounds, attrs)


def clamp_tensor_(input, min=None, max=None):
    bounds, attrs = _clamp_tensor_call(min, max)
    return dispatch_inplace(OPS["clamp_tensor"], input, bounds, attrs)


# ---- norm --------------------------------------------------------------------------------------------

def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm / Tensor.norm as a vector norm (LinalgVectorNormBackward0): p a number or "fro"
    (the 2-norm), over ``dim`` (an int, a tuple, or None for every element)."""
    fn.require_tensor(input, "norm")
    if out is not None:
        raise NotImplementedError("staticgrad's norm has no out= argument; use the returned tensor")
    if input._data.dtype.kind != "f":
        name = fn._dtypes.from_numpy_dtype(input._data.dtype).tensor_type[:-6]
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {name}")
    if dtype is not None:
        np_dtype, have = fn._dtypes.to_numpy_dtype(dtype), input._data.dtype
        if np_dtype.kind != "f":
            raise RuntimeError("linalg.vector_norm: dtype should be floating point or complex, but got "
                               f"{fn._dtypes.scalar_type_name(np_dtype)}")
        if np_dtype != have and np_dtype.itemsize < have.itemsize:   # (float dtypes: narrower is smaller)
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({fn._dtypes.scalar_type_name(have)}) "
                               "should be convertible without narrowing to the specified dtype "
                               f"({fn._dtypes.scalar_type_name(np_dtype)})")
    else:
        np_dtype = None
    if p == "fro":
        p = 2.0
    elif isinstance(p, str):
        raise NotImplementedError(f"staticgrad's norm supports p='fro' and numbers, not p={p!r}: matrix norms "
                                  "are not built")
    if input._data.dtype.kind != "f":
        name = fn._dtypes.from_numpy_dtype(input._data.dtype).tensor_type[:-6]
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {name}")
    ndim = input._data.ndim
    if isinstance(dim, int):
        dims = (_normalize_dim(dim, ndim),) if ndim else None
    else:
        dims = fn.normalize_dims(dim, ndim) if ndim else None
    p = float(p)
    if math.isnan(p):
        raise NotImplementedError("staticgrad's norm needs a p that is a number, not NaN")
    return dispatch(OPS["vector_norm"], (input,), {"ord": p, "dim": dims, "keepdim": bool(keepdim)},
                    cast_to=np_dtype)   # (computed in dtype, as PyTorch's: no ToCopyBackward0 before it)


FUNCTIONS["norm"] = norm



def clamp_min(input, min):
    """torch.clamp_min: clamp with a lower bound only (ClampMinBackward0; a tensor bound: ClampMinBackward1)."""
    if isinstance(min, Tensor):
        fn.require_tensor(input, "clamp_min")
        return dispatch(OPS["clamp_min_tensor"], (input, min), {"has_min": True, "has_max": False})
    fn.require_tensor(input, "clamp_min")
    return dispatch(OPS["clamp_min"], (input,), {"min": as_scalar(min), "max": None})


def clamp_max(input, max):
    """torch.clamp_max: clamp with an upper bound only (ClampMaxBackward0; a tensor bound: ClampMaxBackward1)."""
    if isinstance(max, Tensor):
        fn.require_tensor(input, "clamp_max")
        return dispatch(OPS["clamp_max_tensor"], (input, max), {"has_min": False, "has_max": True})
    fn.require_tensor(input, "clamp_max")
    return dispatch(OPS["clamp_max"], (input,), {"min": None, "max": as_scalar(max)})


def clamp_min_(input, min):
    if isinstance(min, Tensor):
        return dispatch_inplace(OPS["clamp_min_tensor"], input, (min,), {"has_min": True, "has_max": False})
    return dispatch_inplace(OPS["clamp_min"], input, (), {"min": as_scalar(min), "max": None})


def clamp_max_(input, max):
    if isinstance(max, Tensor):
        return dispatch_inplace(OPS["clamp_max_tensor"], input, (max,), {"has_min": False, "has_max": True})
    return dispatch_inplace(OPS["clamp_max"], input, (), {"min": None, "max": as_scalar(max)})


def clamp(input, min=None, max=None):
    """torch.clamp (clip): bounds are numbers (ClampBackward1) or tensors that broadcast (ClampBackward0)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        fn.require_tensor(input, "clamp")
        return clamp_tensor(input, min, max)
    return fn.clamp(input, min, max)


# The C++ names PyTorch's in-place clamp gives the types it cannot cast a result to.
_CLAMP_TARGET_NAMES = _dtypes.CPP_TYPE_NAMES


def clamp_(input, min=None, max=None):
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return clamp_tensor_(input, min, max)
    fn.require_tensor(input, "clamp_")
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    min, max = (None if b is None else as_scalar(b) for b in (min, max))
    target = input._data.dtype
    result = _dtypes.result_type([target], (), [b for b in (min, max) if b is not None])
    if _dtypes.category_of(result) > _dtypes.category_of(target):
        raise RuntimeError(f"result type {_dtypes.from_numpy_dtype(result).tensor_type[:-6]} can't be cast to "
                           f"the desired output type {_CLAMP_TARGET_NAMES[target.name]}")
    return fn.clamp_(input, min, max)


clip = clamp
FUNCTIONS.update(clamp=clamp, clip=clamp, clamp_min=clamp_min, clamp_max=clamp_max)
INPLACE.update(clamp_=clamp_, clip_=clamp_, clamp_min_=clamp_min_, clamp_max_=clamp_max_)

# Tensor methods: every function above as a method, and the in-place forms.
METHODS = {**FUNCTIONS, **INPLACE}
