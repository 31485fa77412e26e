"""Switches the front end reads on hot paths (kept in one small module so that tensor.py and
dispatch.py can both read them without importing each other). The tracer and the phase are per
thread, as PyTorch's grad mode is: one thread's trace never sees another thread's ops."""

import threading


class _Tracing(threading.local):
    """The tracer recording a compiled function in this thread, or None when nothing is being
    recorded; and which phase of a training step is running (recorded with each op, for plan
    inspection). Class attributes are each new thread's starting values."""

    tracer = None
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
