"""The backward engine: run a graph's nodes in dependency order, accumulate leaf gradients,
free saved buffers unless ``retain_graph``, and answer ``autograd.grad``.

Gradients flow as Tensors through the op table's formulas (so ``create_graph=True`` simply
means "run them with grad mode on", and a tracer sees every backward op go by).
"""

from __future__ import annotations

import heapq
import threading
import weakref

import numpy as np

from staticgrad._eager.creation import tensor
from staticgrad._eager.dispatch import F, refresh_view
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.node import AccumulateGrad, PassOn, _RemovableHandle, grad_accumulator, resolved, retain_at
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing, bump_grad_epoch
from staticgrad.ops import OPS
from staticgrad.ops.quiet import restore, silence
from staticgrad.ops.reductions import sum_to_axes


def _root_edge(t: Tensor, index: int):
    refresh_view(t, "backward")
    if t.grad_fn is not None:
        return resolved(t.grad_fn, t._output_nr)
    if t._requires_grad:
        return grad_accumulator(t), 0
    raise RuntimeError(f"element {index} of tensors does not require grad and does not have a grad_fn")


FULL = OPS["full"]


def _root_grads(tensors, grads):
    """(gradient, owned) for each root; implicit ones are created for one-element outputs."""
    out = []
    for i, t in enumerate(tensors):
        g = None if grads is None else grads[i]
        if g is None:
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if t._data.dtype.kind != "f":
                raise RuntimeError("grad can be implicitly created only for real scalar outputs")
            if Tracing.tracer is None:   # the op table's own forward, without a dispatch to record
                shape = t._data.shape
                ones = (np.ones((), t._data.dtype) if shape == () else
                        FULL.forward(shape=shape, value=1.0, dtype=t._data.dtype))
                seed = Tensor._make(ones, False, None)
            else:
                seed = F.full(shape=t._data.shape, value=1.0, dtype=t._data.dtype)
            out.append((seed, True))
            continue
        if not isinstance(g, Tensor):
            g = tensor(g, dtype=t.dtype)
        if g._data.shape != t._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(g._data.shape)} and "
                               f"output[{i}] has a shape of {list(t._data.shape)}.")
        out.append((g, False))
    return out


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


# A backward through a graph holding a compiled model's node may replay a recording of the whole
# graph's backward (``record/backward_graph.py`` sets this once such a node exists):
# ``replay(tensors, grad_tensors, retain_graph) -> bool``, False where the engine must run it.
_graph_replay = None


class _Task(threading.local):
    """What kind of backward runs in this thread: ``plain`` while a ``backward()`` into every leaf
    runs (not ``grad()``, not ``inputs=``), which is when a reentrant checkpoint may run its own."""

    plain = True


_TASK = _Task()


def is_checkpoint_valid() -> bool:
    """PyTorch's ``torch.autograd._is_checkpoint_valid``: False inside ``autograd.grad`` or a
    ``backward(inputs=...)``, where a reentrant checkpoint's inner backward would escape them."""
    return _TASK.plain


def set_graph_replay(replay) -> None:
    """Let ``replay`` take plain backward() calls (no create_graph, no inputs) before the engine."""
    global _graph_replay
    _graph_replay = replay


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """Accumulate d(tensors)/d(leaf) into every reachable leaf's ``.grad`` (or only into ``inputs``)."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    replay = _graph_replay
    if (replay is not None and not create_graph and inputs is None and Tracing.tracer is None
            and replay(tensors, grad_tensors, retain_graph)):
        return
    roots = [_root_edge(t, i) for i, t in enumerate(tensors)]
    root_grads = _root_grads(tensors, grad_tensors)
    targets = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = [input_edge(t) for t in inputs]
    _execute(roots, root_grads, retain_graph, create_graph, targets, inputs, accumulate=True)


def leaf_gradients(tensors: tuple, grad_tensors: tuple | None, retain_graph: bool) -> list:
    """Run ``backward(tensors, grad_tensors)`` but hand back what it would accumulate into leaves,
    as (leaf, gradient, owned) in the order the engine reaches them, instead of accumulating it
    (``accumulate_into_leaves`` does that): how a recording of the graph's backward sees each leaf's
    gradient as a value."""
    roots = [_root_edge(t, i) for i, t in enumerate(tensors)]
    root_grads = _root_grads(tensors, grad_tensors)
    sink = []
    _execute(roots, root_grads, retain_graph, False, None, None, accumulate=True, sink=sink)
    return sink


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False, outside=None):
    """d(outputs)/d(inputs), returned instead of accumulated into ``.grad``. ``outside`` (ids of
    nodes; staticgrad's own use): nodes that do not run, so that only paths avoiding them count
    (the gradients within a compiled call, whose arguments' graphs lead back to its parameters)."""
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    roots = [_root_edge(t, i) for i, t in enumerate(outputs)]
    root_grads = _root_grads(outputs, grad_outputs)
    targets = [input_edge(t) for t in inputs]
    captured = _execute(roots, root_grads, retain_graph, create_graph, targets, inputs, accumulate=False,
                        outside=outside)
    results = []
    for index, (t, edge) in enumerate(zip(inputs, targets)):
        g = captured.get(edge)
        if g is None:
            if materialize_grads:
                g = F.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {index} appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior.")
        results.append(g)
    return tuple(results)


def input_edge(t: Tensor):
    """(node, input number) whose buffer collects ``t``'s gradient: its grad_fn's, or its leaf's."""
    if not isinstance(t, Tensor):
        raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
    refresh_view(t, "autograd.grad")
    if t.grad_fn is not None:
        return resolved(t.grad_fn, t._output_nr)
    if not t._requires_grad:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return grad_accumulator(t), 0


def _discover(root_nodes):
    """Dependency counts (one per edge) of every node reachable from the roots."""
    deps = {}
    seen = set(root_nodes)
    stack = list(seen)
    while stack:
        node = stack.pop()
        for nxt, nr in node.next_functions:
            if type(nxt) is PassOn:
                nxt, nr = resolved(nxt, nr)
            if nxt is not None:
                deps[nxt] = deps.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return deps


def _nodes_to_execute(root_nodes, target_nodes):
    """Nodes with a path to a target through their inputs: only these run when targets are given."""
    reaches = {}
    stack = [(n, False) for n in root_nodes]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            reaches[node] = node in target_nodes or any(reaches.get(n, False) for n in _inputs_of(node))
            continue
        if node in reaches:
            continue
        stack.append((node, True))
        for n in _inputs_of(node):
            if n not in reaches:
                stack.append((n, False))
    return {node for node in reaches if any(reaches.get(n, False) for n in _inputs_of(node))}


def _inputs_of(node) -> list:
    """The nodes a node's gradients go to (past PassOn nodes)."""
    return [n for n, _ in (resolved(*edge) for edge in node.next_functions) if n is not None]


def _execute(roots, root_grads, retain_graph, create_graph, targets, target_tensors, accumulate, sink=None,
             outside=None):
    """Run the graph's nodes; ``sink`` (a list), when given, receives the leaves' (variable,
    gradient, owned) instead of their ``.grad`` (``leaf_gradients``); the nodes whose ids are in
    ``outside`` do not run (what reaches them ends there)."""
    root_nodes = list(dict.fromkeys(node for node, _ in roots))
    deps = _discover(root_nodes)
    execute = None
    capture = {}
    accumulate_only = None
    if targets is not None:
        execute = _nodes_to_execute(root_nodes, {node for node, _ in targets})
        if accumulate:
            accumulate_only = dict(zip(targets, target_tensors))
        else:
            capture = dict.fromkeys(targets)

    buffers = {}
    for (node, nr), (g, owned) in zip(roots, root_grads):
        _add_to_buffer(buffers.setdefault(node, {}), node, nr, g, owned)
    ready = []
    counter = 0
    for node in root_nodes:
        if deps.get(node, 0) == 0:
            heapq.heappush(ready, (-node._seq, counter, node))
            counter += 1

    # plain accumulation (``backward()`` into every leaf): leaves fed by one edge skip the queue
    plain_accumulate = accumulate and accumulate_only is None
    previous_mode, previous_phase, previous_plain = GradMode.enabled, Tracing.phase, _TASK.plain
    GradMode.enabled = create_graph
    Tracing.phase = "backward"
    _TASK.plain = plain_accumulate
    try:
        while ready:
            _, _, node = heapq.heappop(ready)
            buf = buffers.pop(node, {})
            if node._pre_hooks:
                _run_pre_hooks(node, buf)
            if type(node) is not AccumulateGrad and node._retain_grad_refs:
                _retain_grads(node, buf)
            if capture:
                for nr, (g, _) in buf.items():
                    if (node, nr) in capture:
                        capture[(node, nr)] = g
            if type(node) is AccumulateGrad:
                entry = buf.get(0)
                if entry is not None and accumulate:
                    if sink is not None:
                        sink.append((node.variable, entry[0], entry[1]))
                    elif accumulate_only is None or (node, 0) in accumulate_only:
                        _accumulate_into_leaf(node.variable, entry[0], entry[1])
                        if node._post_hooks:   # after accumulating, as PyTorch: (grad_inputs, grad_outputs)
                            for hook in list(node._post_hooks):
                                hook((), (entry[0],))
                continue
            if accumulate_only is not None:
                for nr, (g, _owned) in buf.items():
                    t = accumulate_only.get((node, nr))
                    if t is not None:
                        _accumulate_into_nonleaf(t, g)
            if execute is not None and node not in execute:
                continue
            if node._n_outputs == 1:   # (most nodes: one output, its gradient given)
                entry = buf.get(0)
                grads_in = [entry[0] if entry is not None else None]
                given_any = entry is not None
            else:
                grads_in = [buf[i][0] if i in buf else None for i in range(node._n_outputs)]
                given_any = any(g is not None for g in grads_in)
            # (a double backward's node returns gradients with a graph: the engine adds them itself)
            sums = (_running_sums(node, buffers) if node.op is not None and node.op.running_sum_edges
                    and not create_graph else None)
            # (read before the node runs: a compiled node rebuilt by a double backward is rewired by its run)
            edges, input_meta = node.next_functions, node._input_meta
            grads_out = (apply_node(node, grads_in, sums, release=not retain_graph)
                         if given_any and (outside is None or id(node) not in outside) else None)
            if not retain_graph:
                node.release()
            if node._post_hooks and grads_out is not None:
                for hook in node._post_hooks:
                    hook(grads_out, tuple(grads_in))
            leaves = None
            given = None   # ids of the gradients seen so far: one returned twice is not owned
            for i, (nxt, nr) in enumerate(edges):
                if type(nxt) is PassOn:
                    nxt, nr = resolved(nxt, nr)
                if nxt is None:
                    continue
                g = grads_out[i] if grads_out is not None else None
                remaining = deps[nxt] - 1
                deps[nxt] = remaining
                if g is not None:
                    if given is None:
                        given = {id(other) for other in grads_in if other is not None} if given_any else set()
                    owned = id(g) not in given
                    given.add(id(g))
                    meta = input_meta[i]
                    if meta is not None and (g._data.shape != meta[0] or g._data.dtype != meta[1]):
                        g, owned = _validate(node, i, g)
                    if (remaining == 0 and plain_accumulate and type(nxt) is AccumulateGrad and nxt not in buffers
                            and not nxt._pre_hooks and not nxt._post_hooks and not nxt.variable._hooks):
                        # a leaf this edge alone feeds, with no hooks: accumulate now, as popping its
                        # AccumulateGrad (first in the queue, sequence number infinity) next would
                        if leaves is None:
                            leaves = []
                        leaves.append((nxt.variable, g, owned))
                        continue
                    _add_to_buffer(buffers.setdefault(nxt, {}), nxt, nr, g, owned)
                if remaining == 0:
                    heapq.heappush(ready, (-nxt._seq, counter, nxt))
                    counter += 1
            if leaves is not None:
                if sink is not None:
                    sink.extend(leaves)
                else:
                    accumulate_into_leaves(leaves)
        if accumulate and _BACKWARD_END_CALLBACKS:
            for node in root_nodes:   # the callbacks see every node that ran, the roots too
                deps.setdefault(node, 0)
            _run_backward_end_callbacks(deps)
    finally:
        GradMode.enabled = previous_mode
        Tracing.phase = previous_phase
        _TASK.plain = previous_plain
    return capture


# Methods called when a backward() has accumulated every gradient, with the nodes it reached (a
# dict keyed by node, the roots included): DistributedDataParallel averages its gradients there. Held weakly.
_BACKWARD_END_CALLBACKS: list = []


def add_backward_end_callback(method) -> _RemovableHandle:
    """Call the bound ``method(reached_nodes)`` at the end of every backward() while its object lives."""
    ref = weakref.WeakMethod(method)
    _BACKWARD_END_CALLBACKS.append(ref)
    return _RemovableHandle(_BACKWARD_END_CALLBACKS, ref)


# Methods a compiled function's backward recording calls, at trace time, with (the tensors it
# differentiates with respect to, their gradients): each may record ops on the gradients before
# they leave the compiled node, and returns (gradients, a callable to run each time the recorded
# backward program runs, or None). DistributedDataParallel averages its parameters' gradients
# there, inside the recorded program. Held weakly.
_COMPILED_GRADIENT_REDUCERS: list = []


def add_compiled_gradient_reducer(method) -> _RemovableHandle:
    """Let the bound ``method(wrt, grads)`` add ops to every compiled backward recorded while its object lives."""
    ref = weakref.WeakMethod(method)
    _COMPILED_GRADIENT_REDUCERS.append(ref)
    return _RemovableHandle(_COMPILED_GRADIENT_REDUCERS, ref)


def compiled_gradient_reducers() -> list:
    """The live methods registered with ``add_compiled_gradient_reducer``."""
    methods = []
    for ref in list(_COMPILED_GRADIENT_REDUCERS):
        method = ref()
        if method is None:
            _COMPILED_GRADIENT_REDUCERS.remove(ref)
        else:
            methods.append(method)
    return methods


def _run_backward_end_callbacks(reached: dict) -> None:
    for ref in list(_BACKWARD_END_CALLBACKS):
        method = ref()
        if method is None:
            _BACKWARD_END_CALLBACKS.remove(ref)
        else:
            method(reached)


def _running_sums(node, buffers: dict) -> dict | None:
    """What the buffers of a node's running-sum edges hold already, taken out of them as (gradient,
    owned): the node adds its contributions onto it, in eager's order, and its result becomes the
    buffer's (in place, where the engine owns it)."""
    sums = None
    for i in node.op.running_sum_edges:
        nxt, nr = resolved(*node.next_functions[i])
        buf = buffers.get(nxt)
        if buf is not None and nr in buf:
            if sums is None:
                sums = {}
            sums[i] = buf.pop(nr)
            if not buf:
                del buffers[nxt]
    return sums


def apply_node(node, grads_in, running_sums=None, release: bool = False):
    """Run one node's backward formula: gradients for each of its op's inputs. ``release``: the
    node's saved values go with this run (no retain_graph); a backward that reads arrays takes
    them over before it runs, so that it may free each one after its last use."""
    tracer = Tracing.tracer
    if tracer is not None and id(node) in tracer.outside_nodes:
        tracer.on_outside_node(node)
    op = node.op   # None on a replayed output's released node: unpack_saved raises for it
    if op is not None and op.backward_reads_arrays:
        saved = node.saved_arrays()
        if release:
            node.release()
    else:
        saved = node.unpack_saved()
    edge_inputs = node._edge_inputs
    needs = tuple([meta is not None for meta in node._input_meta]) if edge_inputs is None else edge_inputs[1]
    grad = grads_in[0] if node._n_outputs == 1 else tuple(grads_in)
    if running_sums:
        return node.op.backward(F, grad, saved, node.attrs, needs, running_sums=running_sums)
    grads = node.op.backward(F, grad, saved, node.attrs, needs)
    if edge_inputs is not None:   # the gradients of the inputs that have an edge, edge by edge
        n = len(grads)
        grads = tuple([grads[i] if i is not None and i < n else None for i in edge_inputs[0]])
    return grads


def _validate(node, index, g):
    """Reduce a broadcast gradient to the input's shape and cast it to the input's dtype (it has
    not both already): (gradient, True), a new gradient the engine may steal."""
    shape, dtype = node._input_meta[index]
    owned = False
    if g._data.shape != shape:
        if not _expands_to(shape, g._data.shape):
            raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {index} - got "
                               f"{list(g._data.shape)} but expected shape compatible with {list(shape)}")
        if g.requires_grad:
            g = _sum_to_nodes(g, shape)
        elif F.untracked and g._data.dtype == dtype:
            quiet = silence()   # (the op's own kernel, without a dispatch: its bits)
            try:
                g = F.result(_SUM_TO_SIZE(g._data, shape=shape))
            finally:
                restore(quiet)
        else:
            g = F.sum_to_size(g, shape=shape)
        owned = True
    if g._data.dtype != dtype:
        g, owned = F.to_dtype(g, dtype=dtype, self_dtype=g._data.dtype), True
    return g, owned


_SUM_TO_SIZE = OPS["sum_to_size"].forward


def _expands_to(shape: tuple, target: tuple) -> bool:
    """A tensor of ``shape`` broadcasts to ``target`` (NumPy's rule, without building arrays)."""
    lead = len(target) - len(shape)
    if lead < 0:
        return False
    return all(n == m or n == 1 for n, m in zip(shape, target[lead:]))


def _sum_to_nodes(g: Tensor, shape: tuple) -> Tensor:
    """A gradient that builds a graph reduced to ``shape`` with PyTorch's nodes: SumBackward0 for a
    0-dim shape, else SumBackward1 (keepdim) under a ViewBackward0 that drops the leading dims."""
    if shape == ():
        return F.sum(g)
    lead = g._data.ndim - len(shape)
    g = F.sum(g, dim=sum_to_axes(g._data.shape, shape), keepdim=True)
    return F.view(g, shape=shape) if lead else g


def _add_to_buffer(buf: dict, node, nr: int, g: Tensor, owned: bool) -> None:
    """Put ``g`` into ``node``'s buffer for its input ``nr``, added to what it holds already."""
    existing = buf.get(nr)
    if existing is None:
        buf[nr] = (g, owned)
    else:
        total = existing[0] + g
        tracer = Tracing.tracer
        if tracer is not None:
            tracer.on_gradient_sum(total, (node, nr))
        buf[nr] = (total, True)


def _run_pre_hooks(node, buf: dict) -> None:
    for output_nr, hook in list(node._pre_hooks):
        if output_nr is None:
            grads = tuple(buf[i][0] if i in buf else None for i in range(node._n_outputs))
            result = hook(grads)
            if result is not None:
                for i, g in enumerate(result):
                    if g is not None:
                        buf[i] = (g, False)
            continue
        entry = buf.get(output_nr)
        if entry is None:
            continue
        result = hook(entry[0])
        if result is not None:
            buf[output_nr] = (result, False)
        else:
            buf[output_nr] = (entry[0], False)


def _retain_grads(node, buf: dict) -> None:
    for output_nr, ref in node._retain_grad_refs:
        t = ref()
        entry = buf.get(output_nr)
        if t is None or entry is None:
            continue
        _accumulate_into_nonleaf(t, entry[0])


def _accumulate_into_nonleaf(t: Tensor, g: Tensor) -> None:
    if t._grad is None:
        t._grad = F.clone(g) if not GradMode.enabled else g
    else:
        t._grad = t._grad + g


def _stealable(variable: Tensor, g: Tensor, owned: bool) -> bool:
    """``g`` may become ``variable.grad`` as it is: the engine owns it, and it is a writable
    C-contiguous array of its own in the variable's dtype."""
    data = g._data
    return (owned and g._base is None and data.flags.c_contiguous and data.flags.writeable
            and data.dtype == variable._data.dtype)


def accumulate_into_leaves(leaves: list) -> None:
    """Accumulate (variable, gradient, owned) into leaves without hooks: a fresh gradient that fits
    becomes ``.grad`` as it is (the common first backward after ``zero_grad``), with one bump of
    the grad epoch for all of them; anything else goes through ``_accumulate_into_leaf``."""
    if Tracing.tracer is not None or GradMode.enabled:
        for variable, g, owned in leaves:
            _accumulate_into_leaf(variable, g, owned)
        return
    bump = False
    for variable, g, owned in leaves:
        if variable._grad is None and g._data.shape == variable._data.shape and _stealable(variable, g, owned):
            variable._grad = g
            bump = bump or variable._captured
        else:
            _accumulate_into_leaf(variable, g, owned)
    if bump:
        bump_grad_epoch()


def _accumulate_into_leaf(variable: Tensor, g: Tensor, owned: bool) -> None:
    """AccumulateGrad: steal a fresh gradient, clone a shared one, add into an existing one."""
    if variable._hooks:
        for hook in list(variable._hooks):
            result = hook(g)
            if result is not None:
                g = result
            owned = False
    traced = Tracing.tracer is not None
    current = variable.grad if traced else variable._grad
    if current is None:
        if not GradMode.enabled and _stealable(variable, g, owned):
            if traced or g._data.shape != variable._data.shape:
                variable.grad = g
            else:   # a gradient already checked to fit, outside a trace
                variable._store_grad(g)
        else:
            variable.grad = F.clone(g)
    elif not GradMode.enabled:
        current.add_(g)
    else:
        variable.grad = current + g


def register_tensor_hook(t: Tensor, hook):
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    refresh_view(t, "register_hook")   # (the hook goes on the history the view's next use has, as in PyTorch)
    if t.grad_fn is None:
        if t._hooks is None:
            t._hooks = []
        t._hooks.append(hook)
        return _RemovableHandle(t._hooks, hook)
    return t.grad_fn._add_pre_hook(t._output_nr, hook)


def retain_grad(t: Tensor) -> None:
    if t._retains_grad:
        return
    refresh_view(t, "retain_grad")
    t._retains_grad = True
    retain_at(t.grad_fn, t)
