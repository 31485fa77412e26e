"""The backward of a whole graph that holds compiled nodes, recorded once per graph structure and
replayed: ``loss.backward()`` where ``loss`` is an eager loss of a compiled model's outputs.

Without it, such a backward walks the engine: the eager nodes run their formulas op by op, the
``CompiledFunctionBackward`` node runs its program, and every gradient passes through the
engine's bookkeeping. With it, each plain ``backward()`` first walks the graph once and makes a
key of its structure: every node's op, attributes and edges, the shapes, strides and dtypes of
what it saved (and which saved arrays are one array), the roots' gradients. The second time a key
is seen, the engine runs while a tracer records its every op, the compiled nodes' recorded
programs included (``Tracer.on_compiled_backward``); that recording is compiled like any other
(passes, fusion, buffer plan). From then on, a backward with that key binds the saved arrays
found by the walk, runs the one program, and accumulates its gradients into the leaves through
the engine's own accumulation (``.grad`` stolen, cloned or added into exactly as eager's).

A walk gives up, and the engine runs, where a replay could differ from it: hooks on nodes or
leaves, ``retain_grad``, a node freed by an earlier backward or holding a saved tensor changed in
place (the engine raises PyTorch's errors), DistributedDataParallel's averaging, attributes or
saved values it cannot compare, or a trace that read anything but saved values.
"""

from __future__ import annotations

import math
import threading
import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np

from staticgrad._eager import engine
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.node import AccumulateGrad, PassOn, ReleasedNode, SavedTensor
from staticgrad._eager.node import walk as walk_nodes
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing, bump_grad_epoch
from staticgrad.compiler.codegen import generate
from staticgrad.compiler.passes import run_pipeline
from staticgrad.compiler.planner import plan_program
from staticgrad.errors import TraceError
from staticgrad.ops.quiet import errors_trapped
from staticgrad.record.plan import is_fresh_result
from staticgrad.record.tracer import Tracer
from staticgrad.runtime.replay import CompiledReplay

# Graph structures a compiled model's plan keeps (seen once, recorded, or refused); past this many,
# backwards of new structures run through the engine.
MAX_KEYS = 32


@dataclass
class GraphBackwardPlan:
    """A compiled backward of one graph structure: its program, and where each leaf's gradient
    comes from (leaves numbered in walk order; a leaf no gradient reaches is in neither list):
    ``from_results`` (leaf, result index, fresh: a buffer of its own, which may become ``.grad`` as
    it is, and the result's shape and dtype) and ``from_inputs`` (leaf, input position: a gradient
    the caller gave, passed through)."""

    replay: CompiledReplay
    from_results: list
    from_inputs: list
    guards: list
    keep: list = field(default_factory=list)   # op records the key names by id, held while it is used


@dataclass
class _Refused:
    reason: str


class _Unwalkable(Exception):
    """This backward must run through the engine (the message says why)."""


@dataclass
class GraphWalk:
    """One walk of a graph: its key, the arrays a replay reads (in input order), what binds each
    of them in a recording (tensors and saved tensors), the nodes, the leaves, the first compiled
    node's backward (which keeps the plans) and the ops the key names by id."""

    key: tuple
    arrays: list
    sources: list
    nodes: list
    leaves: list
    compiled: object
    ops: list


def walk(tensors: tuple, grad_tensors: tuple | None, recording: bool = False) -> GraphWalk:
    """Walk the graph behind ``tensors`` breadth first (a node's edges in order), numbering nodes as
    they are found; raises _Unwalkable where the engine must run the backward. Only a walk for a
    recording notes what binds each array and the ops the key names (a replay needs neither)."""
    arrays, positions = [], {}
    sources = [] if recording else None
    ops = [] if recording else None
    key = []
    order, index = [], {}
    if grad_tensors is not None and len(grad_tensors) != len(tensors):
        raise _Unwalkable("the gradients given do not match the tensors")
    for i, t in enumerate(tensors):
        if type(t) is not Tensor or t.grad_fn is None:
            raise _Unwalkable("a root is not a tensor with a grad_fn")
        data = t._data
        g = grad_tensors[i] if grad_tensors is not None else None
        if g is None:
            if data.size != 1 or data.dtype.kind != "f":
                raise _Unwalkable("an implicit gradient of a tensor that is not a float scalar")
            key.append(("ones", data.shape, data.dtype))
        else:
            if type(g) is not Tensor or g._data.shape != data.shape:
                raise _Unwalkable("a given gradient is not a tensor of the root's shape")
            a = g._data
            position = positions.get(id(a))
            if position is None:
                position = positions[id(a)] = len(arrays)
                arrays.append(a)
                if recording:
                    sources.append([])
            if recording:
                sources[position].append(g)
            key.append(("given", position, a.shape, a.strides, a.dtype))
        fn = t.grad_fn
        j = index.get(fn)
        if j is None:
            j = index[fn] = len(order)
            order.append(fn)
        key.append((j, t._output_nr))
    nodes, leaves = [], []
    compiled = None
    for node in order:   # (the loop sees the nodes appended to ``order`` as it goes)
        kind = type(node)
        if isinstance(node, ReleasedNode):
            raise _Unwalkable(f"a {node.name()} node (its saved buffers were freed by an earlier backward)")
        if node._released:
            raise _Unwalkable(f"{node.name()} was already released by an earlier backward")
        if node._pre_hooks or node._post_hooks or node._retain_grad_refs:
            raise _Unwalkable(f"{node.name()} has hooks or retains its gradient")
        nodes.append(node)
        edges = []
        for nxt, nr in node.next_functions:
            if nxt is None:
                edges.append(None)
                continue
            j = index.get(nxt)
            if j is None:
                if type(nxt) is AccumulateGrad:   # a leaf: numbered -1, -2... in the order found
                    if nxt._pre_hooks or nxt._post_hooks or nxt.variable._hooks:
                        raise _Unwalkable("a leaf has hooks")
                    j = index[nxt] = ~len(leaves)
                    leaves.append(nxt.variable)
                else:
                    j = index[nxt] = len(order)
                    order.append(nxt)
            edges.append((j, nr))
        saved_key = []
        saved = node._saved
        op = node.op
        # a compiled node's saved forward results (arrays no tensor holds) have the layouts its plan
        # gives them (its guards hold its arguments' and captured tensors' layouts): the op says them
        planned = op.backward_reads_arrays
        if saved:
            for name, value in saved.items():
                if type(value) is not SavedTensor:
                    saved_key.append((name, _value_key(value)))
                    continue
                if value.version_counter[0] != value.version:
                    raise _Unwalkable(f"a tensor {node.name()} saved was changed in place")
                if value.unpack_hook is not None:   # packed by a saved-tensor hook
                    raise _Unwalkable(f"{node.name()} saved a tensor through a saved-tensor hook (a checkpoint)")
                tensor = value.tensor
                a = value.array if tensor is None else tensor._data
                position = positions.get(id(a))
                if position is None:
                    position = positions[id(a)] = len(arrays)
                    arrays.append(a)
                    if recording:
                        sources.append([value])
                elif recording:
                    sources[position].append(value)
                saved_key.append(position if planned and tensor is None else (position, a.shape, a.strides, a.dtype))
        attrs = node.attrs
        if planned:   # a compiled model's node: its op is its CompiledBackward's
            if "reductions" in attrs:
                raise _Unwalkable("a compiled model's backward averages its gradients (DistributedDataParallel)")
            if compiled is None:
                compiled = op.backward.__self__
            scalars = attrs["scalars"]
            attrs_key = tuple([_value_key(v) for v in scalars]) if scalars else ()
        else:
            attrs_key = tuple([(name, _value_key(v)) for name, v in attrs.items()]) if attrs else ()
            if compiled is None and kind is PassOn:   # a compiled node a double backward rewired keeps the plans
                compiled = op.backward.__self__
        if recording:
            ops.append(op)
        if planned:   # its inputs' shapes and dtypes and its outputs' count are its plan's too
            key.append((id(op), attrs_key, tuple(edges), tuple(saved_key)))
        else:
            key.append((id(op), attrs_key, node._input_meta, node._n_outputs, tuple(edges), tuple(saved_key)))
    return GraphWalk(tuple(key), arrays, sources, nodes, leaves, compiled, ops)


def _value_key(value):
    """A saved value or attribute as part of a key: numbers keep their type and floats their sign
    of zero (0.0, -0.0, 1 and True are equal in Python, not to a replay); tuples, lists and slices
    their items. Anything else (an object whose state a backward may read, such as an
    autograd.Function's ctx) makes the backward run through the engine."""
    kind = type(value)
    if kind is float:
        return (float, value, math.copysign(1.0, value))
    if kind is int or kind is str or value is None:
        return value
    if kind is bool:
        return (bool, value)
    if isinstance(value, (tuple, list)):   # a Size too
        return (kind,) + tuple(_value_key(v) for v in value)
    if isinstance(value, np.floating):   # a NumPy float: -0.0 == 0.0 there too
        return (kind, float(value), math.copysign(1.0, value))
    if isinstance(value, (np.integer, np.bool_, np.dtype)):
        return (kind, value)
    if kind is slice:
        return (slice, _value_key(value.start), _value_key(value.stop), _value_key(value.step))
    if value is Ellipsis:
        return Ellipsis
    raise _Unwalkable(f"a node holds a {kind.__name__}, whose effect on its backward a key cannot tell")


# ---- the engine's door ------------------------------------------------------------------------------

_lock = threading.Lock()

# The compiled nodes alive now (attach adds each; it leaves when its graph is dropped): while there
# are none, no graph can hold one, and a backward goes straight to the engine without a walk.
live_nodes = weakref.WeakSet()


def replay_backward(tensors: tuple, grad_tensors: tuple | None, retain_graph: bool) -> bool:
    """Run ``backward(tensors, grad_tensors)`` from a recording of its graph's structure, recording
    it the second time a structure is seen; False where the engine must run it instead."""
    if not live_nodes or engine._BACKWARD_END_CALLBACKS or errors_trapped():
        return False
    try:
        found = walk(tensors, grad_tensors)
    except _Unwalkable as reason:
        _count_engine_run(tensors, str(reason))
        return False
    compiled = found.compiled
    if compiled is None:
        return False
    plans, stats = compiled.graph_plans, compiled.stats
    entry = plans.get(found.key)
    if type(entry) is GraphBackwardPlan:
        if all(guard.holds() for guard in entry.guards):
            _replay(entry, found, retain_graph)
            stats.backward_replays += 1
            return True
        entry = _Refused("a guard of its recording failed (the default dtype changed)")
    elif entry is None:
        if len(plans) < MAX_KEYS:
            plans[found.key] = 1
            entry = _Refused("the first backward of this graph structure runs eagerly")
        else:
            entry = _Refused(f"{MAX_KEYS} graph structures were seen already")
    elif entry == 1:
        _record(walk(tensors, grad_tensors, recording=True), tensors, grad_tensors, retain_graph)
        return True
    stats.backward_eager += 1
    stats.backward_eager_reason = entry.reason
    return False


def _count_engine_run(tensors: tuple, reason: str) -> None:
    """Count a backward the engine runs because a walk gave up, on the first compiled model in its
    graph (a second walk, on this rare path only, finds it)."""
    starts = [t.grad_fn for t in tensors if type(t) is Tensor and t.grad_fn is not None]
    for node in walk_nodes(starts):
        op = getattr(node, "op", None)
        if op is not None and op.backward_reads_arrays:
            stats = op.backward.__self__.stats
            stats.backward_eager += 1
            stats.backward_eager_reason = reason
            return


def _replay(plan: GraphBackwardPlan, found: GraphWalk, retain_graph: bool) -> None:
    arrays = found.arrays
    passed = [arrays[position] for _, position in plan.from_inputs]   # (before the program takes the arrays)
    found.sources = None   # (saved tensors holding the arrays: only a recording binds them)
    if not retain_graph:   # as the engine frees each node's buffers before or after it runs
        for node in found.nodes:
            node.release()
    found.nodes = None
    results = plan.replay.run(arrays, [], [])   # takes the arrays over: each is dropped after its last use
    make = Tensor._make
    variables = found.leaves
    others = [(variables[leaf], make(array, False, None), False) for (leaf, _), array in zip(plan.from_inputs, passed)]
    appeared = False
    for leaf, index, fresh, shape, dtype in plan.from_results:
        variable = variables[leaf]
        data = variable._data
        if fresh and variable._grad is None and data.shape == shape and data.dtype == dtype:
            # the engine's first accumulation into a leaf: a fresh C-contiguous gradient of its own,
            # of the leaf's shape and dtype, becomes .grad as it is (accumulate_into_leaves)
            variable._grad = make(results[index], False, None)
            appeared = appeared or variable._captured
        else:
            others.append((variable, make(results[index], False, None), fresh))
    if appeared:
        bump_grad_epoch()
    if others:
        _accumulate(others)


def _accumulate(leaves: list) -> None:
    """The engine's accumulation into leaves, under the grad mode and phase the engine runs it in."""
    previous_mode, previous_phase = GradMode.enabled, Tracing.phase
    GradMode.enabled = False
    Tracing.phase = "backward"
    try:
        engine.accumulate_into_leaves(leaves)
    finally:
        GradMode.enabled = previous_mode
        Tracing.phase = previous_phase


# ---- recording ---------------------------------------------------------------------------------------

class GraphBackwardTracer(Tracer):
    """A tracer whose inputs are the walk's arrays: each saved tensor (and given gradient) is bound
    to the input of its array, a saved output through ``trace_value`` (rebound on unpack), and a
    compiled node's saved arrays through ``array_values``. The graph it walks was built outside any
    trace, which is the point: it does not refuse outside nodes."""

    def __init__(self, found: GraphWalk):
        super().__init__("eager", "a backward through a compiled model")
        self._rebound = []
        for position, (array, sources) in enumerate(zip(found.arrays, found.sources)):
            vid = self.tape.input(array.shape, array.dtype)
            self.array_values[id(array)] = vid
            self.external[vid] = ("input", position)
            self.storage_writes[vid] = 0
            for source in sources:
                t = source if type(source) is Tensor else source.tensor
                if t is not None:
                    self._bind(t, vid, vid, full=True)
                    self.input_ids[id(t)] = position
                else:   # (one saved during an earlier trace holds that trace's value: put back after)
                    self._rebound.append((source, source.trace_value))
                    source.trace_value = vid

    def _mark_outside_graph(self, t: Tensor, what: str) -> None:
        pass

    def release_saved(self) -> None:
        """Forget the values saved outputs were bound to (another trace must not see them)."""
        for saved, value in self._rebound:
            saved.trace_value = value
        self._rebound = []


def _record(found: GraphWalk, tensors: tuple, grad_tensors: tuple | None, retain_graph: bool) -> None:
    """Run the backward through the engine while a tracer records it, accumulate its gradients, and
    keep the compiled recording (or why there is none) under the walk's key."""
    compiled = found.compiled
    tracer = GraphBackwardTracer(found)
    previous = Tracing.tracer
    Tracing.tracer = tracer
    try:
        leaves = engine.leaf_gradients(tensors, grad_tensors, retain_graph)
    finally:
        Tracing.tracer = previous
        tracer.release_saved()
    try:
        entry = _compile(tracer, found, leaves)
    except TraceError as error:
        entry = _Refused(str(error))
    except Exception as error:   # the recording cannot be compiled: the engine keeps running this graph
        entry = _Refused(f"its recording could not be compiled ({type(error).__name__}: {error})")
        warnings.warn(f"staticgrad: a backward through a compiled model runs eagerly: {entry.reason}",
                      RuntimeWarning, stacklevel=4)
    with _lock:
        compiled.graph_plans[found.key] = entry
    if type(entry) is GraphBackwardPlan:   # the compiled nodes' own programs now rarely run: free their arenas
        for op in found.ops:
            if op.backward_reads_arrays:
                op.backward.__self__.release_idle_arenas()
    stats = compiled.stats
    stats.backward_recorded += 1
    if type(entry) is _Refused:
        stats.backward_eager_reason = entry.reason
    _accumulate(leaves)


def _compile(tracer: GraphBackwardTracer, found: GraphWalk, leaves: list):
    """The recording's plan, or _Refused naming what a replay could not repeat."""
    if tracer.failure is not None:
        return _Refused(f"its recording failed: {tracer.failure}")
    if tracer.captured:
        return _Refused("its backward read a tensor no node saved")
    if any(tracer.storage_writes.get(vid, 0) for vid in tracer.external):
        return _Refused("its backward changed a saved tensor in place")
    if tracer.grad_slots or tracer.scalar_getters:
        return _Refused("its backward read a .grad or a replay-time number")
    position_of = {id(v): i for i, v in enumerate(found.leaves)}
    leaf_sources = [None] * len(found.leaves)
    results = []
    for variable, g, _owned in leaves:
        i = position_of.get(id(variable))
        if i is None or leaf_sources[i] is not None:
            return _Refused("a leaf the walk did not find, or found twice, received a gradient")
        if id(g) in tracer.input_ids:
            leaf_sources[i] = ("input", tracer.input_ids[id(g)])
            continue
        vid = tracer.read(g)
        leaf_sources[i] = ("result", len(results))
        results.append(vid)
    if tracer.captured or tracer.failure is not None:
        return _Refused("its backward read a tensor no node saved")
    graph = tracer.tape.finish(results, [])
    graph, _, _ = run_pipeline(graph)
    program = plan_program(graph)
    program.consumes_inputs = True
    replay = CompiledReplay(program, generate(program))
    from_results = []
    for leaf, source in enumerate(leaf_sources):
        if source is not None and source[0] == "result":
            value = graph.values[graph.results[source[1]]]
            from_results.append((leaf, source[1], is_fresh_result(program, source[1]), value.shape,
                                 np.dtype(value.dtype)))
    from_inputs = [(leaf, source[1]) for leaf, source in enumerate(leaf_sources)
                   if source is not None and source[0] == "input"]
    return GraphBackwardPlan(replay, from_results, from_inputs, list(tracer.guards), list(found.ops))
