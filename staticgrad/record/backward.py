"""A compiled function whose outputs keep their autograd graph (a compiled model): its replay
returns outputs attached to one ``CompiledFunctionBackward`` node per call, whose backward runs a
recorded, planned backward program.

At trace time, after the function returned outputs with a live graph, the tracer records their
backward: ``autograd.grad`` of those outputs with respect to every argument and captured tensor
that requires grad, with placeholder incoming gradients that become inputs of the recording (the
graph is retained, so the traced call's own outputs backward eagerly as usual). The recording is
then split by phase: the forward program computes the outputs and every forward value the
backward reads (saved per call, in arrays of its own); the backward program takes those, the
arguments and captured tensors it reads (held with their version counters, as eager saves them)
and the incoming gradients, and gives one gradient per argument or captured tensor. Gradients leave
the node into the ordinary engine: leaves accumulate through AccumulateGrad (hooks run) and an
argument computed by eager code passes its gradient on into the eager graph before it.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, field
from dataclasses import replace as _replace

import numpy as np

from staticgrad._eager import engine
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.node import (
    NODE_CLASSES,
    AccumulateGrad,
    PassOn,
    SavedTensor,
    grad_accumulator,
    graph_freed,
    graph_is_live,
    new_node,
    next_sequence_number,
)
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.compiler.analysis import alias_roots
from staticgrad.compiler.codegen import generate
from staticgrad.compiler.ir import Graph, Op, Value
from staticgrad.compiler.passes import run_pipeline
from staticgrad.compiler.planner import plan_program
from staticgrad.inspect import autograd_graph
from staticgrad.ops import OPS
from staticgrad.ops.registry import OpDef, Save
from staticgrad.record.backward_graph import live_nodes, replay_backward
from staticgrad.record.stats import CompileStats
from staticgrad.record.trees import flatten_outputs
from staticgrad.runtime.replay import CompiledReplay

NODE_NAME = "CompiledFunctionBackward"
_numbers = itertools.count()


@dataclass
class BackwardTrace:
    """What recording the outputs' backward found: which outputs are differentiable (positions in
    the flat outputs), the tape values of their incoming gradients, what the gradients are taken
    with respect to (``("input", k)`` or ``("captured", tensor)``), and each gradient's value."""

    outputs: list
    output_meta: list       # (shape, dtype) of each differentiable output
    placeholders: list
    wrt: list
    grads: list             # tape value, or None where the output does not depend on it
    eager_saved_bytes: int = 0   # what the traced call's eager graph alone held for its backward
    # values the engine made adding gradients in a buffer of the wrt tensors' own edges (where eager adds
    # each use's contribution to what other calls left: ``running_sums``)
    gradient_sums: frozenset = frozenset()
    reductions: tuple = ()  # what reducers recorded; each is called after a run of the backward program
    # per gradient (wrt order), the differentiable outputs (positions in ``outputs``) whose graph in the
    # call reaches it: eager gives no gradient where none of them received one
    reached_from: list = field(default_factory=list)


def record_backward(tracer, flat_inputs: list, flat_outputs: list) -> BackwardTrace | None:
    """Record the backward of the outputs made in the call that still have a live graph (None if
    there are none: the call ran its own backward, or returned no differentiable output)."""
    outputs = [(i, o) for i, o in enumerate(flat_outputs)
               if isinstance(o, Tensor) and o.grad_fn is not None and id(o) in tracer.created_ids]
    # (an output whose graph inside the call a backward there freed is returned as released: a backward
    # through it fails, as in eager)
    live = [(i, o) for i, o in outputs
            if graph_is_live(o.grad_fn) and not graph_freed(o.grad_fn, tracer.outside_nodes)]
    if not live:
        return None
    if len(live) != len(outputs):
        tracer.fail("it returns some tensors whose graph a backward inside the call released and some whose graph "
                    "is still live; return either only results of a backward it ran or only outputs to backward later")
        return None
    wrt = [("input", k, t) for k, t in enumerate(flat_inputs) if t._requires_grad]
    seen = {id(t) for *_, t in wrt}
    for kind, t in tracer.captured:
        if kind == "tensor" and t._requires_grad and id(t) not in seen:
            seen.add(id(t))
            wrt.append(("captured", None, t))
    if not wrt:
        return None
    placeholders, tensors = [], []
    for j, (_, o) in enumerate(live):
        g = Tensor._make(np.ones(o._data.shape, o._data.dtype), False, None)
        tracer.add_input(g, len(flat_inputs) + j)
        tensors.append(g)
        placeholders.append(tracer.read(g))
    # only paths inside the call: an argument's graph from before it may lead back to a parameter (a
    # compiled cell applied to its own last output), a path the engine follows after the node has run
    grads = engine.grad([o for _, o in live], [t for *_, t in wrt], grad_outputs=tensors, retain_graph=True,
                        allow_unused=True, outside=tracer.outside_nodes)
    if tracer.failure is not None:
        return None
    grads, reductions = _reduce_gradients(tracer, [t for *_, t in wrt], list(grads))
    if tracer.failure is not None:
        return None
    grad_values = [None if g is None else tracer.read(g) for g in grads]
    edges = {engine.input_edge(t) for *_, t in wrt}   # where the engine collects each wrt's gradient
    sums = frozenset(v for v, edge in tracer.gradient_sums.items() if edge in edges)
    eager_saved = autograd_graph.graph(*[o for _, o in live]).graph_only_bytes
    return BackwardTrace(reached_from=_outputs_reaching([o for _, o in live], [t for *_, t in wrt]),
                         eager_saved_bytes=eager_saved, gradient_sums=sums,
                         outputs=[i for i, _ in live], output_meta=[(o._data.shape, o._data.dtype) for _, o in live],
                         placeholders=placeholders,
                         wrt=[("input", k) if kind == "input" else ("captured", t) for kind, k, t in wrt],
                         grads=grad_values, reductions=reductions)


def _outputs_reaching(outputs: list, wrt: list) -> list:
    """For each tensor of ``wrt``, the positions of the ``outputs`` whose autograd graph inside the call
    reaches it (a path ends at an argument or captured tensor: beyond it lies graph outside the call).
    The engine gives a tensor a gradient only through such a path from an output that received one."""
    leaves = {id(t): k for k, t in enumerate(wrt) if t.grad_fn is None}
    edges = {(t.grad_fn, t._output_nr): k for k, t in enumerate(wrt) if t.grad_fn is not None}
    reached = [[] for _ in wrt]
    for j, output in enumerate(outputs):
        hit, seen, stack = set(), {output.grad_fn}, [output.grad_fn]
        while stack:
            for nxt, nr in stack.pop().next_functions:
                if nxt is None:
                    continue
                k = leaves.get(id(nxt.variable)) if type(nxt) is AccumulateGrad else edges.get((nxt, nr))
                if k is not None:
                    hit.add(k)
                elif nxt not in seen and type(nxt) is not AccumulateGrad:
                    seen.add(nxt)
                    stack.append(nxt)
        for k in hit:
            reached[k].append(j)
    return [tuple(js) for js in reached]


def _reduce_gradients(tracer, wrt: list, grads: list) -> tuple:
    """(gradients, what each reducer recorded): the gradients after the registered reducers'
    ops on them (``DistributedDataParallel`` averages its parameters' gradients over the ranks),
    recorded as backward ops without running (a collective runs in the replays only)."""
    reducers = engine.compiled_gradient_reducers()
    if not reducers:
        return grads, ()
    reductions = []
    previous_phase = Tracing.phase
    Tracing.phase = "backward"
    try:
        for reducer in reducers:
            asked = reducer(wrt, grads)
            if asked is None:
                continue
            indices, name, attrs, note = asked
            outputs = tracer.record_unrun(OPS[name], [grads[k] for k in indices], attrs)
            grads = list(grads)
            for k, g in zip(indices, outputs):
                grads[k] = g
            reductions.append(note)
    finally:
        Tracing.phase = previous_phase
    return grads, tuple(reductions)


class Unsupported(Exception):
    """The recording cannot be split into a forward and a backward program (the reason says why)."""


PARTITIONS = ("auto", "eager")


def split(joint: Graph, trace: BackwardTrace, n_inputs: int, captured_sources: list, outputs: list,
          partition: str = "auto") -> tuple:
    """(forward graph, backward graph, layout) from the joint recording. ``layout`` says where each
    backward input comes from: saved forward results, arguments, captured tensors. ``partition``
    "eager" saves what eager's graph saves; "auto" recomputes cheap forward chains inside the
    backward where that saves fewer bytes (``recompute_cheap_chains``)."""
    backward_ops = [op for op in joint.ops if joint.values[op.outputs[0]].phase == "backward"]
    forward_ops = [op for op in joint.ops if joint.values[op.outputs[0]].phase != "backward"]
    made_in_backward = {v for op in backward_ops for v in op.outputs}
    if any(v in made_in_backward for op in forward_ops for v in op.inputs):
        raise Unsupported("a forward op reads a value its backward computes")
    if any(source in made_in_backward for source, _ in joint.writebacks):
        raise Unsupported("its backward writes into outside state")
    made_in_forward = {v for op in forward_ops for v in op.outputs}
    placeholders = list(trace.placeholders)
    args = list(joint.inputs[:n_inputs])
    recomputed = []
    if partition == "auto":
        output_values = {joint.results[outputs[position][1]] for position in trace.outputs}
        written = {target for _, target in joint.writebacks}
        readable = {v for v, (kind, _) in zip(joint.captured, captured_sources)
                    if kind == "tensor" and v not in written}
        recomputed = recompute_cheap_chains(joint, forward_ops, backward_ops, trace, output_values, readable)
        backward_ops = merge_recomputed_gelus(recomputed + backward_ops, recomputed, joint.values)
        made_in_backward |= {v for op in recomputed for v in op.outputs}
    reads = []
    for v in [v for op in backward_ops for v in op.inputs] + [g for g in trace.grads if g is not None]:
        if v not in made_in_backward and v not in placeholders and v not in reads:
            reads.append(v)
    saved = [v for v in reads if v in made_in_forward]
    arg_reads = [v for v in reads if v in args]
    captured_reads = [v for v in reads if v in joint.captured]
    constant_reads = [v for v in reads if v in joint.constants]
    if len(saved) + len(arg_reads) + len(captured_reads) + len(constant_reads) != len(reads):
        raise Unsupported("its backward reads a value of unknown origin")
    for v in captured_reads:
        if captured_sources[joint.captured.index(v)][0] != "tensor":
            raise Unsupported("its backward reads a .grad")

    forward_results = list(joint.results) + [v for v in saved if v not in joint.results]
    forward = Graph(values=dict(joint.values), ops=forward_ops, inputs=args, captured=list(joint.captured),
                    constants=dict(joint.constants), n_scalars=joint.n_scalars, results=forward_results,
                    writebacks=list(joint.writebacks)).with_ops(forward_ops)
    outside = saved + arg_reads + placeholders
    values = {v: joint.values[v] for op in backward_ops for v in op.inputs + op.outputs}
    for v in outside + captured_reads + constant_reads:
        values[v] = joint.values[v]
    for v in outside:
        values[v] = _replace(values[v], kind="input")
    backward = Graph(values=values, ops=backward_ops, inputs=outside, captured=captured_reads,
                     constants={v: joint.constants[v] for v in constant_reads}, n_scalars=joint.n_scalars,
                     results=[g for g in trace.grads if g is not None], writebacks=[])
    # Whose memory each saved value is (so it follows that tensor's version counter): a view of an
    # argument or captured tensor, or a differentiable output (or a view of one), by the forward's
    # alias structure; else memory of its own.
    roots = alias_roots(forward)
    output_roots, output_owners = {}, []
    for j, position in enumerate(trace.outputs):
        vid = joint.results[outputs[position][1]]
        root = roots.get(vid, vid)
        # an output that is a view of an argument, a captured tensor or an earlier output shares
        # its version counter, as a view does in eager
        if root in args:
            output_owners.append(("input", args.index(root)))
        elif root in joint.captured:
            output_owners.append(("captured", joint.captured.index(root)))
        elif root in output_roots:
            output_owners.append(("output", output_roots[root]))
        else:
            output_owners.append(None)
        output_roots.setdefault(root, j)
    owners = []
    for v in saved:
        root = roots.get(v, v)
        if root in args:
            owners.append(("input", args.index(root)))
        elif root in joint.captured:
            owners.append(("captured", joint.captured.index(root)))
        elif root in output_roots:   # the output itself, a view of it, or the memory it is a view of
            owners.append(("output", output_roots[root]))
        else:
            owners.append(None)
    layout = Layout(saved_results=[forward_results.index(v) for v in saved],
                    arg_inputs=[args.index(v) for v in arg_reads],
                    captured=[joint.captured.index(v) for v in captured_reads], saved_owners=owners,
                    output_owners=output_owners, recomputed=recomputed, partition=partition)
    return forward, backward, layout


# Ops worth running again in the backward rather than keeping their results: elementwise ops and
# views, and layer norm (one pass over rows it reads anyway for its own backward).
_CHEAP_OTHER = frozenset(("layer_norm", "layer_norm_weight", "layer_norm_bias", "layer_norm_affine"))


def recompute_cheap_chains(joint: Graph, forward_ops: list, backward_ops: list, trace: BackwardTrace,
                           output_values: set, readable_captured: set) -> list:
    """Forward ops to run again inside the backward instead of saving their results, where that
    keeps fewer bytes per call: a GELU's output from its saved input, a layer norm's output from
    its input (which its backward keeps anyway). Only elementwise ops, views and layer norm;
    never matmuls, convolutions, softmax, reductions or random ops. A chain reads only the call's
    own forward values, constants, and captured tensors in ``readable_captured`` (held with their
    version counters, so an in-place change before backward raises, as PyTorch's saved weight
    and bias do); never an argument or an output, which the user may change in place before
    backward where eager's saved result would not see it. Returns the ops, in forward order."""
    producer = {v: op for op in forward_ops for v in op.outputs}
    roots = alias_roots(joint.with_ops(forward_ops))
    made_in_backward = {v for op in backward_ops for v in op.outputs}
    placeholders = set(trace.placeholders)
    kept = set()
    for v in [v for op in backward_ops for v in op.inputs] + [g for g in trace.grads if g is not None]:
        if v not in made_in_backward and v not in placeholders and v in producer:
            kept.add(v)
    outside = set(joint.inputs) | set(joint.captured) | {roots.get(v, v) for v in output_values} | output_values

    def private(v) -> bool:   # a forward value only the call's own memory holds
        return v in producer and roots.get(v, v) not in outside

    def readable(u) -> bool:
        return private(u) or u in joint.constants or u in readable_captured

    def cost(values) -> int:
        return sum(joint.values[r].nbytes for r in {roots.get(v, v) for v in values})

    recompute = {}
    changed = True
    while changed:
        changed = False
        for v in sorted(kept, reverse=True):   # later values first: a chain is followed backwards
            op = producer[v]
            cheap = op.opdef.kind in ("elementwise", "view") or op.op in _CHEAP_OTHER
            if v not in kept or not cheap or not all(private(out) for out in op.outputs):
                continue
            if not all(readable(u) for u in op.inputs):
                continue
            after = (kept - set(op.outputs)) | {u for u in op.inputs if u in producer and u not in recompute}
            # a view costs nothing to make again: following it may lead to a chain that saves bytes
            if cost(after) < cost(kept) or (op.opdef.kind == "view" and cost(after) == cost(kept)):
                for out in op.outputs:
                    recompute[out] = op
                kept = after
                changed = True
    # a view whose base is kept anyway saved nothing: it stays saved as it was
    while True:
        useless = [v for v, op in recompute.items()
                   if op.opdef.kind == "view" and not any(u in recompute for u in op.inputs)]
        if not useless:
            break
        for v in useless:
            del recompute[v]
    order = {id(op): k for k, op in enumerate(forward_ops)}
    return sorted({id(op): op for op in recompute.values()}.values(), key=lambda op: order[id(op)])


def running_sums(backward_ops: list, grads: list, gradient_sums: frozenset) -> list:
    """For each gradient the engine summed from several uses inside the call (a chain of its
    additions, ``((c1 + c2) + c3) + ...``): (wrt index, that chain's first addition). Eager adds
    each use's contribution to whatever the leaf's buffer holds already (the other calls' of one
    backward); a replay that hands over only the chain's total would associate the sum otherwise."""
    producer = {v: op for op in backward_ops for v in op.outputs}
    found = []
    for k, g in enumerate(grads):
        op = producer.get(g)
        if g is None or g not in gradient_sums or op is None or op.op != "add":
            continue
        while op.inputs[0] in gradient_sums and producer.get(op.inputs[0]) is not None \
                and producer[op.inputs[0]].op == "add":
            op = producer[op.inputs[0]]
        found.append((k, op))
    return found


ENGINE_ADD_ATTRS = (("alpha", 1),)   # what the engine's ``existing + g`` records


def with_running_sums(graph: Graph, chains: list, grads: list) -> Graph:
    """The backward graph for a call whose gradients join sums the engine holds already (several
    calls outstanding, one backward): per gradient ``grads[k]`` one more captured array, what the
    edge's buffer holds, and the gradient added onto it in eager's association: first, for a sum
    over several uses (``chains``: ``((acc + c1) + c2) + ...``), else last (``acc + g``). Each
    total is written back into its array (in place where the planner can): no new gradient arrays."""
    ops = list(graph.ops)
    values = dict(graph.values)
    captured = list(graph.captured)
    next_id = max(values) + 1
    first_of = dict(chains)
    writebacks = []
    for k, g in enumerate(grads):
        if g is None:
            continue
        v = values[g]
        acc = next_id
        next_id += 1
        values[acc] = Value(acc, v.shape, v.dtype, "captured")
        captured.append(acc)
        first = first_of.get(k)
        if first is not None:
            position = ops.index(first)
            leading, joined = first.inputs[0], next_id
            next_id += 1
            values[joined] = Value(joined, v.shape, v.dtype, "op", "backward")
            ops[position:position + 1] = [Op("add", (acc, leading), (joined,), first.attrs),
                                          Op(first.op, (joined,) + tuple(first.inputs[1:]), first.outputs,
                                             first.attrs)]
            total = g
        else:
            total = next_id
            next_id += 1
            values[total] = Value(total, v.shape, v.dtype, "op", "backward")
            ops.append(Op("add", (acc, g), (total,), ENGINE_ADD_ATTRS))
        writebacks.append((total, acc))
    ops = _in_dependency_order(ops)
    return _replace(graph, values=values, ops=ops, captured=captured, results=[],
                    writebacks=writebacks).with_ops(ops)


def merge_recomputed_gelus(ops: list, recomputed: list, values: dict) -> list:
    """A recomputed GELU and the GELU backward of the same input become one op giving both (one
    erf, or one tanh, an element for the two): recomputing the GELU then costs about nothing.
    The ops are put back in an order their inputs allow, otherwise as they were."""
    backwards = {}
    for op in ops:
        if op.op == "gelu_backward" and op not in recomputed:
            backwards.setdefault((op.inputs[1], op.attrs), op)
    merged = {}
    for op in recomputed:
        partner = backwards.get((op.inputs[0], op.attrs)) if op.op == "gelu" else None
        if partner is None:
            continue
        g, x = values[partner.inputs[0]], values[partner.inputs[1]]
        if g.shape == x.shape and g.dtype == x.dtype and id(partner) not in merged:
            merged[id(op)] = merged[id(partner)] = Op("gelu_with_backward", partner.inputs,
                                                      (partner.outputs[0], op.outputs[0]), op.attrs)
    if not merged:
        return ops
    combined = []
    for op in ops:
        new = merged.get(id(op), op)
        if new is not op and any(new is seen for seen in combined):
            continue
        combined.append(new)
    return _in_dependency_order(combined)


def _in_dependency_order(ops: list) -> list:
    """``ops`` reordered so that each comes after the ops making its inputs, otherwise in the
    order given (the first op whose inputs are ready goes next)."""
    made_by = {v for op in ops for v in op.outputs}
    ready = set()
    pending, ordered = list(ops), []
    while pending:
        for k, op in enumerate(pending):
            if all(v in ready or v not in made_by for v in op.inputs):
                ordered.append(pending.pop(k))
                ready.update(op.outputs)
                break
        else:
            raise Unsupported("its backward's ops depend on each other in a cycle")
    return ordered


@dataclass
class Layout:
    saved_results: list   # forward result index of each saved value, in backward input order
    arg_inputs: list      # argument index of each argument the backward reads
    captured: list        # index into the plan's captured sources of each captured tensor it reads
    saved_owners: list    # per saved value: ("input", k), ("captured", i), ("output", j) or None
    output_owners: list   # per differentiable output: whose view it is, in the same form
    recomputed: list = field(default_factory=list)   # forward ops the backward runs again (not saved)
    partition: str = "auto"


class CompiledBackward:
    """The backward program of a compiled function, and how a replay wires it into autograd."""

    def __init__(self, graph: Graph, trace: BackwardTrace, layout: Layout, captured_sources: list):
        positions = {v: k for k, v in enumerate(graph.results)}   # passes rename results, keeping their order
        self._recorded = graph
        self._partial = {}       # received outputs -> (graph, replay, absent results): see without_unused_outputs
        self._with_sums = {}     # received outputs -> (graph, replay, edges) taking running sums: see _sums_program
        # recordings of whole graphs' backward through this node, by graph structure (backward_graph.py)
        self.graph_plans: dict = {}
        self.stats = CompileStats()   # the compiled function's, once it holds this backward
        self.rebuild = None      # how a double backward rebuilds the call's graph (set by compile_backward)
        graph, self.pass_report, _ = run_pipeline(graph)
        self.graph = graph
        self.partition = layout.partition
        self.recomputed = [op.op for op in layout.recomputed]
        self.program = plan_program(graph)
        self.program.consumes_inputs = True   # saved values are freed as the backward goes
        self.replay = CompiledReplay(self.program, generate(self.program))
        self.trace = trace
        self.layout = layout
        self.captured_tensors = [captured_sources[i][1] for i in layout.captured]
        self.captured_sources = captured_sources
        self.grad_results = [None if g is None else positions[g] for g in trace.grads]
        self._grad_meta = {k: (self._recorded.values[g].shape, np.dtype(self._recorded.values[g].dtype))
                           for k, g in enumerate(trace.grads) if g is not None}
        names = ([f"saved{k}" for k in range(len(layout.saved_results))]
                 + [f"input{k}" for k in range(len(layout.arg_inputs))]
                 + [f"captured{k}" for k in range(len(self.captured_tensors))])
        self.names = names
        self._n_saved = len(layout.saved_results) + len(layout.arg_inputs)
        self._saved_plan = [(name, index, owner) for name, index, owner
                            in zip(names, layout.saved_results, layout.saved_owners)]
        self._argument_plan = list(zip(names[len(layout.saved_results):self._n_saved], layout.arg_inputs))
        self._captured_plan = list(zip(names[self._n_saved:], self.captured_tensors))
        self._freeable = tuple(names)
        self._captured_wrt = [ref for kind, ref in trace.wrt if kind == "captured"]
        self._captured_edges = None
        self._all_captured_edges = None   # (edges, meta) when every edge goes to a captured leaf
        self._sum_edges = [k for k, g in enumerate(trace.grads) if g is not None]
        self._reached_from = [frozenset(js) for js in trace.reached_from]
        self.opdef = OpDef(f"compiled_function_{next(_numbers)}", _no_forward, "other", NODE_NAME, self._backward,
                           tuple(Save(name, 0) for name in names), backward_reads_arrays=True,
                           running_sum_edges=tuple(self._sum_edges))
        # the op of a node a double backward rewired to its call's rebuilt graph (_pass_on_to)
        self.pass_on = OpDef(f"{self.opdef.name}_rebuilt", _no_forward, "other", NODE_NAME, self._passed_on, ())

    def _rebuilt_backward(self, grads: tuple, attrs: dict) -> tuple:
        """A double backward (create_graph=True): the call's graph rebuilt by running its function
        again eagerly on the same arguments (eager and replay compute the same numbers), then
        differentiated with a graph of its own. Refused where a second run would not give that
        graph back: random draws, writes into outside state, or a tensor it read changed since."""
        rebuild = self.rebuild
        refusal = rebuild.refusal if rebuild is not None else "it was compiled without its function"
        if "call" not in attrs and refusal is None:
            refusal = "the call's arguments were not kept"
        if refusal is None:
            _, flat, versions, captured_versions = attrs["call"]
            read = list(zip(flat, versions)) + list(zip(rebuild.captured, captured_versions))
            changed = [(t, version) for t, version in read if t._version_counter[0] != version]
            if changed:
                t, version = changed[0]
                refusal = (f"a {list(t._data.shape)} tensor the call read was changed in place since the call "
                           f"(version {version} then, {t._version_counter[0]} now)")
        if refusal is not None:
            raise RuntimeError(f"{NODE_NAME} cannot run a double backward (create_graph=True): {refusal}, so "
                               "its graph cannot be rebuilt by running the compiled function again. Differentiate "
                               "the uncompiled function for higher-order gradients")
        (args, kwargs), flat, _, _ = attrs["call"]
        first = next_sequence_number()
        out, _ = flatten_outputs(rebuild.fn(*args, **kwargs))
        outputs = [out[i] for i in self.trace.outputs]
        node = attrs["node"]()
        if node is not None:   # the rebuilt nodes take the call's place in the engine's order
            _renumber_between(outputs, first, node._seq)
        wrt = [flat[ref] if kind == "input" else ref for kind, ref in self.trace.wrt]
        used = [(o, g) for o, g in zip(outputs, grads) if g is not None]   # as eager, without the unused paths
        grads_out = tuple(engine.grad([o for o, _ in used], wrt, grad_outputs=[g for _, g in used], create_graph=True,
                                      allow_unused=True))
        if node is not None:
            _pass_on_to(node, outputs, self.pass_on)
        return grads_out

    def _passed_on(self, F, grad, saved, attrs, needs):
        """The backward of a node rewired to its call's rebuilt graph: the gradients go on as they are."""
        return grad if isinstance(grad, tuple) else (grad,)

    def release_idle_arenas(self) -> None:
        """Free the arenas of this backward's programs that no call is using (a recording of the
        whole loss's backward runs in their place; a backward through the engine makes new ones)."""
        self.replay.release_idle_arenas()
        for _, replay, _ in (*self._partial.values(), *self._with_sums.values()):
            replay.release_idle_arenas()

    def _sums_program(self, grads: tuple) -> tuple:
        """(graph, replay, edges) of the backward adding into the running sums the engine holds
        (``with_running_sums``), as eager's engine runs it when only the outputs whose gradient is not
        None received one; ``edges``: the gradients it adds, in the order of its sum arguments.
        Compiled once per set of received outputs."""
        received = tuple(g is not None for g in grads)
        found = self._with_sums.get(received)
        if found is None:
            base, absent = self._without_missing(received)
            unreached = self._unreached(grads)
            grads_here = [None if index is None or index in absent or k in unreached else base.results[index]
                          for k, index in enumerate(self.grad_results)]
            chains = running_sums(base.ops, grads_here, self.trace.gradient_sums)
            graph = with_running_sums(base, chains, grads_here)
            edges = [k for k, g in enumerate(grads_here) if g is not None]
            found = self._with_sums[received] = (graph, _backward_replay(graph), edges)
        return found

    def _without_missing(self, received: tuple) -> tuple:
        """(graph, absent result positions): the recorded backward without the paths of the outputs
        ``received`` marks False (``without_unused_outputs``); the recorded one when all received."""
        if all(received):
            return self._recorded, frozenset()
        placeholders = self._recorded.inputs[self._n_saved:]
        missing = {v for v, got in zip(placeholders, received) if not got}
        return without_unused_outputs(self._recorded, set(placeholders), missing)

    def share_saved_duplicates(self, graph: Graph, n_outputs: int, *others: Graph) -> list:
        """After the forward's passes merged equal values (16 ``t`` of one LSTM weight, one per
        step), saved values that became one are saved once, as the array itself: a copy per
        duplicate (what a repeated result gets) would cost memory, and a contiguous copy of a
        transposed view would send the backward's matmuls down another BLAS path than eager's.
        Only saved values are merged: one equal to an output keeps its own copy, as eager kept
        two arrays. Returns the graphs with the duplicate results dropped (positions of the first
        ``n_outputs`` results unchanged)."""
        results = graph.results
        keep = list(range(n_outputs))
        position = {}
        remap = {index: index for index in range(n_outputs)}   # a saved value that is an output stays
        for index in range(n_outputs, len(results)):
            vid = results[index]
            if vid not in position:
                position[vid] = len(keep)
                keep.append(index)
            remap[index] = position[vid]
        if len(keep) == len(results):
            return [graph, *others]
        self.layout.saved_results = [remap[i] for i in self.layout.saved_results]
        self._saved_plan = [(name, remap[index], owner) for name, index, owner in self._saved_plan]
        return [_replace(g, results=[g.results[i] for i in keep]) for g in (graph, *others)]

    def saved_bytes(self, forward_graph: Graph) -> int:
        """Bytes of forward memory each call keeps for its backward: the buffers its saved values
        live in, each counted once (a view of another saved value, or of a buffer, keeps that
        buffer). Views of arguments, captured tensors or outputs are not counted: that memory is theirs."""
        roots = alias_roots(forward_graph)
        kept = set()
        for index, owner in zip(self.layout.saved_results, self.layout.saved_owners):
            if owner is None:
                vid = forward_graph.results[index]
                kept.add(roots.get(vid, vid))
        total = 0
        for root in kept:
            value = forward_graph.values[root]
            total += int(np.prod(value.shape, dtype=np.int64)) * np.dtype(value.dtype).itemsize
        return total

    def attach(self, leaves: list, results: list, flat: list, scalars: list, call: tuple | None = None) -> None:
        """Give this call's differentiable outputs their node (one per call), saving what its
        backward reads: the forward's saved results, and the arguments and captured tensors as
        they are now (with their version counters). ``call`` (args, kwargs) is kept for a double
        backward, which runs the function again on them."""
        if engine._graph_replay is None:
            engine.set_graph_replay(replay_backward)
        edges, meta = self._edges_and_meta(flat)
        attrs = {"scalars": scalars}
        if self.trace.reductions:
            attrs["reductions"] = self.trace.reductions   # named on the node (DDP skips what they averaged)
        if call is not None and self.rebuild is not None and self.rebuild.refusal is None:
            attrs["call"] = (call, flat, [t._version_counter[0] for t in flat],
                             [t._version_counter[0] for t in self.rebuild.captured])
        node = new_node(NODE_CLASSES[self.opdef.grad_node_name(attrs)], self.opdef, attrs, edges, meta,
                        len(self.trace.outputs))
        if "call" in attrs:
            attrs["node"] = weakref.ref(node)   # a double backward rewires it (_pass_on_to)
        live_nodes.add(node)
        saved = {}
        plain = SavedTensor.of_array
        for name, index, owner in self._saved_plan:
            saved[name] = plain(results[index]) if owner is None else self._saved_array(results[index], owner,
                                                                                       leaves, flat)
        for name, k in self._argument_plan:
            saved[name] = SavedTensor(flat[k], False)
        for name, t in self._captured_plan:
            saved[name] = SavedTensor(t, False)
        node._saved = saved
        node._freeable = self._freeable
        for j, (position, owner) in enumerate(zip(self.trace.outputs, self.layout.output_owners)):
            leaf = leaves[position]
            leaf.grad_fn = node
            leaf._output_nr = j
            leaf._requires_grad = True
            if owner is not None:
                leaf._version_counter = self._owner(owner, leaves, flat)._version_counter

    def _edges_and_meta(self, flat: list) -> tuple:
        """The node's edges (each argument's or captured tensor's grad_fn, or its AccumulateGrad)
        and their (shape, dtype). Those of captured leaves are kept from call to call (the plan's
        guards hold their shapes and dtypes; the AccumulateGrad held here stays the tensor's own)."""
        cached = self._captured_edges
        if cached is None or any(t.grad_fn is not None for t in self._captured_wrt):
            cached = None
            self._captured_edges = {id(t): ((grad_accumulator(t), 0), (t._data.shape, t._data.dtype))
                                    for t in self._captured_wrt if t.grad_fn is None}
            self._all_captured_edges = None
        elif self._all_captured_edges is not None:   # every edge goes to a captured leaf: the same each call
            return self._all_captured_edges
        edges, meta = [], []
        captured = self._captured_edges
        for kind, ref in self.trace.wrt:
            if kind == "captured" and cached is not None:
                edge, m = captured[id(ref)]
                edges.append(edge)
                meta.append(m)
                continue
            t = flat[ref] if kind == "input" else ref
            edges.append((grad_accumulator(t), 0) if t.grad_fn is None else (t.grad_fn, t._output_nr))
            meta.append((t._data.shape, t._data.dtype))
        found = tuple(edges), tuple(meta)
        if cached is not None and self._captured_wrt and len(self._captured_wrt) == len(self.trace.wrt):
            self._all_captured_edges = found
        return found

    def _saved_array(self, array, owner, leaves: list, flat: list) -> SavedTensor:
        """A saved forward result that is an output, or a view of an output, argument or captured
        tensor: it follows that tensor's version counter, so an in-place change before backward
        raises as in eager (naming the output, if it is one)."""
        saved = SavedTensor.of_array(array)
        t = self._owner(owner, leaves, flat)
        saved.version_counter, saved.version = t._version_counter, t._version_counter[0]
        saved.output_nr = owner[1] if owner[0] == "output" else None
        return saved

    def _owner(self, owner, leaves: list, flat: list):
        kind, k = owner
        if kind == "output":
            return leaves[self.trace.outputs[k]]
        return flat[k] if kind == "input" else self.captured_sources[k][1]

    def _backward(self, F, grad, saved, attrs, needs, running_sums=None):
        grads = grad if isinstance(grad, tuple) else (grad,)
        if GradMode.enabled:
            attrs.pop("reductions", None)   # its program does not run: nothing of it is averaged
            return self._rebuilt_backward(grads, attrs)
        arrays = [saved[name] for name in self.names]
        saved.clear()   # the program takes the saved arrays over (a released node holds none)
        n_saved = self._n_saved
        # incoming gradients in the layout the engine gives them (an expanded sum's, a transposed view's),
        # as eager's nodes would read them: the recorded formulas decide nothing by layout (reshape_back)
        incoming = [g._data if g is not None else np.zeros(shape, dtype)
                    for g, (shape, dtype) in zip(grads, self.trace.output_meta)]
        inputs = arrays[:n_saved] + incoming
        captured = arrays[n_saved:]
        tracer = Tracing.tracer
        sources = (arrays[:n_saved], captured[:], incoming) if tracer is not None else None
        del arrays
        make = Tensor._make
        scalars = attrs["scalars"]
        if running_sums:   # as eager's engine adds this call's contributions to what it holds
            graph, replay, edges = self._sums_program(grads)
            passed_back = [k for k in running_sums if k not in edges]   # held sums no gradient here reaches
            totals, taken = [], set()
            for k in edges:
                held = running_sums.get(k)
                if held is None:   # -0.0 adds nothing to any number, signed zeros included
                    shape, dtype = self._grad_meta[k]
                    totals.append(np.full(shape, -0.0, dtype))
                else:   # the engine's own sum is taken over (once); a gradient someone else holds is copied
                    tensor, owned = held
                    data = tensor._data
                    own = (owned and tensor._base is None and data.flags.c_contiguous and data.flags.writeable
                           and id(data) not in taken)
                    taken.add(id(data))
                    totals.append(data if own else data.copy())
            held_sources = ([("tensor", running_sums[k][0]) if k in running_sums
                             else ("constant", np.full(self._grad_meta[k][0], -0.0, self._grad_meta[k][1]))
                             for k in edges] if sources is not None else None)
            by_edge = {k: make(total, False, None) for k, total in zip(edges, totals)}
            for k in passed_back:   # what the engine held goes back as it was, copied (before the sums are
                tensor, owned = running_sums[k]   # added in place) if not its own: the engine may add into it
                by_edge[k] = tensor if owned and id(tensor._data) not in taken else tensor.clone()
            replay.run(inputs, captured + totals, list(scalars))
            for note in self.trace.reductions:
                note()
            returned = tuple(by_edge.get(k) for k in range(len(self.grad_results)))
            if sources is not None:
                self._record_run(tracer, graph, sources, grads, scalars, held_sources,
                                 [(graph.writebacks[i][0], returned[k]) for i, k in enumerate(edges)])
            return returned
        graph, replay, absent, unreached = self._recorded, self.replay, (), frozenset()
        if any(g is None for g in grads):   # some output received none: as eager runs without their paths
            unreached = self._unreached(grads)
            graph, replay, absent = self._partial_program(grads)
        results = replay.run(inputs, captured, list(scalars))
        for note in self.trace.reductions:
            note()
        returned = _as_engine_gradients([None if index is None or k in unreached or index in absent
                                         else results[index] for k, index in enumerate(self.grad_results)], grads)
        if sources is not None:
            self._record_run(tracer, graph, sources, grads, scalars, [],
                             [(graph.results[index], t) for index, t in zip(self.grad_results, returned)
                              if t is not None])
        return returned

    def _partial_program(self, grads: tuple) -> tuple:
        """(graph, replay, absent result positions) of the backward as eager runs it when only the outputs
        whose gradient is not None received one: compiled once per such set."""
        received = tuple(g is not None for g in grads)
        found = self._partial.get(received)
        if found is None:
            graph, absent = self._without_missing(received)
            found = self._partial[received] = (graph, _backward_replay(graph), absent)
        return found

    def _unreached(self, grads: tuple) -> frozenset:
        """The gradients (wrt positions) that no output given a gradient reaches: eager's engine never
        gets to them, so they stay None (not zeros computed from zero-filled incoming gradients)."""
        received = {j for j, g in enumerate(grads) if g is not None}
        return frozenset(k for k, js in enumerate(self._reached_from) if js and received.isdisjoint(js))

    def _record_run(self, tracer, graph: Graph, sources: tuple, grads: tuple, scalars: list, held: list,
                    returned: list) -> None:
        """Tell a trace under way what this node's backward program did, as the recorded program's
        ops on what it read (a recording of a whole graph's backward takes them in)."""
        saved, captured, incoming = sources
        inputs = [("array", a) for a in saved]
        inputs += [("tensor", g) if g is not None else ("constant", zeros) for g, zeros in zip(grads, incoming)]
        tracer.on_compiled_backward(graph, inputs, [("array", a) for a in captured] + held, scalars, returned)


def _backward_replay(graph: Graph) -> CompiledReplay:
    """A backward program compiled to replay: passes, buffer plan, generated code; it frees each
    saved value after its last use."""
    optimized, _, _ = run_pipeline(graph)
    program = plan_program(optimized)
    program.consumes_inputs = True
    return CompiledReplay(program, generate(program))


def _as_engine_gradients(arrays: list, incoming: tuple) -> tuple:
    """The backward program's gradients (arrays, or None) as tensors for the engine, aliasing as
    eager's formulas would: an incoming gradient passed through unchanged is that tensor itself, and
    an array given for several inputs is one tensor. The engine owns (adds into in place, steals as
    ``.grad``) only a gradient that is neither, as in eager; two tensors over one array, each taken
    for the engine's own, would have each input's sum added into the other's."""
    by_array = {id(g._data): g for g in incoming if g is not None}
    returned = []
    for array in arrays:
        if array is None:
            returned.append(None)
            continue
        t = by_array.get(id(array))
        if t is None:
            t = by_array[id(array)] = Tensor._make(array, False, None)
        returned.append(t)
    return tuple(returned)


def without_unused_outputs(graph: Graph, gradients: set, missing: set) -> tuple:
    """The recorded backward ``graph`` as eager's engine runs it when the incoming gradients ``missing``
    (of ``gradients``, the placeholder inputs) never come: an op whose every gradient input is missing
    never runs (eager never reached its node); a sum of two gradients one of which is missing is the
    other, as it is (eager had nothing to add it to); an op mixing a gradient with a missing one reads
    zeros there, as eager's formulas fill a missing gradient. Returns the graph, its results unchanged
    in number and order (a missing one computed as zeros), and the positions of the missing results."""
    values, constants = dict(graph.values), dict(graph.constants)
    missing, gradient = set(missing), set(gradients)
    rename, ops, zeros = {}, [], {}
    next_id = max(values) + 1

    def zeros_like(v: int) -> int:
        nonlocal next_id
        if v not in zeros:
            value = values[v]
            zeros[v] = next_id
            values[next_id] = _replace(value, id=next_id, kind="constant")
            constants[next_id] = np.zeros(value.shape, value.dtype)
            next_id += 1
        return zeros[v]

    for op in graph.ops:
        inputs = tuple(rename.get(v, v) for v in op.inputs)
        reads = [v for v in inputs if v in gradient]
        gone = [v for v in reads if v in missing]
        if reads:
            gradient.update(op.outputs)
        if not gone:
            ops.append(_replace(op, inputs=inputs) if inputs != op.inputs else op)
            continue
        if len(gone) == len(reads):
            missing.update(op.outputs)
            continue
        out = values[op.outputs[0]]
        if op.op == "add" and len(inputs) == 2 and op.attr_dict.get("alpha", 1) == 1:
            kept = inputs[0] if inputs[1] in missing else inputs[1]
            if values[kept].shape == out.shape and values[kept].dtype == out.dtype:
                rename[op.outputs[0]] = kept
                continue
        ops.append(_replace(op, inputs=tuple(zeros_like(v) if v in missing else v for v in inputs)))
    results, absent = [], set()
    for k, v in enumerate(graph.results):
        v = rename.get(v, v)
        if v in missing:
            absent.add(k)
            v = zeros_like(v)
        results.append(v)
    return _replace(graph, ops=ops, values=values, constants=constants, results=results), frozenset(absent)


def _no_forward(*arrays, out=None, **attrs):
    raise RuntimeError(f"{NODE_NAME} has no eager forward: it is made by a compiled function's replay")


def _renumber_between(outputs: list, first: int, call: int) -> None:
    """Give the nodes made from sequence number ``first`` on behind ``outputs`` (a call's graph rebuilt
    by a double backward) numbers between the call's node's and the one before, in their order: the
    engine runs them where it would have run the call's own eager graph, among the nodes made before
    and after the call."""
    made, seen, stack = [], set(), [o.grad_fn for o in outputs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node in seen or not node._plain or node._seq < first:
            continue
        seen.add(node)
        made.append(node)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    made.sort(key=lambda node: node._seq)
    for k, node in enumerate(made):
        node._seq = call - 1 + (k + 1) / (len(made) + 1)


def _pass_on_to(node, outputs: list, op: OpDef) -> None:
    """Rewire a compiled node to the rebuilt graph of its call (``outputs``: the rebuilt differentiable
    outputs, in the node's order). Later backwards through it then join that graph, where the double
    backward's paths run too, so that the two add up inside one graph as in eager (the node's own
    program and the rebuilt graph, run apart, would add their sums in another order)."""
    node.__class__ = PassOn   # the engine follows its edges in its place
    node.op = op
    node.next_functions = tuple((o.grad_fn, o._output_nr) if o.grad_fn is not None
                                else (grad_accumulator(o), 0) if o._requires_grad else (None, 0) for o in outputs)
    node._input_meta = tuple((o._data.shape, o._data.dtype) if o._requires_grad else None for o in outputs)
    node.attrs = {}
    node._saved = None
    node._freeable = ()
    live_nodes.discard(node)


def compile_backward(joint: Graph, trace: BackwardTrace, n_inputs: int, captured_sources: list,
                     outputs: list, partition: str = "auto", fn=None) -> tuple:
    """(forward graph, CompiledBackward) for a recording with a backward trace; ``outputs`` are the
    record's output specs; ``fn`` the compiled function (run again for a double backward)."""
    forward, backward, layout = split(joint, trace, n_inputs, captured_sources, outputs, partition)
    compiled = CompiledBackward(backward, trace, layout, captured_sources)
    if fn is not None:
        compiled.rebuild = Rebuild(fn, rebuild_refusal(forward, captured_sources),
                                   [t for kind, t in captured_sources if kind == "tensor"])
    return forward, compiled


def rebuild_refusal(forward: Graph, captured_sources: list) -> str | None:
    """Why running a call's function again would not rebuild the graph its replay stood for (None:
    it would): random draws differ, and writes into outside state would happen twice."""
    for op in forward.ops:
        if op.opdef.kind == "random":
            return f"its forward draws random numbers ({op.op}), which a second run would draw anew"
    if forward.writebacks:
        return "its forward changes outside state in place, which a second run would change again"
    if any(kind != "tensor" for kind, _ in captured_sources):
        return "its forward reads a .grad"
    return None


@dataclass
class Rebuild:
    """How a compiled model's node rebuilds its graph for a double backward: the function, run
    again eagerly on the call's arguments (or why it cannot be)."""

    fn: object
    refusal: str | None
    captured: list   # the captured tensors, whose versions each call notes
