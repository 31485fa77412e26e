"""Shape ops. Most are views: their output shares storage with input 0 (kind "view")."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from staticgrad.ops.registry import OPS, ZEROS_SELF, OpDef, Save, register, with_emit


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _view(a, out=None, shape=()):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None


def _reshape_error(shapes, attrs, exc):
    if isinstance(exc, RuntimeError):
        return exc
    shape = list(attrs.get("shape", ()))
    return RuntimeError(f"shape '{shape}' is invalid for input of size {_numel(shapes[0])}")


def viewable(array, shape) -> bool:
    """Whether ``array`` can be reshaped to ``shape`` without a copy."""
    if array.flags.c_contiguous:
        return True
    try:
        np.reshape(array, shape, copy=False)
        return True
    except ValueError:
        return False


def reshape_op(array, shape) -> str:
    """The op PyTorch's reshape becomes for this layout: "view" for a contiguous array (ViewBackward0),
    "reshape_alias" for another layout a view can still express (ReshapeAliasBackward0), else None
    (a copy: CloneBackward0 under UnsafeViewBackward0)."""
    if array.flags.c_contiguous:   # NumPy's flag, like PyTorch's is_contiguous, ignores size-1 and empty dims
        return "view"
    return "reshape_alias" if viewable(array, shape) else None


def reshape_back(F, g, shape):
    """A gradient reshaped to ``shape`` (an input's), as PyTorch's reshape: a view where the layout
    allows one, else a copy. Where no graph is built (g needs no gradient) one op whose NumPy reshape
    makes that choice when it runs, so a recorded backward decides nothing by the layout its trace
    saw: a compiled model's backward gets incoming gradients in whatever layout the loss gave them
    (a sum's stride-0 expand), as eager's nodes do. Building a graph, PyTorch's nodes: ViewBackward0,
    ReshapeAliasBackward0, or CloneBackward0 under UnsafeViewBackward0."""
    if not g.requires_grad:
        return F.unsafe_view(g, shape=shape)
    op = reshape_op(g._data, shape)
    if op is not None:
        return getattr(F, op)(g, shape=shape)
    return F.unsafe_view(F.clone(g), shape=shape)


register(OpDef("view", _view, "view", "ViewBackward0",
               lambda F, g, s, at, need: (reshape_back(F, g, tuple(s["self_sym_sizes"])),),
               (Save("self_sym_sizes", "shape:0", freed=False),), "same", explain=_reshape_error))

register(OpDef("unsafe_view", lambda a, out=None, shape=(): np.reshape(a, shape), "view", "UnsafeViewBackward0",
               lambda F, g, s, at, need: (reshape_back(F, g, tuple(s["self_sym_sizes"])),),
               (Save("self_sym_sizes", "shape:0", freed=False),), "same", explain=_reshape_error))


def _transpose(a, out=None, dim0=0, dim1=1, inplace=False):
    """Swap two dims; on a 0-dim tensor (dims 0 and -1 allowed, as in PyTorch) an identity view."""
    return np.swapaxes(a, dim0, dim1) if a.ndim else a.view()


def _named(name: str):
    """A view op's node name: ``name`` + "0", or + "1" for its in-place form (``inplace`` attribute:
    x.t_(), x.unsqueeze_(0), whose node PyTorch numbers apart)."""
    return lambda at: name + ("1" if at.get("inplace") else "0")


register(OpDef("transpose", _transpose, "view", _named("TransposeBackward"),
               lambda F, g, s, at, need: (F.transpose(g, dim0=at["dim0"], dim1=at["dim1"]),),
               (Save("dim0", "attr:dim0", freed=False), Save("dim1", "attr:dim1", freed=False)), "same"))

register(OpDef("t", lambda a, out=None, inplace=False: a.T, "view", _named("TBackward"),
               lambda F, g, s, at, need: (F.t(g),), (), "same"))


def _inverse_permutation(dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return tuple(inverse)


register(OpDef("permute", lambda a, out=None, dims=(): np.transpose(a, dims), "view", "PermuteBackward0",
               lambda F, g, s, at, need: (F.permute(g, dims=_inverse_permutation(at["dims"])),),
               (Save("dims", "attr:dims", freed=False),), "same"))


def _expand_error(shapes, attrs, exc):
    shape = list(attrs["shape"])
    src = list(shapes[0])
    return RuntimeError(
        f"The expanded size of the tensor ({shape[-1] if shape else 0}) must match the existing size "
        f"({src[-1] if src else 0}) at non-singleton dimension {len(shape) - 1}.  Target sizes: {shape}.  "
        f"Tensor sizes: {src}")


def _sum_to(F, g, sizes: tuple):
    """expand's gradient: g summed to the input's sizes, or g itself where the expand kept the shape
    (no node and no copy, as PyTorch's sum_to: a -0.0 stays -0.0)."""
    return g if tuple(g.shape) == sizes else F.sum_to_size(g, shape=sizes)


register(OpDef("expand", lambda a, out=None, shape=(): np.broadcast_to(a, shape), "view", "ExpandBackward0",
               lambda F, g, s, at, need: (_sum_to(F, g, tuple(s["self_sym_sizes"])),),
               (Save("self_sym_sizes", "shape:0", freed=False),), "same", explain=_expand_error))

register(OpDef("unsqueeze", lambda a, out=None, dim=0, inplace=False: np.expand_dims(a, dim), "view",
               _named("UnsqueezeBackward"),
               lambda F, g, s, at, need: (F.squeeze(g, dim=(at["dim"],)),),
               (Save("dim", "attr:dim", freed=False),), "same"))


def _squeeze(a, out=None, dim=None, listed=False, inplace=False):
    if dim is None:
        return np.squeeze(a)
    dims = tuple(d for d in dim if a.shape[d] == 1)
    return np.squeeze(a, axis=dims) if dims else a.view()


def _squeeze_name(at) -> str:
    number = 0 if at.get("dim") is None else 2 if at.get("listed") else 1
    return f"SqueezeBackward{number + 3 if at.get('inplace') else number}"


register(OpDef("squeeze", _squeeze, "view", _squeeze_name,
               lambda F, g, s, at, need: (F.view(g, shape=tuple(s["self_sym_sizes"])),),
               (Save("self_sym_sizes", "shape:0", freed=False),), "same"))

register(OpDef("detach", lambda a, out=None: a, "view", dtype_rule="same"))

register(OpDef("alias", lambda a, out=None: a.view(), "view", "AliasBackward0",
               lambda F, g, s, at, need: (g,), (), "same"))


# ---- basic indexing: select and slice are views, as in PyTorch ----------------------------------

def _select(a, out=None, dim=0, index=0):
    # The trailing Ellipsis keeps a 0-d result a view (a bare integer index gives a NumPy scalar copy).
    return a[(slice(None),) * dim + (index, Ellipsis)]


def _select_backward(g, out=None, sizes=(), dim=0, index=0):
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    out[(slice(None),) * dim + (index,)] = g
    return out


register(OpDef("select", _select, "view", "SelectBackward0",
               lambda F, g, s, at, need: (F.select_backward(g, sizes=tuple(s["self_sym_sizes"]), dim=at["dim"],
                                                            index=at["index"]),),
               (Save("self_sym_sizes", "shape:0", freed=False), Save("dim", "attr:dim", freed=False),
                Save("index", "attr:index", freed=False)), "same"))
register(OpDef("select_backward", _select_backward, "other", "SelectBackwardBackward0",
               lambda F, gg, s, at, need: (F.select(gg, dim=at["dim"], index=at["index"]),), (), "same"))


# ---- functions returning several views (unbind, split): one node for all of them ---------------
# Eager runs each piece as its own select or slice (what a trace records); the node these records
# give the pieces is PyTorch's single UnbindBackward0 or SplitBackward0, whose backward builds the
# input's gradient once (stack or cat, zeros for the pieces that got none) instead of adding one
# input-sized buffer per piece.

def _pieces_grads(g) -> tuple:
    return g if type(g) is tuple else (g,)


def _unbind_backward(F, g, s, at, need):
    grads = _pieces_grads(g)
    present = next(x for x in grads if x is not None)
    return (F.stack(*[x if x is not None else F.zeros_like(present) for x in grads], dim=at["dim"]),)


def _split_backward(F, g, s, at, need):
    grads, dim = _pieces_grads(g), at["dim"]
    sizes = list(s["self_sym_sizes"])
    dtype = next(x for x in grads if x is not None).dtype
    filled = []
    for x, size in zip(grads, at["sections"]):
        if x is None:
            x = F.full(shape=tuple(sizes[:dim] + [size] + sizes[dim + 1:]), value=0.0, dtype=dtype)
        filled.append(x)
    return (F.cat(*filled, dim=dim) if len(filled) > 1 else filled[0],)


def _pieces_forward(a, out=None, **attrs):
    raise RuntimeError("staticgrad internal error: unbind and split run as their pieces' views, not as one op")


register(OpDef("unbind", _pieces_forward, "view", "UnbindBackward0", _unbind_backward,
               (Save("dim", "attr:dim", freed=False),), "same"))
register(OpDef("split", _pieces_forward, "view", "SplitBackward0", _split_backward,
               (Save("dim", "attr:dim", freed=False), Save("self_sym_sizes", "shape:0", freed=False),
                Save("split_size", "attr:split_size", freed=False)), "same"))
register(OpDef("split_with_sizes", _pieces_forward, "view", "SplitWithSizesBackward0", _split_backward,
               (Save("dim", "attr:dim", freed=False), Save("self_sym_sizes", "shape:0", freed=False),
                Save("split_sizes", "attr:split_sizes", freed=False)), "same"))


def _slice(a, out=None, dim=0, start=0, end=None, step=1):
    return a[(slice(None),) * dim + (slice(start, end, step),)]


def _slice_backward(g, out=None, sizes=(), dim=0, start=0, end=None, step=1):
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    out[(slice(None),) * dim + (slice(start, end, step),)] = g
    return out


_SLICE_ATTRS = ("dim", "start", "end", "step")
register(OpDef("slice", _slice, "view", "SliceBackward0",
               lambda F, g, s, at, need: (F.slice_backward(g, sizes=tuple(s["self_sym_sizes"]),
                                                           **{k: at[k] for k in _SLICE_ATTRS}),),
               (Save("self_sym_sizes", "shape:0", freed=False), Save("dim", "attr:dim", freed=False),
                Save("start", "attr:start", freed=False), Save("end", "attr:end", freed=False),
                Save("step", "attr:step", freed=False)), "same"))
register(OpDef("slice_backward", _slice_backward, "other", "SliceBackwardBackward0",
               lambda F, gg, s, at, need: (F.slice(gg, **{k: at[k] for k in _SLICE_ATTRS}),), (), "same"))


# ---- advanced indexing: integer / boolean index tensors (copies, not views) -------------------

def _build_index(template, index_arrays):
    """Rebuild a NumPy index from a template whose tensor positions are the string "T"."""
    it = iter(index_arrays)
    parts = []
    for item in template:
        if item == "T":
            parts.append(next(it))
        elif isinstance(item, tuple) and item and item[0] == "slice":
            parts.append(slice(item[1], item[2], item[3]))
        elif item == "...":
            parts.append(Ellipsis)
        else:
            parts.append(item)
    return tuple(parts)


VIEW_THEN = "|"   # a template's marker: the plain index before it makes a view, the index after it indexes that


VIEWS = "views"   # a template's first item ("views", ((op, attrs), ...)): view ops applied before the index


def view_chain_item(chain) -> tuple:
    """The template item that applies ``chain``, (op name, attribute dict) pairs, to an array first."""
    return (VIEWS, tuple((name, _frozen(attrs)) for name, attrs in chain))


def _frozen(value):
    """An attribute value as nested tuples (hashable, and printed back as itself)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _through_views(a, chain):
    """``a`` viewed by each op of ``chain`` in turn; refused where an op would copy instead (a
    reshape of a layout it cannot view), since a write into the copy would be lost."""
    for name, attrs in chain:
        viewed = OPS[name].forward(a, **dict(attrs))
        if type(viewed) is not np.ndarray or (viewed.size and not np.may_share_memory(viewed, a)):
            raise RuntimeError(f"an in-place write through the view op {name!r} finds it copying this "
                               f"{a.dtype.name}{list(a.shape)} array (its layout cannot be viewed so); clone the "
                               "view and write the clone")
        a = viewed
    return a


def locate(a, template, index_arrays) -> tuple:
    """(array, NumPy index) for ``a[template]``: ``a`` itself, or for a template with the VIEW_THEN
    marker the view its plain part makes (PyTorch's indexing applies ints, slices, None and bools as
    views first, then the index tensors on that view); a template starting with a VIEWS item first
    views ``a`` by its chain of view ops (an in-place write into a view of a view)."""
    if template and type(template[0]) is tuple and template[0] and template[0][0] == VIEWS:
        return locate(_through_views(a, template[0][1]), template[1:], index_arrays)
    if VIEW_THEN not in template:
        return a, _build_index(template, index_arrays)
    cut = template.index(VIEW_THEN)
    return a[_build_index(template[:cut], ())], _build_index(template[cut + 1:], index_arrays)


def _index(a, *indices, out=None, template=()):
    a, index = locate(a, template, indices)
    result = a[index]
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _index_error(shapes, attrs, exc):
    if isinstance(exc, IndexError):
        message = str(exc)
        if message.startswith("shape mismatch: indexing arrays"):   # PyTorch's words for index tensors
            found = re.findall(r"\(([^)]*)\)", message.partition(" shapes ")[2])
            shown = ", ".join("[" + ", ".join(d.strip() for d in f.split(",") if d.strip()) + "]" for f in found)
            return IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes {shown}")
        return IndexError(message.replace("axis", "dimension"))
    return None


def _count_tensors(template) -> int:
    return sum(1 for item in template if item == "T")


def _index_backward_formula(F, g, s, at, need):
    n = _count_tensors(at["template"])
    indices = [s[f"indices{i}"] for i in range(n)]
    put = getattr(F, f"index_put_zeros{n}")
    return (put(g, *indices, template=at["template"], sizes=tuple(s["self_sym_sizes"])),) + (None,) * n


def _index_put_zeros(g, *indices, out=None, template=(), sizes=()):
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    view, index = locate(out, template, indices)
    np.add.at(view, index, g)
    return out


def _index_put_zeros_backward(F, gg, s, at, need):
    n = _count_tensors(at["template"])
    indices = [s[f"indices{i}"] for i in range(n)]
    return (getattr(F, f"index{n}")(gg, *indices, template=at["template"]),) + (None,) * n


def _index_put(a, v, *indices, out=None, template=(), node_name=None):
    """``a[template with indices] = v`` on a copy of ``a`` (or into ``out``); ``node_name``, which
    setitem gives a write of the whole tensor, names the autograd node only."""
    if out is None:
        out = np.array(a, copy=True)
    elif out is not a:
        np.copyto(out, a)
    view, index = locate(out, template, indices)
    view[index] = v
    return out


def _index_put_backward(F, g, s, at, need):
    n = _count_tensors(at["template"])
    indices = [s[f"indices{i}"] for i in range(n)]
    grad_a = grad_v = None
    if need[0]:
        zero = F.full(shape=(), value=0, dtype=g._data.dtype)
        grad_a = getattr(F, f"index_put{n}")(g, zero, *indices, template=at["template"])
    if need[1]:
        grad_v = getattr(F, f"index{n}")(g, *indices, template=at["template"])
    return (grad_a, grad_v) + (None,) * n


def _write_through_view_name(at) -> str:
    """``x[1:3] = v``: PyTorch writes a view of x and shows CopySlices; an index that selects the whole
    tensor writes x itself (``setitem`` names that node)."""
    return at.get("node_name", "torch::autograd::CopySlices")


def _index_put_name(at) -> str:
    """``x[idx] = v`` with index tensors: IndexPutBackward0, or CopySlices when the index's plain part
    made a view first (``x[0, [1]] = v``: PyTorch puts into the view ``x[0]``)."""
    return "torch::autograd::CopySlices" if VIEW_THEN in at["template"] else "IndexPutBackward0"


# One op per number of index tensors keeps each record's inputs and saves static; an index has at most
# one tensor per dim, and PyTorch's tensors have at most 8 dims in practice (one index tensor per dim).
MAX_INDEX_TENSORS = 8
for _n in range(0, MAX_INDEX_TENSORS + 1):
    _saved_indices = tuple(Save(f"indices{i}", i + 1) for i in range(_n))
    register(OpDef(f"index{_n}", _index, "other", "IndexBackward0", _index_backward_formula,
                   (Save("self_sym_sizes", "shape:0", freed=False),) + _saved_indices,
                   "same", explain=_index_error, grad_inputs=(0,)))
    register(OpDef(f"index_put_zeros{_n}", _index_put_zeros, "other", "IndexPutImplBackward0",
                   _index_put_zeros_backward, _saved_indices, "same", grad_inputs=ZEROS_SELF))
    register(OpDef(f"index_put{_n}", _index_put, "other",  # inputs (self, values, *indices)
                   _index_put_name if _n else _write_through_view_name, _index_put_backward,
                   tuple(Save(f"indices{i}", i + 2) for i in range(_n)),
                   "same", explain=_index_error, grad_inputs=(0, 1)))



def _view_through(a, out=None, template=(), size=(), stride=(), storage_offset=0):
    """``a`` viewed by the chain of view ops of ``template`` (a VIEWS item): a view taken afresh of
    its base after the base's history changed in place, which PyTorch records as an as_strided
    view (AsStridedBackward0; ``size``, ``stride`` and ``storage_offset`` are that view's, shown
    as its saved values; the chain alone decides the view)."""
    return _through_views(a, template[0][1])


def _view_through_backward(F, g, s, at, need):
    return (F.index_put_zeros0(g, template=at["template"], sizes=tuple(s["self_sym_sizes"])),)


register(OpDef("view_through", _view_through, "view", "AsStridedBackward0", _view_through_backward,
               (Save("self_sym_sizes", "shape:0", freed=False), Save("size", "attr:size", freed=False),
                Save("stride", "attr:stride", freed=False),
                Save("storage_offset", "attr:storage_offset", freed=False)), "same"))

# ---- joining -----------------------------------------------------------------------------------

def _cat(*arrays, out=None, dim=0, sizes=()):
    """``sizes`` holds each input's size along ``dim``, None for a legacy empty tensor (shape (0,))
    among others, which cat skips."""
    if None in sizes:
        arrays = [a for a, size in zip(arrays, sizes) if size is not None]
    return np.concatenate(arrays, axis=dim, out=out)


def _cat_error(shapes, attrs, exc):
    dim = attrs["dim"]
    numbered = [(i, s) for i, (s, size) in enumerate(zip(shapes, attrs["sizes"])) if size is not None]
    first = numbered[0][1]
    for i, s in numbered[1:]:
        if len(s) != len(first):
            return RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(s)}")
        for d in range(len(first)):
            if d != dim and s[d] != first[d]:
                return RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size "
                                    f"{first[d]} but got size {s[d]} for tensor number {i} in the list.")
    return None


def _cat_backward(F, g, s, at, need):
    dim, grads, start = at["dim"], [], 0
    for size, needed in zip(at["sizes"], need):
        if size is None:   # a legacy empty input cat skipped: its gradient is empty too
            grads.append(F.full(shape=(0,), value=0, dtype=g._data.dtype) if needed else None)
            continue
        grads.append(F.slice(g, dim=dim, start=start, end=start + size, step=1) if needed else None)
        start += size
    return tuple(grads)


register(OpDef("cat", _cat, "other", "CatBackward0", _cat_backward, (Save("dim", "attr:dim", freed=False),),
               "promote", explain=_cat_error))


def _stack(*arrays, out=None, dim=0):
    return np.stack(arrays, axis=dim, out=out)


def _stack_error(shapes, attrs, exc):
    first = shapes[0]
    for i, s in enumerate(shapes[1:], start=1):
        if tuple(s) != tuple(first):
            return RuntimeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                                f"and {list(s)} at entry {i}")
    return None


register(OpDef("stack", _stack, "other", "StackBackward0",
               lambda F, g, s, at, need: tuple(F.select(g, dim=at["dim"], index=i) if n else None
                                               for i, n in enumerate(need)),
               (Save("dim", "attr:dim", freed=False),), "promote", explain=_stack_error))


# ---- direct NumPy calls for generated replay code (views assign their output) -----------------

with_emit("t", lambda ins, out, at, shapes: f"{out} = {ins[0]}.T")
with_emit("transpose", lambda ins, out, at, shapes: (  # a 0-dim input calls the forward (an identity view)
    None if shapes[0] == () else f"{out} = np.swapaxes({ins[0]}, {at['dim0']}, {at['dim1']})"))
with_emit("permute", lambda ins, out, at, shapes: f"{out} = np.transpose({ins[0]}, {at['dims']!r})")
with_emit("view", lambda ins, out, at, shapes: f"{out} = {ins[0]}.reshape({at['shape']!r})")
with_emit("unsafe_view", lambda ins, out, at, shapes: f"{out} = {ins[0]}.reshape({at['shape']!r})")
# reshape of a non-contiguous tensor that a view can express: PyTorch's _reshape_alias
register(replace(OPS["view"], name="reshape_alias", node_name="ReshapeAliasBackward0"))
with_emit("expand", lambda ins, out, at, shapes: f"{out} = np.broadcast_to({ins[0]}, {at['shape']!r})")
with_emit("unsqueeze", lambda ins, out, at, shapes: f"{out} = np.expand_dims({ins[0]}, {at['dim']})")
with_emit("squeeze", lambda ins, out, at, shapes: f"{out} = {ins[0]}.reshape({tuple(shapes[-1])!r})")
with_emit("select", lambda ins, out, at, shapes: (  # the forward's index: a trailing Ellipsis keeps a 0-d view
    f"{out} = {ins[0]}[{', '.join([':'] * at['dim'] + [repr(at['index']), '...'])}]"))
with_emit("detach", lambda ins, out, at, shapes: f"{out} = {ins[0]}")
with_emit("alias", lambda ins, out, at, shapes: f"{out} = {ins[0]}.view()")
