"""The end of a traced call: turn what the tracer saw into a TraceRecord for compile.

Decides what each output is on replay, which ``.grad`` slots a replay must set, which outside
storages it must overwrite in place, and whether any tensor made during the call escaped into
Python state that a replay would not update.
"""

from __future__ import annotations

from numpy.lib.array_utils import byte_bounds

from staticgrad._eager.node import AccumulateGrad, SavedTensor, graph_freed, graph_is_live, walk
from staticgrad._eager.tensor import Tensor
from staticgrad.record.trace_record import TraceRecord
from staticgrad.record.tracer import Tracer


class _Results:
    """The values a replay hands back, numbered in the order they are first asked for."""

    def __init__(self):
        self.values, self._index = [], {}

    def of(self, vid: int) -> int:
        if vid not in self._index:
            self._index[vid] = len(self.values)
            self.values.append(vid)
        return self._index[vid]


def finish(tracer: Tracer, flat_outputs: list, eager_peak_bytes: int | None = None,
           differentiable: set = frozenset()) -> TraceRecord:
    """Turn a finished trace into its record: what the call returned, which ``.grad`` slots it left
    and with what, which outside tensors it wrote, and the tape as a graph."""
    record = TraceRecord(graph=None, input_count=len(tracer.input_ids), captured=tracer.captured,
                         scalar_getters=tracer.scalar_getters, state_guards=tracer.guards,
                         input_guards=tracer.input_guards, outputs=[], grad_slots=[], version_bumps=[],
                         failure=tracer.failure, float_arguments_static=tracer.float_arguments_static,
                         eager_peak_bytes=eager_peak_bytes)
    if tracer.failure is not None:
        return record
    results = _Results()
    output_positions = _record_outputs(tracer, flat_outputs, record, results, differentiable)
    if tracer.failure is not None:
        record.failure = tracer.failure
        return record
    slot_finals = _record_grad_slots(tracer, output_positions, record, results)
    writebacks = _record_writes(tracer, record)
    record.escapes = _escapes(tracer, flat_outputs, slot_finals)
    record.failure = tracer.failure
    record.graph = tracer.tape.finish(results.values, writebacks)
    return record


def _record_outputs(tracer: Tracer, flat_outputs: list, record: TraceRecord, results: _Results,
                    differentiable: set) -> dict:
    """How a replay rebuilds each returned leaf; returns {id(tensor): position} of returned tensors."""
    created = tracer.created_ids
    output_positions = {}
    for position, obj in enumerate(flat_outputs):
        if not isinstance(obj, Tensor):
            record.outputs.append(("object", obj))
            continue
        key = id(obj)
        if key in output_positions:  # the same tensor returned twice: a replay returns one object twice
            record.outputs.append(("same", output_positions[key]))
            continue
        output_positions[key] = position
        if key in tracer.input_ids:
            record.outputs.append(("input", tracer.input_ids[key]))
        elif key not in created:
            record.outputs.append(("object", obj))
        else:
            vid = tracer.read(obj)
            info = (True, None) if key in differentiable else _output_info(tracer, obj)
            record.outputs.append(("value", results.of(vid), info))
        if tracer.failure is not None:
            break
    return output_positions


def _record_grad_slots(tracer: Tracer, output_positions: dict, record: TraceRecord, results: _Results) -> set:
    """What each ``.grad`` the call touched holds at its end; returns the ids of those gradients."""
    created = tracer.created_ids
    slot_finals = set()
    for key, ref in tracer.grad_slots.items():
        t = ref()
        if t is None:
            continue
        if t._grad is not None:
            slot_finals.add(id(t._grad))
        if key in tracer.input_ids:
            owner = ("input", tracer.input_ids[key])
        elif key in created:
            if key not in output_positions:
                continue
            owner = ("output", output_positions[key])
        else:
            owner = ("captured", t)
        final = t._grad
        if final is None:
            record.grad_slots.append((owner, None))
        elif id(final) in tracer.input_ids:
            record.grad_slots.append((owner, ("input", tracer.input_ids[id(final)])))
        elif id(final) in created:
            record.grad_slots.append((owner, ("value", results.of(tracer.read(final)))))
        elif _is_own_captured_grad(tracer, final, t):
            continue
        else:
            record.grad_slots.append((owner, ("object", final)))
    return slot_finals


def _record_writes(tracer: Tracer, record: TraceRecord) -> list:
    """Writebacks into outside storage, and the version bumps a replay repeats for them."""
    writebacks = []
    for storage, where in tracer.external.items():
        count = tracer.storage_writes.get(storage, 0)
        if not count:
            continue
        writebacks.append((tracer.storage_value[storage], storage))
        if where[0] == "input":
            record.version_bumps.append((("input", where[1]), count))
        else:
            record.version_bumps.append((where[2], count))
    _check_shared_memory(tracer, writebacks)
    return writebacks



def _is_own_captured_grad(tracer: Tracer, grad: Tensor, owner: Tensor) -> bool:
    """The slot still holds the gradient tensor the call found there (updated in place)."""
    return any(source[0] == "grad" and source[1] is owner and owner._grad is grad for source in tracer.captured)


def _output_info(tracer: Tracer, t: Tensor):
    """(requires_grad, name of a released grad_fn to show) for a tensor a replay returns."""
    fn = t.grad_fn
    if fn is None:
        return (t._requires_grad, None)
    if graph_is_live(fn) and not graph_freed(fn, tracer.outside_nodes):
        tracer.fail("it returns a tensor whose autograd graph is still live, and a replay builds no graph; "
                    "call backward() inside the compiled function (compile the whole training step), "
                    "return a detached tensor, or run it under no_grad()")
        return (True, None)
    return (True, fn.name())


def _graph_tensors(flat_outputs) -> set:
    """Ids of tensors that outputs or their graphs still reference (saved tensors, leaves, and the
    bases of views among them)."""
    ids = set()

    def add(t):
        while t is not None and id(t) not in ids:
            ids.add(id(t))
            t = t._base

    for obj in flat_outputs:
        if isinstance(obj, Tensor):
            add(obj._base)
    for node in walk([obj.grad_fn for obj in flat_outputs if isinstance(obj, Tensor) and obj.grad_fn is not None]):
        if type(node) is AccumulateGrad:
            add(node.variable)
            continue
        for value in (node._saved or {}).values():
            if type(value) is SavedTensor and value.tensor is not None:
                add(value.tensor)
    return ids


def _escapes(tracer: Tracer, flat_outputs, slot_finals: set) -> list:
    """Why the call cannot replay, one reason per tensor the call rebound that something outside still
    holds (and a replay would not update): a tensor made inside, or an argument view whose history an
    in-place op inside rebuilt."""
    allowed = {id(o) for o in flat_outputs if isinstance(o, Tensor)} | _graph_tensors(flat_outputs) | slot_finals
    escaped = []
    for ref in tracer.created:
        t = ref()
        if t is None or id(t) in allowed:
            continue
        what = f"{t.dtype.name}{list(t.shape)}"
        if id(t) in tracer.input_ids:
            escaped.append(f"argument {tracer.input_ids[id(t)]} (a {what} view of another tensor) was changed in place "
                           "inside the function while autograd recorded it, which gives the view a new history; a "
                           "replay would not give the caller's view that history. Pass the base tensor and take the "
                           "view inside the function")
        else:
            escaped.append(f"a {what} tensor made inside the function is still referenced after it returned (kept in "
                           "outside state), and a replay would not update it; return it instead")
    return escaped


def _check_shared_memory(tracer: Tracer, writebacks) -> None:
    """Refuse in-place updates to a captured tensor whose memory another captured tensor shares
    (found by sweeping the arrays' memory bounds in address order)."""
    written = {target for _, target in writebacks}
    spans = []
    for storage, where in tracer.external.items():
        if where[0] == "captured":
            start, end = byte_bounds(where[2]._data)
            if end > start:
                spans.append((start, end, storage))
    spans.sort()
    reach_end, reach_storage = -1, None
    for start, end, storage in spans:
        if start < reach_end and (storage in written or reach_storage in written):
            tracer.fail("an in-place update inside a compiled function writes memory that another tensor it "
                        "reads also uses (a view or .data of it); replay keeps them apart, so use one tensor")
            return
        if end > reach_end:
            reach_end, reach_storage = end, storage
