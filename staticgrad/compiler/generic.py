"""Shape-generic pass results: one run of the passes serves every batch size.

A new batch size traces a graph with the same ops, attributes and value ids as an earlier one and
other dims. The passes from ``SHAPE_GENERIC_FROM`` on (passes/__init__.py) read a dim only to
compare it with another dim, or with 0 or 1. So they run once on a *symbolic* copy of the graph,
whose dims of 2 and more are ``Dim`` symbols (equal dims, one symbol), and the result is kept under
the graph's canonical form: the graph with those dims numbered in order of first appearance (and
every attribute tagged with its type, so ``1`` and ``1.0``, ``0.0`` and ``-0.0`` differ). A graph
of the same form gets the kept result with its own dims put in.

Why that is exactly what the passes compute on that graph: a ``Dim`` answers only questions every
graph of the form answers alike -- ``==`` with a ``Dim`` (the same symbol iff the same dim, in each
graph, as numbering is by value), ``==`` with a number below 2 (never: symbolic dims are 2 or
more), hashing and truth. Anything else -- arithmetic, ordering, ``int()``, ``repr``, comparing with
a number of 2 or more, any other attribute -- raises ``SymbolicDims``, a ``BaseException`` no pass
catches; so do the constants' contents (hidden). Then that structure compiles concretely, every
time. Every branch a pass takes on the symbolic graph is thus the branch it takes on each graph of
the form, and the result is the same up to the dims. Tests set ``CROSS_CHECK``: every compile then
also runs the passes concretely and compares.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from numbers import Real

import numpy as np

from staticgrad.compiler.ir import Graph, Numel, Op, Value

# When True (the test suite sets it), every cached or symbolic pass result is compared with a
# concrete run of the same passes; a difference raises AssertionError.
CROSS_CHECK = False


class SymbolicDims(BaseException):
    """A pass asked a symbolic dim (or a hidden constant) what only a concrete one can answer.
    A BaseException, so that no ``except Exception`` (or ``except TypeError``) in a pass takes it
    for an ordinary failure and carries on down another branch."""


def _refuse(self, *args, **kwargs):
    raise SymbolicDims("a shape-generic pass read a symbolic dim's value")


class Dim:
    """A dim of size 2 or more, known only by which other dims it equals (one object per symbol)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        object.__setattr__(self, "index", index)

    def __eq__(self, other):
        if other is self:
            return True
        if type(other) is Dim:
            return False
        if isinstance(other, Real) and not isinstance(other, Dim):
            if other < 2:
                return False   # never, in any graph of the form: symbolic dims are >= 2
            _refuse(self)
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = object.__hash__

    def __bool__(self):
        return True            # a dim of 2 or more

    def __getattr__(self, name):
        _refuse(self)

    def __setattr__(self, name, value):
        _refuse(self)

    def __reduce_ex__(self, protocol):
        _refuse(self)


for _name in ("lt", "le", "gt", "ge", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
              "floordiv", "rfloordiv", "mod", "rmod", "divmod", "rdivmod", "pow", "rpow", "neg", "pos", "abs",
              "invert", "and", "rand", "or", "ror", "xor", "rxor", "lshift", "rlshift", "rshift", "rrshift",
              "index", "int", "float", "complex", "round", "trunc", "floor", "ceil", "repr", "str", "format"):
    setattr(Dim, f"__{_name}__", _refuse)   # not __len__, __iter__, __call__...: an int has none either

_DIMS: list = []


def _dim(index: int) -> Dim:
    while len(_DIMS) <= index:
        _DIMS.append(Dim(len(_DIMS)))
    return _DIMS[index]


class _Hidden:
    """A constant's contents, which shape-generic passes never read (they differ per batch size)."""

    __slots__ = ()

    def __getattribute__(self, name):
        _refuse(self)


for _name in ("eq", "ne", "lt", "le", "gt", "ge", "bool", "len", "iter", "getitem", "contains", "array",
              "float", "int", "index", "repr", "str", "format", "add", "mul", "reduce_ex"):
    setattr(_Hidden, f"__{_name}__", _refuse)
_Hidden.__hash__ = object.__hash__
_HIDDEN = _Hidden()


# ---- canonical form ---------------------------------------------------------------------------

def canonical(graph: Graph):
    """(key, dims): the graph with every dim >= 2 replaced by the number of its symbol (as -2 - n)
    and attributes tagged with their types; and the dims, by symbol. None if an attribute does not
    hash (that graph is compiled concretely)."""
    symbols: dict = {}
    memo: dict = {}
    values = []
    for v in graph.values.values():
        shape = v.shape
        code = memo.get(shape)
        if code is None:
            code = memo[shape] = tuple(d if d < 2 else symbols.setdefault(d, -2 - len(symbols)) for d in shape)
        values.append((v.id, code, v.dtype, v.kind, v.phase))
    ops = tuple((op.op, op.inputs, op.outputs, _typed_attrs(op.attrs)) if op.attrs else (op.op, op.inputs, op.outputs)
                for op in graph.ops)
    key = (tuple(values), ops, tuple(graph.inputs), tuple(graph.captured), tuple(graph.constants),
           graph.n_scalars, tuple(graph.results), tuple(graph.writebacks), tuple(graph.reuse.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key, tuple(symbols)


def _typed_attrs(attrs: tuple) -> tuple:
    """_typed of an op's (name, value) pairs, the common plain values inline."""
    typed = []
    for k, v in attrs:
        t = type(v)
        if t is int or t is str or t is bool or v is None:
            typed.append((k, t, v))
        elif t is float:
            typed.append((k, t, v.hex()))
        else:
            typed.append((k, _typed(v)))
    return tuple(typed)


def _typed(x):
    """``x`` with every leaf tagged with its type (and floats by their bits: ``-0.0`` is not ``0.0``)."""
    t = type(x)
    if t is tuple:
        return tuple(map(_typed, x))
    if t is float:
        return (float, x.hex())
    if t is complex:
        return (complex, x.real.hex(), x.imag.hex())
    if isinstance(x, np.generic):
        return (t, x.tobytes())
    return (t, x)


# ---- the symbolic run and its result ---------------------------------------------------------

class _Unsupported(Exception):
    """The symbolic result holds a dim somewhere instantiate() does not rebuild."""


def _has_dims(x) -> bool:
    """Whether ``x`` holds a Dim where _instantiate rebuilds it (tuples, Numel); _Unsupported if it
    holds one anywhere else (a list, a dict, another object's fields)."""
    t = type(x)
    if t is Dim:
        return True
    if t is tuple:
        found = False
        for item in x:
            found = _has_dims(item) or found
        return found
    if t is Numel:
        return _has_dims(x.shape)
    if _hides_dims(x):
        raise _Unsupported(f"a symbolic dim inside a {t.__name__}")
    return False


def _hides_dims(x, depth: int = 0) -> bool:
    if type(x) is Dim:
        return True
    if depth > 50:
        return True    # too deep to tell: treated as holding one
    if x is _HIDDEN or x is None or isinstance(x, (str, bytes, int, float, type)):
        return False
    if isinstance(x, (tuple, list, set, frozenset)):
        return any(_hides_dims(item, depth + 1) for item in x)
    if isinstance(x, dict):
        return any(_hides_dims(k, depth + 1) or _hides_dims(v, depth + 1) for k, v in x.items())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return any(_hides_dims(getattr(x, f.name), depth + 1) for f in dataclasses.fields(x))
    return any(_hides_dims(v, depth + 1) for v in getattr(x, "__dict__", {}).values())


def _instantiate(x, dims: tuple):
    t = type(x)
    if t is Dim:
        return dims[x.index]
    if t is tuple:
        return tuple([dims[item.index] if type(item) is Dim else item if type(item) is int else _instantiate(item, dims)
                      for item in x])
    if t is Numel:
        return Numel(_instantiate(x.shape, dims))
    return x


def _fill_attrs(attrs: tuple, positions: tuple, dims: tuple) -> tuple:
    filled = list(attrs)
    for i in positions:
        name, value = attrs[i]
        filled[i] = (name, _instantiate(value, dims))
    return tuple(filled)


class _Template:
    """A symbolic graph, prepared to be filled in with a concrete graph's dims."""

    def __init__(self, graph: Graph, source: Graph):
        for field in (graph.inputs, graph.captured, graph.results, graph.writebacks, graph.reuse, graph.n_scalars):
            if _hides_dims(field):
                raise _Unsupported("a symbolic dim outside values and op attributes")
        for k, c in graph.constants.items():
            if c is not _HIDDEN or k not in source.constants:
                raise _Unsupported("a pass made a constant")
        self.graph = graph
        self.values = []    # (vid, how, value): "input" (the concrete graph's own), "dims" (fill in), "same"
        for vid, v in graph.values.items():
            if source.values.get(vid) is v:
                self.values.append((vid, "input", None))
            elif _has_dims(v.shape):
                self.values.append((vid, "dims", v))
            else:
                self.values.append((vid, "same", v))
        # per op, the positions of the attributes that hold dims (None: the op as it is)
        self.ops = []
        for op in graph.ops:
            positions = tuple(i for i, (_, value) in enumerate(op.attrs) if _has_dims(value))
            self.ops.append((op, positions or None))

    def fill(self, concrete: Graph, dims: tuple) -> Graph:
        source_values = concrete.values
        values = {}
        for vid, how, v in self.values:
            if how == "input":
                values[vid] = source_values[vid]
            elif how == "dims":
                values[vid] = Value(vid, _instantiate(v.shape, dims), v.dtype, v.kind, v.phase)
            else:
                values[vid] = v
        ops = [op if positions is None else Op(op.op, op.inputs, op.outputs, _fill_attrs(op.attrs, positions, dims))
               for op, positions in self.ops]
        g = self.graph
        return Graph(values=values, ops=ops, inputs=list(g.inputs), captured=list(g.captured),
                     constants={k: concrete.constants[k] for k in g.constants}, n_scalars=g.n_scalars,
                     results=list(g.results), writebacks=list(g.writebacks), reuse=dict(g.reuse))


class _Entry:
    def __init__(self, final, report, before_lowering):
        self.final, self.report, self.before_lowering = final, report, before_lowering


def symbolic_copy(graph: Graph, dims: tuple) -> Graph:
    symbol = {d: _dim(n) for n, d in enumerate(dims)}
    memo: dict = {}
    values = {}
    for vid, v in graph.values.items():
        shape = v.shape
        new = memo.get(shape)
        if new is None:
            new = memo[shape] = tuple(symbol.get(d, d) if d >= 2 else d for d in shape)
        values[vid] = Value(v.id, new, v.dtype, v.kind, v.phase)
    return Graph(values=values, ops=list(graph.ops), inputs=list(graph.inputs), captured=list(graph.captured),
                 constants=dict.fromkeys(graph.constants, _HIDDEN), n_scalars=graph.n_scalars,
                 results=list(graph.results), writebacks=list(graph.writebacks), reuse=dict(graph.reuse))


class PassCache:
    """Shape-generic pass results of one compiled function, by canonical form (the newest few).
    Keyed by the passes too; settings the passes read (fuse.MIN_GROUP...) are read when a structure
    first compiles."""

    def __init__(self, limit: int = 8):
        self.limit = limit
        self._entries: OrderedDict = OrderedDict()
        self.symbolic_runs = 0      # structures the passes ran on symbolically (for tests)
        self.reuses = 0             # results filled in from a kept one

    def __len__(self) -> int:
        return len(self._entries)

    def run(self, graph: Graph, passes: list, run_concrete) -> tuple:
        """(final graph, report, graph before lowering or None) of ``passes`` on ``graph``;
        ``run_concrete(graph, passes)`` computes the same from the concrete graph."""
        canon = canonical(graph)
        if canon is None:
            return run_concrete(graph, passes)
        key, dims = canon
        key = (tuple(fn for fn, _ in passes), key)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._symbolic_run(graph, dims, passes, run_concrete)
            self._entries[key] = entry
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
            if entry is not False:
                self.reuses += 1
        if entry is False:
            return run_concrete(graph, passes)
        final = entry.final.fill(graph, dims)
        before = entry.before_lowering.fill(graph, dims) if entry.before_lowering is not None else None
        result = (final, list(entry.report), before)
        if CROSS_CHECK:
            _check_same(result, run_concrete(graph, passes))
        return result

    def _symbolic_run(self, graph: Graph, dims: tuple, passes: list, run_concrete):
        symbolic = symbolic_copy(graph, dims)
        try:
            final, report, before = run_concrete(symbolic, passes)
            entry = _Entry(_Template(final, symbolic), report,
                           _Template(before, symbolic) if before is not None else None)
        except (SymbolicDims, _Unsupported, Exception):
            return False    # this structure compiles concretely, every time
        self.symbolic_runs += 1
        return entry


def _check_same(got: tuple, want: tuple) -> None:
    for label, a, b in (("final graph", got[0], want[0]), ("graph before lowering", got[2], want[2])):
        if (a is None) != (b is None):
            raise AssertionError(f"shape-generic passes: {label} present in one result only")
        if a is not None:
            _check_same_graph(label, a, b)
    if got[1] != want[1]:
        raise AssertionError(f"shape-generic passes: report {got[1]} != {want[1]}")


def _check_same_graph(label: str, a: Graph, b: Graph) -> None:
    problems = []
    if list(a.values.items()) != list(b.values.items()):
        problems.append("values")
    if a.ops != b.ops:
        problems.append("ops")
    for name in ("inputs", "captured", "n_scalars", "results", "writebacks", "reuse"):
        if getattr(a, name) != getattr(b, name):
            problems.append(name)
    if list(a.constants) != list(b.constants) or any(a.constants[k] is not b.constants[k] for k in a.constants):
        problems.append("constants")
    if problems:
        raise AssertionError(f"shape-generic passes differ from concrete ones in the {label}: {', '.join(problems)}"
                             f"\n--- filled in:\n{a}\n--- concrete:\n{b}")
