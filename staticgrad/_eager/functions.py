"""PyTorch's tensor functions (``torch.add``, ``torch.matmul``, ``torch.sum``...) over the op
table: argument handling, dim normalization and PyTorch's composites (matmul by rank,
scalar operands as attributes, indexing split into views)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from staticgrad._eager.arguments import as_scalar, shape_argument
from staticgrad._eager.dispatch import dispatch, dispatch_inplace, dispatch_pieces
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.math_ops import kernel_not_implemented
from staticgrad.ops.shape import reshape_op

_SCALAR_TYPES = (int, float, bool, np.number, np.bool_)


def is_scalar(x) -> bool:
    return isinstance(x, _SCALAR_TYPES)


def _op(name: str):
    return OPS[name]


def _type_name(value) -> str:
    """A type as PyTorch's argument errors print it: builtins bare (float), others with their module
    (numpy.ndarray)."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def require_tensor(value, fn: str, arg: str = "input", position: int = 1) -> None:
    """PyTorch's TypeError when ``fn`` gets a non-Tensor (an ndarray, a list, None) for ``arg``; the
    ``type() is`` test first keeps the common case to one comparison."""
    if type(value) is not Tensor and not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {_type_name(value)}")


def _number(value, fn: str):
    """A Python number standing in for ``fn``'s input (``2 * x``), else PyTorch's TypeError."""
    if not is_scalar(value):
        require_tensor(value, fn)
    return as_scalar(value)


def _tensor_list(tensors, fn: str) -> tuple:
    """``tensors`` (a list or tuple of Tensors) as a tuple, else PyTorch's TypeError for ``fn``."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, not {_type_name(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {_type_name(t)}")
    return tuple(tensors)


def _no_dims(dim: int) -> IndexError:
    """PyTorch's error for a dim-wise op (unbind, mv) on a 0-dim tensor, which has no dim to walk."""
    return IndexError(f"Dimension specified as {dim} but tensor has no dimensions")


def _require_dims(input, message: str) -> None:
    """Refuse a 0-dim ``input`` with PyTorch's ``message`` (split, chunk, narrow need a dim to cut)."""
    if input._data.ndim == 0:
        raise RuntimeError(message)


# ---- arithmetic --------------------------------------------------------------------------------

def fit_scalar(tensor, value):
    """A Python int outside an integer tensor's range wrapped into it (``uint8 + -3`` adds 253), as
    PyTorch casts the number to the tensor's dtype; NumPy refuses such a number."""
    dtype = tensor._data.dtype
    if type(value) is int and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max and -2**63 <= value < 2**64:
            return int(np.array(value % 2**64, dtype=np.uint64).astype(dtype))
    return value


def add(input, other, *, alpha=1):
    if isinstance(other, Tensor):
        if isinstance(input, Tensor):
            return dispatch(_op("add"), (input, other), {"alpha": alpha})
        number = _number(input, "add")
        number = number * alpha if alpha != 1 else number   # (True * 1 would make a bool an int)
        return dispatch(_op("add_scalar"), (other,), {"other": fit_scalar(other, number), "alpha": 1})
    require_tensor(input, "add")
    return dispatch(_op("add_scalar"), (input,), {"other": fit_scalar(input, as_scalar(other)), "alpha": alpha})


def _is_bool(value) -> bool:
    return type(value) is bool or (isinstance(value, Tensor) and value._data.dtype == np.bool_)


def _sub_check(input, other) -> None:
    """PyTorch refuses ``-`` on bool tensors (a Python bool counts as one)."""
    if _is_bool(input) and _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")


def sub(input, other, *, alpha=1):
    _sub_check(input, other)
    if isinstance(other, Tensor):
        if isinstance(input, Tensor):
            return dispatch(_op("sub"), (input, other), {"alpha": alpha})
        number = fit_scalar(other, _number(input, "sub"))
        return dispatch(_op("rsub_scalar"), (other,), {"other": number, "alpha": alpha})
    require_tensor(input, "sub")
    return dispatch(_op("sub_scalar"), (input,), {"other": fit_scalar(input, as_scalar(other)), "alpha": alpha})


def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


def mul(input, other):
    if isinstance(other, Tensor):
        if isinstance(input, Tensor):
            return dispatch(_op("mul"), (input, other), {})
        return dispatch(_op("mul_scalar"), (other,), {"other": fit_scalar(other, _number(input, "mul"))})
    require_tensor(input, "mul")
    return dispatch(_op("mul_scalar"), (input,), {"other": fit_scalar(input, as_scalar(other))})


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        return div_rounded(input, other, rounding_mode)
    if isinstance(other, Tensor):
        if isinstance(input, Tensor):
            return dispatch(_op("div"), (input, other), {})
        return mul(reciprocal(other), _number(input, "div"))
    require_tensor(input, "div")
    return dispatch(_op("div_scalar"), (input,), {"other": as_scalar(other)})


true_divide = divide = div
multiply = mul
subtract = sub


def pow(input, exponent):
    if isinstance(exponent, Tensor):
        if isinstance(input, Tensor):
            return dispatch(_op("pow"), (input, exponent), {})
        if isinstance(input, bool) and exponent._data.dtype == np.bool_:
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")
        return dispatch(_op("rpow_scalar"), (exponent,), {"base": _number(input, "pow")})
    require_tensor(input, "pow")
    return dispatch(_op("pow_scalar"), (input,), {"exponent": as_scalar(exponent)})


def _unary(name, public=None):
    """torch.<public> for the unary op ``name`` (public defaults to the op's name)."""
    op = OPS[name]
    public = public or name

    def fn(input):
        require_tensor(input, public)
        return dispatch(op, (input,), {})

    fn.__name__ = fn.__qualname__ = public  # the qualified name pickle finds it by (a saved module's activation)
    return fn


def _negation(public: str):
    """torch.neg / negative: refused on bool tensors with PyTorch's message."""
    unary = _unary("neg", public)

    def fn(input):
        if isinstance(input, Tensor) and input._data.dtype.kind == "b":
            raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                               "invert a mask, use the `~` or `logical_not()` operator instead.")
        return unary(input)

    fn.__name__ = fn.__qualname__ = public
    return fn


neg = _negation("neg")
negative = _negation("negative")
exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
sqrt = _unary("sqrt")
reciprocal = _unary("reciprocal")
rsqrt = _unary("rsqrt")
abs = _unary("abs")
_sign = _unary("sign")


def sign(input):
    """torch.sign; of a bool tensor, its own values (True is 1), as PyTorch."""
    require_tensor(input, "sign")
    if input._data.dtype == np.bool_:
        return clone(input)
    return _sign(input)
logical_not = _unary("logical_not")


def square(input):
    require_tensor(input, "square")
    return pow(input, 2)




def clamp(input, min=None, max=None):
    require_tensor(input, "clamp")
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return dispatch(_op("clamp"), (input,), {"min": None if min is None else as_scalar(min),
                                              "max": None if max is None else as_scalar(max)})


clip = clamp


def maximum(input, other):
    require_tensor(input, "maximum")
    require_tensor(other, "maximum", "other", 2)
    return dispatch(_op("maximum"), (input, other), {})


def minimum(input, other):
    require_tensor(input, "minimum")
    require_tensor(other, "minimum", "other", 2)
    return dispatch(_op("minimum"), (input, other), {})


def _comparison(name):
    tensor_op, scalar_op = OPS[name], OPS[name + "_scalar"]

    def fn(input, other):
        require_tensor(input, name)
        if isinstance(other, Tensor):
            return dispatch(tensor_op, (input, other), {})
        return dispatch(scalar_op, (input,), {"other": as_scalar(other)})

    fn.__name__ = name
    return fn


eq, ne, lt, le, gt, ge = (_comparison(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
greater, less = gt, lt


def logical_and(input, other):
    require_tensor(input, "logical_and")
    require_tensor(other, "logical_and", "other", 2)
    return dispatch(_op("logical_and"), (input, other), {})


def where(condition, input, other):
    require_tensor(condition, "where", "condition")
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):  # two Python numbers: the dtype they would have as tensors together
        values = (as_scalar(input), as_scalar(other))
        if any(isinstance(v, float) for v in values):
            dtype = _dtypes.default_float().np
        else:
            dtype = np.dtype(np.bool_) if all(isinstance(v, bool) for v in values) else np.dtype(np.int64)
        input, other = (dispatch(_op("full"), (), {"shape": (), "value": v, "dtype": dtype}) for v in values)
    if not isinstance(input, Tensor):
        input = full_like_scalar(like, input)
    if not isinstance(other, Tensor):
        other = full_like_scalar(like, other)
    return dispatch(_op("where"), (condition, input, other), {})


def full_like_scalar(like: Tensor, value) -> Tensor:
    """A 0-dim constant of ``like``'s dtype (how PyTorch wraps a Python number operand)."""
    dtype = like._data.dtype
    if dtype.kind != "f" and isinstance(value, float):
        dtype = _dtypes.default_float().np
    elif dtype.kind == "b" and type(value) is int:   # an int with a bool tensor: int64, as PyTorch promotes
        dtype = _dtypes.int64.np
    return dispatch(_op("full"), (), {"shape": (), "value": as_scalar(value), "dtype": dtype})


def clone(input, *, memory_format=None):
    require_tensor(input, "clone")
    return dispatch(_op("clone"), (input,), {})


def detach(input):
    require_tensor(input, "detach")
    return dispatch(_op("detach"), (input,), {})


def to_dtype(input, dtype):
    np_dtype = _dtypes.to_numpy_dtype(dtype)
    if input._data.dtype == np_dtype:
        return input
    return dispatch(_op("to_dtype"), (input,), {"dtype": np_dtype, "self_dtype": input._data.dtype})


# ---- reductions -----------------------------------------------------------------------------

def normalize_dims(dim, ndim: int):
    """None -> None; an int or a sequence -> a sorted tuple of non-negative dims."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None
        dims = tuple(sorted(_normalize_dim(d, ndim) for d in dim))
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
        return dims
    return (_normalize_dim(dim, ndim),)


def reduction_dims(dim, ndim: int):
    """The dims a reduction's op gets: None -> None (all, the dimless node); an empty list -> every
    dim listed (PyTorch reduces all but records the dim form); 0 or -1 on a 0-dim tensor -> (),
    since the tensor has no axis to reduce and NumPy refuses axis (0,) on it."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return tuple(range(ndim))
    dims = normalize_dims(dim, ndim)
    return dims if ndim else ()


def reduction_input(input, dtype, kernel: str, bool_ok: bool = True):
    """A sum-like reduction's input for its ``dtype=`` argument (when given), and that dtype as
    NumPy's; refused as PyTorch's kernel ``kernel`` refuses uint16/32/64 (and bool, unless ``bool_ok``),
    and as its autograd refuses a non-float result of an input that requires grad. A float dtype
    is left to the op (``dispatch(..., cast_to=)``): PyTorch's node has no ToCopyBackward0 before it;
    an integer one is a plain cast (its result holds no graph)."""
    if dtype is None:
        return input, None
    np_dtype = _dtypes.to_numpy_dtype(dtype)
    if np_dtype in _dtypes.WIDE_UNSIGNED or (np_dtype.kind == "b" and not bool_ok):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_dtypes.scalar_type_name(np_dtype)}\'')
    if np_dtype.kind == "f":
        return input, np_dtype
    if input._requires_grad and GradMode.enabled:
        raise RuntimeError(f"Autograd not support dtype: {_dtypes.scalar_type_name(np_dtype)}")
    return to_dtype(input, dtype), np_dtype


def reduce_as(op, input, attrs, np_dtype):
    """``op`` on ``input`` computed in ``np_dtype`` when that is a float dtype (PyTorch's dtype=),
    then given that dtype (an integer result is cast after: it holds no graph)."""
    if np_dtype is not None and np_dtype.kind == "f":
        return dispatch(op, (input,), attrs, cast_to=np_dtype)
    return requested(dispatch(op, (input,), attrs), np_dtype)


def requested(result, np_dtype):
    """A reduction's result in its ``dtype=`` argument: the integer ops sum in int64 (wrapping as
    the narrower type would) and an integer result holds no graph, so the cast is exact and free."""
    if np_dtype is None or result._data.dtype == np_dtype:
        return result
    return to_dtype(result, np_dtype)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    require_tensor(input, "sum")
    attrs = {"dim": reduction_dims(dim, input._data.ndim), "keepdim": keepdim}
    input, np_dtype = reduction_input(input, dtype, "sum_cpu")
    return reduce_as(_op("sum"), input, attrs, np_dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    require_tensor(input, "mean")
    if dtype is not None:
        np_dtype = _dtypes.to_numpy_dtype(dtype)
        if np_dtype.kind != "f":
            raise RuntimeError("mean(): could not infer output dtype. Optional dtype must be either a floating "
                               f"point or complex dtype. Got: {_dtypes.scalar_type_name(np_dtype)}")
        return dispatch(_op("mean"), (input,), {"dim": reduction_dims(dim, input._data.ndim), "keepdim": keepdim},
                        cast_to=np_dtype)
    if input._data.dtype.kind != "f":
        name = _dtypes.from_numpy_dtype(input._data.dtype).tensor_type[:-6]
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {name}")
    return dispatch(_op("mean"), (input,), {"dim": reduction_dims(dim, input._data.ndim), "keepdim": keepdim})


MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _check_nonempty(name: str, input, dim) -> None:
    """PyTorch's errors for max/min over no elements."""
    shape = input._data.shape
    if dim is None:
        if input._data.size == 0:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               "reduction dim with the 'dim' argument.")
    elif shape and shape[_normalize_dim(dim, len(shape))] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {_normalize_dim(dim, len(shape))} to have non-zero size.")


def max(input, dim=None, keepdim=False, *, axis=None, other=None):
    require_tensor(input, "max")
    if other is not None:   # torch.max(input, other=...): the elementwise form
        return maximum(input, other)
    if axis is not None:  # PyTorch's alias of dim
        if dim is not None:
            raise TypeError("max() got an unexpected keyword argument 'axis'")
        dim = axis
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    _check_nonempty("max", input, dim)
    if dim is None:
        return dispatch(_op("amax"), (input,), {"dim": None, "keepdim": False})
    attrs = {"dim": _normalize_dim(dim, input._data.ndim), "keepdim": keepdim}
    values, indices = dispatch(_op("max_dim"), (input,), attrs)
    return MaxResult(values, indices)


def min(input, dim=None, keepdim=False, *, axis=None, other=None):
    require_tensor(input, "min")
    if other is not None:   # torch.min(input, other=...): the elementwise form
        return minimum(input, other)
    if axis is not None:  # PyTorch's alias of dim
        if dim is not None:
            raise TypeError("min() got an unexpected keyword argument 'axis'")
        dim = axis
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    _check_nonempty("min", input, dim)
    if dim is None:
        return dispatch(_op("amin"), (input,), {"dim": None, "keepdim": False})
    attrs = {"dim": _normalize_dim(dim, input._data.ndim), "keepdim": keepdim}
    values, indices = dispatch(_op("min_dim"), (input,), attrs)
    return MinResult(values, indices)


def _check_nonempty_dims(name: str, input, dims, tail: str = "") -> None:
    """PyTorch's errors for amax/amin/argmax/argmin over no elements (``dims`` None: all of them)."""
    shape = input._data.shape
    if dims is None or not shape:
        if input._data.size == 0:
            raise (RuntimeError if tail else IndexError)(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0.{tail}")
        return
    for d in dims:
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


_SPECIFY_DIM = " Specify the reduction dim with the 'dim' argument."


def _listed_dims(dim, ndim: int):
    """amax/amin's dims, None where none are listed (all of them)."""
    return None if isinstance(dim, (list, tuple)) and len(dim) == 0 else reduction_dims(dim, ndim)


def amax(input, dim=(), keepdim=False):
    require_tensor(input, "amax")
    _check_nonempty_dims("amax", input, _listed_dims(dim, input._data.ndim), _SPECIFY_DIM)
    return dispatch(_op("amax"), (input,), {"dim": reduction_dims(dim, input._data.ndim), "keepdim": keepdim})


def amin(input, dim=(), keepdim=False):
    require_tensor(input, "amin")
    _check_nonempty_dims("amin", input, _listed_dims(dim, input._data.ndim), _SPECIFY_DIM)
    return dispatch(_op("amin"), (input,), {"dim": reduction_dims(dim, input._data.ndim), "keepdim": keepdim})


def argmax(input, dim=None, keepdim=False):
    require_tensor(input, "argmax")
    d = None if dim is None else _normalize_dim(dim, input._data.ndim)
    _check_nonempty_dims("argmax", input, None if d is None else (d,))
    return dispatch(_op("argmax"), (input,), {"dim": d, "keepdim": keepdim and d is not None})


def argmin(input, dim=None, keepdim=False):
    require_tensor(input, "argmin")
    d = None if dim is None else _normalize_dim(dim, input._data.ndim)
    _check_nonempty_dims("argmin", input, None if d is None else (d,))
    return dispatch(_op("argmin"), (input,), {"dim": d, "keepdim": keepdim and d is not None})


def _softmax_kernel_check(name: str, input, dim: int) -> None:
    """PyTorch's softmax kernels have no integer or bool loop (their name says whether dim is the last)."""
    data = input._data
    if data.dtype.kind in "biu" and data.size:
        last = data.ndim == 0 or dim == data.ndim - 1
        raise kernel_not_implemented(f"{name}{'_lastdim' if last else ''}_kernel_impl", data.dtype)


def softmax(input, dim, dtype=None):
    require_tensor(input, "softmax")
    if dtype is not None:
        input = to_dtype(input, dtype)
    dim = _normalize_dim(dim, input._data.ndim)
    _softmax_kernel_check("softmax", input, dim)
    return dispatch(_op("softmax"), (input,), {"dim": dim})


def log_softmax(input, dim, dtype=None):
    require_tensor(input, "log_softmax")
    if dtype is not None:
        input = to_dtype(input, dtype)
    dim = _normalize_dim(dim, input._data.ndim)
    _softmax_kernel_check("log_softmax", input, dim)
    return dispatch(_op("log_softmax"), (input,), {"dim": dim})


def logsumexp(input, dim, keepdim=False):
    require_tensor(input, "logsumexp")
    dims = reduction_dims(dim, input._data.ndim)
    if dims is None:
        dims = tuple(range(input._data.ndim))
    return dispatch(_op("logsumexp"), (input,), {"dim": dims, "keepdim": keepdim})


def gather(input, dim, index):
    require_tensor(input, "gather")
    require_tensor(index, "gather", "index", 3)
    d = _normalize_dim(dim, input._data.ndim)
    if index._data.dtype.name not in ("int64", "int32"):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    shape, ishape = input._data.shape, index._data.shape
    if len(ishape) != len(shape) and not (len(ishape) <= 1 and len(shape) <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(len(ishape) if shape else 0):
        if k != d and ishape[k] > shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ishape)} to be no larger "
                               f"than self {list(shape)} apart from dimension {d}")
    return dispatch(_op("gather"), (input, index), {"dim": d})


# ---- matrix products --------------------------------------------------------------------------

# ---- products: PyTorch's BLAS-backed ops take operands of one dtype, never promoting ---------------

def _cpp_type(t) -> str:
    """A tensor's dtype as PyTorch's C++ messages name it (float, double, c10::Half, long int)."""
    return _CPP_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name)


def _scalar_type(t) -> str:
    """A tensor's dtype as PyTorch's ScalarType names it (Float, Double, Half, Long)."""
    return _dtypes.from_numpy_dtype(t._data.dtype).tensor_type[:-6]


def _same_dtype_mm(mat1, mat2) -> None:
    if mat1._data.dtype != mat2._data.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cpp_type(mat1)} != "
                           f"{_cpp_type(mat2)}")


def mm(input, mat2):
    require_tensor(input, "mm")
    require_tensor(mat2, "mm", "mat2", 2)
    if input._data.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    _same_dtype_mm(input, mat2)
    return dispatch(_op("mm"), (input, mat2), {})


def bmm(input, mat2):
    require_tensor(input, "bmm")
    require_tensor(mat2, "bmm", "mat2", 2)
    if input._data.dtype != mat2._data.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_type(input)} but found {_scalar_type(mat2)}")
    return dispatch(_op("bmm"), (input, mat2), {})


def mv(input, vec):
    require_tensor(input, "mv")
    require_tensor(vec, "mv", "vec", 2)
    if input._data.ndim == 0:
        raise _no_dims(0)
    if input._data.ndim != 2 or vec._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input._data.ndim}, {vec._data.ndim}")
    if input._data.dtype != vec._data.dtype:  # PyTorch's mv is addmv into a result of vec's dtype
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_scalar_type(vec)}, "
                           f"{_scalar_type(input)}, and {_scalar_type(vec)}")
    return dispatch(_op("mv"), (input, vec), {})


def dot(input, other):
    require_tensor(input, "dot")
    require_tensor(other, "dot", "tensor", 2)
    if input._data.ndim != 1 or other._data.ndim != 1:  # np.dot would multiply scalars or matrices
        raise RuntimeError(f"1D tensors expected, but got {input._data.ndim}D and {other._data.ndim}D tensors")
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_scalar_type(input)} and "
                           f"{_scalar_type(other)}")
    return dispatch(_op("dot"), (input, other), {})


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    require_tensor(input, "addmm")
    require_tensor(mat1, "addmm", "mat1", 2)
    require_tensor(mat2, "addmm", "mat2", 3)
    for name, operand in (("self", input), ("mat1", mat1)):  # PyTorch checks in this order
        if operand._data.dtype != mat2._data.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {_scalar_type(operand)} and "
                               f"{_scalar_type(mat2)}")
    return dispatch(_op("addmm"), (input, mat1, mat2), {"beta": beta, "alpha": alpha})


def _should_fold(a, b) -> bool:
    """PyTorch's rule for computing N-D @ (1-D or 2-D) as one mm/mv on a folded matrix."""
    larger_first = a._data.ndim >= b._data.ndim
    big = a._data if larger_first else np.swapaxes(b._data, -1, -2)
    small_dim = b._data.ndim if larger_first else a._data.ndim
    if not (big.ndim >= 3 and small_dim <= 2):
        return False
    if (b if larger_first else a)._requires_grad:
        return True
    if a._data.ndim == 2:
        return False
    if big.size == 0:
        return True
    strides, shape = big.strides, big.shape
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(big.ndim - 1))


def matmul(input, other):
    """PyTorch's matmul: dot, mv, mm; N-D @ 2-D folded into one mm; otherwise a broadcast bmm."""
    require_tensor(input, "matmul")
    require_tensor(other, "matmul", "other", 2)
    da, db = input._data.ndim, other._data.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(input, other)
    if da == 2 and db == 1:
        return mv(input, other)
    if da == 1 and db == 2:
        return squeeze(mm(unsqueeze(input, 0), other), 0, inplace_name=True)
    if da == 2 and db == 2:
        return mm(input, other)
    if _should_fold(input, other):
        transpose = db > da
        t1 = transpose_last(other) if transpose else input
        t2 = (t(input) if da == 2 else input) if transpose else other
        batch = t1._data.shape[:-1]
        folded = reshape(t1, (int(np.prod(batch, dtype=np.int64)), t1._data.shape[-1]))
        if t2._data.ndim == 2:
            out = dispatch(_op("unsafe_view"), (mm(folded, t2),), {"shape": batch + (t2._data.shape[1],)})
            return clone(transpose_last(out)) if transpose else out
        return dispatch(_op("unsafe_view"), (mv(folded, t2),), {"shape": batch})
    return _batched_matmul(input, other)


def transpose_last(x):
    return transpose(x, -2, -1)


def _batched_matmul(a, b):
    da, db = a._data.ndim, b._data.ndim
    n = a._data.shape[-2] if da > 1 else 1
    m1 = a._data.shape[-1]
    m2 = b._data.shape[-2] if db > 1 else b._data.shape[0]
    p = b._data.shape[-1] if db > 1 else 1
    try:
        batch = tuple(np.broadcast_shapes(a._data.shape[:-2], b._data.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"The size of tensor a ({a._data.shape[-3]}) must match the size of tensor b "
                           f"({b._data.shape[-3]}) at non-singleton dimension 0") from None
    count = int(np.prod(batch, dtype=np.int64))
    a3 = reshape(expand(a, batch + (n, m1)), (count, n, m1))
    if db == 1:
        b3 = unsqueeze(reshape(expand(b, batch + (m2,)), (count, m2)), 2)
    else:
        b3 = reshape(expand(b, batch + (m2, p)), (count, m2, p))
    out_shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    product = bmm(a3, b3)
    if db == 1:
        product = squeeze(product, -1)
    return dispatch(_op("unsafe_view"), (product,), {"shape": out_shape})


# ---- shapes -----------------------------------------------------------------------------------

def infer_shape(shape: tuple, numel: int) -> tuple:
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for d in shape:
        if d != -1:
            if d < 0:
                raise RuntimeError(f"invalid shape dimension {d}")
            known *= d
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:unknown[0]] + (numel // known,) + shape[unknown[0] + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def reshape(input, *shape):
    """A view when the memory layout allows one (ViewBackward0 on a contiguous tensor,
    ReshapeAliasBackward0 on another), else a copy (Clone + UnsafeView), as PyTorch does."""
    require_tensor(input, "reshape")
    shape = infer_shape(shape_argument(shape), input._data.size)
    op = reshape_op(input._data, shape)
    if op is not None:
        return dispatch(_op(op), (input,), {"shape": shape})
    return dispatch(_op("unsafe_view"), (clone(input),), {"shape": shape})


def view(input, *shape):
    require_tensor(input, "view")
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        raise NotImplementedError("staticgrad's view() takes a shape; use .to(dtype) to change the dtype")
    shape = infer_shape(shape_argument(shape), input._data.size)
    return dispatch(_op("view"), (input,), {"shape": shape})


def flatten(input, start_dim=0, end_dim=-1):
    require_tensor(input, "flatten")
    shape = input._data.shape
    start, end = _normalize_dim(start_dim, len(shape)), _normalize_dim(end_dim, len(shape))
    if not shape:
        return reshape(input, (1,))
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return input
    middle = int(np.prod(shape[start:end + 1], dtype=np.int64))
    return reshape(input, shape[:start] + (middle,) + shape[end + 1:])


def transpose(input, dim0, dim1):
    require_tensor(input, "transpose")
    ndim = input._data.ndim
    dims = {"dim0": _normalize_dim(dim0, ndim), "dim1": _normalize_dim(dim1, ndim)}
    return dispatch(_op("transpose"), (input,), dims)


def swapaxes(input, axis0, axis1):
    require_tensor(input, "swapaxes")
    return transpose(input, axis0, axis1)


def t(input):
    require_tensor(input, "t")
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input._data.ndim}D")
    return dispatch(_op("t"), (input,), {})


def permute(input, *dims):
    require_tensor(input, "permute")
    dims = shape_argument(dims)
    ndim = input._data.ndim
    if len(dims) != ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {ndim} is not "
                           f"equal to len(dims) = {len(dims)}")
    dims = tuple(_normalize_dim(d, ndim) for d in dims)
    if len(set(dims)) != ndim:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return dispatch(_op("permute"), (input,), {"dims": dims})


def unsqueeze(input, dim):
    require_tensor(input, "unsqueeze")
    return dispatch(_op("unsqueeze"), (input,), {"dim": _normalize_dim(dim, input._data.ndim + 1)})


def squeeze(input, dim=None, *, inplace_name=False):
    require_tensor(input, "squeeze")
    attrs = {"dim": None, "listed": False, "inplace": inplace_name}
    if dim is not None:
        ndim = input._data.ndim
        dims = normalize_dims(dim, ndim)  # checks the dims even of a 0-dim tensor, which has none to squeeze
        attrs["dim"] = dims if ndim else ()
        attrs["listed"] = isinstance(dim, (list, tuple))
    return dispatch(_op("squeeze"), (input,), attrs)


def expand(input, *sizes):
    require_tensor(input, "expand")
    sizes = shape_argument(sizes)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(torch.{_dtypes.from_numpy_dtype(input._data.dtype).tensor_type}"
                           f"{{{list(shape)}}}, size={list(sizes)}): the number of sizes "
                           f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the "
                           f"tensor ({len(shape)})")
    lead = len(sizes) - len(shape)
    target = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s == -1:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            target.append(s)
            continue
        own = shape[i - lead]
        if s == -1:
            target.append(own)
        elif own != s and own != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({own}) at "
                               f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(shape)}")
        else:
            target.append(s)
    return dispatch(_op("expand"), (input,), {"shape": tuple(target)})


def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (a shape it expands to): the input itself when it already has
    that shape, else a keepdim sum over the broadcast dims (SumBackward1), viewed to ``size`` when
    ``size`` has fewer dims (ViewBackward0), as PyTorch builds it."""
    require_tensor(input, "sum_to_size")
    size = tuple(shape_argument(size))
    shape = input._data.shape
    lead = len(shape) - len(size)
    if lead < 0 or any(s != n and s != 1 for s, n in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    if not size:   # a 0-dim target is a whole sum, even of a 0-dim input
        return sum(input)
    if size == shape:
        return input
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and shape[lead + i] != 1]
    total = sum(input, dims, keepdim=True) if dims else input
    return total.view(size) if lead else total


def expand_as(input, other):
    require_tensor(other, "expand_as", "other", 1)  # a method only: self is position 0
    return expand(input, other._data.shape)


def cat(tensors, dim=0):
    return _cat(tensors, dim, "cat")


def _cat(tensors, dim: int, name: str):
    """torch.cat under any of its names (cat, concat, concatenate), which its errors show."""
    tensors = _tensor_list(tensors, name)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for position, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {position}) cannot be concatenated")
    # PyTorch skips legacy empty tensors (shape (0,)) among others: they join the dtype, not the shapes
    legacy = [t._data.shape == (0,) for t in tensors]
    kept = [t for t, skip in zip(tensors, legacy) if not skip]
    if not kept:
        return dispatch(_op("cat"), tensors, {"dim": 0, "sizes": (0,) * len(tensors)})
    d = _normalize_dim(dim, kept[0]._data.ndim)
    sizes = tuple(None if skip else t._data.shape[d] if t._data.ndim > d else 0 for t, skip in zip(tensors, legacy))
    return dispatch(_op("cat"), tensors, {"dim": d, "sizes": sizes})


def concat(tensors, dim=0):
    return _cat(tensors, dim, "concat")


def concatenate(tensors, axis=0):
    return _cat(tensors, axis, "concatenate")


def stack(tensors, dim=0):
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    return dispatch(_op("stack"), tensors, {"dim": _normalize_dim(dim, tensors[0]._data.ndim + 1)})


def split(input, split_size_or_sections, dim=0):
    require_tensor(input, "split")
    _require_dims(input, "split expects at least a 1-dimensional tensor")
    d = _normalize_dim(dim, input._data.ndim)
    length = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        sections = [step] * (length // step) + ([length % step] if length % step else [])
        op, attrs = _op("split"), {"dim": d, "split_size": step}
    else:
        sections = list(split_size_or_sections)
        if builtins_sum(sections) != length:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's "
                               f"size at dimension {d}), but got split_sizes={sections}")
        op, attrs = _op("split_with_sizes"), {"dim": d, "split_sizes": tuple(sections)}
    starts = [builtins_sum(sections[:i]) for i in range(len(sections))]
    attrs["sections"] = tuple(sections)
    return dispatch_pieces(op, input, attrs, [lambda start=start, size=size: narrow(input, d, start, size)
                                              for start, size in zip(starts, sections)])


def chunk(input, chunks, dim=0):
    require_tensor(input, "chunk")
    _require_dims(input, "chunk expects at least a 1-dimensional tensor")
    length = input._data.shape[_normalize_dim(dim, input._data.ndim)]
    step = -(-length // chunks)
    return split(input, step, dim)


def narrow(input, dim, start, length):
    require_tensor(input, "narrow")
    _require_dims(input, "narrow() cannot be applied to a 0-dim tensor.")
    d = _normalize_dim(dim, input._data.ndim)
    return dispatch(_op("slice"), (input,), {"dim": d, "start": start, "end": start + length, "step": 1})


def unbind(input, dim=0):
    require_tensor(input, "unbind")
    if input._data.ndim == 0:
        raise _no_dims(0)
    d = _normalize_dim(dim, input._data.ndim)
    select = _op("select")
    return dispatch_pieces(_op("unbind"), input, {"dim": d},
                           [lambda i=i: dispatch(select, (input,), {"dim": d, "index": i})
                            for i in range(input._data.shape[d])])


def builtins_sum(values):
    total = 0
    for v in values:
        total += v
    return total


# ---- in place ---------------------------------------------------------------------------------

def add_(input, other, *, alpha=1):
    if isinstance(other, Tensor):
        return dispatch_inplace(_op("add"), input, (other,), {"alpha": alpha})
    number = fit_scalar(input, as_scalar(other))
    return dispatch_inplace(_op("add_scalar"), input, (), {"other": number, "alpha": alpha})


def sub_(input, other, *, alpha=1):
    _sub_check(input, other)
    if isinstance(other, Tensor):
        return dispatch_inplace(_op("sub"), input, (other,), {"alpha": alpha})
    number = fit_scalar(input, as_scalar(other))
    return dispatch_inplace(_op("sub_scalar"), input, (), {"other": number, "alpha": alpha})


def mul_(input, other):
    if isinstance(other, Tensor):
        return dispatch_inplace(_op("mul"), input, (other,), {})
    return dispatch_inplace(_op("mul_scalar"), input, (), {"other": fit_scalar(input, as_scalar(other))})


def div_(input, other):
    if isinstance(other, Tensor):
        return dispatch_inplace(_op("div"), input, (other,), {})
    return dispatch_inplace(_op("div_scalar"), input, (), {"other": as_scalar(other)})


def copy_(input, src):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    return dispatch_inplace(_op("copy"), input, (src,), {})


def fill_(input, value):
    """A number everywhere in ``input`` (FillBackward2); ``Tensor.fill_`` with a 0-dim tensor is
    ``indexing.fill_``."""
    return dispatch_inplace(_op("fill"), input, (), {"value": as_scalar(value), "node_name": "FillBackward2"})


def zero_(input):
    return dispatch_inplace(_op("fill"), input, (), {"value": 0, "node_name": "ZeroBackward0"})


def clamp_(input, min=None, max=None):
    return dispatch_inplace(_op("clamp"), input, (), {"min": min, "max": max})


def _unary_inplace(name):
    op = OPS[name]

    def fn(input):
        return dispatch_inplace(op, input, (), {})

    fn.__name__ = name + "_"
    return fn


exp_, tanh_, sigmoid_, relu_, sqrt_, neg_, abs_, log_, sign_, rsqrt_, reciprocal_ = (
    _unary_inplace(n) for n in ("exp", "tanh", "sigmoid", "relu", "sqrt", "neg", "abs", "log", "sign", "rsqrt",
                                "reciprocal"))


def pow_(input, exponent):
    return dispatch_inplace(_op("pow_scalar"), input, (), {"exponent": as_scalar(exponent)})


# ---- masks and triangles (what causal attention is built from) ----------------------------------

# The C++ type names PyTorch's mask-dtype error shows.
_CPP_TYPE_NAMES = _dtypes.CPP_TYPE_NAMES


def mask_attrs(mask, value) -> dict:
    if mask._data.dtype.kind != "b":
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_CPP_TYPE_NAMES.get(mask._data.dtype.name, mask._data.dtype.name)}")
    return {"value": as_scalar(value)}


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where ``mask`` is True, ``input`` elsewhere (MaskedFillBackward0)."""
    require_tensor(input, "masked_fill")
    require_tensor(mask, "masked_fill", "mask", 2)
    return dispatch(OPS["masked_fill"], (input, mask), mask_attrs(mask, value))


def masked_fill_(input: Tensor, mask: Tensor, value) -> Tensor:
    return dispatch_inplace(OPS["masked_fill"], input, (mask,), mask_attrs(mask, value))


def _triangle(name: str, inplace: bool = False):
    """torch.triu / tril, or (``inplace``) Tensor.triu_ / tril_."""
    op = OPS[name]

    def fn(input: Tensor, diagonal: int = 0) -> Tensor:
        require_tensor(input, name)
        if inplace and GradMode.enabled and input._requires_grad and input.grad_fn is None:   # PyTorch's first check
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if input._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        attrs = {"diagonal": int(diagonal)}
        return dispatch_inplace(op, input, (), attrs) if inplace else dispatch(op, (input,), attrs)

    fn.__name__ = name + ("_" if inplace else "")
    fn.__doc__ = f"torch.{name}: the {'upper' if name == 'triu' else 'lower'} triangle of the last two dims."
    return fn


triu, tril = _triangle("triu"), _triangle("tril")
triu_, tril_ = _triangle("triu", inplace=True), _triangle("tril", inplace=True)


# ---- div with a rounding mode (the ops live in staticgrad.ops.casts) ------------------------------

def div_rounded(input, other, rounding_mode):
    """div with ``rounding_mode`` 'trunc' or 'floor': DivBackward2, zero gradients, as PyTorch."""
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    attrs = {"rounding_mode": rounding_mode}
    if not isinstance(other, Tensor):
        require_tensor(input, "div")
        return dispatch(_op("div_mode_scalar"), (input,), {"other": as_scalar(other), **attrs})
    if not isinstance(input, Tensor):
        input = full_like_scalar(other, _number(input, "div"))
    return dispatch(_op("div_mode"), (input, other), attrs)
