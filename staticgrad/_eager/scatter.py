"""PyTorch's indexed writes over the op table (ops/scatter.py): scatter (a source tensor or a value,
with the deprecated ``reduce=``), scatter_add, scatter_reduce, index_add, index_copy, index_fill and
masked_fill with a 0-dim tensor value; each as a torch function, a Tensor method and an in-place
method, with PyTorch's argument checks and messages."""

from __future__ import annotations

import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
               "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _type_name(t: Tensor) -> str:
    return _TYPE_NAMES[t._data.dtype.name]


def _run(op: str, inplace: bool, self: Tensor, others: tuple, attrs: dict):
    if inplace:
        return dispatch_inplace(OPS[op], self, others, attrs)
    return dispatch(OPS[op], (self,) + others, attrs)


# ---- scatter, scatter_add, scatter_reduce -------------------------------------------------------------

def _check_scatter(self: Tensor, dim, index: Tensor, src: Tensor | None) -> int:
    """PyTorch's scatter checks (dim, index dtype and rank, sizes, src dtype); returns the dim."""
    fn.require_tensor(index, "scatter", "index", 3)
    ndim = self._data.ndim
    d = _normalize_dim(dim, ndim)
    if index._data.dtype.name not in ("int64", "int32"):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src is not None and src._data.dtype != self._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if index._data.ndim != ndim and not (index._data.ndim <= 1 and ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if src is not None:
        if src._data.ndim != index._data.ndim and not (src._data.ndim <= 1 and index._data.ndim <= 1):
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    shape, ishape = self._data.shape, index._data.shape
    if ishape and shape:
        too_big = any(ishape[k] > shape[k] for k in range(len(ishape)) if k != d)
        if src is not None:
            too_big = too_big or any(ishape[k] > src._data.shape[k] for k in range(len(ishape)))
        if too_big:
            message = (f"Expected index {list(ishape)} to be no larger than self {list(shape)} apart from dimension "
                       f"{d}")
            if src is not None:
                message += f" and to be no larger size than src {list(src._data.shape)}"
            raise RuntimeError(message)
    return d


def _scatter(self, dim, index, src, value, reduce, inplace: bool):
    fn.require_tensor(self, "scatter")
    if src is not None and value is not None:
        raise TypeError("scatter() received an invalid combination of arguments - got both src and value")
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required positional arguments: \"src\"")
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if src is not None:
            warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in "
                          "a future PyTorch release. Use torch.scatter_reduce instead for more reduction options.",
                          UserWarning, stacklevel=3)
    d = _check_scatter(self, dim, index, src)
    if src is not None:
        return _run("scatter", inplace, self, (index, src), {"dim": d, "reduce": reduce})
    return _run("scatter_value", inplace, self, (index,), {"dim": d, "value": fn.as_scalar(value), "reduce": reduce})


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """torch.scatter: ``input`` with ``src`` (or ``value``) written at ``index`` along ``dim``
    (ScatterBackward0 / ScatterBackward1)."""
    return _scatter(input, dim, index, src, value, reduce, False)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    return _scatter(self, dim, index, src, value, reduce, True)


def _scatter_add(self, dim, index, src, inplace: bool):
    fn.require_tensor(self, "scatter_add")
    fn.require_tensor(src, "scatter_add", "src", 3)
    d = _check_scatter(self, dim, index, src)
    return _run("scatter_add", inplace, self, (index, src), {"dim": d})


def scatter_add(input, dim, index, src):
    """torch.scatter_add: ``src`` added into a copy of ``input`` at ``index`` along ``dim``."""
    return _scatter_add(input, dim, index, src, False)


def scatter_add_(self, dim, index, src):
    return _scatter_add(self, dim, index, src, True)


_REDUCES = ("sum", "prod", "mean", "amax", "amin", "max", "min")  # max/min: forward-only aliases, as in PyTorch


def _scatter_reduce(self, dim, index, src, reduce, include_self, inplace: bool):
    fn.require_tensor(self, "scatter_reduce")
    fn.require_tensor(src, "scatter_reduce", "src", 3)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = _check_scatter(self, dim, index, src)
    return _run("scatter_reduce", inplace, self, (index, src),
                {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """torch.scatter_reduce: ``src`` reduced ("sum", "prod", "mean", "amax", "amin") into ``input`` at
    ``index`` along ``dim``, with or without ``input``'s own values (ScatterReduceBackward0)."""
    return _scatter_reduce(input, dim, index, src, reduce, include_self, False)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce(self, dim, index, src, reduce, include_self, True)


# ---- index_add, index_copy, index_fill --------------------------------------------------------------

def _index_vector(index: Tensor, name: str) -> None:
    if index._data.ndim > 1:
        if name == "index_add_":
            raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index._data.ndim} with "
                             f"type: {_type_name(index)} and size: {list(index._data.shape)}")
        if name == "index_copy_":
            raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index._data.ndim})")
        raise RuntimeError("Index has to be a vector/scalar")


def _check_source(self: Tensor, d: int, index: Tensor, source: Tensor, name: str) -> None:
    count = max(index.numel(), 1) if index._data.ndim else 1
    shape, sshape = self._data.shape, source._data.shape
    source_size = sshape[d] if sshape else 1
    if name == "index_add_":
        if index._data.dtype.name not in ("int64", "int32"):
            raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {_type_name(index)}")
        if source._data.dtype != self._data.dtype:
            raise RuntimeError(f"index_add_(): self ({_type_name(self)}) and source ({_type_name(source)}) must "
                               "have the same scalar type")
        if count != source_size:
            raise RuntimeError(f"index_add_(): Number of indices ({count}) should be equal to source.size(dim): "
                               f"({source_size}), for dim: {d}")
        rest = [n for k, n in enumerate(shape) if k != d], [n for k, n in enumerate(sshape) if k != d]
        if (len(shape) > 0 and len(sshape) != len(shape)) or (len(sshape) == len(shape) and rest[0] != rest[1]):
            raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified "
                               f"dimension. Got self.shape = {list(shape)} source.shape = {list(sshape)}")
        return
    if index._data.dtype.name != "int64":
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {_type_name(index)}")
    if count != source_size:
        raise IndexError(f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) "
                         f"({source_size})")
    for k, (n, m) in enumerate(zip(shape, sshape)):
        if k != d and n != m:  # PyTorch counts the dimension within the slice (the dim left out)
            at = k if k < d else k - 1
            raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. Destination "
                               f"slice shape: {n} at dimension {at} and source slice shape: {m} at dimension {at}.")
    if source._data.dtype != self._data.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_type_name(self)} and (source) {_type_name(source)}")


def _index_add(self, dim, index, source, alpha, inplace: bool):
    fn.require_tensor(self, "index_add")
    fn.require_tensor(index, "index_add", "index", 3)
    fn.require_tensor(source, "index_add", "source", 4)
    d = _normalize_dim(dim, self._data.ndim)
    _index_vector(index, "index_add_")
    _check_source(self, d, index, source, "index_add_")
    return _run("index_add", inplace, self, (index.reshape(-1), source),
                {"dim": d, "alpha": fn.as_scalar(alpha), "source_dim": source._data.ndim})


def index_add(input, dim, index, source, *, alpha=1):
    """torch.index_add: ``alpha * source`` added into a copy of ``input`` at ``index`` along ``dim``."""
    return _index_add(input, dim, index, source, alpha, False)


def index_add_(self, dim, index, source, *, alpha=1):
    return _index_add(self, dim, index, source, alpha, True)


def _index_copy(self, dim, index, source, inplace: bool):
    fn.require_tensor(self, "index_copy")
    fn.require_tensor(index, "index_copy", "index", 3)
    fn.require_tensor(source, "index_copy", "source", 4)
    d = _normalize_dim(dim, self._data.ndim)
    _index_vector(index, "index_copy_")
    _check_source(self, d, index, source, "index_copy_")
    return _run("index_copy", inplace, self, (index.reshape(-1), source), {"dim": d, "source_dim": source._data.ndim})


def index_copy(input, dim, index, source):
    """torch.index_copy: ``source``'s slices written into a copy of ``input`` at ``index`` along ``dim``."""
    return _index_copy(input, dim, index, source, False)


def index_copy_(self, dim, index, source):
    return _index_copy(self, dim, index, source, True)


def _index_fill(self, dim, index, value, inplace: bool):
    fn.require_tensor(self, "index_fill")
    fn.require_tensor(index, "index_fill", "index", 3)
    d = _normalize_dim(dim, self._data.ndim)
    if index._data.dtype.name != "int64":
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    _index_vector(index, "index_fill_")
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
        return _run("index_fill_tensor", inplace, self, (index.reshape(-1), value), {"dim": d})
    return _run("index_fill", inplace, self, (index.reshape(-1),), {"dim": d, "value": fn.as_scalar(value)})


def index_fill(input, dim, index, value):
    """torch.index_fill: ``value`` (a number or a 0-dim tensor) written into a copy of ``input`` at
    ``index`` along ``dim`` (IndexFillBackward0 / IndexFillBackward1)."""
    return _index_fill(input, dim, index, value, False)


def index_fill_(self, dim, index, value):
    return _index_fill(self, dim, index, value, True)


# ---- masked_fill with a tensor value -------------------------------------------------------------------

def _masked_fill(self, mask, value, inplace: bool):
    if not isinstance(value, Tensor):
        return (fn.masked_fill_ if inplace else fn.masked_fill)(self, mask, value)
    fn.require_tensor(self, "masked_fill")
    fn.require_tensor(mask, "masked_fill", "mask", 2)
    if value._data.ndim:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value._data.ndim} dimension(s).")
    fn.mask_attrs(mask, 0)  # PyTorch's check of the mask's dtype
    return _run("masked_fill_tensor", inplace, self, (mask, value), {})   # (cast by the fill, as PyTorch's)


def masked_fill(input, mask, value):
    """torch.masked_fill: ``value`` (a number, or a 0-dim tensor, MaskedFillBackward1) where ``mask``."""
    return _masked_fill(input, mask, value, False)


def masked_fill_(self, mask, value):
    return _masked_fill(self, mask, value, True)


METHODS = {
    "scatter": scatter, "scatter_": scatter_, "scatter_add": scatter_add, "scatter_add_": scatter_add_,
    "scatter_reduce": scatter_reduce, "scatter_reduce_": scatter_reduce_,
    "index_add": index_add, "index_add_": index_add_, "index_copy": index_copy, "index_copy_": index_copy_,
    "index_fill": index_fill, "index_fill_": index_fill_, "masked_fill": masked_fill, "masked_fill_": masked_fill_,
}
