"""Tensor's PyTorch methods and operators, and calling a backward node: installed on the data
classes from the top of the eager core, so that ``tensor`` and ``node`` import nothing above them.
``staticgrad/__init__`` imports this module first."""

from __future__ import annotations

import warnings

from staticgrad._eager import engine, indexing, movement
from staticgrad._eager import functions as fn
from staticgrad._eager.node import Node
from staticgrad._eager.printing import tensor_repr
from staticgrad._eager.tensor import Tensor, _read_guard
from staticgrad.ops import dtypes as _dtypes


def _comparison(function):
    """``==`` / ``!=``: against None, a list, tuple, string or dict PyTorch's tensor declines
    (NotImplemented), so Python compares identities (False for ==, True for !=)."""
    def method(self, other):
        if other is None or isinstance(other, (list, tuple, str, dict, set)):
            return NotImplemented
        return function(self, other)
    return method


def _flip(self, *dims, **keywords):
    """Tensor.flip(*dims) or flip(dims=...)."""
    if "dims" in keywords:
        if dims:
            raise TypeError("flip() got multiple values for argument 'dims'")
        return movement.flip(self, keywords.pop("dims"), **keywords)
    if not dims:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    return movement.flip(self, dims[0] if len(dims) == 1 else dims, **keywords)


def _reflect(f):
    def method(self, other):
        return f(other, self)
    return method


def _to(self, *args, **kwargs):
    """``.to(dtype)``; devices other than "cpu" are refused."""
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, _dtypes.DType) or a in (float, int, bool):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif str(a) != "cpu":
            raise RuntimeError(f"staticgrad runs on the CPU only; cannot move a tensor to {a!r}")
    device = kwargs.get("device")
    if device is not None and str(device) != "cpu":
        raise RuntimeError(f"staticgrad runs on the CPU only; cannot move a tensor to {device!r}")
    return self if dtype is None else fn.to_dtype(self, dtype)


def _max(self, dim=None, keepdim=False, *, axis=None):
    return fn.max(self, dim, keepdim, axis=axis)


def _min(self, dim=None, keepdim=False, *, axis=None):
    return fn.min(self, dim, keepdim, axis=axis)


def _view(self, *shape):
    return fn.view(self, *shape)


def _reshape(self, *shape):
    return fn.reshape(self, *shape)


def _permute(self, *dims):
    return fn.permute(self, *dims)


def _expand(self, *sizes):
    return fn.expand(self, *sizes)


def _repeat_type(dtype):
    return lambda self: fn.to_dtype(self, dtype)


METHODS = {
    # operators
    "__add__": fn.add, "__radd__": _reflect(fn.add), "__iadd__": fn.add_,
    "__sub__": fn.sub, "__rsub__": _reflect(fn.sub), "__isub__": fn.sub_,
    "__mul__": fn.mul, "__rmul__": _reflect(fn.mul), "__imul__": fn.mul_,
    "__truediv__": fn.div, "__rtruediv__": _reflect(fn.div), "__itruediv__": fn.div_,
    "__pow__": fn.pow, "__rpow__": _reflect(fn.pow), "__matmul__": fn.matmul, "__rmatmul__": _reflect(fn.matmul),
    "__neg__": fn.neg, "__abs__": fn.abs,
    "__eq__": _comparison(fn.eq), "__ne__": _comparison(fn.ne),
    "__lt__": fn.lt, "__le__": fn.le, "__gt__": fn.gt, "__ge__": fn.ge,
    "__getitem__": indexing.getitem, "__setitem__": indexing.setitem,
    # math
    "add": fn.add, "sub": fn.sub, "mul": fn.mul, "div": fn.div, "true_divide": fn.div, "pow": fn.pow,
    "multiply": fn.mul, "subtract": fn.sub, "divide": fn.div, "negative": fn.neg,
    "neg": fn.neg, "exp": fn.exp, "log": fn.log, "tanh": fn.tanh, "sigmoid": fn.sigmoid, "relu": fn.relu,
    "sqrt": fn.sqrt, "rsqrt": fn.rsqrt, "reciprocal": fn.reciprocal, "abs": fn.abs, "sign": fn.sign,
    "square": fn.square, "clamp": fn.clamp, "clip": fn.clamp, "maximum": fn.maximum, "minimum": fn.minimum,
    "eq": fn.eq, "ne": fn.ne, "lt": fn.lt, "le": fn.le, "gt": fn.gt, "ge": fn.ge,
    "logical_and": fn.logical_and, "logical_not": fn.logical_not,
    "sum": fn.sum, "mean": fn.mean, "max": _max, "min": _min, "amax": fn.amax, "amin": fn.amin,
    "argmax": fn.argmax, "argmin": fn.argmin, "softmax": fn.softmax, "log_softmax": fn.log_softmax,
    "logsumexp": fn.logsumexp, "gather": fn.gather, "masked_fill": fn.masked_fill, "triu": fn.triu, "tril": fn.tril,
    "matmul": fn.matmul, "mm": fn.mm, "bmm": fn.bmm, "mv": fn.mv, "dot": fn.dot,
    # shape
    "view": _view, "reshape": _reshape, "flatten": fn.flatten, "transpose": fn.transpose, "swapaxes": fn.transpose,
    "t": fn.t, "permute": _permute, "unsqueeze": fn.unsqueeze, "squeeze": fn.squeeze, "expand": _expand,
    "expand_as": fn.expand_as, "sum_to_size": fn.sum_to_size,
    "split": fn.split, "chunk": fn.chunk, "narrow": fn.narrow, "unbind": fn.unbind,
    "view_as": lambda self, other: fn.view(self, other._data.shape),
    "reshape_as": lambda self, other: fn.reshape(self, other._data.shape),
    # copies and types
    "clone": fn.clone, "detach": fn.detach, "to": _to, "type_as": lambda self, other: fn.to_dtype(self, other.dtype),
    "float": _repeat_type(_dtypes.float32), "double": _repeat_type(_dtypes.float64),
    "long": _repeat_type(_dtypes.int64), "int": _repeat_type(_dtypes.int32), "bool": _repeat_type(_dtypes.bool_),
    "half": _repeat_type(_dtypes.float16), "cpu": lambda self: self,
    "contiguous": lambda self: self if self.is_contiguous() else fn.clone(self),
    # in place
    "add_": fn.add_, "sub_": fn.sub_, "mul_": fn.mul_, "div_": fn.div_, "copy_": fn.copy_, "zero_": fn.zero_,
    "fill_": indexing.fill_, "clamp_": fn.clamp_, "pow_": fn.pow_, "exp_": fn.exp_, "tanh_": fn.tanh_,
    "sigmoid_": fn.sigmoid_, "relu_": fn.relu_, "sqrt_": fn.sqrt_, "neg_": fn.neg_, "abs_": fn.abs_, "log_": fn.log_,
    "masked_fill_": fn.masked_fill_,
}


def _detach_(self):
    """Detach in place: the tensor becomes a leaf that does not require grad."""
    if self._base is not None and self.grad_fn is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self.grad_fn = None
    self._requires_grad = False
    return self


METHODS["detach_"] = _detach_

# data movement (staticgrad._eager.movement)
METHODS.update({
    "flip": _flip,
    "fliplr": movement.fliplr, "flipud": movement.flipud, "roll": movement.roll, "diagonal": movement.diagonal,
    "repeat": movement.repeat, "tile": movement._tile_method,
    "diag": movement.diag, "diag_embed": movement.diag_embed, "unfold": movement.unfold,
    "unflatten": movement.unflatten,
    "repeat_interleave": movement.repeat_interleave, "index_select": movement.index_select,
    "sort": movement.sort, "argsort": movement.argsort, "topk": movement.topk,
    "masked_select": movement.masked_select, "nonzero": movement.nonzero,
})

for _name, _fn in METHODS.items():
    setattr(Tensor, _name, _fn)


def _matrix_transpose(self):
    """``.mT``: the last two dims swapped. PyTorch refuses a 1-D tensor and returns a 0-dim one itself
    (deprecated, with a warning)."""
    ndim = self._data.ndim
    if ndim == 0:
        warnings.warn("Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
                      UserWarning, stacklevel=2)
        return self
    if ndim == 1:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return fn.transpose(self, -2, -1)


Tensor.T = property(lambda self: fn.permute(self, tuple(reversed(range(self._data.ndim)))))
Tensor.mT = property(_matrix_transpose)


def _retain_grad(self) -> None:
    if self.grad_fn is None:
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        return
    engine.retain_grad(self)


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    engine.backward((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs)


def _repr(self) -> str:
    _read_guard(self, "printing")
    return tensor_repr(self)


def _call_node(self, *grads):
    """``node(grad)``: run one backward node on the given gradients, as PyTorch allows."""
    result = engine.apply_node(self, list(grads))
    return result[0] if len(result) == 1 else result


def _iter(self):
    """Iterating a tensor unbinds its first dim (one UnbindBackward0 node for all rows, as PyTorch)."""
    if self._data.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(fn.unbind(self, 0))


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    raise AssertionError("Torch not compiled with CUDA enabled")


Tensor.__iter__ = _iter
Tensor.cuda = _cuda
Tensor.retain_grad = _retain_grad
Tensor.register_hook = lambda self, hook: engine.register_tensor_hook(self, hook)
Tensor.backward = _backward
Tensor.__repr__ = Tensor.__str__ = _repr
Node.__call__ = _call_node


# Methods defined next to their functions: elementwise math, reductions and scans, casts and remainders,
# Tensor.new_* and the random refills, the bitwise and logical operators, the indexed writes (scatter...).
from staticgrad._eager import bitwise as _bitwise  # noqa: E402
from staticgrad._eager import casts as _casts  # noqa: E402
from staticgrad._eager import composites as _composites  # noqa: E402
from staticgrad._eager import reductions_more as _reductions_more  # noqa: E402
from staticgrad._eager.counting_functions import METHODS as _COUNTING_METHODS  # noqa: E402
from staticgrad._eager.math_functions import METHODS as _MATH_METHODS  # noqa: E402
from staticgrad._eager.new_factories import METHODS as _NEW_METHODS  # noqa: E402
from staticgrad._eager.order_functions import METHODS as _ORDER_METHODS  # noqa: E402
from staticgrad._eager.random_inplace import METHODS as _RANDOM_METHODS  # noqa: E402
from staticgrad._eager.scatter import METHODS as _SCATTER_METHODS  # noqa: E402
from staticgrad._eager.special_functions import METHODS as _SPECIAL_METHODS  # noqa: E402

for _table in (_MATH_METHODS, _reductions_more.METHODS, _casts.METHODS, _NEW_METHODS, _RANDOM_METHODS,
               _bitwise.METHODS, _SCATTER_METHODS, _composites.METHODS, _SPECIAL_METHODS,
               _ORDER_METHODS, _COUNTING_METHODS):
    METHODS.update(_table)
    for _name, _fn in _table.items():
        setattr(Tensor, _name, _fn)

# More random draws: bernoulli(_), exponential_, geometric_, log_normal_, cauchy_, multinomial.
from staticgrad._eager.random_more import METHODS as _RANDOM_MORE_METHODS  # noqa: E402

METHODS.update(_RANDOM_MORE_METHODS)
for _name, _fn in _RANDOM_MORE_METHODS.items():
    setattr(Tensor, _name, _fn)

# Matrix products, indexed reads and writes, more math and statistics.
from staticgrad._eager.indexing_more import METHODS as _INDEXING_MORE_METHODS  # noqa: E402
from staticgrad._eager.integrals import METHODS as _INTEGRALS_METHODS  # noqa: E402
from staticgrad._eager.linalg_decomp import METHODS as _LINALG_DECOMP_METHODS  # noqa: E402
from staticgrad._eager.linalg_more import METHODS as _LINALG_MORE_METHODS  # noqa: E402
from staticgrad._eager.math_extra import METHODS as _MATH_EXTRA_METHODS  # noqa: E402
from staticgrad._eager.metadata_inplace import METHODS as _METADATA_INPLACE_METHODS  # noqa: E402
from staticgrad._eager.methods_more import METHODS as _MORE_METHODS  # noqa: E402

for _table in (_LINALG_DECOMP_METHODS, _LINALG_MORE_METHODS, _INDEXING_MORE_METHODS, _MATH_EXTRA_METHODS,
               _INTEGRALS_METHODS, _METADATA_INPLACE_METHODS, _MORE_METHODS):
    METHODS.update(_table)
    for _name, _fn in _table.items():
        setattr(Tensor, _name, _fn)

# NumPy's keyword names (axis=, keepdims=) on the methods PyTorch binds natively.
from staticgrad._eager.arguments import NUMPY_KEYWORD_NAMES, numpy_keyword_names  # noqa: E402

for _name in NUMPY_KEYWORD_NAMES:
    if _name in METHODS:
        METHODS[_name] = numpy_keyword_names(METHODS[_name])
        setattr(Tensor, _name, METHODS[_name])
