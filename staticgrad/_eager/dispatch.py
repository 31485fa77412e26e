"""Dispatch: run one op from the table on tensors.

Every op a user or a backward formula calls comes through here: pick the compute dtype
(PyTorch's promotion), run the op's NumPy forward, wrap the result, record an autograd node
with exactly the slots the op's record asks for, and tell the tracer when one is listening.
"""

from __future__ import annotations

import numpy as np

from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.node import NODE_CLASSES, SavedTensor, grad_accumulator, new_node
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.ops import OPS, OpDef
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.quiet import restore, silence
from staticgrad.ops.registry import ATTR, INPUT, RESULT, SHAPE

# Scalar attributes that take part in type promotion (PyTorch wraps them as numbers); None is an
# absent bound (clamp's min or max).
_WIDE_UNSIGNED = _dtypes.WIDE_UNSIGNED
PROMOTING_ATTRS = ("other", "exponent", "base", "min", "max")
_PROMOTING_RULES = ("promote", "float", "bool")

def _dtypes_for(op: OpDef, arrays, attrs):
    """(dtype to cast the inputs to, or None; output dtype) under the op's dtype rule."""
    rule = op.dtype_rule
    if rule == "attr":
        dtype = np.dtype(attrs["dtype"])
        if dtype in _WIDE_UNSIGNED:
            _dtypes.refuse_wide_unsigned(op.name, dtype)
        return None, dtype
    if not arrays:
        return None, None
    first = arrays[0].dtype
    if first in _WIDE_UNSIGNED and rule not in _PROMOTING_RULES:   # (a promoting op asks of its promoted dtype)
        _dtypes.refuse_wide_unsigned(op.name, first)
    if rule == "same":
        return None, first
    if rule == "index":
        return None, np.dtype(np.int64)
    n = len(arrays)
    # Fast path: one or two inputs of one float dtype (most ops) need no promotion.
    if n == 1:
        uniform = True
    elif n == 2:
        uniform = arrays[1].dtype == first
    else:
        uniform = all(a.dtype == first for a in arrays)
    if uniform and first.kind == "f":
        compute = first
    else:
        scalars = [attrs[k] for k in PROMOTING_ATTRS if attrs.get(k) is not None] if attrs else ()
        promoted = arrays[1:] if op.name == "where" else arrays   # (a where's condition takes no part)
        dims = [a.dtype for a in promoted if a.ndim]
        zeros = [a.dtype for a in promoted if not a.ndim]
        compute = _dtypes.result_type(dims, zeros, scalars)
        if compute in _WIDE_UNSIGNED and rule != "float":   # (a float op computes in float)
            _dtypes.refuse_wide_unsigned(op.name, compute)
    if rule == "float":
        compute = _dtypes.floating_result(compute)
    cast = None if uniform and compute == first else compute
    if rule == "bool":
        return cast, np.dtype(np.bool_)
    return cast, compute


def _explain(op: OpDef, inputs, attrs, exc: Exception) -> Exception:
    if op.explain is not None:
        better = op.explain([t.shape for t in inputs], attrs, exc)
        if better is not None:
            return better
    return exc


def dispatch(op: OpDef, inputs: tuple, attrs: dict, cast_to=None):
    """Run ``op`` out of place on tensors ``inputs``; returns a Tensor (or a tuple of them).
    ``cast_to``: a NumPy dtype the op computes in whatever its inputs' (a reduction's ``dtype=``):
    the node's edges keep the inputs' dtypes, so their gradients come back in them."""
    tracer = Tracing.tracer
    if tracer is not None and GradMode.enabled:   # a stale view's new history, before the trace reads it
        for t in inputs:
            if t._base is not None and t._base.grad_fn is not t._view_base_fn:
                stale_view(t, op.name)
    arrays = [t._data for t in inputs]
    cast, _out_dtype = _dtypes_for(op, arrays, attrs)
    if cast_to is not None and any(a.dtype != cast_to for a in arrays):
        cast = cast_to
    kernel_attrs = attrs if tracer is None else tracer.concrete_attrs(attrs)
    quiet = silence()  # log(-1) is nan, 1/0 inf, with no NumPy warning, as in PyTorch
    try:
        if cast is not None:
            arrays = [a if a.dtype == cast else a.astype(cast) for a in arrays]
        result = op.forward(*arrays, **kernel_attrs)
    except Exception as exc:  # NumPy's errors become PyTorch's wording where the op knows it
        raise _explain(op, inputs, attrs, exc) from None
    finally:
        restore(quiet)

    if type(result) is tuple:
        outputs = tuple(_wrap_output(op, _owned(op, r), inputs, None) for r in result)   # (no chain: a tuple)
        for i, t in enumerate(outputs):
            t._output_nr = i
    else:
        if type(result) is not np.ndarray or not result.flags.c_contiguous:
            result = _owned(op, result)
        outputs = (_wrap_output(op, result, inputs, attrs),)

    if tracer is not None:
        tracer.on_op(op, inputs, attrs, outputs, None, cast)
    if GradMode.enabled and op.backward is not None:
        _record_node(op, inputs, attrs, outputs, None)
    return outputs[0] if len(outputs) == 1 and type(result) is not tuple else outputs


def _owned(op: OpDef, result) -> np.ndarray:
    """An op's result as an array; one that owns its memory is made C-contiguous, the layout a
    replay's planned buffers have, so that a later matmul or reduction reads it in the same order
    in eager and in replay (NumPy keeps a transposed input's layout in an elementwise result)."""
    if type(result) is not np.ndarray:
        result = np.asarray(result)
    if not op.is_view and not result.flags.c_contiguous:
        result = np.ascontiguousarray(result)
    return result


def _wrap_output(op: OpDef, array: np.ndarray, inputs, attrs) -> Tensor:
    t = Tensor._make(array, False, None)
    if op.is_view:
        base = inputs[0]
        t._version_counter = base._version_counter
        if op.name != "detach":  # detach shares memory and version, but is not a view (and holds no graph)
            root = base._base if base._base is not None else base
            t._base = root
            t._view_base_fn = root.grad_fn
            # made in no_grad mode (True), or with grad on of such a view (the op's name: PyTorch's error
            # for an in-place change of it names the op); False otherwise
            t._view_no_grad = root._requires_grad and (not GradMode.enabled or (
                base._base is not None and base._view_no_grad and view_function_name(op, attrs)))
            # the view ops from the root to it (indexing.view_chain): None where one cannot be replayed
            # on the root alone (a view op of several tensors or results, a view of such a view)
            chain = () if base._base is None else base._view_chain
            t._view_chain = (chain + ((op.name, attrs),) if attrs is not None and len(inputs) == 1
                             and chain is not None and not (chain and chain[0] is None) else None)
    return t


def _refuse_grad(op: OpDef, index: int) -> None:
    for i, function, argument in op.nondifferentiable:
        if i == index:
            raise RuntimeError(f"The function '{function}' is not differentiable with respect to argument "
                               f"'{argument}'. This input cannot have requires_grad True.")


# indexing.regenerate_view, added when indexing is imported (it takes a view afresh of its base)
REGENERATE_VIEW: list = []
# The end of PyTorch's errors for the views unbind/split/chunk return, changed in place or stale
MULTIPLE_VIEWS = ("This view is the output of a function that returns multiple views. Such functions do not allow "
                  "the output views to be modified inplace. You should replace the inplace operation by an "
                  "out-of-place one.")


def stale_view(t: Tensor, where: str) -> None:
    """A view whose base's autograd history changed (an in-place op or a write into the base) after
    the view was made: its own history still leads to the base as it was, so its gradient would miss
    what the change did. As PyTorch gives such a view a new history over the base's current one
    (AsStridedBackward0), the view is taken afresh of the base by the view ops that made it, under
    that node; one whose ops cannot be replayed is refused, as is one that is an ``autograd.grad``
    input (its earlier uses hold its old history)."""
    base = t._base
    if not base._requires_grad and not t._requires_grad:
        return
    mark = t._view_chain
    if mark and mark[0] is None:   # one of several views a function returned (unbind, split): PyTorch's error
        raise RuntimeError(f"Output {mark[2]} of {mark[1]} is a view and its base or another view of its base has "
                           f"been modified inplace. {MULTIPLE_VIEWS}")
    if REGENERATE_VIEW and where != "autograd.grad" and REGENERATE_VIEW[0](t):
        return
    raise RuntimeError(
        f"{where}: a view ({t._data.dtype.name}{list(t._data.shape)}) taken before its base tensor was changed in "
        "place is used in autograd; its history still leads to the base as it was before the change, so its "
        "gradient would miss what the change did. PyTorch gives such a view the base's new history "
        "(AsStridedBackward0); staticgrad does so for views made by view ops and indexing, not for this one"
        + (" (an autograd.grad input)" if where == "autograd.grad" else "")
        + ". Take the view again after the in-place change, or clone it before the change.")


def refresh_view(t: Tensor, where: str) -> None:
    """Give ``t`` its new history first if it is a view whose base changed in place since it was
    made (``stale_view``); ops check inline, on their hot path."""
    if t._base is not None and t._base.grad_fn is not t._view_base_fn:
        stale_view(t, where)


def _record_node(op: OpDef, inputs, attrs, outputs, original_target, versions=None):
    """Attach a Node to ``outputs`` if any differentiable input requires grad."""
    grad_inputs = op.grad_inputs
    needs = []
    edges = []
    meta = []
    any_need = False
    for i, t in enumerate(inputs):
        if t._base is not None and t._base.grad_fn is not t._view_base_fn:
            stale_view(t, op.name)
        if t._requires_grad and (grad_inputs is None or i in grad_inputs):
            needs.append(True)
            any_need = True
            fn = t.grad_fn
            edges.append((fn, t._output_nr) if fn is not None else (grad_accumulator(t), 0))
            meta.append((t._data.shape, t._data.dtype))
        else:
            if op.nondifferentiable and t._requires_grad:
                _refuse_grad(op, i)
            needs.append(False)
            edges.append((None, 0))
            meta.append(None)
    if not any_need:
        return None
    if op.wrapped_scalar:
        edges.append((None, 0))
        meta.append(None)
        needs.append(False)
    if grad_inputs is not None:   # edges for the differentiable inputs only (an absent optional one too)
        n = len(edges)
        edges = [edges[i] if i is not None and i < n else (None, 0) for i in grad_inputs]
        meta = [meta[i] if i is not None and i < n else None for i in grad_inputs]
    name = op.node_name   # the node is of PyTorch's class for its name (one dict lookup)
    node = new_node(NODE_CLASSES[name if name.__class__ is str else name(attrs)], op, attrs, tuple(edges),
                    tuple(meta), len(outputs))
    if grad_inputs is not None:
        node._edge_inputs = (grad_inputs, tuple(needs))
    if op.saves:
        saved = {}
        freeable = []
        for slot in op.saves:
            kind, key, when = slot.kind, slot.key, slot.when
            if when:
                for j in when:
                    if needs[j]:
                        break
                else:
                    continue
            if kind is INPUT:
                source = inputs[key]
                if original_target is not None and key == 0:
                    source = original_target
                value = SavedTensor(source, False)
                if versions is not None and source is inputs[key]:
                    value.version = versions[key]  # saved as it was before this in-place op ran
            elif kind is RESULT:
                value = SavedTensor(outputs[key], True)
            elif kind is ATTR:
                value = attrs.get(key)
            elif kind is SHAPE:
                value = inputs[key]._data.shape
            else:
                array = inputs[key]._data
                itemsize = array.itemsize
                value = tuple([stride // itemsize for stride in array.strides])
            saved[slot.name] = value
            if slot.freed:
                freeable.append(slot.name)
        node._saved = saved
        node._freeable = tuple(freeable)
    for t in outputs:
        if t._data.dtype.kind == "f":
            t.grad_fn = node
            t._requires_grad = True
    return node


def dispatch_pieces(op: OpDef, input: Tensor, attrs: dict, pieces) -> tuple:
    """Several views of ``input`` under one node (unbind, split): each of ``pieces`` (callables)
    dispatches its own view op, which is what a trace records; the node of ``op``, attached to them
    all, is the one PyTorch shows (UnbindBackward0, SplitBackward0)."""
    grad_on = GradMode.enabled
    GradMode.enabled = False
    try:
        outputs = tuple(piece() for piece in pieces)
    finally:
        GradMode.enabled = grad_on
    if grad_on:   # (made with grad off here only to record one node for them all)
        for t in outputs:
            t._view_no_grad = False
    if grad_on and input._requires_grad and outputs:
        for i, t in enumerate(outputs):
            t._output_nr = i
        node = _record_node(op, (input,), attrs, outputs, None)
        if node is not None:   # PyTorch refuses in-place ops on these views: indexing.inplace_on_view says so
            function = node.name().rsplit("Backward", 1)[0]
            for i, t in enumerate(outputs):
                t._view_chain = (None, function, i)
    return outputs


def partial_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """PyTorch's refusal test for an elementwise in-place op: two dense, non-overlapping layouts whose
    memory ranges overlap, other than the very same elements in the same layout (``a.add_(a)``).
    Layouts with gaps or repeats (a strided slice, an expand) are too hard to judge, and pass."""
    if a.size == 0 or b.size == 0 or not (_dense(a) and _dense(b)):
        return False
    a_begin, b_begin = a.__array_interface__["data"][0], b.__array_interface__["data"][0]
    a_end, b_end = a_begin + a.nbytes, b_begin + b.nbytes
    if a_begin == b_begin and a_end == b_end:
        return a.strides != b.strides
    return a_begin < b_end and b_begin < a_end


def _dense(a: np.ndarray) -> bool:
    """Its elements fill its memory range once each (C-contiguous in some order of its dims)."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return True
    expected = a.itemsize
    for stride, size in sorted((s, n) for s, n in zip(a.strides, a.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def view_function_name(op: OpDef, attrs) -> str:
    """The name PyTorch gives a view op in its no_grad-view errors: its node's name without
    "Backward0" (SelectBackward0 -> Select), or without "Backward" (SqueezeBackward1 -> Squeeze1)."""
    name = op.node_name if op.node_name.__class__ is str else op.node_name(attrs or {})
    return name[:-len("Backward0")] if name.endswith("Backward0") else name.replace("Backward", "")


def raise_no_grad_view(made) -> None:
    """PyTorch's error for an in-place change, with grad mode on, of a view made in no_grad mode
    (``made`` True), or of a view made of such a view with grad on (``made``: its view op's name)."""
    what = ("A view was created in no_grad mode" if made is True
            else f"Output 0 of {made} is a view of a view which was created in no_grad mode")
    raise RuntimeError(f"{what} and is being modified inplace with grad mode enabled. Given that this use case is "
                       "ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view "
                       "and the inplace either both inside the no_grad block (if you don't want the inplace to be "
                       "tracked) or both outside (if you want the inplace to be tracked).")


# An in-place op on a view of a tensor in autograd, as PyTorch records it
# (``_eager.indexing.inplace_on_view``, which puts itself here: indexing is built on this module).
INPLACE_ON_VIEW: list = []


def dispatch_inplace(op: OpDef, target: Tensor, others: tuple, attrs: dict) -> Tensor:
    """Run ``op`` writing into ``target``'s storage (``add_``, ``mul_``, ``copy_``...)."""
    grad_on = GradMode.enabled
    if grad_on and target._base is not None and target._view_no_grad:
        raise_no_grad_view(target._view_no_grad)
    if grad_on and target._requires_grad and target.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    inputs = (target,) + others
    arrays = [t._data for t in inputs]
    if others and op.kind == "elementwise":
        written = arrays[0]
        for a in arrays[1:]:
            if a is not written and np.may_share_memory(written, a) and partial_overlap(written, a):
                raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                                   "refer to a single memory location. Please clone() the tensor before performing "
                                   "the operation.")
    cast, out_dtype = _dtypes_for(op, arrays, attrs)
    target_dtype = target._data.dtype
    if out_dtype != target_dtype and _dtypes.category_of(out_dtype) > _dtypes.category_of(target_dtype):
        raise RuntimeError(f"result type {_dtypes.from_numpy_dtype(out_dtype).tensor_type[:-6]} can't be cast "
                           f"to the desired output type {_dtypes.from_numpy_dtype(target_dtype).tensor_type[:-6]}")
    if cast is not None:
        quiet = silence()
        try:
            arrays = [a if a.dtype == cast else a.astype(cast) for a in arrays]
        finally:
            restore(quiet)
    needs_graph = grad_on and op.backward is not None and any(t._requires_grad for t in inputs)
    if needs_graph and target._base is not None:
        done = INPLACE_ON_VIEW[0](op, target, others, attrs) if INPLACE_ON_VIEW else None
        if done is not None:
            return done
        raise RuntimeError(
            f"staticgrad does not support in-place '{op.name}' on this view of a tensor that takes part in "
            "autograd (it supports views made by view ops and indexing, a[1:], a.t()[0] or a.view(-1), whose "
            "memory is the base's for its layout); apply the op out of place (y = y.op(...)) or clone the "
            "view first.")
    tracer = Tracing.tracer
    versions = [t._version_counter[0] for t in inputs] if needs_graph else None
    original = None
    if needs_graph and _saves_input0(op):
        original = snapshot(target)
    kernel_attrs = attrs if tracer is None else tracer.concrete_attrs(attrs)
    out = target._data
    quiet = silence()
    try:
        if out.dtype == (cast or out.dtype):
            op.forward(*arrays, out=out, **kernel_attrs)
        else:
            np.copyto(out, op.forward(*arrays, **kernel_attrs), casting="unsafe")
    except Exception as exc:
        raise _explain(op, inputs, attrs, exc) from None
    finally:
        restore(quiet)
    target._version_counter[0] += 1
    if tracer is not None:
        tracer.on_op(op, inputs, attrs, (target,), target, cast)
    if needs_graph:
        node = _record_node(op, inputs, attrs, (target,), original, versions)
        target._output_nr = 0
        if node is not None and target._data.dtype.kind != "f":
            target.grad_fn = None
    return target


def snapshot(target: Tensor) -> Tensor:
    """A copy of ``target``'s values with its history, for a node of an in-place op to read and save:
    the write that follows moves ``target``'s version, not the copy's."""
    original = Tensor._make(target._data.copy(), target._requires_grad, target.grad_fn)
    original._output_nr = target._output_nr
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.on_copy(target, original)
    return original


def _saves_input0(op: OpDef) -> bool:
    return any(slot.kind is INPUT and slot.key == 0 for slot in op.saves)


class Functional:
    """``F.<op>(*tensors, **attrs)`` for every op in the table: what backward formulas call."""

    @property
    def recording(self) -> bool:
        """Whether ops dispatched now record autograd nodes: in a backward formula, exactly under
        create_graph=True (a formula with a faster, non-differentiable form checks it)."""
        return GradMode.enabled

    @property
    def untracked(self) -> bool:
        """Whether nothing records the ops a backward formula dispatches now (neither autograd, as
        under create_graph=True, nor a trace): a formula may then compute on arrays, making the
        same NumPy calls its ops would, and wrap the results with ``F.result``."""
        return not GradMode.enabled and Tracing.tracer is None

    @staticmethod
    def result(array: np.ndarray, transposed: bool = False) -> Tensor:
        """A formula's gradient computed on arrays: a tensor of ``array`` (C-contiguous, as an op's
        result is), or with ``transposed`` the ``t()`` view of one, as ``F.t(F.mm(...))`` gives."""
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        t = Tensor._make(array, False, None)
        return _wrap_output(_T_OP, array.T, (t,), {}) if transposed else t

    def __getattr__(self, name: str):
        try:
            op = OPS[name]
        except KeyError:
            raise AttributeError(f"staticgrad has no op named {name!r}") from None

        def call(*tensors, **attrs):
            dtype = attrs.get("dtype")
            if dtype is not None and not isinstance(dtype, np.dtype):
                attrs["dtype"] = _dtypes.to_numpy_dtype(dtype)
            return dispatch(op, tensors, attrs)

        call.__name__ = name
        setattr(self, name, call)
        return call


_T_OP = OPS["t"]
F = Functional()
