"""The tracer: watches one eager call of a compiled function and writes what it did to a tape.

It maps tensors to tape values (SSA: an in-place op gives its tensor a new value), finds the
tensors that come from outside (arguments, and captured state such as parameters, optimizer
buffers and existing gradients, all read by reference on replay), turns numbers read from
Python state into replay-time scalars, collects guards, and refuses what a replay could not
repeat faithfully: reading a traced value into Python, building a tensor from a NumPy array,
changing a tensor through a stale view, or keeping a tensor made inside the call.
"""

from __future__ import annotations

import math
import operator
import threading
import weakref
from dataclasses import dataclass, field

from staticgrad._state import Tracing
from staticgrad.compiler.trace import Tape
from staticgrad.errors import TraceError
from staticgrad._eager.tensor import Tensor, serial_mark


def guard(check, label: str):
    """``check()``, and while a compiled function is being traced, a guard that it keeps this value:
    for Python state a module branches on (``Dropout`` reads ``self.training``)."""
    value = check()
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.add_guard(check, value, label)
    return value


# ---- numbers re-read on every replay -------------------------------------------------------------


class ScalarRef(float):
    """A number read from Python state (an optimizer's ``lr``) that a replay re-reads.

    Arithmetic on it stays a ScalarRef; comparing it or branching on it adds a guard."""

    __slots__ = ("getter", "key")

    def __new__(cls, value, getter, key):
        obj = float.__new__(cls, value)
        obj.getter = getter
        obj.key = key
        return obj

    def _derive(self, fn, other, name, reflected=False):
        if isinstance(other, ScalarRef):
            a, b = (other, self) if reflected else (self, other)
            ga, gb = a.getter, b.getter
            return ScalarRef(fn(_raw(a), _raw(b)), lambda: fn(ga(), gb()), (name, a.key, b.key))
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            g = self.getter
            if reflected:
                return ScalarRef(fn(other, _raw(self)), lambda: fn(other, g()), (name, other, self.key))
            return ScalarRef(fn(_raw(self), other), lambda: fn(g(), other), (name, self.key, other))
        return NotImplemented

    def __neg__(self):
        g = self.getter
        return ScalarRef(-_raw(self), lambda: -g(), ("neg", self.key))

    def __pos__(self):
        return self

    def __abs__(self):
        g = self.getter
        return ScalarRef(abs(_raw(self)), lambda: abs(g()), ("abs", self.key))

    def _compare(self, other, fn):
        result = fn(_raw(self), _raw(other) if type(other) is ScalarRef else other)
        tracer = Tracing.tracer
        if tracer is not None and (_reads_argument(self) or _reads_argument(other)):
            tracer.float_argument_read_as_value()
        elif tracer is not None:
            g = self.getter
            other_getter = other.getter if isinstance(other, ScalarRef) else (lambda: other)
            tracer.add_guard(lambda: fn(g(), other_getter()), result, f"a comparison of {self.key}")
        return result

    def __bool__(self):
        return self._compare(0.0, operator.ne)

    def __hash__(self):
        return float.__hash__(self)

    # Python turns a float argument into something else through these (a loop count, a shape, a
    # string): a plan that did so holds the value itself and replays only for that value.
    def _as_value(self, convert, *args):
        tracer = Tracing.tracer
        if tracer is not None and _reads_argument(self):
            tracer.float_argument_read_as_value()
        return convert(_raw(self), *args)

    def __float__(self):
        return self._as_value(float)

    def __int__(self):
        return self._as_value(int)

    def __trunc__(self):
        return self._as_value(math.trunc)

    def __floor__(self):
        return self._as_value(math.floor)

    def __ceil__(self):
        return self._as_value(math.ceil)

    def __round__(self, ndigits=None):
        return self._as_value(round, ndigits)

    def __format__(self, spec):
        return self._as_value(format, spec)

    def __repr__(self):
        return self._as_value(repr)

    def __str__(self):
        return self._as_value(str)

    def is_integer(self):
        return self._as_value(float.is_integer)

    def as_integer_ratio(self):
        return self._as_value(float.as_integer_ratio)

    def __divmod__(self, other):
        return self._as_value(divmod, other)

    def __floordiv__(self, other):
        return self._as_value(operator.floordiv, other)

    def __mod__(self, other):
        return self._as_value(operator.mod, other)

    def __reduce__(self):
        return (float, (_raw(self),))


_raw = float.__float__   # a ScalarRef's value as a plain float, without the conversions' bookkeeping


def argument_scalar(value: float, index: int) -> ScalarRef:
    """A Python float argument of a compiled function, as a trace sees it: the replay reads the
    value of the call being replayed (``CallFloats.values[index]``)."""
    return ScalarRef(value, lambda: CallFloats.values[index], ("argument", index))


class _CallFloats(threading.local):
    values: list = []


CallFloats = _CallFloats()   # the float arguments of this thread's current compiled call


def _reads_argument(x) -> bool:
    """``x`` is a ScalarRef computed from a float argument (its key names one)."""
    if type(x) is not ScalarRef:
        return False
    stack = [x.key]
    while stack:
        key = stack.pop()
        if isinstance(key, tuple):
            if key[:1] == ("argument",):
                return True
            stack.extend(key)
    return False


def _binary(fn, name, reflected=False):
    def method(self, other):
        return self._derive(fn, other, name, reflected)
    return method


def _comparison(fn):
    def method(self, other):
        if not isinstance(other, (int, float)):
            return NotImplemented
        return self._compare(other, fn)
    return method


for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("pow", operator.pow)):
    setattr(ScalarRef, f"__{_name}__", _binary(_fn, _name))
    setattr(ScalarRef, f"__r{_name}__", _binary(_fn, _name, reflected=True))
for _name, _fn in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)):
    setattr(ScalarRef, f"__{_name}__", _comparison(_fn))


# ---- what a trace hands to compile --------------------------------------------------------------

@dataclass
class Guard:
    """A value a plan depends on: ``check()`` must equal ``expected`` for a replay to be valid.

    An identity guard's check returns ``(keys, objects)``: it holds while the keys are equal and
    every object is the very one recorded (the parameters a module holds, an optimizer's buffers)."""

    check: object
    expected: object
    label: str
    identity: bool = False

    def holds(self) -> bool:
        current = self.check()
        if not self.identity:
            return current == self.expected
        (keys, objects), (expected_keys, expected_objects) = current, self.expected
        return (keys == expected_keys and len(objects) == len(expected_objects)
                and all(a is b for a, b in zip(objects, expected_objects)))


@dataclass
class TraceRecord:
    graph: object
    input_count: int
    captured: list                 # ("tensor", t) or ("grad", t): where each captured value is read
    scalar_getters: list
    state_guards: list             # Guards re-checked when the state epoch moves
    input_guards: list             # (flat input index, expected grad state) for inputs' .grad
    outputs: list                  # per output leaf: ("value", result index, info) / ("input", k) / ("object", obj)
                                   # / ("same", earlier leaf position): one tensor returned twice
    grad_slots: list               # (owner, final) -- owner ("captured", t) / ("input", k) / ("output", i)
    version_bumps: list            # (tensor or ("input", k), count)
    failure: str | None = None
    escapes: list = field(default_factory=list)
    eager_peak_bytes: int | None = None   # measured during the traced (eager) call
    float_arguments_static: bool = False  # Python made a plain value of a float argument


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
        self._created: list = []       # weakrefs of tensors made during the call
        self._created_ids: set = set()
        self._storage_writes: dict = {}
        self._storage_value: dict = {}  # storage -> value holding its full current contents
        self._external: dict = {}      # storage -> ("input", k) / ("captured", index, tensor)
        self._captured: list = []
        self._input_ids: dict = {}     # id(input tensor) -> flat index
        self._scalar_slots: dict = {}
        self._scalar_getters: list = []
        self._guards: list = []
        self._input_guards: list = []
        self._grad_slots: dict = {}    # id(tensor) -> tensor (strong: slots of externals only)
        self._constant_values: set = set()
        self._guarded_modules: dict = {}
        self._outside_nodes: dict = {}  # id(grad_fn) of tensors from outside -> how to name them
        self._start_serial = serial_mark()
        self.float_arguments_static = False

    # ---- binding tensors to values --------------------------------------------------------

    def add_input(self, t: Tensor, index: int) -> None:
        if id(t) in self._bindings:
            return
        vid = self.tape.input(t._data.shape, t._data.dtype)
        self._bind(t, vid, vid, full=True)
        self._external[vid] = ("input", index)
        self._input_ids[id(t)] = index
        self._mark_outside_graph(t, f"argument {index}")

    def _mark_outside_graph(self, t: Tensor, what: str) -> None:
        """Remember the autograd node of a tensor computed outside the call: a backward inside
        the call that reaches it goes on into a graph the replay knows nothing of."""
        if t.grad_fn is not None:
            self._outside_nodes[id(t.grad_fn)] = f"{what} (a {t.dtype.name}{list(t.shape)} tensor)"

    def on_outside_node(self, node) -> None:
        """The backward engine is about to run a node of a graph built outside the call."""
        what = self._outside_nodes[id(node)]
        self.fail(f"backward reached the autograd graph of {what} computed outside the compiled function, "
                  "and a replay cannot follow a graph it did not record (the next call's graph may differ); "
                  "detach it before the call, or compile the code that computes it as well")

    def _bind(self, t: Tensor, vid: int, storage: int, full: bool, created: bool = False) -> None:
        key = id(t)
        writes = self._storage_writes.get(storage)
        if writes is None:
            writes = self._storage_writes[storage] = 0
        self._bindings[key] = _Binding(vid, storage, writes, full)
        if full:
            self._storage_value[storage] = vid
        if key not in self._refs:
            bindings, refs, created_ids = self._bindings, self._refs, self._created_ids

            def forget(_, key=key):
                bindings.pop(key, None)
                refs.pop(key, None)
                created_ids.discard(key)

            self._refs[key] = weakref.ref(t, forget)
        if created and key not in self._created_ids:
            self._created_ids.add(key)
            self._created.append(self._refs[key])

    def _capture(self, t: Tensor, source) -> _Binding:
        vid = self.tape.captured(t._data.shape, t._data.dtype)
        self._captured.append(source)
        t._captured = True
        self._mark_outside_graph(t, "a captured tensor")
        self._bind(t, vid, vid, full=True)
        self._external[vid] = ("captured", len(self._captured) - 1, t)
        return self._bindings[id(t)]

    def _read(self, t: Tensor) -> int:
        b = self._bindings.get(id(t))
        if b is None:
            if t._serial > self._start_serial:
                raise TraceError(f"staticgrad internal error: a tensor made during the traced call of {self.name} "
                                 "reached an op without passing the tracer; refusing to replay it by reference")
            b = self._capture(t, ("tensor", t))
        if self._storage_writes[b.storage] != b.writes:
            if not b.full:
                self.fail("a view read after its base tensor was changed in place inside a compiled function "
                          "cannot be replayed; take the view after the in-place op, or clone it before")
                return b.value
            current = self._storage_value[b.storage]
            b = _Binding(current, b.storage, self._storage_writes[b.storage], True)
            self._bindings[id(t)] = b
        return b.value

    def value_of(self, t: Tensor) -> int | None:
        b = self._bindings.get(id(t))
        return None if b is None else b.value

    # ---- events from dispatch and the Tensor API ------------------------------------------

    def on_op(self, op, inputs, attrs, outputs, inplace_target, cast) -> None:
        if self.failure is not None:
            return
        bindings, writes = self._bindings, self._storage_writes
        in_ids = []
        for t in inputs:
            b = bindings.get(id(t))
            # _read's common case inline: a bound tensor whose storage was not written since
            in_ids.append(b.value if b is not None and writes[b.storage] == b.writes else self._read(t))
        if self.failure is not None:
            return
        if cast is not None:
            in_ids = [self._cast(v, t._data.dtype, cast) for v, t in zip(in_ids, inputs)]
        frozen = self._attrs(attrs)
        if inplace_target is None:
            shapes = [(o._data.shape, o._data.dtype) for o in outputs]
            out_ids = self.tape.op(op.name, in_ids, frozen, shapes, Tracing.phase)
            for t, vid in zip(outputs, out_ids):
                if op.kind == "view":
                    storage = self._bindings[id(inputs[0])].storage
                    full = op.name in _IDENTITY_VIEWS and self._bindings[id(inputs[0])].full
                    self._bind(t, vid, storage, full=full, created=True)
                else:
                    self._bind(t, vid, vid, full=True, created=True)
            return
        self._write_inplace(op, inplace_target, in_ids, frozen, cast)

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
        self._storage_writes[b.storage] += 1
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
            self._scalar_getters.append(ref.getter)
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
        if _reads_argument(value):
            self.float_argument_read_as_value()

    def add_guard(self, check, expected, label: str) -> None:
        self._guards.append(Guard(check, expected, label))

    def add_identity_guard(self, check, label: str) -> None:
        """Guard that ``check()``'s ``(keys, objects)`` keep naming the very same objects."""
        self._guards.append(Guard(check, check(), label, identity=True))

    def add_module_guard(self, module) -> None:
        """Guard a module the call used (called, or an attribute read): its train/eval mode, and
        that it still holds the same parameters, buffers and submodules (once per module per trace)."""
        if id(module) not in self._guarded_modules:
            self._guarded_modules[id(module)] = module
            name = type(module).__name__
            self.add_guard(lambda: module.training, module.training, f"{name}.training")
            self.add_identity_guard(module._holdings, f"the parameters, buffers and submodules of a {name}")

    def on_constant(self, t: Tensor, from_array: str | None) -> None:
        if from_array is not None:
            self.fail(f"{from_array} inside a compiled function bakes the array's current contents into the "
                      "plan; pass the data in as a tensor argument instead")
            return
        vid = self.tape.constant(t._data)
        self._constant_values.add(vid)
        self._bind(t, vid, vid, full=True, created=True)

    def on_alias(self, source: Tensor, alias: Tensor, kind: str) -> None:
        self._read(source)
        b = self._bindings[id(source)]
        self._bind(alias, b.value, b.storage, full=b.full, created=True)

    def on_copy(self, source: Tensor, copy: Tensor) -> None:
        """``copy`` holds ``source``'s current contents in storage of its own."""
        vid = self._read(source)
        (cid,) = self.tape.op("clone", [vid], {}, [(copy._data.shape, copy._data.dtype)], Tracing.phase)
        self._bind(copy, cid, cid, full=True, created=True)

    def on_unpack(self, tensor: Tensor, value: int) -> None:
        """A saved output rebuilt as a tensor for a backward formula (create_graph)."""
        self._bind(tensor, value, value, full=True, created=True)

    def on_data_read(self, t: Tensor, what: str) -> None:
        b = self._bindings.get(id(t))
        if b is not None and b.value in self._constant_values:
            return
        self.fail(f"{what} on a traced tensor reads its value into Python, which a replay cannot repeat; "
                  "move it out of the compiled function (return the tensor and read it after the call)")

    def _slot_ref(self, t: Tensor):
        """How finish() finds a tensor whose .grad was touched: weakly if it was made inside."""
        if id(t) in self._created_ids:
            return self._refs[id(t)]
        return lambda: t

    def on_grad_read(self, t: Tensor) -> None:
        key = id(t)
        if key in self._grad_slots or key in self._created_ids:
            if key not in self._grad_slots:
                self._grad_slots[key] = self._slot_ref(t)
            return
        self._grad_slots[key] = self._slot_ref(t)
        grad = t._grad
        expected = None if grad is None else (grad._data.shape, grad._data.dtype)
        if key in self._input_ids:
            self._input_guards.append((self._input_ids[key], expected))
        else:
            self._guards.append(Guard(_grad_state(t), expected, "the .grad of a captured tensor"))
        if grad is not None and id(grad) not in self._bindings:
            self._capture(grad, ("grad", t) if key not in self._input_ids else ("input_grad", self._input_ids[key]))

    def on_grad_write(self, t: Tensor, value) -> None:
        if id(t) not in self._grad_slots:
            self._grad_slots[id(t)] = self._slot_ref(t)

    def on_requires_grad(self, t: Tensor) -> None:
        if id(t) not in self._created_ids:
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

    # ---- the end of the call ------------------------------------------------------------------

    def finish(self, flat_outputs: list) -> TraceRecord:
        from staticgrad.record.finish import finish

        return finish(self, flat_outputs)


def _grad_state(t: Tensor):
    def check():
        g = t._grad
        return None if g is None else (g._data.shape, g._data.dtype)
    return check
