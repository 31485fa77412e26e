"""The tracer: watches one eager call of a compiled function and writes what it did to a tape.

It maps tensors to tape values (SSA: an in-place op gives its tensor a new value), finds the
tensors that come from outside (arguments, and captured state such as parameters, optimizer
buffers and existing gradients, all read by reference on replay), turns numbers read from
Python state into replay-time scalars, collects guards, and refuses what a replay could not
repeat faithfully: reading a traced value into Python, building a tensor from a NumPy array,
changing a tensor through a stale view, or keeping a tensor made inside the call.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from staticgrad._eager.indexing import view_through_attrs
from staticgrad._eager.tensor import Tensor, serial_mark
from staticgrad._state import Tracing
from staticgrad.compiler.ir import ScalarSlot
from staticgrad.compiler.trace import Tape
from staticgrad.errors import TraceError
from staticgrad.ops.dtypes import default_float
from staticgrad.record.scalars import ScalarRef, _raw, reads_argument
from staticgrad.record.trace_record import Guard, grad_state


class LiveBytes:
    """The bytes of the arrays made during a traced call that are still alive, and the most at once:
    eager's peak tensor memory (the storage of every tensor the call makes, its saved tensors,
    gradients and new optimizer state), plus an op's working memory while it runs (the temporaries
    its scratch declares, a convolution's columns: what a replay's arena holds for it too; NumPy's
    smaller temporaries are not counted). Counted with a weak reference per array, a few
    microseconds a trace, where tracemalloc would double its time."""

    __slots__ = ("__weakref__", "_refs", "live", "peak")

    def __init__(self):
        self.live = 0
        self.peak = 0
        self._refs: dict = {}

    def add(self, array) -> None:
        while isinstance(array.base, np.ndarray):   # a view: count the array that owns the memory
            array = array.base
        key = id(array)
        if key in self._refs:
            return
        size = array.nbytes
        self._refs[key] = weakref.ref(array, _Forget(weakref.ref(self), key, size))
        self.live += size
        if self.live > self.peak:
            self.peak = self.live

    def working(self, size: int) -> None:
        """An op ran with ``size`` bytes of temporaries beside what is alive (its outputs too)."""
        if self.live + size > self.peak:
            self.peak = self.live + size


class _Forget:
    """LiveBytes' callback when an array it counts dies (weakly held: a finished trace's counter
    goes away while arrays it counted live on)."""

    __slots__ = ("counter", "key", "size")

    def __init__(self, counter, key: int, size: int):
        self.counter, self.key, self.size = counter, key, size

    def __call__(self, _) -> None:
        counter = self.counter()
        if counter is not None:
            counter._refs.pop(self.key, None)
            counter.live -= self.size


@dataclass(slots=True)
class _Binding:
    value: int
    storage: int
    writes: int       # the storage's write count when this binding was made
    full: bool        # the tensor covers its storage exactly (not a partial view)


# Views that alias their whole input with the same layout: writes through them are writes to it.
_IDENTITY_VIEWS = ("detach", "alias")


class Tracer:
    def __init__(self, fallback: str, name: str):
        self.tape = Tape()
        self.fallback = fallback
        self.name = name
        self.failure = None
        self._bindings: dict = {}      # id(tensor) -> _Binding
        self._refs: dict = {}          # id(tensor) -> weakref (removes the binding when it dies)
        self.created: list = []       # weakrefs of tensors made during the call
        self.created_ids: set = set()
        self.storage_writes: dict = {}
        self.storage_value: dict = {}  # storage -> value holding its full current contents
        self.external: dict = {}      # storage -> ("input", k) / ("captured", index, tensor)
        self.captured: list = []
        self.input_ids: dict = {}     # id(input tensor) -> flat index
        self._scalar_slots: dict = {}
        self.scalar_getters: list = []
        # every trace depends on the default dtype (factories, int -> float promotion read it)
        self.guards: list = [Guard(default_float, default_float(), "the default dtype (set_default_dtype)")]
        self.input_guards: list = []
        self.grad_slots: dict = {}    # id(tensor) -> tensor (strong: slots of externals only)
        self._constant_values: set = set()
        self._guarded_modules: dict = {}
        self.outside_nodes: dict = {}  # id(grad_fn) of tensors from outside -> how to name them
        self._start_serial = serial_mark()
        self.float_arguments_static = False
        self.gradient_sums: dict = {}  # values the engine made adding gradients into one input -> (node, nr)
        self.array_values: dict = {}   # id(array) -> value, for arrays a compiled node's backward reads
        self.memory = LiveBytes()       # eager's peak: the arrays the call makes

    # ---- binding tensors to values --------------------------------------------------------

    def add_input(self, t: Tensor, index: int) -> None:
        if id(t) in self._bindings:
            return
        vid = self.tape.input(t._data.shape, t._data.dtype)
        self._bind(t, vid, vid, full=True)
        self.external[vid] = ("input", index)
        self.input_ids[id(t)] = index
        self._mark_outside_graph(t, f"argument {index}")

    def _mark_outside_graph(self, t: Tensor, what: str) -> None:
        """Remember the autograd node of a tensor computed outside the call: a backward inside
        the call that reaches it goes on into a graph the replay knows nothing of."""
        if t.grad_fn is not None:
            self.outside_nodes[id(t.grad_fn)] = f"{what} (a {t.dtype.name}{list(t.shape)} tensor)"

    def on_outside_node(self, node) -> None:
        """The backward engine is about to run a node of a graph built outside the call."""
        what = self.outside_nodes[id(node)]
        self.fail(f"backward reached the autograd graph of {what} computed outside the compiled function, "
                  "and a replay cannot follow a graph it did not record (the next call's graph may differ); "
                  "detach it before the call, or compile the code that computes it as well")

    def _bind(self, t: Tensor, vid: int, storage: int, full: bool, created: bool = False) -> None:
        key = id(t)
        writes = self.storage_writes.get(storage)
        if writes is None:
            writes = self.storage_writes[storage] = 0
        self._bindings[key] = _Binding(vid, storage, writes, full)
        if full:
            self.storage_value[storage] = vid
        if key not in self._refs:
            bindings, refs, created_ids = self._bindings, self._refs, self.created_ids

            def forget(_, key=key):
                bindings.pop(key, None)
                refs.pop(key, None)
                created_ids.discard(key)

            self._refs[key] = weakref.ref(t, forget)
        if created and key not in self.created_ids:
            self.created_ids.add(key)
            self.created.append(self._refs[key])

    def _capture(self, t: Tensor, source) -> _Binding:
        vid = self.tape.captured(t._data.shape, t._data.dtype)
        self.captured.append(source)
        t._captured = True
        self._mark_outside_graph(t, "a captured tensor")
        self._bind(t, vid, vid, full=True)
        self.external[vid] = ("captured", len(self.captured) - 1, t)
        return self._bindings[id(t)]

    def read(self, t: Tensor) -> int:
        b = self._bindings.get(id(t))
        if b is None:
            if t._serial > self._start_serial:
                raise TraceError(f"staticgrad internal error: a tensor made during the traced call of {self.name} "
                                 "reached an op without passing the tracer; refusing to replay it by reference")
            b = self._capture(t, ("tensor", t))
        if self.storage_writes[b.storage] != b.writes:
            if not b.full:
                fresh = self._view_afresh(t, b)
                if fresh is not None:
                    return fresh
                self.fail("a view read after its base tensor was changed in place inside a compiled function "
                          "cannot be replayed; take the view after the in-place op, or clone it before")
                return b.value
            current = self.storage_value[b.storage]
            b = _Binding(current, b.storage, self.storage_writes[b.storage], True)
            self._bindings[id(t)] = b
        return b.value

    def _view_afresh(self, t: Tensor, b) -> int | None:
        """A view whose base was written since it was bound, read again: its view ops taken afresh
        of the base's current value (view_through), or None when they cannot be replayed."""
        attrs = view_through_attrs(t) if t._base is not None else None
        if attrs is None:
            return None
        base_value = self.read(t._base)
        (vid,) = self.tape.op("view_through", [base_value], self._attrs(attrs), [(t._data.shape, t._data.dtype)],
                              Tracing.phase)
        self._bind(t, vid, b.storage, full=False)
        return vid

    def on_gradient_sum(self, t: Tensor, edge: tuple) -> None:
        value = self.value_of(t)
        if value is not None:
            self.gradient_sums[value] = edge

    def value_of(self, t: Tensor) -> int | None:
        b = self._bindings.get(id(t))
        return None if b is None else b.value

    # ---- events from dispatch and the Tensor API ------------------------------------------

    def on_op(self, op, inputs, attrs, outputs, inplace_target, cast) -> None:
        if self.failure is not None:
            return
        bindings, writes = self._bindings, self.storage_writes
        in_ids = []
        for t in inputs:
            b = bindings.get(id(t))
            # _read's common case inline: a bound tensor whose storage was not written since
            in_ids.append(b.value if b is not None and writes[b.storage] == b.writes else self.read(t))
        if self.failure is not None:
            return
        if cast is not None:
            in_ids = [self._cast(v, t._data.dtype, cast) for v, t in zip(in_ids, inputs)]
        frozen = self._attrs(attrs)
        if inplace_target is None:
            shapes = [(o._data.shape, o._data.dtype) for o in outputs]
            out_ids = self.tape.op(op.name, in_ids, frozen, shapes, Tracing.phase)
            for t, vid in zip(outputs, out_ids):
                if op.is_view:
                    storage = self._bindings[id(inputs[0])].storage
                    full = op.name in _IDENTITY_VIEWS and self._bindings[id(inputs[0])].full
                    self._bind(t, vid, storage, full=full, created=True)
                else:
                    self._bind(t, vid, vid, full=True, created=True)
                    self.memory.add(t._data)
            if op.scratch is not None:
                self._working_memory(op, inputs, frozen)
            return
        self._write_inplace(op, inplace_target, in_ids, frozen, cast)

    def _working_memory(self, op, inputs, attrs) -> None:
        """Count an op's declared temporaries (OpDef.scratch), sized as the planner sizes them."""
        concrete = {k: v for k, v in attrs.items() if not isinstance(v, ScalarSlot)}
        arrays = [t._data for t in inputs]
        self.memory.working(op.scratch([a.shape for a in arrays], [a.dtype for a in arrays], concrete))

    def record_unrun(self, op, inputs: list, attrs: dict) -> list:
        """Record ``op`` on ``inputs`` without running it (a collective a replay runs but a trace
        must not, or the ranks' calls would pair up wrongly); returns placeholder outputs shaped as
        the inputs, which the rest of the trace must not read for their values."""
        outputs = [Tensor._make(np.empty_like(t._data), False, None) for t in inputs]
        self.on_op(op, inputs, attrs, outputs, None, None)
        return outputs

    def _write_inplace(self, op, target: Tensor, in_ids, attrs, cast) -> None:
        b = self._bindings[id(target)]
        if not b.full:
            self.fail(f"in-place '{op.name}' on a view inside a compiled function cannot be replayed; "
                      "apply it to the base tensor or out of place")
            return
        target_dtype = target._data.dtype
        compute = cast if cast is not None else target_dtype
        (vid,) = self.tape.op(op.name, in_ids, attrs, [(target._data.shape, compute)], Tracing.phase)
        if compute != target_dtype:
            (vid,) = self.tape.op("to_dtype", [vid], {"dtype": target_dtype, "self_dtype": compute},
                                  [(target._data.shape, target_dtype)], Tracing.phase)
        self.storage_writes[b.storage] += 1
        self._bind(target, vid, b.storage, full=True)

    def _cast(self, vid: int, dtype, cast) -> int:
        if dtype == cast:
            return vid
        shape = self.tape.graph.values[vid].shape
        (out,) = self.tape.op("to_dtype", [vid], {"dtype": cast, "self_dtype": dtype}, [(shape, cast)], Tracing.phase)
        return out

    def _attrs(self, attrs: dict) -> dict:
        if not attrs:
            return attrs
        out = None
        for k, v in attrs.items():
            if type(v) is ScalarRef:
                if out is None:
                    out = dict(attrs)
                out[k] = self._scalar_slot(v)
        return attrs if out is None else out

    def _scalar_slot(self, ref: ScalarRef):
        slot = self._scalar_slots.get(ref.key)
        if slot is None:
            slot = self.tape.scalar()
            self._scalar_slots[ref.key] = slot
            self.scalar_getters.append(ref.getter)
        return slot

    def concrete_attrs(self, attrs: dict) -> dict:
        if not attrs:
            return attrs
        for v in attrs.values():
            if type(v) is ScalarRef:
                return {k: _raw(x) if type(x) is ScalarRef else x for k, x in attrs.items()}
        return attrs

    def dynamic_scalar(self, value, getter, label) -> ScalarRef:
        return ScalarRef(value, getter, label)

    def float_argument_read_as_value(self) -> None:
        """Python code turned a float argument into a plain value (a comparison, int(), a string):
        the plan holds what it made of this call's value, so it must not replay for other values."""
        self.float_arguments_static = True

    def on_stored_number(self, value) -> None:
        if reads_argument(value):
            self.float_argument_read_as_value()

    def add_guard(self, check, expected, label: str, identity: bool = False) -> None:
        """Guard that ``check()`` keeps returning ``expected``; with ``identity``, that its
        ``(keys, objects)`` keep naming the very same objects."""
        self.guards.append(Guard(check, expected, label, identity))

    def add_module_guard(self, module) -> None:
        """Guard a module the call used (called, or an attribute read): its train/eval mode, and
        that it still holds the same parameters, buffers and submodules (once per module per trace)."""
        if id(module) not in self._guarded_modules:
            self._guarded_modules[id(module)] = module
            name = type(module).__name__
            self.add_guard(lambda: module.training, module.training, f"{name}.training")
            self.add_guard(module._holdings, module._holdings(), f"the parameters, buffers and submodules of a {name}",
                           identity=True)

    def on_constant(self, t: Tensor, from_array: str | None) -> None:
        if from_array is not None:
            self.fail(f"{from_array} inside a compiled function bakes the array's current contents into the "
                      "plan; pass the data in as a tensor argument instead")
            return
        vid = self.tape.constant(t._data)
        self._constant_values.add(vid)
        self._bind(t, vid, vid, full=True, created=True)
        self.memory.add(t._data)

    def on_alias(self, source: Tensor, alias: Tensor, kind: str) -> None:
        self.read(source)
        b = self._bindings[id(source)]
        self._bind(alias, b.value, b.storage, full=b.full, created=True)

    def on_copy(self, source: Tensor, copy: Tensor) -> None:
        """``copy`` holds ``source``'s current contents in storage of its own."""
        vid = self.read(source)
        (cid,) = self.tape.op("clone", [vid], {}, [(copy._data.shape, copy._data.dtype)], Tracing.phase)
        self._bind(copy, cid, cid, full=True, created=True)
        self.memory.add(copy._data)

    def on_unpack(self, tensor: Tensor, value: int) -> None:
        """A saved output rebuilt as a tensor for a backward formula (create_graph)."""
        self._bind(tensor, value, value, full=True, created=True)

    def on_compiled_backward(self, graph, inputs: list, captured: list, scalars: list, returned: list) -> None:
        """A compiled model's node ran its backward program: record the program's recorded ops
        (``graph``, as traced) as ops of this tape. ``inputs`` and ``captured`` say what each of the
        graph's inputs and captured values was: ``("tensor", t)``, ``("array", a)`` (a saved array
        this trace bound to a value, see ``array_values``) or ``("constant", a)``; ``scalars`` are the
        call's replay-time scalars; ``returned`` pairs graph values with the tensors the node returned."""
        if self.failure is not None:
            return
        values = {}
        for vid, source in zip(graph.inputs, inputs):
            values[vid] = self._source_value(source)
        for vid, source in zip(graph.captured, captured):
            values[vid] = self._source_value(source)
        if self.failure is not None:
            return
        for vid, array in graph.constants.items():
            values[vid] = self.tape.constant(array)
        graph_values = graph.values
        for op in graph.ops:
            attrs = {k: scalars[v.index] if type(v) is ScalarSlot else v for k, v in op.attrs}
            shapes = [(graph_values[v].shape, graph_values[v].dtype) for v in op.outputs]
            out_ids = self.tape.op(op.op, [values[v] for v in op.inputs], attrs, shapes, "backward")
            values.update(zip(op.outputs, out_ids))
        for vid, t in returned:
            self._bind(t, values[vid], values[vid], full=True, created=True)
            self.memory.add(t._data)

    def _source_value(self, source) -> int:
        kind, obj = source
        if kind == "tensor":
            return self.read(obj)
        if kind == "constant":
            return self.tape.constant(obj)
        vid = self.array_values.get(id(obj))
        if vid is None:
            self.fail("a compiled model's backward read an array this recording did not bind (a compiled "
                      "model's backward inside a compiled function)")
            return -1
        return vid

    def on_data_read(self, t: Tensor, what: str) -> None:
        b = self._bindings.get(id(t))
        if b is not None and b.value in self._constant_values:
            return
        self.fail(f"{what} on a traced tensor reads its value into Python, which a replay cannot repeat; "
                  "move it out of the compiled function (return the tensor and read it after the call)")

    def _slot_ref(self, t: Tensor):
        """How finish() finds a tensor whose .grad was touched: weakly if it was made inside."""
        if id(t) in self.created_ids:
            return self._refs[id(t)]
        return lambda: t

    def on_grad_read(self, t: Tensor) -> None:
        key = id(t)
        if key in self.grad_slots or key in self.created_ids:
            if key not in self.grad_slots:
                self.grad_slots[key] = self._slot_ref(t)
            return
        self.grad_slots[key] = self._slot_ref(t)
        grad = t._grad
        expected = grad_state(t)
        if key in self.input_ids:
            self.input_guards.append((self.input_ids[key], expected))
        else:
            self.guards.append(Guard(_grad_state(t), expected, "the .grad of a captured tensor", reads_grad=True,
                                     subject=t))
        if grad is not None and id(grad) not in self._bindings:
            self._capture(grad, ("grad", t) if key not in self.input_ids else ("input_grad", self.input_ids[key]))

    def on_grad_write(self, t: Tensor, value) -> None:
        if id(t) not in self.grad_slots:
            self.grad_slots[id(t)] = self._slot_ref(t)

    def on_requires_grad(self, t: Tensor) -> None:
        if id(t) not in self.created_ids:
            self.fail("changing requires_grad of a tensor from outside the compiled function cannot be replayed; "
                      "do it before calling")

    def fail(self, reason: str) -> None:
        if self.fallback == "eager":
            if self.failure is None:
                self.failure = reason
            Tracing.tracer = None
            return
        raise TraceError(f"staticgrad.compile({self.name}): {reason}. (Or compile with fallback=\"eager\" to run "
                         "such calls eagerly.)")


def _grad_state(t: Tensor):
    return lambda: grad_state(t)
