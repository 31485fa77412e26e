"""The static program: values and ops in schedule order, built from a tape, rebuilt by passes.

``Value`` and ``Op`` are frozen, slotted records. A ``Graph`` lists its ops in the order a
replay runs them; values come from outside (``input``: call arguments, ``captured``: tensors
read by reference such as parameters and optimizer state, ``constant``) or from an op.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from staticgrad.ops import OPS

VALUE_KINDS = ("input", "captured", "constant", "op")
PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True, slots=True)
class ScalarSlot:
    """An attribute a replay reads afresh each call (e.g. an optimizer's ``lr``)."""

    index: int

    def __repr__(self) -> str:
        return f"scalar[{self.index}]"


@dataclass(frozen=True, slots=True)
class Value:
    id: int
    shape: tuple
    dtype: str
    kind: str
    phase: str = "forward"  # the phase of the step that computed it (op values)

    def __post_init__(self):
        if self.kind not in VALUE_KINDS:
            raise ValueError(f"value %{self.id}: kind {self.kind!r} is not one of {VALUE_KINDS}")
        if self.phase not in PHASES:
            raise ValueError(f"value %{self.id}: phase {self.phase!r} is not one of {PHASES}")

    @property
    def nbytes(self) -> int:
        n = np.dtype(self.dtype).itemsize
        for d in self.shape:
            n *= d
        return int(n)


@dataclass(frozen=True, slots=True)
class Op:
    op: str
    inputs: tuple
    outputs: tuple
    attrs: tuple = ()  # sorted (name, value) pairs; values hashable

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}")

    @property
    def attr_dict(self) -> dict:
        return dict(self.attrs)

    @property
    def opdef(self):
        return OPS[self.op]

    @property
    def returns_own_arrays(self) -> bool:
        """Its forward hands back arrays it allocated itself (a multi-output op), so its outputs own
        no planned buffer; a fused kernel, though it has several outputs, writes into planned ones,
        and so does a forward that fills the outputs it is handed (OpDef.fills_outputs)."""
        return len(self.outputs) > 1 and self.op != "fused" and not self.opdef.fills_outputs


def freeze_attrs(attrs: dict) -> tuple:
    """Attributes as a sorted tuple of pairs, lists turned into tuples so the result hashes."""
    for v in attrs.values():
        if type(v) not in _ATOMS and not isinstance(v, (np.dtype, ScalarSlot)):
            return tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))
    return tuple(sorted(attrs.items()))   # keys differ, so the sort never compares values


_ATOMS = frozenset((int, float, str, bool, type(None)))   # _freeze keeps these as they are (and dtypes, slots)


def _freeze(v: Any):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.dtype):
        return v
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def frozen_constant(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array`` with its memory layout: broadcast (zero-stride) dimensions stay
    broadcast. Layout picks NumPy's and BLAS's summation order, so a constant laid out otherwise than
    the eager array it stands for would make a replay round differently."""
    array = np.asarray(array)
    if 0 in array.strides and array.size > 1:
        compact = array[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in array.strides)]
        frozen = np.broadcast_to(np.array(compact, copy=True), array.shape)
    else:
        frozen = np.array(array, copy=True)
        frozen.flags.writeable = False
    return frozen


@dataclass
class Graph:
    """A recorded program. ``results`` are the values a caller gets back (outputs, new
    gradients); ``writebacks`` maps a value to the captured value whose storage it must
    overwrite in place (parameter updates, optimizer state)."""

    values: dict = field(default_factory=dict)
    ops: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    captured: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    n_scalars: int = 0
    results: list = field(default_factory=list)
    writebacks: list = field(default_factory=list)  # (value id, captured value id)
    reuse: dict = field(default_factory=dict)       # op output -> input whose buffer it is written into

    def producers(self) -> dict:
        return {v: i for i, op in enumerate(self.ops) for v in op.outputs}

    def users(self) -> dict:
        users: dict = {}
        for i, op in enumerate(self.ops):
            for v in op.inputs:
                users.setdefault(v, []).append(i)
        return users

    def live_roots(self) -> set:
        """Values the program must produce: results and the sources of writebacks."""
        return set(self.results) | {v for v, _ in self.writebacks}

    def with_ops(self, ops: list) -> "Graph":
        used = {v for op in ops for v in op.inputs + op.outputs}
        used |= set(self.inputs) | set(self.captured) | self.live_roots()
        values = {k: v for k, v in self.values.items() if k in used}
        constants = {k: c for k, c in self.constants.items() if k in used}
        return replace(self, ops=ops, values=values, constants=constants)

    def __str__(self) -> str:
        lines = [f"graph({', '.join(f'%{v}' for v in self.inputs)}) captured({len(self.captured)}):"]
        for op in self.ops:
            outs = ", ".join(f"%{v}: {_type(self.values[v])}" for v in op.outputs)
            attrs = "".join(f", {k}={v!r}" for k, v in op.attrs)
            lines.append(f"  {outs} = {op.op}({', '.join(f'%{v}' for v in op.inputs)}{attrs})")
        lines.append(f"  return {', '.join(f'%{v}' for v in self.results)}")
        for v, target in self.writebacks:
            lines.append(f"  write %{v} -> %{target}")
        return "\n".join(lines)

    def to_networkx(self):
        """The program as a ``networkx.DiGraph``: one node per value and per op."""
        import networkx as nx  # networkx (0.2 s to import) loads only when a networkx graph is asked for

        g = nx.DiGraph()
        for v in self.values.values():
            g.add_node(f"%{v.id}", kind="value", value_kind=v.kind, shape=v.shape, dtype=v.dtype)
        for i, op in enumerate(self.ops):
            name = f"op{i}:{op.op}"
            g.add_node(name, kind="op", op=op.op, attrs=dict(op.attrs), index=i, members=fused_members(op),
                       shape=self.values[op.outputs[0]].shape, dtype=self.values[op.outputs[0]].dtype)
            for v in op.inputs:
                g.add_edge(f"%{v}", name)
            for v in op.outputs:
                g.add_edge(name, f"%{v}")
        return g


def fused_members(op: Op) -> list:
    """The op names a fused op stands for (its loops' bodies, then "sum" per epilogue)."""
    if op.op != "fused":
        return [op.op]
    names = []
    for loop in op.attr_dict["kernel"].loops:
        names += [name for name, _, _ in loop.body] + ["sum"] * len(loop.sums)
    return names


def _type(v: Value) -> str:
    return f"{v.dtype}[{', '.join(str(d) for d in v.shape)}]"


class VerifyError(AssertionError):
    pass


def verify(graph: Graph) -> None:
    """Check the invariants every pass must keep: each value defined once before use, ops
    known, external values not produced by ops, results and writebacks defined."""
    defined = set(graph.inputs) | set(graph.captured) | set(graph.constants)
    for v in defined:
        if v not in graph.values:
            raise VerifyError(f"external value %{v} has no Value record")
    for i, op in enumerate(graph.ops):
        if op.op not in OPS:
            raise VerifyError(f"op {i} ({op.op}) is not in the op table")
        for v in op.inputs:
            if v not in defined:
                raise VerifyError(f"op {i} ({op.op}) reads %{v} before it is defined")
        for v in op.outputs:
            if v in defined:
                raise VerifyError(f"op {i} ({op.op}) redefines %{v}")
            if v not in graph.values:
                raise VerifyError(f"op {i} ({op.op}) output %{v} has no Value record")
            defined.add(v)
    for v in graph.results:
        if v not in defined:
            raise VerifyError(f"result %{v} is never defined")
    for v, target in graph.writebacks:
        if v not in defined:
            raise VerifyError(f"writeback source %{v} is never defined")
        if target not in graph.captured:
            raise VerifyError(f"writeback target %{target} is not a captured value")


# ---- fused elementwise groups (built by passes/fuse.py, turned into source by codegen.py) --------

@dataclass(frozen=True, slots=True)
class KernelScalar:
    """A kernel argument: a value read at replay time (e.g. lr), or a count that depends on the
    shapes (an element count), passed in so that one kernel serves every batch size. Cast to the
    loop dtype, or ``raw``: the Python float as passed (a count divides in double precision, as
    the eager op's Python arithmetic does)."""

    index: int
    raw: bool = False


@dataclass(frozen=True, slots=True)
class Numel:
    """A kernel argument's value: the element count of ``shape`` (a mean's divisor), passed as a
    float. Kept as the shape, not the number, so that fusion never reads a dim's value (the passes
    run on symbolic dims: compiler/generic.py); two counts share an argument when their shapes match."""

    shape: tuple

    def __float__(self) -> float:
        return float(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return repr(float(self))


@dataclass(frozen=True, slots=True)
class FusedLoop:
    """One loop nest over an iteration shape of ``ndim`` dims.

    ``loads``: (source, pattern), the source ("in", k) for the k-th input array or ("out", k) for
    an output an earlier loop stored; a pattern gives, per array dim, the iteration dim that
    indexes it or -1 for a broadcast dim. ``body``: (op name, args, attrs), each arg ("in", k) for
    the k-th load or ("t", j) for the j-th body result. ``stores``/``sums``: (body result, output
    arg, pattern); a sum accumulates over the iteration dims its pattern leaves out."""

    ndim: int
    dtype: str
    dims: tuple
    loads: tuple
    body: tuple
    stores: tuple
    sums: tuple


@dataclass(frozen=True, slots=True)
class FusedKernel:
    """A fused group's kernel: its loop nests, run in order. ``value_inputs``: the inputs (by index)
    that are 0-d arrays of the loops' dtype, which the kernel may take as one value (a float)
    rather than as an array: Numba compiles a float argument in a fraction of an array's time."""

    loops: tuple
    n_inputs: int
    n_outputs: int
    n_scalars: int
    n_dims: int
    value_inputs: tuple = ()
