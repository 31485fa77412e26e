"""Scalar chains: connected 0-dim ops (Adam's step count and bias corrections: add 1, cast, two
powers, a few scalar ops, once per parameter) become one ``scalar_chains`` op per family of
identical chains, which computes each distinct input once on NumPy scalars (ops/scalar_chains.py).

A 0-dim NumPy call costs about as much as a small kernel (0.3-1 us), so an optimizer for N
parameters spent ~9N such calls on the same few numbers. Chains are identical when their ops,
attributes (replay-time scalars included: one family per parameter group), dtypes and exported
steps match; their members then differ only in their inputs, usually equal step counts.

Heuristic: MIN_OPS = 2, a lone 0-dim op stays the NumPy call it is (one call either way). Two ops
already pay: a chain of two 0-dim multiplies took 1.3 us as this op (with the view of its result)
against 1.9 us as two ufunc calls; Adam's twelve ops per parameter took 2.7 us for the first
parameter and 0.3 us for each further one with the same step count, against ~6 us per parameter
as nine NumPy calls (tiny MLP, 2 CPUs).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from staticgrad.compiler.ir import Graph, Op, ScalarSlot, Value, freeze_attrs
from staticgrad.compiler.passes.fuse import placement
from staticgrad.ops.scalar_chains import CHAIN_OPS, program_text

MIN_OPS = 2
_FLOAT_DTYPES = ("float32", "float64")


def gather_scalar_chains(graph: Graph) -> tuple:
    ops = graph.ops
    chained = [i for i, op in enumerate(ops) if _chainable(op, graph)]
    if len(chained) < MIN_OPS:
        return graph, False
    producer = graph.producers()
    users = graph.users()
    live = graph.live_roots()
    families: dict = {}
    for component in _components(chained, ops, producer):
        signature, inputs, outputs = _describe(component, graph, users, live)
        families.setdefault(signature, []).append((component, inputs, outputs))
    placed, dropped = {}, set()
    values = dict(graph.values)
    for signature, members in families.items():
        for at, members_here in _placeable(members, ops, producer, users):
            placed[at] = _build(signature, members_here, graph, values)
            dropped.update(i for component, _, _ in members_here for i in component)
    if not placed:
        return graph, False
    kept = []
    for i, op in enumerate(ops):
        if i in placed:
            kept += placed[i]
        elif i not in dropped:
            kept.append(op)
    return replace(graph, values=values).with_ops(kept), True


def _chainable(op: Op, graph: Graph) -> bool:
    """A 0-dim float op this pass can compute exactly on NumPy scalars, with plain attributes."""
    if op.op not in CHAIN_OPS or len(op.outputs) != 1 or not op.inputs:
        return False
    values = [graph.values[v] for v in op.inputs + op.outputs]
    if any(len(v.shape) != 0 or v.dtype not in _FLOAT_DTYPES for v in values):
        return False
    if op.op != "to_dtype" and any(v.dtype != values[-1].dtype for v in values):
        return False
    for _, value in op.attrs:
        if isinstance(value, float) and not math.isfinite(value):
            return False   # printed into the replay source, where inf and nan are no literals
        if not isinstance(value, (int, float, ScalarSlot, np.dtype)) and value is not None:
            return False
    if op.op in ("to_dtype", "rpow_scalar", "pow_scalar"):
        return True
    return op.opdef.scalar_expr is not None and _has_expression(op)


def _has_expression(op: Op) -> bool:
    """The op has a scalar expression NumPy scalars compute exactly: not one with a fused multiply-add
    (an add with an alpha), which they have not."""
    try:
        expression = op.opdef.scalar_expr([f"x{i}" for i in range(len(op.inputs))], dict(op.attrs))
    except (KeyError, TypeError):
        return False
    return expression is not None and "fma(" not in expression


def _components(chained: list, ops: list, producer: dict) -> list:
    """The chained ops, split where no value links them, each in schedule order."""
    parent = {i: i for i in chained}

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in chained:
        for v in ops[i].inputs:
            p = producer.get(v)
            if p in parent:
                parent[root(i)] = root(p)
    components: dict = {}
    for i in chained:
        components.setdefault(root(i), []).append(i)
    return list(components.values())


def _describe(component: list, graph: Graph, users: dict, live: set) -> tuple:
    """(signature, input values, exported values) of one chain: the signature is the chain as the
    ``scalar_chains`` op runs it, with the replay-time scalars it reads and its inputs' dtypes."""
    inside = set(component)
    local, inputs, slots, chain, exports, outputs = {}, [], [], [], [], []
    for j, i in enumerate(component):
        op = graph.ops[i]
        args = []
        for v in op.inputs:
            if v not in local:
                local[v] = ("x", len(inputs))
                inputs.append(v)
            args.append(local[v])
        attrs = []
        for k, value in op.attrs:
            if isinstance(value, ScalarSlot):
                if value not in slots:
                    slots.append(value)
                value = ("slot", slots.index(value))
            elif isinstance(value, np.dtype):
                value = value.name
            attrs.append((k, value))
        out = op.outputs[0]
        chain.append((op.op, tuple(args), tuple(attrs), graph.values[out].dtype))
        local[out] = ("t", j)
        if out in live or any(u not in inside for u in users.get(out, ())):
            exports.append(j)
            outputs.append(out)
    dtypes = tuple(graph.values[v].dtype for v in inputs)
    return (tuple(chain), tuple(exports), dtypes, tuple(slots)), inputs, outputs


def _placeable(members: list, ops: list, producer: dict, users: dict) -> list:
    """[(where the op stands, members)]: the whole family in one op if one place suits every member
    (fuse.placement's rule), else each member on its own; members with no place stay as they are."""
    everything = sorted(i for component, _, _ in members for i in component)
    if len(everything) < MIN_OPS:
        return []
    at = placement(everything, ops, producer, users)
    if at is not None:
        return [(at, members)]
    groups = []
    for member in members:
        component = member[0]
        at = placement(component, ops, producer, users) if len(component) >= MIN_OPS else None
        if at is not None:
            groups.append((at, [member]))
    return groups


def _build(signature: tuple, members: list, graph: Graph, values: dict) -> list:
    """The ops in place of a family: per dtype of its exports, a ``scalar_chains`` op writing them
    into one 1-dim array, and a 0-dim ``select`` view of it for each exported value."""
    chain, exports, _, slots = signature
    built = []
    for dtype in dict.fromkeys(chain[j][3] for j in exports):
        wanted = [k for k, j in enumerate(exports) if chain[j][3] == dtype]
        part, part_exports, used_inputs, used_slots = _pruned(chain, [exports[k] for k in wanted])
        inputs, positions, outputs = [], [], []
        for _, member_inputs, member_outputs in members:
            row = []
            for x in used_inputs:
                v = member_inputs[x]
                if v not in inputs:
                    inputs.append(v)
                row.append(inputs.index(v))
            positions.append(tuple(row))
            outputs += [member_outputs[k] for k in wanted]
        pack = max(values) + 1
        values[pack] = Value(pack, (len(outputs),), dtype, "op", values[outputs[0]].phase)
        attrs = {"program": program_text(part, part_exports, tuple(positions))}
        for k, slot_index in enumerate(used_slots):
            attrs[f"s{k}"] = slots[slot_index]
        built.append(Op("scalar_chains", tuple(inputs), (pack,), freeze_attrs(attrs)))
        built += [Op("select", (pack,), (v,), freeze_attrs({"dim": 0, "index": k})) for k, v in enumerate(outputs)]
    return built


def _pruned(chain: tuple, exports: list) -> tuple:
    """The steps ``exports`` need, renumbered: (chain, exports, inputs read, slots read), the last two
    as the original input and slot numbers in the order of the new ones."""
    needed = set()
    for j in sorted(exports, reverse=True):
        needed.add(j)
    for j in range(len(chain) - 1, -1, -1):
        if j in needed:
            needed.update(k for kind, k in chain[j][1] if kind == "t")
    steps, renumber, inputs, slots = [], {}, [], []
    for j in sorted(needed):
        name, args, attrs, dtype = chain[j]
        new_args = []
        for kind, k in args:
            if kind == "x":
                if k not in inputs:
                    inputs.append(k)
                new_args.append(("x", inputs.index(k)))
            else:
                new_args.append(("t", renumber[k]))
        new_attrs = []
        for key, value in attrs:
            if isinstance(value, tuple):
                if value[1] not in slots:
                    slots.append(value[1])
                value = ("slot", slots.index(value[1]))
            new_attrs.append((key, value))
        renumber[j] = len(steps)
        steps.append((name, tuple(new_args), tuple(new_attrs), dtype))
    return tuple(steps), tuple(renumber[j] for j in exports), inputs, slots
