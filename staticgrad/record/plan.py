"""A compiled plan as users see it: the recorded IR, the buffer plan, and ``replay``.

``replay`` binds a call's tensors to the program's slots (arguments by value, captured state by
reference), runs it, and leaves the state an eager call would: new ``.grad`` tensors, parameters
and optimizer buffers updated in place (version counters bumped), fresh output tensors.
"""

from __future__ import annotations

from sys import getrefcount
from typing import NamedTuple

from staticgrad._eager.node import ReleasedNode
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Epoch, GradEpoch, bump_grad_epoch
from staticgrad.inspect import plan_report
from staticgrad.record.profiling import profile_plan
from staticgrad.record.trace_record import grad_state
from staticgrad.record.trees import rebuild_outputs

_MISSING = object()



class Bound(NamedTuple):
    """What a program run reads: argument arrays, captured arrays, replay-time scalar values."""

    inputs: list
    captured: list
    scalars: list

class Plan:
    """One recording of a compiled function, planned and ready to replay; or, when the trace found
    something a replay cannot repeat (``failure``), the record of why, with nothing to replay."""

    def __init__(self, record, key, *, graph=None, unfused_graph=None, program=None, compiled_replay=None,
                 tree=None, keep=(), global_guards=(), pass_report=(), epoch=0, roles=None, backward=None):
        self.record = record
        self.signature = key
        self.graph = graph
        self.unfused_graph = unfused_graph
        self.program = program
        self.compiled_replay = compiled_replay
        self.pass_report = pass_report
        self.roles = roles or {}   # external value -> "parameter", "optimizer state"... (for inspection)
        self.backward = backward   # record.backward.CompiledBackward when the outputs keep a graph
        self.failure = record.failure
        self.replayable = record.failure is None
        self.escaped = False
        self.reason = record.failure
        if not self.replayable:
            return
        self._tree = tree
        self._keep = keep
        self._globals = global_guards
        self._epoch = epoch
        self._grad_epoch = -1   # re-checked at the first replay when a guard reads a .grad
        self._grad_guards = [(guard.subject, guard.expected) for guard in record.state_guards if guard.reads_grad]
        self._captured = record.captured
        self._captured_tensors = [src[1] for src in record.captured if src[0] == "tensor"]
        self._all_plain_captures = len(self._captured_tensors) == len(record.captured)
        # (a captured tensor's strides too: they fix the layout of views the program makes of it,
        # which a compiled model's node saves; its backward recordings key them by its plan)
        self._captured_meta = [(t, t._data.shape, t._data.strides, t._data.dtype, t._requires_grad)
                               for t in self._captured_tensors]
        self._scalar_getters = record.scalar_getters
        # Replay's bookkeeping, precomputed: version bumps of captured tensors and of arguments.
        self._bumps = [(target._version_counter, count) for target, count in record.version_bumps
                       if type(target) is not tuple]
        self._input_bumps = [(target[1], count) for target, count in record.version_bumps if type(target) is tuple]
        # New .grad tensors of captured tensors whose gradient is a whole buffer of its own (so an old
        # gradient may be recycled for it); every other gradient slot goes through the general loop.
        self._fresh_grads, self._other_grads = [], []
        for owner, final in record.grad_slots:
            if (owner[0] == "captured" and final is not None and final[0] == "value"
                    and is_fresh_result(program, final[1])):
                self._fresh_grads.append((owner[1], final[1]))
            else:
                self._other_grads.append((owner, final))
        self._written = [None] * len(graph.results)  # the arrays this plan last gave each result
        self._nodes = {}
        for spec in record.outputs:
            if spec[0] == "value" and spec[2][1] is not None:
                self._nodes.setdefault(spec[2][1], ReleasedNode(spec[2][1]))

    def mark_escaped(self, escapes: list) -> None:
        self.replayable = False
        self.escaped = True
        self.reason = escapes[0]

    # ---- guards ---------------------------------------------------------------------------------

    def guards_hold(self, flat: list) -> bool:
        for holder, name, obj in self._globals:
            current = holder.get(name, _MISSING) if name is not None else _cell(holder)
            if current is not obj:
                return False
        for index, expected in self.record.input_guards:
            if grad_state(flat[index]) != expected:
                return False
        if self._epoch != Epoch.value:
            if not self._state_guards_hold():
                return False
            self._epoch, self._grad_epoch = Epoch.value, GradEpoch.value
        elif self._grad_guards and self._grad_epoch != GradEpoch.value:
            for t, expected in self._grad_guards:   # one loop: a step reads many .grad
                if grad_state(t) != expected:
                    return False
            self._grad_epoch = GradEpoch.value
        return True

    def failing_guard(self, flat: list) -> str | None:
        """What about a call makes this plan not apply, in words (None if it applies)."""
        for holder, name, obj in self._globals:
            current = holder.get(name, _MISSING) if name is not None else _cell(holder)
            if current is not obj:
                return f"the global or closure variable {name or ''} now names another object"
        for index, expected in self.record.input_guards:
            if grad_state(flat[index]) != expected:
                return f"the .grad of argument {index}"
        for t, shape, strides, dtype, requires_grad in self._captured_meta:
            data = t._data
            if (data.shape != shape or data.strides != strides or data.dtype != dtype
                    or t._requires_grad != requires_grad):
                return f"a captured {dtype} tensor of shape {list(shape)} (its shape, layout, dtype or requires_grad)"
        for guard in self.record.state_guards:
            if not guard.holds():
                return guard.label
        return None

    def _state_guards_hold(self) -> bool:
        for t, shape, strides, dtype, requires_grad in self._captured_meta:
            data = t._data
            if (data.shape != shape or data.strides != strides or data.dtype != dtype
                    or t._requires_grad != requires_grad):
                return False
        return all(guard.holds() for guard in self.record.state_guards)

    # ---- replay --------------------------------------------------------------------------------

    def bind(self, flat: list, copy: bool = True) -> Bound:
        """The arrays a run of this plan's program reads for the argument tensors ``flat``: inputs,
        captured state (copied, unless ``copy`` is False, so that a run leaves the tensors alone)
        and the replay-time scalars' current values. ``Interpreter(program).run(*plan.bind(flat))``
        runs any program of this recording, e.g. the unfused one, as an oracle for the replay."""
        captured = self._bind_captured(flat)
        return Bound([t._data for t in flat], [a.copy() for a in captured] if copy else captured,
                     [g() for g in self._scalar_getters])

    def _bind_captured(self, flat: list) -> list:
        if self._all_plain_captures:
            return [t._data for t in self._captured_tensors]
        arrays = []
        for kind, ref in self._captured:
            if kind == "tensor":
                arrays.append(ref._data)
            elif kind == "grad":
                arrays.append(ref._grad._data)
            else:
                arrays.append(flat[ref]._grad._data)
        return arrays

    def _recyclable_grads(self) -> list | None:
        """Old ``.grad`` arrays that new gradients may overwrite: those nothing but their parameter
        can reach (checked with reference counts, as PyTorch's AccumulateGrad checks use counts),
        so the reuse is unobservable; it saves the allocation and the memory of a second copy.
        Only arrays this plan wrote itself are taken, so their layout is known to fit."""
        recycled = None
        written = self._written
        for target, index in self._fresh_grads:
            grad = target._grad
            if (grad is None or grad._data is not written[index] or getrefcount(grad) != _GRAD_REFS
                    or getrefcount(grad._data) != _ARRAY_REFS):
                continue
            if recycled is None:
                recycled = [None] * len(written)
            recycled[index] = grad._data
        return recycled

    def replay(self, flat: list, call: tuple | None = None):
        """Run the plan on argument tensors ``flat``; ``call`` is the call's (args, kwargs), which
        a compiled model's backward keeps to rebuild its graph for a double backward."""
        record = self.record
        recycled = self._recyclable_grads() if self._fresh_grads else None
        scalars = [g() for g in self._scalar_getters]
        results = self.compiled_replay.run([t._data for t in flat], self._bind_captured(flat), scalars, recycled)
        for counter, count in self._bumps:
            counter[0] += count
        for index, count in self._input_bumps:
            flat[index]._version_counter[0] += count
        make = Tensor._make
        written = self._written
        for target, index in self._fresh_grads:
            old = target._grad
            if old is None:
                bump_grad_epoch()  # guards that read this .grad (of this or another plan) must be re-checked
            elif recycled is not None and recycled[index] is not None:
                old._version_counter[0] = 0  # as a new gradient tensor would be
                continue
            target._grad = make(results[index], False, None)
            written[index] = results[index]
        leaves = []
        for spec in record.outputs:
            kind = spec[0]
            if kind == "value":
                requires_grad, node_name = spec[2]
                t = Tensor._make(results[spec[1]], requires_grad, self._nodes.get(node_name))
                leaves.append(t)
            elif kind == "input":
                leaves.append(flat[spec[1]])
            elif kind == "same":
                leaves.append(leaves[spec[1]])
            else:
                leaves.append(spec[1])
        for owner, final in self._other_grads:
            kind = owner[0]
            target = owner[1] if kind == "captured" else flat[owner[1]] if kind == "input" else leaves[owner[1]]
            new = _grad_value(final, results, flat)
            if kind == "captured" and (new is None) != (target._grad is None):
                bump_grad_epoch()  # guards that read this .grad (of this or another plan) must be re-checked
            target._grad = new
        if self.backward is not None:
            self.backward.attach(leaves, results, flat, scalars, call)
        return rebuild_outputs(self._tree, leaves)

    # ---- inspection -------------------------------------------------------------------------

    def to_networkx(self):
        """The recorded program as a ``networkx.DiGraph`` (nodes carry op, shape and dtype)."""
        return self.graph.to_networkx()

    @property
    def buffers(self) -> list:
        """Every buffer: name, shape, dtype, nbytes, kind, producer op, first and last use, offset."""
        return plan_report.buffers(self)

    @property
    def kernels(self) -> list:
        """The fused kernels: (name, the ops each fuses, number of loops)."""
        return plan_report.kernels(self)

    def describe(self) -> str:
        """The buffer table, the fused kernels, and "arena, lower bound (ratio), eager peak"."""
        return plan_report.describe(self)

    def render(self, path: str) -> None:
        """Draw the buffer-lifetime chart and the replayed program into an image file."""
        plan_report.render(self, path)

    def profile(self, *args, calls: int = 20, warmup: int = 1, **kwargs):
        """Time every step of this plan's program (and of its backward program, for a compiled
        model) over ``calls`` calls with the arguments of a call this plan replays, after ``warmup``
        untimed ones. Runs on copies of the captured state: parameters, optimizer state and
        ``.grad`` stay as they are. Returns a ``Profile``: ``print`` it for the table, or
        ``save_chrome_trace(path)`` for Perfetto."""
        return profile_plan(self, args, kwargs, calls, warmup)

    @property
    def arena_bytes(self) -> int:
        return self.program.arena_bytes

    @property
    def lower_bound_bytes(self) -> int:
        return self.program.lower_bound

    def __repr__(self) -> str:
        if self.graph is None:
            return f"<Plan (eager: {self.failure})>"
        state = "replayable" if self.replayable else f"not replayable: {self.reason or self.failure}"
        return (f"<Plan {len(self.graph.ops)} ops, {len(self.graph.inputs)} inputs, {len(self.graph.captured)} "
                f"captured, arena {self.program.arena_bytes} B; {state}>")


# Reference counts of an old gradient nobody else holds, seen from _recyclable_grads: the tensor
# is held by its parameter's slot, a local variable and getrefcount's argument; its array by the
# tensor, the plan's record of what it wrote, and getrefcount's argument.
_GRAD_REFS = 3
_ARRAY_REFS = 3


def is_fresh_result(program, index: int) -> bool:
    """The result is a whole fresh buffer of its own (so it may be written into a recycled array):
    not a view, and not a slot an earlier result already returned (a later one gets a copy)."""
    slot = program.result_slots[index]
    if program.result_slots.index(slot) != index:
        return False
    return any(spec.slot == slot and spec.offset is None for spec in program.buffers)


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _grad_value(final, results, flat):
    if final is None:
        return None
    kind, ref = final
    if kind == "value":
        return Tensor._make(results[ref], False, None)
    if kind == "input":
        return flat[ref]
    return ref
