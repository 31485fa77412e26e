"""Data movement ops: flip, roll, repeat, diagonals, unfold, padding, sorting, index_select, masked_select,
nonzero, one_hot and linspace. Each backward is written with ops of this table (mostly the
adjoint op registered next to its forward), so eager, create_graph and replay share it."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.reductions import axis_error
from staticgrad.ops.registry import ZEROS_SELF, OpDef, Save, register
from staticgrad.ops.shape import reshape_back


def _into(result, out):
    """``result`` written into ``out`` when the caller planned a buffer (replay), else returned."""
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _kept(name: str) -> Save:
    """A plain-value attribute slot (shown as ``grad_fn._saved_<name>``, never freed)."""
    return Save(name, f"attr:{name}", freed=False)


_SIZES = Save("self_sym_sizes", "shape:0", freed=False)


# ---- flip and roll ----------------------------------------------------------------------------

register(OpDef("flip", lambda a, out=None, dims=(): _into(np.flip(a, dims) if a.ndim else a.copy(), out), "other",
               "FlipBackward0", lambda F, g, s, at, need: (F.flip(g, dims=at["dims"]),),
               (_kept("dims"),), "same"))


def _roll(a, out=None, shifts=(), dims=()):
    if not dims:  # rolls the flattened tensor, then restores the shape
        return _into(np.roll(a, shifts[0]) if a.ndim else a.copy(), out)
    return _into(np.roll(a, shifts, axis=dims), out)


register(OpDef("roll", _roll, "other", "RollBackward0",
               lambda F, g, s, at, need: (F.roll(g, shifts=tuple(-k for k in at["shifts"]), dims=at["dims"]),),
               (_kept("dims"), _kept("shifts")), "same"))


# ---- repeat (Tensor.repeat, torch.tile) -----------------------------------------------------------

def _repeat(a, out=None, repeats=()):
    """``a`` tiled ``repeats`` times per dim (its shape padded with leading ones to len(repeats))."""
    return _into(np.tile(a, repeats), out)


def _repeat_backward(F, g, s, at, need):
    """PyTorch's repeat_backward: the leading new dims summed away, then one reshape that splits each
    repeated dim into (repeat, size) and one sum over the repeat dims."""
    repeats, sizes = at["repeats"], tuple(s["self_sym_sizes"])
    if 0 in repeats:
        return (F.full(shape=sizes, value=0.0, dtype=g._data.dtype),)
    for _ in range(len(repeats) - len(sizes)):
        g = F.sum(g, dim=(0,), keepdim=False)
    split, sum_dims = [], []
    for size, repeat in zip(sizes, repeats[len(repeats) - len(sizes):]):
        if repeat != 1:
            split.append(repeat)
            sum_dims.append(len(split) - 1)
        split.append(size)
    if not sum_dims:
        return (g,)
    g = reshape_back(F, g, tuple(split))
    return (F.sum(g, dim=tuple(sum_dims), keepdim=False),)


register(OpDef("repeat", _repeat, "other", "RepeatBackward0", _repeat_backward,
               (_kept("repeats"), _SIZES), "same"))


# ---- diagonals (diagonal is a view, as in PyTorch) ------------------------------------------------

def _diagonal(a, out=None, offset=0, dim1=0, dim2=1):
    """The diagonal as a writable view of ``a`` (NumPy's own diagonal view is read-only)."""
    moved = np.diagonal(a, offset, dim1, dim2)
    start = a[tuple(slice(max(-offset, 0) if d == dim1 else max(offset, 0) if d == dim2 else None, None)
                    for d in range(a.ndim))]
    if moved.size == 0:
        return moved
    return np.lib.stride_tricks.as_strided(start, moved.shape, moved.strides)


def _diagonal_backward(g, out=None, sizes=(), offset=0, dim1=0, dim2=1):
    result = np.zeros(sizes, dtype=g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    if g.size:
        _diagonal(result, offset=offset, dim1=dim1, dim2=dim2)[...] = g
    return result


_DIAGONAL_ATTRS = ("offset", "dim1", "dim2")


def _to_diagonal(F, g, s, at, need):
    return (F.diagonal_backward(g, sizes=tuple(s["self_sym_sizes"]), **{k: at[k] for k in _DIAGONAL_ATTRS}),)


register(OpDef("diagonal", _diagonal, "view", "DiagonalBackward0", _to_diagonal,
               (_SIZES,) + tuple(_kept(k) for k in _DIAGONAL_ATTRS), "same"))
register(OpDef("diagonal_copy", lambda a, out=None, **at: _into(_diagonal(a, **at).copy(), out), "other",
               "DiagonalBackward0_copy", _to_diagonal, (_SIZES,) + tuple(_kept(k) for k in _DIAGONAL_ATTRS), "same"))
register(OpDef("diagonal_backward", _diagonal_backward, "other", "DiagonalBackwardBackward0",
               lambda F, gg, s, at, need: (F.diagonal(gg, **{k: at[k] for k in _DIAGONAL_ATTRS}),), (), "same"))


def _diag_embed(a, out=None, offset=0, dim1=0, dim2=1):
    """The last dim of ``a`` placed on diagonal ``offset`` of new square dims ``dim1``, ``dim2`` of the
    result (torch.diag_embed; torch.diag of a vector is dims 0 and 1 of a 1-D input)."""
    n = a.shape[-1] + abs(offset)
    sizes = list(a.shape[:-1])
    for d in sorted((dim1, dim2)):
        sizes.insert(d, n)
    return _diagonal_backward(a, out, sizes=tuple(sizes), offset=offset, dim1=dim1, dim2=dim2)


register(OpDef("diag_embed", _diag_embed, "other", "DiagEmbedBackward0",
               lambda F, g, s, at, need: (F.diagonal(g, offset=at["offset"], dim1=at.get("dim1", 0),
                                                     dim2=at.get("dim2", 1)),),
               (_kept("offset"),), "same"))


# ---- unfold: sliding windows along one dim, a view --------------------------------------------

def _unfold(a, out=None, dimension=0, size=1, step=1):
    if a.ndim == 0:
        return np.lib.stride_tricks.as_strided(a, (size,), (0,))
    count = (a.shape[dimension] - size) // step + 1
    shape = a.shape[:dimension] + (count,) + a.shape[dimension + 1:] + (size,)
    strides = (a.strides[:dimension] + (a.strides[dimension] * step,) + a.strides[dimension + 1:]
               + (a.strides[dimension],))
    return np.lib.stride_tricks.as_strided(a, shape, strides)


def _unfold_backward(g, out=None, sizes=(), dimension=0, size=1, step=1):
    result = np.zeros(sizes, dtype=g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    if not sizes:
        result[...] = g.sum()
        return result
    count = g.shape[dimension]
    for i in range(size):  # window element i of window w sits at position w * step + i
        window = (slice(None),) * dimension + (slice(i, i + step * (count - 1) + 1, step),)
        result[window] += g[..., i]
    return result


_UNFOLD_ATTRS = ("dimension", "size", "step")
register(OpDef("unfold", _unfold, "view", "UnfoldBackward0",
               lambda F, g, s, at, need: (F.unfold_backward(g, sizes=tuple(s["self_sym_sizes"]),
                                                            **{k: at[k] for k in _UNFOLD_ATTRS}),),
               (_SIZES,) + tuple(_kept(k) for k in _UNFOLD_ATTRS), "same"))
register(OpDef("unfold_backward", _unfold_backward, "other", "UnfoldBackwardBackward0",
               lambda F, gg, s, at, need: (F.unfold(gg, **{k: at[k] for k in _UNFOLD_ATTRS}),), (), "same"))


# ---- padding -------------------------------------------------------------------------------------

def _constant_pad(a, out=None, pad=(), value=0):
    """Pad pairs (last dim first) of any sign: positive pads add ``value``, negative ones crop."""
    pairs = [(0, 0)] * (a.ndim - len(pad) // 2) + [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]
    crop = tuple(slice(max(-lo, 0), a.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pairs))
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    return _into(np.pad(a[crop], grow, mode="constant", constant_values=value), out)


register(OpDef("constant_pad_nd", _constant_pad, "other", "ConstantPadNdBackward0",
               lambda F, g, s, at, need: (F.constant_pad_nd(g, pad=tuple(-p for p in at["pad"]), value=0),),
               (_kept("pad"),), "same"))


def _source_positions(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """For each output position along a padded dim, the input position it copies."""
    if mode == "circular":  # cropping comes first; the wrapped copies come from what is left
        first, kept = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
        return first + np.arange(-max(lo, 0), kept + max(hi, 0)) % kept
    p = np.arange(-lo, n + hi)
    if mode == "reflect":
        p = np.abs(p)
        return np.where(p >= n, 2 * (n - 1) - p, p)
    return np.clip(p, 0, n - 1)  # replicate


def _padded_dims(ndim: int, pad):
    """(dim, lo, hi) for each padded dim; the pad tuple lists the last dim first."""
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _pad_gather(a, out=None, pad=(), mode="reflect"):
    result = a
    for dim, lo, hi in _padded_dims(a.ndim, pad):
        result = np.take(result, _source_positions(a.shape[dim], lo, hi, mode), axis=dim)
    return _into(result, out)


def _pad_scatter(g, out=None, sizes=(), pad=(), mode="reflect"):
    """The adjoint of ``_pad_gather``: each input position receives the sum of the copies of it."""
    result = g
    for dim, lo, hi in reversed(_padded_dims(len(sizes), pad)):
        shape = result.shape[:dim] + (sizes[dim],) + result.shape[dim + 1:]
        summed = np.zeros(shape, dtype=g.dtype)
        np.add.at(summed, (slice(None),) * dim + (_source_positions(sizes[dim], lo, hi, mode),), result)
        result = summed
    return _into(result, out)


_PAD_NAMES = {"reflect": "ReflectionPad", "replicate": "ReplicationPad"}


def _pad_name(at) -> str:
    if at["mode"] == "circular":
        return "torch::autograd::CopySlices"
    return f"{_PAD_NAMES[at['mode']]}{len(at['pad']) // 2}DBackward0"


def _pad_backward_name(at) -> str:
    return f"{_PAD_NAMES.get(at['mode'], 'CircularPad')}{len(at['pad']) // 2}DBackwardBackward0"


register(OpDef("pad_gather", _pad_gather, "other", _pad_name,
               lambda F, g, s, at, need: (F.pad_scatter(g, sizes=tuple(s["self_sym_sizes"]), pad=at["pad"],
                                                        mode=at["mode"]),),
               (_SIZES, _kept("pad")), "same"))
register(OpDef("pad_scatter", _pad_scatter, "other", _pad_backward_name,
               lambda F, gg, s, at, need: (F.pad_gather(gg, pad=at["pad"], mode=at["mode"]),), (), "same"))


# ---- sorting: values and int64 indices; the gradient goes back to where each value came from --------

def _moved_sort(a, dim, descending):
    """Stable argsort along ``dim``; descending keeps equal values in their original order (NaN first)."""
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")
    n = a.shape[dim]
    flipped = np.argsort(np.flip(a, dim), axis=dim, kind="stable")
    return np.flip(n - 1 - flipped, dim)


def _sort(a, out=None, dim=0, descending=False, stable=False):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    indices = _moved_sort(a, dim, descending)
    return np.take_along_axis(a, indices, axis=dim), indices.astype(np.int64)


def _argsort(a, out=None, dim=0, descending=False):
    return _into(_sort(a, dim=dim, descending=descending)[1], out)


def _topk(a, out=None, k=1, dim=0, largest=True):
    values, indices = _sort(a, dim=dim, descending=largest)
    if a.ndim == 0:
        return values, indices
    keep = (slice(None),) * dim + (slice(0, k),)
    return values[keep], indices[keep]


def _scatter_back(F, g, s, at, need):
    """Gradient of a value-selecting op (sort, topk): each value's gradient goes to its source."""
    return (F.scatter_zeros(g[0], s["indices"], dim=at["dim"], sizes=tuple(s["self_sym_sizes"])),)


_SELECTED = (Save("indices", "result:1"), _SIZES, _kept("dim"))
register(OpDef("sort", _sort, "other", lambda at: "SortBackward1" if at.get("stable") else "SortBackward0",
               _scatter_back, _SELECTED, "same", explain=axis_error))
register(OpDef("topk", _topk, "other", "TopkBackward0", _scatter_back, _SELECTED, "same", explain=axis_error))
register(OpDef("argsort", _argsort, "other", dtype_rule="index", explain=axis_error))


# ---- index_select and its adjoint ---------------------------------------------------------------

def _index_select(a, index, out=None, dim=0):
    if a.ndim == 0:  # a 0-dim input gives a 0-dim result (its one index is checked by the caller)
        return _into(np.take(a.reshape(1), index).reshape(()), out)
    return _into(np.take(a, index, axis=dim), out)


def _index_add_zeros(g, index, out=None, dim=0, sizes=()):
    result = np.zeros(sizes, dtype=g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    target = result.reshape(1) if not sizes else result
    np.add.at(target, (slice(None),) * dim + (index,), g)
    return result


register(OpDef("index_select", _index_select, "other", "IndexSelectBackward0",
               lambda F, g, s, at, need: (F.index_add_zeros(g, s["index"], dim=at["dim"],
                                                            sizes=tuple(s["self_sym_sizes"])), None),
               (_kept("dim"), Save("index", 1), _SIZES), "same", grad_inputs=(0,)))
register(OpDef("index_add_zeros", _index_add_zeros, "other", "IndexAddBackward0",
               lambda F, gg, s, at, need: (F.index_select(gg, s["index"], dim=at["dim"]), None),
               (Save("index", 1),), "same", grad_inputs=ZEROS_SELF))


# ---- data-dependent sizes: masked_select, nonzero (callers refuse them while tracing) ----------------

def _masked_select(a, mask, out=None):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return _into(np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)], out)


def _masked_scatter_zeros(g, mask, out=None, sizes=()):
    result = np.zeros(sizes, dtype=g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    result[np.broadcast_to(mask, sizes)] = g
    return result


def _masked_select_backward(F, g, s, at, need):
    mask, sizes = s["mask"], tuple(s["self_sym_sizes"])
    full = tuple(np.broadcast_shapes(sizes, tuple(mask.shape)))
    grad = F.masked_scatter_zeros(g, mask, sizes=full)
    return (grad if full == sizes else F.sum_to_size(grad, shape=sizes), None)


def _masked_select_error(shapes, attrs, exc):
    source, mask = shapes  # PyTorch broadcasts the mask first: it is "tensor a" in the message
    for i in range(1, min(len(source), len(mask)) + 1):
        if source[-i] != mask[-i] and 1 not in (source[-i], mask[-i]):
            return RuntimeError(f"The size of tensor a ({mask[-i]}) must match the size of tensor b ({source[-i]}) "
                                f"at non-singleton dimension {max(len(source), len(mask)) - i}")
    return None


register(OpDef("masked_select", _masked_select, "other", "MaskedSelectBackward0", _masked_select_backward,
               (Save("mask", 1), _SIZES), "same", explain=_masked_select_error, grad_inputs=(0,)))
register(OpDef("masked_scatter_zeros", _masked_scatter_zeros, "other", "MaskedScatterBackward0",
               lambda F, gg, s, at, need: (F.masked_select(gg, s["mask"]), None), (Save("mask", 1),), "same",
               grad_inputs=ZEROS_SELF))

register(OpDef("nonzero", lambda a, out=None: _into(np.argwhere(a).astype(np.int64), out), "other",
               dtype_rule="index"))


# ---- one_hot and linspace ----------------------------------------------------------------------------

def _one_hot(a, out=None, num_classes=1):
    """int64 rows with a one at each class; refuses out-of-range classes (in replay as well)."""
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return _into((a[..., None] == np.arange(num_classes)).astype(np.int64), out)


register(OpDef("one_hot", _one_hot, "other", dtype_rule="index"))


def _fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once, as the C ``fma`` PyTorch's compiled loops use (float64 arrays): the
    product's and the sum's rounding errors recovered exactly (Dekker's split, Knuth's two-sum)."""
    product = a * b
    split_a, split_b = 134217729.0 * a, 134217729.0 * b  # 2**27 + 1
    a_hi, b_hi = split_a - (split_a - a), split_b - (split_b - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    product_error = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    total = product + c
    back = total - product
    sum_error = (product - (total - back)) + (c - back)
    return total + (sum_error + product_error)


def _linspace(out=None, start=0.0, end=1.0, steps=100, dtype=None):
    """PyTorch's CPU linspace: the first half counts up from start, the second half down from end,
    each value one fused multiply-add (float64 for integer results, then truncated)."""
    dtype = np.dtype(dtype)
    compute = dtype if dtype.kind == "f" else np.dtype(np.float64)
    first, last = compute.type(start), compute.type(end)
    step = (last - first) / compute.type(steps - 1) if steps > 1 else compute.type(0)
    index = np.arange(steps, dtype=np.float64)
    up = index < steps // 2
    values = np.where(up, _fused_multiply_add(np.float64(step), index, np.float64(first)),
                      _fused_multiply_add(-np.float64(step), steps - 1 - index, np.float64(last)))
    if steps == 1:
        values = np.full(1, np.float64(first))
    return _into(values.astype(compute).astype(dtype), out)


register(OpDef("linspace", _linspace, "factory", dtype_rule="attr"))
