"""Indexed writes: scatter (a source tensor or a value), scatter_add, scatter_reduce, index_add,
index_copy, index_fill (a value or a 0-dim tensor) and masked_fill with a 0-dim tensor value.

Each forward starts from a copy of ``self`` (or writes into ``out``, which in place is ``self``'s
own array) and writes at the indexed positions; repeated indices accumulate in index order for the
adding forms, as PyTorch's CPU kernels do. Indices out of range raise PyTorch's errors before
anything is written. Backward formulas are PyTorch's (derivatives.yaml), written with table ops."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register

NOT_IMPLEMENTED_NODE = "torch::autograd::NotImplemented"


def _start(a, out):
    """The result array holding ``a``'s values: a copy, or ``out`` (``a`` itself when in place)."""
    if out is None:
        return a.copy()
    if out is not a:
        np.copyto(out, a)
    return out


def _check_bounds(index, size: int, dim: int, error=RuntimeError, prefix: str = "", original=None) -> None:
    bad = (index < 0) | (index >= size)
    if np.any(bad):
        shown = (index if original is None else original)[bad].flat[0]
        raise error(f"{prefix}index {int(shown)} is out of bounds for dimension {dim} with size {size}")


def _grid(index, dim: int) -> tuple:
    """The positions a scatter along ``dim`` writes: index's own coordinates, ``index`` along ``dim``."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def _as_1d(*arrays):
    """0-dim arrays seen as 1-element vectors (a 0-dim self scatters into its one element)."""
    return tuple(a.reshape(1) if a.ndim == 0 else a for a in arrays)


def _src_part(src, index):
    """The part of ``src`` a scatter reads: ``src`` at index's coordinates (src may be larger)."""
    return src[tuple(slice(0, n) for n in index.shape)]


def _scatter_target(a, index, out, dim):
    result = _start(a, out)
    target, index = _as_1d(result, index)
    _check_bounds(index, target.shape[dim], dim)
    return result, target, _grid(index.astype(np.int64, copy=False), dim)


# ---- scatter, scatter_add --------------------------------------------------------------------------

def _scatter(a, index, src, out=None, dim=0, reduce=None):
    result, target, grid = _scatter_target(a, index, out, dim)
    (src,) = _as_1d(src)
    values = _src_part(src, grid[dim])
    if reduce is None:
        target[grid] = values
    else:  # the deprecated reduce= of scatter: "add" or "multiply"
        (np.add if reduce == "add" else np.multiply).at(target, grid, values)
    return result


def _scatter_value(a, index, out=None, dim=0, value=0.0, reduce=None):
    result, target, grid = _scatter_target(a, index, out, dim)
    if reduce is None:
        target[grid] = value
    else:
        (np.add if reduce == "add" else np.multiply).at(target, grid, np.asarray(value, dtype=target.dtype))
    return result


def _scatter_add(a, index, src, out=None, dim=0):
    result, target, grid = _scatter_target(a, index, out, dim)
    (src,) = _as_1d(src)
    np.add.at(target, grid, _src_part(src, grid[dim]))
    return result


def _gather_back(F, g, index, dim, src_shape):
    """A source's gradient: the output gradient gathered at the index (0-dim sources stay 0-dim)."""
    gathered = F.gather(g, index, dim=dim)
    return F.view(gathered, shape=()) if src_shape == () and gathered._data.shape != () else gathered


_DIM_INDEX = (Save("dim", "attr:dim", freed=False), Save("index", 1))


def _scatter_name(at):
    return "ScatterBackward0" if at.get("reduce") is None else NOT_IMPLEMENTED_NODE


def _scatter_backward(F, g, s, at, need):
    if at.get("reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    dim, index = at["dim"], s["index"]
    return (F.scatter_value(g, index, dim=dim, value=0.0) if need[0] else None, None,
            _gather_back(F, g, index, dim, tuple(s["src_sym_sizes"])) if need[2] else None)


def _scatter_value_backward(F, g, s, at, need):
    if at.get("reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    return (F.scatter_value(g, s["index"], dim=at["dim"], value=0.0), None)


register(OpDef("scatter", _scatter, "other", _scatter_name, _scatter_backward,
               _DIM_INDEX + (Save("src_sym_sizes", "shape:2", freed=False),), "same", grad_inputs=(0, 2)))
register(OpDef("scatter_value", _scatter_value, "other",
               lambda at: "ScatterBackward1" if at.get("reduce") is None else NOT_IMPLEMENTED_NODE,
               _scatter_value_backward, _DIM_INDEX, "same", grad_inputs=(0,)))
register(OpDef("scatter_add", _scatter_add, "other", "ScatterAddBackward0",
               lambda F, g, s, at, need: (g if need[0] else None, None,
                                          _gather_back(F, g, s["index"], at["dim"], tuple(s["src_sym_sizes"]))
                                          if need[2] else None),
               _DIM_INDEX + (Save("src_sym_sizes", "shape:2", freed=False),), "same", grad_inputs=(0, 2)))


# ---- scatter_reduce ----------------------------------------------------------------------------------

_INITIAL = {"sum": 0, "mean": 0, "prod": 1}


_ALIASES = {"max": "amax", "min": "amin"}  # accepted by the forward; PyTorch's backward refuses them


def _scatter_reduce(a, index, src, out=None, dim=0, reduce="sum", include_self=True):
    reduce = _ALIASES.get(reduce, reduce)
    result, target, grid = _scatter_target(a, index, out, dim)
    (src,) = _as_1d(src)
    values = _src_part(src, grid[dim])
    if not include_self:  # the scattered positions start from the reduction's identity
        if reduce in _INITIAL:
            initial = _INITIAL[reduce]
        elif target.dtype.kind == "f":
            initial = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(target.dtype) if target.dtype.kind in "iu" else None
            initial = (info.min if reduce == "amax" else info.max) if info else reduce == "amin"
        target[grid] = initial
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce]
    ufunc.at(target, grid, values)
    if reduce == "mean":
        count = np.full(target.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, grid, 1)
        count = np.maximum(count, 1)
        if target.dtype.kind == "f":
            np.true_divide(target, count.astype(target.dtype), out=target)
        else:
            np.floor_divide(target, count.astype(target.dtype), out=target)
    return result


def _as_float(F, mask, like):
    """A boolean mask as 0/1 values of ``like``'s dtype."""
    return F.to_dtype(mask, dtype=like._data.dtype, self_dtype=mask._data.dtype)


def _scatter_reduce_backward(F, g, s, at, need):
    """PyTorch's scatter_reduce_backward, for each reduction."""
    dim, index, reduce, include_self = at["dim"], s["index"], at["reduce"], at["include_self"]
    if reduce in _ALIASES:
        raise RuntimeError(f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', 'amin' but got {reduce}.")
    self_, src, result = s["self"], s["src"], s["result"]
    grad_self = grad_src = None
    if reduce == "sum":
        grad_self, grad_src = g, F.gather(g, index, dim=dim)
    elif reduce == "mean":
        counts = F.fill(g, value=1.0 if include_self else 0.0)
        counts = F.scatter_add(counts, index, F.fill(src, value=1.0), dim=dim)
        counts = F.masked_fill(counts, F.eq_scalar(counts, other=0.0), value=1.0)
        grad_self = F.div(g, counts)
        grad_src = F.div(F.gather(g, index, dim=dim), F.gather(counts, index, dim=dim))
    elif reduce in ("amax", "amin"):  # the gradient shared evenly among the values that are the result
        value = F.gather(result, index, dim=dim)
        self_is = F.eq(self_, result)
        src_is = F.eq(src, value)
        self_is, src_is = _as_float(F, self_is, g), _as_float(F, src_is, g)
        spread = F.div(g, F.scatter_add(self_is, index, src_is, dim=dim))
        grad_self = F.mul(self_is, spread)
        grad_src = F.mul(src_is, F.gather(spread, index, dim=dim))
    else:  # prod: exclusive products where self or src hold zeros
        masked_self = F.masked_fill(self_, F.eq_scalar(self_, other=0.0), value=1.0)
        masked_self_result = F.scatter_reduce(masked_self, index, src, dim=dim, reduce="prod",
                                              include_self=include_self)
        grad_self = F.div(F.mul(g, masked_self_result), masked_self)
        src_zero = F.eq_scalar(src, other=0.0)
        zeros_at = F.gather(F.scatter_add(F.fill(self_, value=0.0), index,
                                          _as_float(F, src_zero, g), dim=dim), index, dim=dim)
        single_zero = F.logical_and(src_zero, F.eq_scalar(zeros_at, other=1.0))
        masked_src_result = F.scatter_reduce(self_, index, F.masked_fill(src, single_zero, value=1.0), dim=dim,
                                             reduce="prod", include_self=include_self)
        grad_src = F.where(single_zero, F.gather(F.mul(g, masked_src_result), index, dim=dim),
                           F.div(F.gather(F.mul(g, result), index, dim=dim),
                                 F.masked_fill(src, src_zero, value=1.0)))
    if not include_self:
        grad_self = F.scatter_value(grad_self, index, dim=dim, value=0.0)
    return (grad_self if need[0] else None, None, grad_src if need[2] else None)


register(OpDef("scatter_reduce", _scatter_reduce, "other", "ScatterReduceBackward0", _scatter_reduce_backward,
               (Save("dim", "attr:dim", freed=False), Save("include_self", "attr:include_self", freed=False),
                Save("index", 1), Save("reduce", "attr:reduce", freed=False), Save("result", "result"),
                Save("self", 0), Save("src", 2)), "same", grad_inputs=(0, 2)))


# ---- index_add, index_copy, index_fill ------------------------------------------------------------

def _index_target(a, index, out, dim, error=RuntimeError, prefix="", wrap=False):
    result = _start(a, out)
    (target,) = _as_1d(result)
    size, original = target.shape[dim], index
    if wrap:  # index_fill counts negative indices from the end
        index = np.where(index < 0, index + size, index)
    _check_bounds(index, size, dim, error, prefix, original)
    return result, target, (slice(None),) * dim + (index.astype(np.int64, copy=False),)


def _index_add(a, index, source, out=None, dim=0, alpha=1, source_dim=0):
    result, target, where = _index_target(a, index, out, dim)
    (source,) = _as_1d(source)
    np.add.at(target, where, source if alpha == 1 else source * np.asarray(alpha, dtype=source.dtype))
    return result


def _index_copy(a, index, source, out=None, dim=0, source_dim=0):
    result, target, where = _index_target(a, index, out, dim, IndexError, "index_copy_(): ")
    (source,) = _as_1d(source)
    target[where] = source
    return result


def _index_fill(a, index, out=None, dim=0, value=0.0):
    result, target, where = _index_target(a, index, out, dim, IndexError, wrap=True)
    target[where] = value
    return result


def _index_fill_tensor(a, index, value, out=None, dim=0):
    return _index_fill(a, index, out=out, dim=dim, value=value[()])


def _selected(F, g, s, at, source_dim: int):
    picked = F.index_select(g, s["index"], dim=at["dim"])
    return F.view(picked, shape=()) if source_dim == 0 and picked._data.shape != () else picked


def _index_add_backward(F, g, s, at, need):
    grad_source = None
    if need[2]:
        grad_source = _selected(F, g, s, at, s["source_dim"])
        if at["alpha"] != 1:
            grad_source = F.mul_scalar(grad_source, other=at["alpha"])
    return (g if need[0] else None, None, grad_source)


def _index_copy_backward(F, g, s, at, need):
    return (F.index_fill(g, s["index"], dim=at["dim"], value=0.0) if need[0] else None, None,
            _selected(F, g, s, at, s["source_dim"]) if need[2] else None)


def _index_fill_tensor_backward(F, g, s, at, need):
    """The value's gradient: the sum of the gradient over the filled positions (each counted once,
    as PyTorch's unique indices give), here the gradient less its index_fill with 0, summed."""
    filled = F.index_fill(g, s["index"], dim=at["dim"], value=0.0)
    return (filled if need[0] else None, None, F.sum(F.sub(g, filled)) if need[2] else None)


_SOURCE_DIM = Save("source_dim", "attr:source_dim", freed=False)
register(OpDef("index_add", _index_add, "other", "IndexAddBackward0", _index_add_backward,
               (Save("alpha", "attr:alpha", freed=False),) + _DIM_INDEX + (_SOURCE_DIM,), "same",
               grad_inputs=(0, 2)))
register(OpDef("index_copy", _index_copy, "other", "IndexCopyBackward0", _index_copy_backward,
               _DIM_INDEX + (_SOURCE_DIM,), "same", grad_inputs=(0, 2)))
register(OpDef("index_fill", _index_fill, "other", "IndexFillBackward0",
               lambda F, g, s, at, need: (F.index_fill(g, s["index"], dim=at["dim"], value=0.0), None),
               _DIM_INDEX, "same", grad_inputs=(0,)))
register(OpDef("index_fill_tensor", _index_fill_tensor, "other", "IndexFillBackward1", _index_fill_tensor_backward,
               _DIM_INDEX, "same", grad_inputs=(0, 2)))


# ---- masked_fill with a 0-dim tensor value ------------------------------------------------------------

def _masked_fill_tensor(a, mask, value, out=None):
    result = np.where(mask, value, a)
    if out is None:
        return result.astype(a.dtype, copy=False)
    np.copyto(out, result, casting="unsafe")
    return out


def _masked_fill_tensor_backward(F, g, s, at, need):
    mask = s["mask"]
    grad_value = None
    if need[2]:
        grad_value = F.sum(F.where(mask, g, F.full(shape=(), value=0.0, dtype=g._data.dtype)))
    return (F.masked_fill(g, mask, value=0.0) if need[0] else None, None, grad_value)


register(OpDef("masked_fill_tensor", _masked_fill_tensor, "other", "MaskedFillBackward1",
               _masked_fill_tensor_backward, (Save("mask", 1),), "same", grad_inputs=(0, 2)))
