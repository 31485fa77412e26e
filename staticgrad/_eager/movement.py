"""PyTorch's data-movement functions over the op table: flip, roll, repeat, tile, diagonal, diag, unfold,
unflatten, repeat_interleave, index_select, sort, argsort, topk, masked_select, nonzero, one_hot,
linspace and F.pad. Ops whose result size depends on tensor values read those values into Python
(refused while tracing, as ``.item()`` is): a replay must never reuse a size seen on other data."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import tensor
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.out_argument import refuse_autograd, write_out
from staticgrad._eager.tensor import Tensor, _normalize_dim, _read_guard
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def _dims_list(dims) -> tuple:
    return tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)


def flip(input, dims):
    """torch.flip: a copy with the order of ``dims`` reversed (FlipBackward0)."""
    fn.require_tensor(input, "flip")
    ndim = input._data.ndim
    dims = tuple(_normalize_dim(d, ndim) for d in _dims_list(dims))
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
    return dispatch(OPS["flip"], (input,), {"dims": dims if ndim else ()})


def fliplr(input):
    fn.require_tensor(input, "fliplr")
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, 1)


def flipud(input):
    fn.require_tensor(input, "flipud")
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


def roll(input, shifts, dims=None):
    """torch.roll: elements shifted along ``dims`` (the flattened tensor when dims is None)."""
    fn.require_tensor(input, "roll")
    shifts, ndim = tuple(int(s) for s in _dims_list(shifts)), input._data.ndim
    dims = () if dims is None else _dims_list(dims)
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if dims and not ndim:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    dims = tuple(_normalize_dim(d, ndim) for d in dims)
    return dispatch(OPS["roll"], (input,), {"shifts": shifts if dims else shifts[:1], "dims": dims})


def _int_tuple(values, fn: str, arg: str) -> tuple:
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be tuple of ints, but found element of "
                            f"type {type(v).__name__} at pos {i}")
    return tuple(values)


def repeat(input, *repeats):
    """Tensor.repeat: the tensor tiled ``repeats`` times along each dim, new leading dims first
    (RepeatBackward0, whose backward sums the tiles)."""
    if not repeats:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    if len(repeats) == 1 and isinstance(repeats[0], (list, tuple)):
        repeats = repeats[0]
    repeats = _int_tuple(repeats, "repeat", "repeats")
    shape = input._data.shape
    if len(repeats) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    padded = (1,) * (len(repeats) - len(shape)) + shape
    target = [r * n for r, n in zip(repeats, padded)]
    negative = [n for n in target if n < 0]
    if negative:
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative[0]}: {target}")
    return dispatch(OPS["repeat"], (input,), {"repeats": repeats})


def tile(input, dims):
    """torch.tile: repeat, with ``dims`` padded by leading ones when shorter than the tensor's rank."""
    fn.require_tensor(input, "tile")
    if not isinstance(dims, (list, tuple)):
        raise TypeError(f"tile(): argument 'dims' (position 2) must be tuple of ints, not {type(dims).__name__}")
    dims = _int_tuple(dims, "tile", "dims")
    ndim = input._data.ndim
    return repeat(input, (1,) * (ndim - len(dims)) + dims)


def _tile_method(self, *dims):
    if not dims:
        raise TypeError('tile() missing 1 required positional arguments: "dims"')
    return tile(self, dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """torch.diagonal: a view of the diagonal over dims ``dim1`` and ``dim2``, moved last."""
    fn.require_tensor(input, "diagonal")
    ndim = input._data.ndim
    d1, d2 = _normalize_dim(dim1, ndim), _normalize_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return dispatch(OPS["diagonal"], (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def diag(input, diagonal=0):
    """torch.diag: a vector on a matrix's diagonal (DiagEmbedBackward0), or a matrix's diagonal copied."""
    fn.require_tensor(input, "diag")
    ndim = input._data.ndim
    if ndim == 1:
        return dispatch(OPS["diag_embed"], (input,), {"offset": int(diagonal)})
    if ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")
    return dispatch(OPS["diagonal_copy"], (input,), {"offset": int(diagonal), "dim1": 0, "dim2": 1})


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dim of ``input`` on diagonal ``offset`` of two new square dims ``dim1``
    and ``dim2`` of the result (DiagEmbedBackward0)."""
    fn.require_tensor(input, "diag_embed")
    ndim = input._data.ndim + 1
    d1, d2 = _normalize_dim(dim1, ndim), _normalize_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return dispatch(OPS["diag_embed"], (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def unfold(input, dimension, size, step):
    """Tensor.unfold: windows of ``size`` every ``step`` along ``dimension``, a new last dim (a view)."""
    shape = input._data.shape
    d = _normalize_dim(dimension, len(shape))
    length = shape[d] if shape else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return dispatch(OPS["unfold"], (input,), {"dimension": d, "size": int(size), "step": int(step)})


def unflatten(input, dim, sizes):
    """torch.unflatten: dim ``dim`` split into ``sizes`` (one -1 allowed), a view."""
    fn.require_tensor(input, "unflatten")
    shape = input._data.shape
    if not shape:
        raise RuntimeError("unflatten got an unexpected error: a 0-dim tensor has no dim to unflatten")
    d = _normalize_dim(dim, len(shape))
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
    if -1 in sizes:
        if known == 0 or shape[d] % known:
            raise RuntimeError(f"shape '{list(sizes)}' is invalid for input of size {shape[d]}")
        sizes = tuple(shape[d] // known if s == -1 else s for s in sizes)
    elif known != shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({shape[d]}) in the input tensor")
    return fn.view(input, shape[:d] + sizes + shape[d + 1:])


def index_select(input, dim, index):
    """torch.index_select: the entries at ``index`` (1-D integers) along ``dim`` (IndexSelectBackward0)."""
    fn.require_tensor(input, "index_select")
    fn.require_tensor(index, "index_select", "index", 3)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _normalize_dim(dim, input._data.ndim)
    if input._data.ndim == 0 and index._data.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index._data.size} value(s)")
    size = input._data.shape[d] if input._data.ndim else 1
    bad = index._data[(index._data < -size) | (index._data >= size)] if index._data.size else ()
    if len(bad):
        raise IndexError("index out of range in self")
    return dispatch(OPS["index_select"], (input, fn.view(index, (-1,)) if index._data.ndim == 0 else index),
                    {"dim": d})


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """torch.repeat_interleave: each entry repeated ``repeats`` times along ``dim`` (flattened when None)."""
    if repeats is None:  # torch.repeat_interleave(repeats): each index i repeated repeats[i] times
        counts = input
        _read_guard(counts, "repeat_interleave(repeats) (its result's size depends on the values)")
        return tensor(np.repeat(np.arange(counts._data.size), counts._data.reshape(-1)).tolist(),
                      dtype=_dtypes.int64)
    fn.require_tensor(input, "repeat_interleave")
    if dim is None:
        input, dim = fn.flatten(input), 0
    d = _normalize_dim(dim, input._data.ndim)
    if input._data.ndim == 0:
        input = fn.view(input, (1,))
    if isinstance(repeats, Tensor):
        _read_guard(repeats, "repeat_interleave with a tensor of repeats (its result's size depends on the values)")
        counts = repeats._data
        if counts.size == 1 and counts.ndim <= 1:  # one count for every entry
            counts = np.full(input._data.shape[d], counts.reshape(()), dtype=counts.dtype)
        if counts.ndim != 1 or counts.size != input._data.shape[d]:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{counts.size} and input.size({d}) = {input._data.shape[d]}")
        if counts.size and counts.min() < 0:
            raise RuntimeError("repeats can not be negative")
        index = tensor(np.repeat(np.arange(counts.size), counts).tolist(), dtype=_dtypes.int64)
        return dispatch(OPS["index_select"], (input, index), {"dim": d})
    repeats = int(repeats)
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    shape = input._data.shape
    grown = fn.expand(fn.unsqueeze(input, d + 1), shape[:d + 1] + (repeats,) + shape[d + 1:])
    return fn.view(fn.clone(grown), shape[:d] + (shape[d] * repeats,) + shape[d + 1:])


# ---- sorting ------------------------------------------------------------------------------------

def _sort_dim(input, dim) -> int:
    return _normalize_dim(dim, input._data.ndim)


def sort(input, dim=-1, descending=False, stable=None):
    """torch.sort: (values, indices) along ``dim``; equal values keep their order (a stable sort, so
    ``stable`` changes nothing but the node's name: PyTorch's sort.stable overload, SortBackward1)."""
    fn.require_tensor(input, "sort")
    attrs = {"dim": _sort_dim(input, dim), "descending": bool(descending), "stable": stable is not None}
    values, indices = dispatch(OPS["sort"], (input,), attrs)
    return SortResult(values, indices)


def argsort(input, dim=-1, descending=False, stable=False):
    fn.require_tensor(input, "argsort")
    return dispatch(OPS["argsort"], (input,), {"dim": _sort_dim(input, dim), "descending": bool(descending)})


def topk(input, k, dim=-1, largest=True, sorted=True):
    """torch.topk: the ``k`` largest (or smallest) values along ``dim`` and their indices, in order."""
    fn.require_tensor(input, "topk")
    d = _sort_dim(input, dim)
    length = input._data.shape[d] if input._data.ndim else 1
    if not 0 <= k <= length:
        raise RuntimeError("selected index k out of range")
    values, indices = dispatch(OPS["topk"], (input,), {"k": int(k), "dim": d, "largest": bool(largest)})
    return TopkResult(values, indices)


# ---- data-dependent sizes -----------------------------------------------------------------------------

def masked_select(input, mask):
    """torch.masked_select: the entries where ``mask`` (broadcast with input) is True, as a 1-D tensor."""
    fn.require_tensor(input, "masked_select")
    fn.require_tensor(mask, "masked_select", "mask", 2)
    if mask._data.dtype.kind != "b":
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    _read_guard(mask, "masked_select() (its result's size depends on the mask's values)")
    return dispatch(OPS["masked_select"], (input, mask), {})


def nonzero(input, *, as_tuple=False):
    """torch.nonzero: the indices of the non-zero entries, (count, ndim) int64 or one 1-D tensor per dim."""
    fn.require_tensor(input, "nonzero")
    _read_guard(input, "nonzero() (its result's size depends on the values)")
    if as_tuple:
        flat = input if input._data.ndim else fn.view(input, (1,))
        found = dispatch(OPS["nonzero"], (flat,), {})
        return tuple(dispatch(OPS["select"], (found,), {"dim": 1, "index": i}) for i in range(flat._data.ndim))
    return dispatch(OPS["nonzero"], (input,), {})


def one_hot(tensor, num_classes=-1):
    """F.one_hot: int64 rows with a one at each class index (num_classes=-1: the largest index + 1)."""
    fn.require_tensor(tensor, "one_hot", "input")
    if tensor._data.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        _read_guard(tensor, "one_hot() with num_classes=-1 (its result's size depends on the values)")
        if tensor._data.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor._data.max()) + 1
    return dispatch(OPS["one_hot"], (tensor,), {"num_classes": int(num_classes)})


def linspace(start, end, steps, *, dtype=None, requires_grad=False, device=None, layout=None, out=None):
    """torch.linspace: ``steps`` evenly spaced values from start to end (PyTorch's rounding)."""
    steps = int(steps)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    np_dtype = _dtypes.default_float().np if dtype is None else _dtypes.to_numpy_dtype(dtype)
    if np_dtype == np.bool_ or (out is not None and out._data.dtype == np.bool_):
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    if out is not None:   # computed in out's dtype, as PyTorch does, and written into out
        refuse_autograd("aten::linspace", out)
        if dtype is not None and np_dtype != out._data.dtype:
            asked, given = (_dtypes.from_numpy_dtype(d).tensor_type.removesuffix("Tensor")
                            for d in (np_dtype, out._data.dtype))
            raise RuntimeError(f"dtype {asked} does not match dtype of out parameter ({given})")
        attrs = {"start": start, "end": end, "steps": steps, "dtype": out._data.dtype}
        return write_out("linspace", dispatch(OPS["linspace"], (), attrs), out)
    result = dispatch(OPS["linspace"], (), {"start": start, "end": end, "steps": steps, "dtype": np_dtype})
    if requires_grad:
        result.requires_grad_(True)
    return result


# ---- padding ------------------------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """F.pad: constant (any sign: negative pads crop), reflect, replicate and circular padding; ``pad``
    lists (left, right) pairs from the last dim backwards."""
    fn.require_tensor(input, "pad")
    pad = tuple(int(p) for p in pad)
    shape, ndim = input._data.shape, input._data.ndim
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {ndim}")
    if mode == "constant":
        for i in range(len(pad) // 2):
            if shape[ndim - 1 - i] + pad[2 * i] + pad[2 * i + 1] < 0 or -pad[2 * i] > shape[ndim - 1 - i]:
                raise RuntimeError("narrow(): length must be non-negative.")
        return dispatch(OPS["constant_pad_nd"], (input,), {"pad": pad, "value": 0 if value is None else value})
    if value is not None:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pad) // 2
    if k not in (1, 2, 3) or ndim not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {ndim}D input tensor.")
    for i in range(k):
        d, lo, hi = ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        if mode == "reflect" and (lo >= shape[d] or hi >= shape[d]):
            raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {list(shape)}")
        if mode == "circular" and (lo > shape[d] or hi > shape[d]):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if shape[d] + lo + hi < 0 or shape[d] == 0:
            raise RuntimeError(f"staticgrad's F.pad: mode {mode!r} cannot pad dimension {d} of size {shape[d]} "
                               f"with ({lo}, {hi}): the result would be empty or read an empty dimension")
    return dispatch(OPS["pad_gather"], (input,), {"pad": pad, "mode": mode})
