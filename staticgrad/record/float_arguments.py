"""Python float arguments of a compiled function, read at replay like an optimizer's ``lr``.

A trace sees each top-level float argument as a ``ScalarRef``, so the ops it feeds record a
replay-time scalar instead of its value. Python can still turn the value into something a plan
holds (a comparison it branches on, ``int()``, ``math.exp()``, a NumPy scalar, a tensor made from
it), and a ScalarRef cannot see every such path. So a plan replays for other values only once two
traces with different values recorded the very same program: anything the value reached other than
through replay-time scalars would differ between them. Until then each value has a plan of its own.
Integers stay part of the signature: they are sizes, counts and indices as often as factors.
"""

from __future__ import annotations

import numpy as np

from staticgrad.record.scalars import argument_scalar


def float_arguments(args: tuple, kwargs: dict) -> list:
    """The top-level float arguments of a call, positional then keyword (in the call's order)."""
    floats = [a for a in args if type(a) is float]
    if kwargs:
        floats.extend(v for v in kwargs.values() if type(v) is float)
    return floats


def as_replay_scalars(args: tuple, kwargs: dict) -> tuple:
    """``args`` and ``kwargs`` with each top-level float replaced by its argument ScalarRef."""
    index = 0

    def wrap(a):
        nonlocal index
        if type(a) is not float:
            return a
        index += 1
        return argument_scalar(a, index - 1)

    args = tuple(wrap(a) for a in args)
    kwargs = {k: wrap(v) for k, v in kwargs.items()}
    return args, kwargs


def without_float_values(key: tuple) -> tuple | None:
    """A call signature with the values of its top-level float arguments left out (None for the
    short form of a call with tensors only)."""
    if len(key) != 3 or not isinstance(key[1], tuple) or key[1][:1] != ("tuple",):
        return None
    grad_mode, positional, keywords = key
    return (grad_mode, _erase(positional), ("dict",) + tuple((k, _erase_one(d)) for k, d in keywords[1:]))


def _erase(described: tuple) -> tuple:
    return described[:1] + tuple(_erase_one(d) for d in described[1:])


def _erase_one(d):
    return ("float",) if d[:1] == ("float",) else d


def same_recording(a, b) -> bool:
    """Two trace records hold the same program, state and guards (values of replay-time scalars
    aside): one plan can stand for both."""
    ga, gb = a.graph, b.graph
    return (a.float_arguments_static is b.float_arguments_static is False
            and ga.ops == gb.ops and ga.values == gb.values and ga.inputs == gb.inputs
            and ga.captured == gb.captured and ga.results == gb.results and ga.writebacks == gb.writebacks
            and ga.n_scalars == gb.n_scalars and ga.constants.keys() == gb.constants.keys()
            and all(_same(ga.constants[k], gb.constants[k]) for k in ga.constants)
            and len(a.scalar_getters) == len(b.scalar_getters)
            and _same(a.captured, b.captured) and _same(a.outputs, b.outputs)
            and _same(a.grad_slots, b.grad_slots) and _same(a.version_bumps, b.version_bumps)
            and _same(a.input_guards, b.input_guards) and a.input_count == b.input_count
            and _same([(g.label, g.identity, g.expected) for g in a.state_guards],
                      [(g.label, g.identity, g.expected) for g in b.state_guards]))


def _same(x, y) -> bool:
    """Equal as a plan would use them: tensors and other objects by identity, arrays by content and
    layout, numbers and strings by type and value, containers element by element."""
    if x is y:
        return True
    if isinstance(x, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, dict):
        return type(x) is type(y) and x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, np.ndarray):
        return (isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
                and x.strides == y.strides and np.array_equal(x, y, equal_nan=True))
    if x is None or isinstance(x, (bool, int, float, str, bytes, np.dtype, np.generic)):
        return type(x) is type(y) and (x == y or (x != x and y != y))
    return False   # tensors, modules and any other object: the very same one (checked above)
