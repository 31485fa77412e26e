"""Numbers a replay re-reads: an optimizer's ``lr`` and ``betas``, a float argument of the call.

While tracing they are ``ScalarRef``s: floats that remember how to read their value again.
Arithmetic on them stays a ScalarRef, an op that takes one records a replay-time scalar, and
turning one into a plain value (comparing, branching, ``int()``) adds a guard, or, for a float
argument, keeps the plan to the traced value.
"""

from __future__ import annotations

import math
import operator
import threading

from staticgrad._state import Tracing


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
        if tracer is not None and (reads_argument(self) or reads_argument(other)):
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
        if tracer is not None and reads_argument(self):
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
    values: tuple = ()   # each compiled call sets its own list


CallFloats = _CallFloats()   # the float arguments of this thread's current compiled call


def reads_argument(x) -> bool:
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


