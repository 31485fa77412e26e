"""Tensor indexing as PyTorch does it: ints, slices and None become select/slice/unsqueeze views
applied one after another; index tensors (integer or boolean) finish with one index op."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad._eager.creation import tensor
from staticgrad._eager.dispatch import (
    INPLACE_ON_VIEW,
    MULTIPLE_VIEWS,
    REGENERATE_VIEW,
    dispatch,
    dispatch_inplace,
    raise_no_grad_view,
    snapshot,
    stale_view,
)
from staticgrad._eager.functions import _scalar_type, expand, full_like_scalar, reshape, to_dtype, unsqueeze, view
from staticgrad._eager.functions import fill_ as _fill_number
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.node import retain_at
from staticgrad._eager.tensor import Tensor, _read_guard
from staticgrad._state import Tracing
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.shape import MAX_INDEX_TENSORS, VIEW_THEN, locate, view_chain_item

FULL_SLICE = ("slice", None, None, None)
_WIDE_UNSIGNED = _dtypes.WIDE_UNSIGNED


def _as_index_tensor(item):
    """A list or array of indices as an index tensor; a Python list or tuple is a literal of the code (a
    constant of a traced call), an array a tensor made from an array (refused while tracing)."""
    array = np.asarray(item)
    if array.size == 0 and array.dtype.kind == "f":  # an empty list: no indices
        array = array.astype(np.int64)
    if array.dtype.kind not in "iub" or array.dtype in _WIDE_UNSIGNED:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    dtype = _dtypes.bool_ if array.dtype.kind == "b" else _dtypes.int64
    return tensor(array.tolist() if isinstance(item, (list, tuple)) else array, dtype=dtype)


def _sequence_as_tuple(index) -> bool:
    """PyTorch's (and old NumPy's) rule: a short list holding a sequence, slice, ellipsis, None or
    tensor is a tuple of per-dim indices (``x[[[0, 1], [2, 2]]]`` is ``x[[0, 1], [2, 2]]``)."""
    return isinstance(index, list) and len(index) < 32 and any(
        item is None or item is Ellipsis or isinstance(item, (list, tuple, slice, Tensor, np.ndarray))
        for item in index)


def _normalize(index, byte_masks: bool = False):
    """The index as a list of items; ``byte_masks`` (reading): a uint8 tensor is a mask of its nonzero
    elements, as PyTorch (deprecated there, with a warning) reads one."""
    if _sequence_as_tuple(index):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated; use x[tuple(seq)] "
                      "instead of x[seq] (PyTorch will read it as a tensor index)", UserWarning, stacklevel=3)
        index = tuple(index)
    if not isinstance(index, tuple):
        index = (index,)
    items = []
    for item in index:
        if isinstance(item, (list, tuple, np.ndarray)):  # a sequence inside the index: indices of one dim
            item = _as_index_tensor(item)
        elif isinstance(item, np.integer):
            item = int(item)
        elif byte_masks and isinstance(item, Tensor) and item._data.dtype == np.uint8:
            warnings.warn("indexing with dtype staticgrad.uint8 is now deprecated, please use a dtype "
                          "staticgrad.bool instead.", UserWarning, stacklevel=3)
            item = to_dtype(item, _dtypes.bool_)
        elif isinstance(item, Tensor) and (item._data.dtype.kind not in "iub" or item._data.dtype in _WIDE_UNSIGNED):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        elif (isinstance(item, Tensor) and item._data.ndim == 0 and item._data.dtype.kind in "iu"
              and Tracing.tracer is None):
            item = int(item._data)  # a 0-dim integer tensor indexes as its int (a select), as in PyTorch
        items.append(item)
    return items


def _dims_consumed(item) -> int:
    if isinstance(item, Tensor):
        return item._data.ndim if item._data.dtype.kind == "b" else 1
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    return 1


def _expand_ellipsis(items, ndim):
    consumed = sum(_dims_consumed(i) for i in items)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for item in items:
        if item is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        else:
            out.append(item)
    return out


def _apply_basic(t: Tensor, items):
    """Apply ints, slices and None as views; return the view and [(dim, index tensor)]."""
    lone_full_slice = len(items) == 1 and isinstance(items[0], slice) and items[0] == slice(None)
    result, dim, tensors, ints = t, 0, [], 0   # (an error counts the dims ints took away: ``ints``)
    for item in items:
        if item is None:
            result = unsqueeze(result, dim)
            dim += 1
        elif isinstance(item, bool):  # PyTorch's rule: a new dim of size 1, then a mask over it (False: empty)
            result = unsqueeze(result, dim)
            tensors.append((dim, _bool_mask(item)))
            dim += 1
        elif isinstance(item, int):
            size = result._data.shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim + ints} with size {size}")
            result = dispatch(OPS["select"], (result,), {"dim": dim, "index": item % size})
            ints += 1
        elif isinstance(item, slice):
            size = result._data.shape[dim]
            if item.step is not None and item.step <= 0:
                raise ValueError("slice step cannot be zero" if item.step == 0 else "step must be greater than zero")
            if item == slice(None) and not lone_full_slice:
                dim += 1
                continue
            start, stop, step = item.indices(size)
            stop = max(stop, start)
            result = dispatch(OPS["slice"], (result,), {"dim": dim, "start": start, "end": stop, "step": step})
            dim += 1
        elif isinstance(item, Tensor):
            tensors.append((dim, item))
            dim += _dims_consumed(item)
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are "
                             f"valid indices (got {type(item).__name__})")
    return result, tensors


def _bool_mask(item: bool) -> Tensor:
    """A Python bool index as the one-element mask PyTorch indexes its new dim with."""
    return tensor([item], dtype=_dtypes.bool_)


def _template(tensors):
    template, pos = [], 0
    for dim, idx in tensors:
        template.extend([FULL_SLICE] * (dim - pos))
        template.append("T")
        pos = dim + _dims_consumed(idx)
    return tuple(template)


def _check_mask_shape(mask: Tensor, indexed: Tensor, dim: int) -> None:
    """PyTorch's error for a boolean mask whose shape differs from the dims it covers (``indexed`` is
    the tensor after the plain indices, the mask's first dim at ``dim``)."""
    shape = indexed._data.shape
    for k, size in enumerate(mask._data.shape):
        if dim + k < len(shape) and size != shape[dim + k]:
            raise IndexError(f"The shape of the mask {list(mask._data.shape)} at index {k} does not match the shape "
                             f"of the indexed tensor {list(shape)} at index {dim + k}")


def getitem(t: Tensor, index):
    items = _expand_ellipsis(_normalize(index, byte_masks=True), t._data.ndim)
    result, tensors = _apply_basic(t, items)
    if not tensors:   # (whole slices and ``...`` make no view op: PyTorch's result is then an alias of t)
        return dispatch(OPS["alias"], (t,), {}) if result is t else result
    if len(tensors) > MAX_INDEX_TENSORS:
        raise IndexError(f"staticgrad supports at most {MAX_INDEX_TENSORS} index tensors in one indexing expression")
    for dim, index_tensor in tensors:
        if index_tensor._data.dtype.kind == "b":
            _check_mask_shape(index_tensor, result, dim)
            _read_guard(index_tensor, "indexing with a boolean mask (the result's size depends on the mask's values)")
    return dispatch(OPS[f"index{len(tensors)}"], (result,) + tuple(i for _, i in tensors),
                    {"template": _template(tensors)})


def _full_template(items):
    """The whole index as one template (for index_put): tensors become "T"."""
    template, tensors = [], []
    for item in items:
        if isinstance(item, Tensor):
            template.append("T")
            tensors.append(item)
        elif isinstance(item, slice):
            template.append(("slice", item.start, item.stop, item.step))
        elif item is None:
            template.append(None)
        else:
            template.append(item)
    return tuple(template), tuple(tensors)


def _view_then_template(items, shape):
    """The template of an index with tensors as PyTorch applies it: its ints, slices, None and bools as
    a view (a bool adds a dim its one-element mask then indexes), the index tensors on that view; and
    the tensors. None when the plain part makes no view (it is whole slices): the plain template serves."""
    plain, tensors, made_view, dim, source_dim = [], [], False, 0, 0
    for item in items:
        if item is None or isinstance(item, bool):
            plain.append(None)
            made_view = True
            if isinstance(item, bool):
                tensors.append((dim, _bool_mask(item)))
            dim += 1
        elif isinstance(item, int):
            plain.append(item)
            made_view = True
            source_dim += 1
        elif isinstance(item, slice):
            plain.append(("slice", item.start, item.stop, item.step))
            if item.indices(shape[source_dim]) != (0, shape[source_dim], 1):
                made_view = True
            dim += 1
            source_dim += 1
        else:
            width = _dims_consumed(item)
            plain.extend([FULL_SLICE] * width)
            tensors.append((dim, item))
            dim += width
            source_dim += width
    if not made_view:
        return None, None
    return tuple(plain) + (VIEW_THEN,) + _template(tensors), tuple(i for _, i in tensors)


def setitem(t: Tensor, index, value) -> None:
    """``t[index] = value`` in place; the node PyTorch shows: IndexPutBackward0 with index tensors,
    torch::autograd::CopySlices for a view, CopyBackwards / FillBackward3 for the whole tensor."""
    if type(index) is bool:   # PyTorch's rule for a lone bool (not in a tuple): True writes t[None], False nothing
        if not index:
            if not isinstance(value, Tensor):
                full_like_scalar(t, value)  # (a value that is no number fails as it would otherwise)
            return
        index = None
    items = _expand_ellipsis(_normalize(index), t._data.ndim)
    _check_ints(items, t._data.shape)
    if GradMode.enabled and t._base is not None and t._view_no_grad:
        made = _last_view_op(items, t._data.shape)
        if made is not None:   # PyTorch writes through that view, made with grad on of a no_grad view
            raise_no_grad_view(made)
    template, tensors = _full_template(items)
    if tensors or any(isinstance(item, bool) for item in items):
        view_template, view_tensors = _view_then_template(items, t._data.shape)
        if view_template is not None:
            template, tensors = view_template, view_tensors
    if len(tensors) > MAX_INDEX_TENSORS:
        raise IndexError(f"staticgrad supports at most {MAX_INDEX_TENSORS} index tensors in one indexing expression")
    if not isinstance(value, Tensor):
        value = full_like_scalar(t, value)
    elif tensors and value._data.dtype != t._data.dtype and not (value._data.ndim == 0 and _one_mask(items)):
        # (one bool mask and a 0-dim value: PyTorch fills, in the tensor's dtype)
        array, where = locate(_shape_only(t._data.shape), template, [i._data for i in tensors])
        try:   # PyTorch checks the shapes first
            np.broadcast_to(_shape_only(_without_leading_ones(value._data.shape)), array[where].shape)
        except ValueError as exc:
            raise _value_shape_error(t, template, tensors, value, exc) from None
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {_scalar_type(t)} for "
                           f"the destination and {_scalar_type(value)} for the source.")
    # a value of another dtype is cast by the write itself, as PyTorch's copy_ does: no node of its
    # own; its gradient is cast back to its dtype by the engine (the edge's input dtype)
    attrs = {"template": template}
    shape = value._data.shape
    region = _region_shape(t, template) if not tensors and shape else None
    if region is not None:
        if shape != region:  # PyTorch views the value without its leading 1-sized dims, then expands it
            value = view(value, _without_leading_ones(shape))
            if value._data.shape != region:
                value = expand(value, region)
    elif tensors and shape and shape[0] == 1:  # PyTorch drops the value's leading 1-sized dims
        value = reshape(value, _without_leading_ones(shape))
    whole = not tensors and _selects_whole(template, t._data.shape)
    if whole:
        attrs["node_name"] = _whole_write_node_name(t, value)
    elif GradMode.enabled and t._requires_grad and t.grad_fn is None and (not tensors or VIEW_THEN in template):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    try:
        dispatch_inplace(OPS[f"index_put{len(tensors)}"], t, (value,) + tensors, attrs)
    except ValueError as exc:  # NumPy could not broadcast the value
        raise _value_shape_error(t, template, tensors, value, exc) from None
    except IndexError as exc:  # an index tensor out of range (NumPy's axis is a dim of the view indexed)
        raise IndexError(str(exc).replace(" axis ", " dimension ")) from None


def _last_view_op(items, shape) -> str | None:
    """The view op PyTorch's ``t[index] = value`` writes through last, by its error name (Select,
    Slice, Unsqueeze), for a basic index; None for an index with tensors or bools, or one that makes
    no view (full slices only: PyTorch writes into ``t`` itself)."""
    name, dim = None, 0
    for item in items:
        if item is None:
            name = "Unsqueeze"
        elif isinstance(item, (bool, Tensor)):
            return None
        elif isinstance(item, int):
            name, dim = "Select", dim + 1
        else:
            if item.indices(shape[dim]) != (0, shape[dim], 1):
                name = "Slice"
            dim += 1
    return name


def _one_mask(items) -> bool:
    """The index's only tensor is a bool mask of one or more dims (no Python bool beside it)."""
    found = [item for item in items if isinstance(item, (Tensor, bool))]
    return (len(found) == 1 and isinstance(found[0], Tensor) and found[0]._data.dtype.kind == "b"
            and found[0]._data.ndim > 0)


def _check_ints(items, shape) -> None:
    """PyTorch's error for an int out of range, naming the dim as it counts them: every item before it,
    None and bools included, counts one (an index tensor, its dims)."""
    dim = source_dim = 0
    for item in items:
        if item is None or isinstance(item, bool):
            dim += 1
            continue
        if isinstance(item, int):
            size = shape[source_dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
        width = _dims_consumed(item) if isinstance(item, Tensor) else 1
        dim += width
        source_dim += width


def _region_shape(t: Tensor, template):
    """The shape ``t[template]`` has (no tensors in it), or None for an index out of range (the write
    then raises PyTorch's error)."""
    array, where = locate(_shape_only(t._data.shape), template, ())
    try:
        return array[where].shape
    except IndexError:
        return None


def _shape_only(shape):
    """An array of ``shape`` that takes no memory: indexing it gives a region's shape."""
    return np.broadcast_to(np.zeros((), np.int8), shape)


def _without_leading_ones(shape) -> tuple:
    kept = 0
    while kept < len(shape) and shape[kept] == 1:
        kept += 1
    return shape[kept:]


def _value_shape_error(t: Tensor, template, tensors, value: Tensor, exc: Exception) -> Exception:
    """PyTorch's error for a value that does not broadcast to the indexed region."""
    array, where = locate(_shape_only(t._data.shape), template, [i._data for i in tensors])
    region = array[where]
    if tensors:
        return RuntimeError(f"shape mismatch: value tensor of shape {list(value._data.shape)} cannot be broadcast "
                            f"to indexing result of shape {list(region.shape)}")
    try:
        expand(value, region.shape)  # raises PyTorch's expand error
    except RuntimeError as expand_error:
        return expand_error
    return exc


def _selects_whole(template, shape) -> bool:
    """The index is slices that each start at 0, step by 1 and reach the end: PyTorch's indexing
    then gives the tensor itself, not a view, and writes it with copy_ or fill_."""
    if not all(isinstance(item, tuple) for item in template):  # an int or None makes a view
        return False
    for (_, start, stop, step), size in zip(template, shape):
        if start not in (None, 0) or step not in (None, 1) or (stop is not None and stop < size):
            return False
    return True  # dims past the index are taken whole


def _whole_write_node_name(t: Tensor, value: Tensor) -> str:
    """PyTorch's node for a write of the whole tensor: copy_ for a value of its shape or of more
    than 0 dims, fill_ for a 0-dim value (a Python number is one)."""
    if value._data.shape == t._data.shape or value._data.ndim:
        return "torch::autograd::CopyBackwards"
    return "FillBackward3"


def fill_(input, value):
    """``value`` everywhere in ``input``: a number (FillBackward2), or a 0-dim tensor, whose gradient
    is the sum of the incoming one (FillBackward3, as PyTorch's fill_.Tensor)."""
    if not isinstance(value, Tensor):
        return _fill_number(input, value)
    if value._data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions.")
    try:
        setitem(input, Ellipsis, value)
    except RuntimeError as exc:   # the refusal of an in-place write into a view names fill_, not the write
        if "in-place 'index_put0'" not in str(exc):
            raise
        raise RuntimeError(str(exc).replace("'index_put0'", "'fill'")) from None
    return input


def inplace_on_view(op, target: Tensor, others: tuple, attrs: dict) -> Tensor:
    """``op`` in place on ``target``, a view of a tensor in autograd (``a[:, 1:] += 1``,
    ``a[0].mul_(3)``, ``a.t()[1].mul_(w)``), as PyTorch records it: the op out of place, its result
    written into the base's region (the base's node becomes CopySlices), and the view's history
    taken afresh over the base's new one (AsStridedBackward0). None when ``target``'s view ops cannot
    be replayed on its base (the caller refuses)."""
    _refuse_shared_or_multiple(target)
    base, chain = target._base, view_chain(target)
    if chain is None:
        return None
    if base.grad_fn is not target._view_base_fn:
        stale_view(target, op.name)   # (returns when neither the view nor its base takes part in autograd)
    # the op reads the view's values through a copy with its history: writing the result into the
    # base moves the view's version, and a node that saved the view itself would then refuse
    result = dispatch(op, (snapshot(target),) + others, attrs)
    if result._data.dtype != target._data.dtype:
        result = to_dtype(result, target._data.dtype)
    if GradMode.enabled and base._requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    dispatch_inplace(OPS["index_put0"], base, (result,), {"template": (view_chain_item(chain),)})
    regenerate_view(target)
    return target


def _refuse_shared_or_multiple(view: Tensor) -> None:
    """PyTorch's errors for an in-place op in autograd on a view whose elements share memory (an
    expand) or on one of several views a function returned together (unbind, split, chunk)."""
    step = view._view_chain
    if step and step[0] is None:
        raise RuntimeError(f"Output {step[2]} of {step[1]} is a view and is being modified inplace. {MULTIPLE_VIEWS}")
    if any(stride == 0 and size > 1 for stride, size in zip(view._data.strides, view._data.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a single "
                           "memory location. Please clone() the tensor before performing the operation.")


def view_chain(view: Tensor):
    """The (op name, attributes) of the view ops from ``view``'s base to it, in order; None when they
    cannot be replayed on the base (a view op of several tensors, one of a function's several views)."""
    chain = view._view_chain
    if chain is None or (chain and chain[0] is None):
        return None
    # attributes that print as themselves (a traced call's may hold a value read from a tensor)
    return chain if all(_plain(attrs) for _, attrs in chain) else None


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (int, float, bool, str) or isinstance(value, (np.dtype, np.generic))


def view_through_attrs(view: Tensor):
    """The attributes of the view_through op that takes ``view`` afresh of its base (its chain of
    view ops, and the as_strided size, stride and storage offset PyTorch shows), or None when its
    view ops cannot be replayed on the base."""
    chain = view_chain(view)
    if chain is None:
        return None
    array, root = view._data, view._base._data
    itemsize = array.itemsize
    return {"template": (view_chain_item(chain),), "size": tuple(array.shape),
            "stride": tuple(step // itemsize for step in array.strides),
            "storage_offset": (array.__array_interface__["data"][0] - root.__array_interface__["data"][0])
            // itemsize}


def regenerate_view(view: Tensor) -> bool:
    """Give a view the history of its view taken afresh of its base's current one (after an
    in-place change of the base, or a write into it through the view), as PyTorch does: one
    AsStridedBackward0 node on the base, which replays the view ops that made the view. False when
    they cannot be replayed on the base."""
    base, attrs = view._base, view_through_attrs(view)
    if attrs is None:
        return False
    previous = GradMode.enabled
    GradMode.enabled = True   # (a backward() under no_grad still differentiates the view)
    try:
        fresh = dispatch(OPS["view_through"], (base,), attrs)
    finally:
        GradMode.enabled = previous
    view.grad_fn, view._output_nr, view._requires_grad = fresh.grad_fn, fresh._output_nr, fresh._requires_grad
    view._view_base_fn = base.grad_fn
    if view._retains_grad and view.grad_fn is not None:   # (PyTorch keeps retain_grad on the new history)
        retain_at(view.grad_fn, view)
    tracer = Tracing.tracer
    if tracer is not None:   # the view now reads the base as written (a later write into it makes it stale)
        tracer.on_alias(fresh, view, "view")
    return True


INPLACE_ON_VIEW.append(inplace_on_view)
REGENERATE_VIEW.append(regenerate_view)
