"""Fusion: groups of elementwise ops with one iteration shape become one generated kernel.

A group grows from an op into its consumers while they share the output shape and dtype; an
outer-axis sum of a group value (a bias gradient) joins as an epilogue; consecutive groups then
merge into one multi-loop kernel, except groups whose kernel the program runs more than once (an
optimizer's update of each parameter), which share that kernel. Only ops with an exact scalar
expression join, so fused replay computes what eager computes, bit for bit.

Heuristics, each measured on the bench MLP (repeated kernels on the bench LM):
- MIN_GROUP = 2: a lone op stays a NumPy call; a kernel call costs about what one same-shape ufunc
  call does (0.4-0.7 us vs 0.5 us), so fusing pays only when it removes calls. Except a lone op that
  broadcasts (a bias add): NumPy's broadcasting loop is slow (1.3 us vs 0.4 us at 32x64, 6.6 us vs
  2.7 us at 128x256), so it becomes a kernel too.
- MAX_KERNEL_ARRAYS = 64: merging more loops into one kernel saves little dispatch (1.6 us for 30
  arrays) and lengthens Numba compile time.
- A group whose kernel the program runs more than once (every parameter's optimizer update of one
  shape rank, a layer's chain repeated in every layer) stands alone, never merged with a neighbour:
  then all of them call one compiled kernel, which Numba compiles once (0.2-0.3 s), where merged
  runs of them made kernels that differ from one another (which parameters, in which order), each
  compiled apart at 0.7-1.3 s (an optimizer step over 7 parameters, 44 arguments). On the bench LM
  (31 parameters, AdamW) the fused kernels' cold compile fell from 6.6 s to 2.9 s; merging had saved
  about 0.5 us of dispatch per call it removed (0.3 % of that step's replay).
- MAX_DEFERRED_VALUES = 2: a group that stands at its last member runs its earlier members late,
  which keeps their inputs alive until then. A chain of gradient sums (a weight used at every step
  of an LSTM) would hold every term at once (16 x 64 KiB) where eager adds each as it comes; a group
  may keep at most this many values alive past their last outside use (a count, not bytes, so that
  fusing never depends on a dim's value).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from staticgrad.compiler.ir import FusedKernel, FusedLoop, Graph, KernelScalar, Numel, Op, ScalarSlot, freeze_attrs
from staticgrad.ops.reductions import sum_to_axes

MIN_GROUP = 2
MAX_KERNEL_ARRAYS = 64
MAX_DEFERRED_VALUES = 2
_FLOAT_DTYPES = ("float32", "float64")


@dataclass
class _Group:
    shape: tuple
    dtype: str
    members: list = field(default_factory=list)
    sums: list = field(default_factory=list)

    @property
    def ops(self) -> list:
        return sorted(self.members + self.sums)


def _expression(op: Op, graph: Graph, shape: tuple):
    expr = op.opdef.scalar_expr
    if expr is None:
        return None
    attrs = dict(op.attrs)
    # as the kernel reads it: a scalar argument (never the count itself, so that fusing never
    # depends on a dim's value)
    attrs["_numel"] = KernelScalar(0, raw=True)
    try:
        return expr([f"x{i}" for i in range(len(op.inputs))], attrs)
    except (KeyError, TypeError):
        return None


def _needs_numel(op: Op, graph: Graph) -> bool:
    """The op's scalar expression reads the iteration's element count (a mean's scale)."""
    try:
        op.opdef.scalar_expr([f"x{i}" for i in range(len(op.inputs))], dict(op.attrs))
    except KeyError:
        return True
    return False


def fusable(op: Op, graph: Graph) -> bool:
    """An elementwise op with an exact inline form, computing in float32 or float64."""
    if op.opdef.kind != "elementwise" or len(op.outputs) != 1:
        return False
    out = graph.values[op.outputs[0]]
    if out.dtype not in _FLOAT_DTYPES:
        return False
    if any(graph.values[v].dtype not in (out.dtype, "bool") for v in op.inputs):
        return False
    return _expression(op, graph, out.shape) is not None


def _epilogue_axes(op: Op, graph: Graph):
    """For a sum over leading axes only (a bias gradient): how many leading axes it reduces.

    Exact only where NumPy adds row after row: its reduction then loops over the kept trailing
    elements innermost, from an identity of +0.0, as the fused loop does. When the kept part is a
    single element NumPy adds pairwise instead (8 partial sums), so such a sum stays a NumPy call."""
    src = graph.values[op.inputs[0]].shape
    out = graph.values[op.outputs[0]].shape
    if op.op == "sum_to_size":
        axes = sum_to_axes(src, out)
    elif op.op == "sum" and op.attr_dict.get("dim") is not None and not op.attr_dict.get("keepdim"):
        axes = op.attr_dict["dim"]
    else:
        return None
    k = len(axes)
    if k == 0 or tuple(axes) != tuple(range(k)):
        return None
    trailing = tuple(src[k:])
    if all(d == 1 for d in trailing) or any(d == 0 for d in trailing):  # at most one element
        return None  # NumPy sums the whole array pairwise, not row after row as a fused loop does
    lead = len(out) - len(trailing)
    if lead < 0 or tuple(out[lead:]) != trailing or any(d != 1 for d in out[:lead]):
        return None
    return k


def placement(members: list, ops: list, producer: dict, users: dict):
    """Where a group's fused op can stand: at its first member, if every input of every member
    is computed before that point, or at its last member, if no outside op between first and
    last reads a group value. None if neither holds."""
    inside = set(members)
    first, last = min(members), max(members)
    if all(producer.get(v, -1) < first or producer.get(v) in inside for m in members for v in ops[m].inputs):
        return first
    for m in members:
        for v in ops[m].outputs:
            for u in users.get(v, ()):
                if u not in inside and u < last:
                    return None
    return last


def _can_absorb(group: _Group, index: int, ops: list, producer: dict, users: dict, also: list = ()) -> bool:
    members = group.ops + list(also) + [index]
    where = placement(members, ops, producer, users)
    return where is not None and _deferred_values(members, where, ops, producer, users) <= MAX_DEFERRED_VALUES


def _deferred_values(members: list, where: int, ops: list, producer: dict, users: dict) -> int:
    """How many values computed outside the group a group standing at ``where`` keeps alive past
    their last use outside it (inputs of members that would have run earlier)."""
    inside = set(members)
    seen = set()
    for m in members:
        if m >= where:
            continue
        for v in ops[m].inputs:
            p = producer.get(v)
            if v in seen or p is None or p in inside or ops[p].opdef.kind == "view":
                continue
            uses = users.get(v, ())
            if max((u for u in uses if u not in inside), default=-1) >= where:
                continue  # alive until then anyway
            dies = max(u for u in uses if u < where)   # where it dies if every member runs in place
            if any(j not in inside for j in range(dies + 1, where)):  # something else runs meanwhile
                seen.add(v)
    return len(seen)


def _join(candidates: list, index: int, ops: list, producer: dict, users: dict):
    """The group an op joins: the latest candidate group that can take it, or None."""
    for g in reversed(candidates):
        if _can_absorb(g, index, ops, producer, users):
            return g
    return None


def _find_groups(graph: Graph) -> list:
    ops = graph.ops
    producer = {v: i for i, op in enumerate(ops) for v in op.outputs}
    users = graph.users()
    group_of = {}
    groups = []
    for i, op in enumerate(ops):
        if fusable(op, graph):
            out = graph.values[op.outputs[0]]
            candidates = []
            for v in op.inputs:
                g = group_of.get(producer.get(v))
                if g is not None and g not in candidates and g.shape == out.shape and g.dtype == out.dtype:
                    candidates.append(g)
            target = _join(candidates, i, ops, producer, users)
            if target is None:
                target = _Group(out.shape, out.dtype)
                groups.append(target)
            else:
                for g in candidates:
                    if g is not target and _can_absorb(target, i, ops, producer, users, g.ops):
                        target.members += g.members
                        target.sums += g.sums
                        for m in g.ops:
                            group_of[m] = target
                        groups.remove(g)
            target.members.append(i)
            group_of[i] = target
        elif op.op in ("sum_to_size", "sum") and op.inputs:
            g = group_of.get(producer.get(op.inputs[0]))
            source = op.inputs[0]
            if (g is not None and producer.get(source) in g.members and graph.values[source].shape == g.shape
                    and _epilogue_axes(op, graph) is not None and _can_absorb(g, i, ops, producer, users)):
                g.sums.append(i)
                group_of[i] = g
    return [g for g in groups if len(g.members) + len(g.sums) >= MIN_GROUP or _broadcasts(g, graph)]


def _broadcasts(group: _Group, graph: Graph) -> bool:
    return any(graph.values[v].shape not in (group.shape, ()) for m in group.members for v in graph.ops[m].inputs)


def _pattern(shape: tuple, ndim: int, iteration: tuple) -> tuple:
    offset = ndim - len(shape)
    return tuple(offset + d if shape[d] == iteration[offset + d] else -1 for d in range(len(shape)))


def _build(group: _Group, graph: Graph, users: dict, live: set) -> Op:
    ops = graph.ops
    inside = set(group.members) | set(group.sums)
    shape, ndim = group.shape, len(group.shape)
    temp_of, loads, inputs, body, stores, sums, outputs = {}, [], [], [], [], [], []
    slots = {}
    for m in sorted(group.members):   # program order: merged groups append their members out of it
        op = ops[m]
        args = []
        for v in op.inputs:
            if v in temp_of:
                args.append(("t", temp_of[v]))
                continue
            if v not in inputs:
                inputs.append(v)
                loads.append((("in", len(inputs) - 1), _pattern(graph.values[v].shape, ndim, shape)))
            args.append(("in", inputs.index(v)))
        attrs = {}
        for k, value in op.attrs:
            if isinstance(value, ScalarSlot):
                value = KernelScalar(slots.setdefault(value, len(slots)))
            attrs[k] = value
        if _needs_numel(op, graph):
            # an argument, not a literal: the kernel's source (and its compiled code) stays the same
            # for every batch size
            attrs["_numel"] = KernelScalar(slots.setdefault(Numel(tuple(shape)), len(slots)), raw=True)
        body.append((op.op, tuple(args), freeze_attrs(attrs)))
        out = op.outputs[0]
        temp_of[out] = len(body) - 1
        if out in live or any(u not in inside for u in users.get(out, ())):
            outputs.append(out)
            stores.append((len(body) - 1, len(outputs) - 1, tuple(range(ndim))))
    for s in group.sums:
        op = ops[s]
        out = op.outputs[0]
        outputs.append(out)
        out_shape = graph.values[out].shape
        k = _epilogue_axes(op, graph)
        lead = ndim - len(out_shape)
        pattern = tuple(lead + d if lead + d >= k else -1 for d in range(len(out_shape)))
        sums.append((temp_of[op.inputs[0]], len(outputs) - 1, pattern))
    loop = FusedLoop(ndim, group.dtype, tuple(range(ndim)), tuple(loads), tuple(body), tuple(stores), tuple(sums))
    values = tuple(k for k, v in enumerate(inputs)
                   if graph.values[v].shape == () and graph.values[v].dtype == group.dtype)
    kernel = FusedKernel((loop,), len(inputs), len(outputs), len(slots), ndim, values)
    attrs = {"kernel": kernel, "dims": tuple(shape)}
    for slot, index in slots.items():
        attrs[f"s{index}"] = slot
    return Op("fused", tuple(inputs), tuple(outputs), freeze_attrs(attrs))


def _merge(a: Op, b: Op) -> Op:
    """Two adjacent fused ops as one kernel running both loops in order; where the second reads
    what the first stores, it loads from that output array."""
    ka, kb = a.attr_dict["kernel"], b.attr_dict["kernel"]
    b_inputs = [v for v in b.inputs if v not in a.outputs]
    source_of = {}
    for k, v in enumerate(b.inputs):
        source_of[k] = ("out", a.outputs.index(v)) if v in a.outputs else ("in", len(a.inputs) + b_inputs.index(v))
    slots_a = {v: int(k[1:]) for k, v in a.attrs if k.startswith("s") and isinstance(v, (ScalarSlot, Numel))}
    slots_b = {int(k[1:]): v for k, v in b.attrs if k.startswith("s") and isinstance(v, (ScalarSlot, Numel))}
    merged_slots = dict(slots_a)
    renumber = {}
    for index, slot in sorted(slots_b.items()):
        renumber[index] = merged_slots.setdefault(slot, len(merged_slots))

    def shift(loop: FusedLoop) -> FusedLoop:
        loads = tuple((source_of[src[1]] if src[0] == "in" else ("out", src[1] + ka.n_outputs), p)
                      for src, p in loop.loads)
        stores = tuple((t, arg + ka.n_outputs, p) for t, arg, p in loop.stores)
        sums = tuple((t, arg + ka.n_outputs, p) for t, arg, p in loop.sums)
        body = tuple((name, args, tuple((k, replace(v, index=renumber[v.index]) if isinstance(v, KernelScalar) else v)
                                        for k, v in attrs)) for name, args, attrs in loop.body)
        dims = tuple(d + ka.n_dims for d in loop.dims)
        return replace(loop, loads=loads, stores=stores, sums=sums, body=body, dims=dims)

    values = ka.value_inputs + tuple(source_of[k][1] for k in kb.value_inputs if source_of[k][0] == "in")
    kernel = FusedKernel(ka.loops + tuple(shift(l) for l in kb.loops), ka.n_inputs + len(b_inputs),
                         ka.n_outputs + kb.n_outputs, len(merged_slots), ka.n_dims + kb.n_dims, values)
    attrs = {"kernel": kernel, "dims": a.attr_dict["dims"] + b.attr_dict["dims"]}
    for slot, index in merged_slots.items():
        attrs[f"s{index}"] = slot
    return Op("fused", a.inputs + tuple(b_inputs), a.outputs + b.outputs, freeze_attrs(attrs))


def _repeated_kernels(fused_ops) -> set:
    """The kernels (by structure: loops, not sizes) that more than one of the fused ops runs."""
    counts = Counter(op.attr_dict["kernel"] for op in fused_ops)
    return {kernel for kernel, count in counts.items() if count > 1}


def fuse_elementwise(graph: Graph) -> tuple:
    groups = _find_groups(graph)
    if not groups:
        return graph, False
    users = graph.users()
    producer = {v: i for i, op in enumerate(graph.ops) for v in op.outputs}
    live = graph.live_roots()
    placed, dropped = {}, set()
    for g in groups:
        placed[placement(g.ops, graph.ops, producer, users)] = _build(g, graph, users, live)
        dropped.update(g.ops)
    repeated = _repeated_kernels(placed.values())
    ops = []
    for i, op in enumerate(graph.ops):
        if i in placed:
            fused = placed[i]
            previous = ops[-1] if ops else None
            if (previous is not None and previous.op == "fused"
                    and previous.attr_dict["kernel"] not in repeated and fused.attr_dict["kernel"] not in repeated
                    and previous.attr_dict["kernel"].loops[0].dtype == fused.attr_dict["kernel"].loops[0].dtype
                    and len(previous.inputs) + len(previous.outputs) + len(fused.inputs) + len(fused.outputs)
                    <= MAX_KERNEL_ARRAYS):
                ops[-1] = _merge(previous, fused)
            else:
                ops.append(fused)
        elif i not in dropped:
            ops.append(op)
    return graph.with_ops(ops), True
