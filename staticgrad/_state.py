"""Switches the front end reads on hot paths (kept in one small module so that tensor.py and
dispatch.py can both read them without importing each other). The tracer and the phase are per
thread, as PyTorch's grad mode is: one thread's trace never sees another thread's ops."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any, Protocol


class Recorder(Protocol):
    """What the front end tells a trace under way (``Tracing.tracer``), in one place. The tracer
    (``record/tracer.py``) implements it; eager code calls it only where ``Tracing.tracer`` is set.

    Tensors and values:
      ``on_op(op, inputs, attrs, outputs, inplace_target, cast)`` an op ran (dispatch);
      ``on_alias(source, alias, kind)`` / ``on_copy(source, copy)`` a view or copy shares or takes
      data outside dispatch; ``on_constant(t, from_array)`` a factory made a tensor from data;
      ``on_unpack(t, value)`` a saved tensor came back in backward; ``on_gradient_sum(t, edge)`` the
      engine added two gradients flowing into one input of a node (``edge``: (node, input number));
      ``value_of(t)`` the tape value a tensor holds (saved for backward); ``on_outside_node(node)``
      backward reached a node made before the call; ``concrete_attrs(attrs)`` attributes with
      replay-time scalars made plain;
      ``on_compiled_backward(graph, inputs, captured, scalars, returned)`` a compiled model's node
      ran its recorded backward program (a recording of a whole graph's backward takes its ops in).
    Reads and writes Python sees:
      ``on_data_read(t, what)`` a tensor's numbers were read into Python (``.item()``, ``numpy()``);
      ``on_grad_read(t)`` / ``on_grad_write(t, value)`` ``.grad`` was read or set;
      ``on_requires_grad(t)`` ``requires_grad`` changed; ``on_stored_number(value)`` a number was
      stored into module or optimizer state.
    What a replay depends on:
      ``add_guard(check, expected, label, identity=False)`` the one way to add a guard (see
      ``guard``); ``add_module_guard(module)`` a module's mode and holdings, once per module;
      ``dynamic_scalar(value, getter, key)`` a number a replay re-reads (see ``replay_scalar``);
      ``fail(reason)`` the call cannot be replayed.
    """

    def on_op(self, op, inputs, attrs, outputs, inplace_target, cast) -> None: ...
    def on_alias(self, source, alias, kind: str) -> None: ...
    def on_copy(self, source, copy) -> None: ...
    def on_constant(self, t, from_array: str | None) -> None: ...
    def on_unpack(self, t, value: int) -> None: ...
    def on_gradient_sum(self, t, edge: tuple) -> None: ...
    def value_of(self, t) -> int | None: ...
    def on_outside_node(self, node) -> None: ...
    def on_compiled_backward(self, graph, inputs: list, captured: list, scalars: list, returned: list) -> None: ...
    def concrete_attrs(self, attrs: dict) -> dict: ...
    def on_data_read(self, t, what: str) -> None: ...
    def on_grad_read(self, t) -> None: ...
    def on_grad_write(self, t, value) -> None: ...
    def on_requires_grad(self, t) -> None: ...
    def on_stored_number(self, value) -> None: ...
    def add_guard(self, check: Callable[[], Any], expected, label: str, identity: bool = False) -> None: ...
    def add_module_guard(self, module) -> None: ...
    def dynamic_scalar(self, value, getter: Callable[[], Any], key) -> float: ...
    def fail(self, reason: str) -> None: ...


def guard(check: Callable[[], Any], label: str, identity: bool = False):
    """``check()``, and while a call is being traced, a guard that it keeps this value (or, with
    ``identity``, that its ``(keys, objects)`` keep naming the very same objects): for Python state
    the call branches on or reads tensors through (``Dropout`` reads ``self.training``)."""
    value = check()
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.add_guard(check, value, label, identity)
    return value


def replay_scalar(value, getter: Callable[[], Any], key):
    """``value``; while a call is being traced, a number its replays re-read with ``getter`` (an
    optimizer's ``lr``). ``key`` names the number: two uses of one key are one replay-time scalar."""
    tracer = Tracing.tracer
    if tracer is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return tracer.dynamic_scalar(value, getter, key)


class _Tracing(threading.local):
    """The tracer recording a compiled function in this thread, or None when nothing is being
    recorded; and which phase of a training step is running (recorded with each op, for plan
    inspection). Class attributes are each new thread's starting values."""

    tracer: Recorder | None = None
    phase = "forward"


Tracing = _Tracing()


class phase:
    """Mark the ops run inside as belonging to a phase ("backward", "optimizer")."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self._previous = Tracing.phase
        Tracing.phase = self.name
        return self

    def __exit__(self, *exc):
        Tracing.phase = self._previous
        return False


class Epoch:
    """Bumped whenever state a compiled plan depends on changes outside its view (a module's
    parameters reassigned, ``.data`` or ``requires_grad`` of a captured tensor changed, a module
    switched between train and eval): plans re-check their guards when it moves. One value for
    all threads (state is shared), moved under a lock so that no bump is lost."""

    value = 0


_epoch_lock = threading.Lock()


def bump_epoch() -> None:
    with _epoch_lock:
        Epoch.value += 1


class GradEpoch:
    """Bumped whenever a captured tensor's ``.grad`` appears or goes (``zero_grad``, a first
    backward). Kept apart from ``Epoch``: a training loop moves it on every step, and only plans
    that read a ``.grad`` re-check their guards when it moves."""

    value = 0


_grad_epochs = itertools.count(1)


def bump_grad_epoch() -> None:
    # every value is drawn once from the counter (atomic under the GIL): a plan that noted an
    # earlier value sees a different one, whichever thread stores last, so no bump is lost
    GradEpoch.value = next(_grad_epochs)


def note_stored_number(value) -> None:
    """A number is being stored into module or optimizer state. A trace under way learns of it: a
    float argument kept there must be its traced value on every later call, so the plan cannot
    replay for other values of that argument."""
    tracer = Tracing.tracer
    if tracer is not None and isinstance(value, float) and type(value) is not float:
        tracer.on_stored_number(value)


class EpochMapping:
    """Mixin for a dict that compiled plans read holders from (a module's registries, optimizer
    state, parameter groups): removing entries bumps the epoch, and ``update``/``setdefault`` go
    through the class's own ``__setitem__``, which decides when a change bumps it."""

    def __delitem__(self, key):
        super().__delitem__(key)
        bump_epoch()

    def pop(self, *args):
        value = super().pop(*args)
        bump_epoch()
        return value

    def popitem(self, *args):
        item = super().popitem(*args)
        bump_epoch()
        return item

    def clear(self):
        super().clear()
        bump_epoch()

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]
