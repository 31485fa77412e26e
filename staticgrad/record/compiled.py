"""``@staticgrad.compile``: record a function on its first call, replay the recording after.

A call's signature (argument shapes, dtypes, requires_grad, grad mode, Python values) picks the
cached plans; each plan's guards (captured tensors, ``.grad`` states, optimizer structure,
module modes, globals the function reads) decide whether it may replay. Anything else traces:
the call runs eagerly while the tracer records it. A replay leaves exactly eager's observable
state: outputs, parameters, ``.grad``, optimizer state.
"""

from __future__ import annotations

import dis
import functools
import inspect
import threading
import time
import types
import warnings

import numpy as np

from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Epoch, Tracing
from staticgrad.compiler.codegen import generate
from staticgrad.compiler.generic import PassCache
from staticgrad.compiler.passes import run_pipeline
from staticgrad.compiler.planner import plan_program
from staticgrad.errors import TraceError
from staticgrad.nn.module import Module
from staticgrad.ops.quiet import errors_trapped
from staticgrad.record.backward import PARTITIONS, Unsupported, compile_backward, record_backward
from staticgrad.record.compiled_module import CompiledModule
from staticgrad.record.escaped import EscapedPlan
from staticgrad.record.finish import finish
from staticgrad.record.float_arguments import as_replay_scalars, float_arguments, same_recording, without_float_values
from staticgrad.record.plan import Plan
from staticgrad.record.scalars import CallFloats
from staticgrad.record.stats import CompileStats
from staticgrad.record.tracer import Tracer
from staticgrad.record.trees import flatten_outputs
from staticgrad.runtime.replay import CompiledReplay

FALLBACKS = ("error", "eager")


# Replayable plans one compiled function keeps (as PyTorch's Dynamo caps its recompiles at 8).
MAX_PLANS = 8


def compile(fn=None, *, fallback: str = "error", max_plans: int = MAX_PLANS, partition: str = "auto"):
    """Compile ``fn`` (a model function or a whole training step) for record-and-replay.

    ``fallback="error"`` raises ``staticgrad.TraceError`` when a call does something a replay
    cannot repeat; ``fallback="eager"`` runs such calls eagerly instead (warning once).
    ``max_plans`` caps the plans kept: past it, calls that would trace a new plan (a new batch
    size, a changed module...) run eagerly, with one warning naming what keeps changing.
    ``partition`` decides what a compiled model keeps per call for its backward: ``"auto"``
    recomputes cheap elementwise chains in the backward where that keeps fewer bytes (a GELU's
    output from its input); ``"eager"`` keeps exactly what eager's graph keeps."""
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    if not isinstance(max_plans, int) or max_plans < 1:
        raise ValueError(f"max_plans must be a positive int, got {max_plans!r}")
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}, got {partition!r}")
    if fn is None:
        return functools.partial(compile, fallback=fallback, max_plans=max_plans, partition=partition)
    if isinstance(fn, Module):
        return CompiledModule(fn, CompiledFunction(fn, fallback, max_plans, partition))
    return CompiledFunction(fn, fallback, max_plans, partition)


class CompiledFunction:
    def __init__(self, fn, fallback: str, max_plans: int = MAX_PLANS, partition: str = "auto"):
        self.fn = fn
        self.fallback = fallback
        self.max_plans = max_plans
        self.partition = partition
        self.stats = CompileStats()
        self._cache: dict = {}
        self._warned = False
        self._capped = False
        self._last_plan = None
        self._lock = threading.Lock()   # traces in several threads update the cache one at a time
        self._passes = PassCache()      # pass results per structure: a new batch size reuses them
        self._name = getattr(fn, "__qualname__", None) or type(fn).__name__
        if not isinstance(fn, Module):
            functools.update_wrapper(self, fn)

    @property
    def plan(self):
        """The plan the latest call replayed (or traced, if it traced): the one to inspect."""
        return self._last_plan

    @property
    def plans(self) -> list:
        """Every plan traced so far, one per signature (and per guard state) seen."""
        plans = {id(plan): plan for entries in self._cache.values() for plan in entries}
        return list(plans.values())

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        if Tracing.tracer is not None:
            return self.fn(*args, **kwargs)
        if errors_trapped():
            self.stats.fallbacks += 1
            return self.fn(*args, **kwargs)
        key, flat, keep = signature(args, kwargs)
        floats = float_arguments(args, kwargs)
        if floats:
            CallFloats.values = floats
        entries = self._cache.get(key)
        if entries:
            for plan in entries:
                if plan.failure is not None:
                    self.stats.fallbacks += 1
                    return self.fn(*args, **kwargs)
                if plan.replayable and plan.guards_hold(flat):
                    self.stats.replays += 1
                    self._last_plan = plan
                    return plan.replay(flat, (args, kwargs))
        if floats:
            for plan in self._cache.get(without_float_values(key), ()):
                if plan.guards_hold(flat):
                    self.stats.replays += 1
                    self._last_plan = plan
                    return plan.replay(flat, (args, kwargs))
        if sum(plan.replayable for plan in self.plans) >= self.max_plans:
            self.stats.fallbacks += 1
            if not self._capped:
                self._capped = True
                warnings.warn(f"staticgrad.compile({self._name}) keeps {self.max_plans} plans and runs further new "
                              f"cases eagerly: {self._what_changes(key, flat)}. Keep it steady (pad a last partial "
                              "batch, reuse modules), or compile with a larger max_plans", RuntimeWarning,
                              stacklevel=2)
            return self.fn(*args, **kwargs)
        if floats:
            args, kwargs = as_replay_scalars(args, kwargs)
        return self._trace(key, args, kwargs, flat, keep, bool(floats))

    def _what_changes(self, key, flat) -> str:
        """Why a call matched no plan: the arguments that differ from the newest plan's, or the
        guard the newest plan of this signature failed."""
        entries = self._cache.get(key)
        if entries:
            plan = next((p for p in entries if p.replayable), None)
            label = plan.failing_guard(flat) if plan is not None else None
            return f"{label or 'a guarded state'} changed between calls"
        if not self._cache:
            return "a new call signature"
        return describe_difference(self.fn, next(reversed(self._cache)), key)  # against the newest signature

    def _trace(self, key, args, kwargs, flat, keep, floats: bool = False):
        started = time.perf_counter()
        epoch = Epoch.value  # the call may change guarded state: its plan re-checks before a first replay
        tracer = Tracer(self.fallback, self._name)
        for i, t in enumerate(flat):
            tracer.add_input(t, i)
        previous = Tracing.tracer
        Tracing.tracer = tracer
        try:
            out = self.fn(*args, **kwargs)
            flat_out, tree = flatten_outputs(out)
            backward = (record_backward(tracer, flat, flat_out)
                        if GradMode.enabled and tracer.failure is None else None)
        finally:
            Tracing.tracer = previous
        peak = tracer.memory.peak   # eager's peak, for plan.describe()
        with self._lock:
            return self._add_plan(tracer, key, keep, out, flat_out, tree, peak, epoch, started, floats,
                                  backward, len(flat))

    def _add_plan(self, tracer, key, keep, out, flat_out, tree, peak, epoch, started, floats=False, backward=None,
                  n_inputs=0):
        plan = self._make_plan(tracer, key, keep, flat_out, tree, peak, epoch, backward, n_inputs)
        self._cache.setdefault(key, []).insert(0, plan)
        self._last_plan = plan
        self.stats.traces += 1
        self.stats.compile_seconds += time.perf_counter() - started
        if plan.failure is not None:
            self._fall_back(plan.failure)
        elif floats:
            self._share_over_float_values(key, plan)
        return out

    def _make_plan(self, tracer, key, keep, flat_out, tree, peak, epoch, backward=None, n_inputs=0) -> Plan:
        """The plan of one trace; a failed one (kept, so that its signature runs eagerly) when the
        call cannot be replayed."""
        differentiable = {id(flat_out[i]) for i in backward.outputs} if backward is not None else set()
        record = finish(tracer, flat_out, eager_peak_bytes=peak, differentiable=differentiable)
        if record.failure is not None:
            return Plan(record, key)
        if record.escapes:   # it never replays: the next call traces again (compiled only if inspected)
            entries = self._cache.get(key)
            escaped_before = bool(entries) and entries[0].escaped
            plan = EscapedPlan(record, key, lambda: self._compiled_plan(record, key, keep, tree, epoch, backward,
                                                                        n_inputs))
            if escaped_before:
                plan.failure = record.escapes[0]
            return plan
        return self._compiled_plan(record, key, keep, tree, epoch, backward, n_inputs)

    def _compiled_plan(self, record, key, keep, tree, epoch, backward, n_inputs) -> Plan:
        """The plan of a finished record: passes, buffer plan, replay code and kernels."""
        compiled_backward = None
        forward_graph = record.graph
        if backward is not None:
            try:
                forward_graph, compiled_backward = compile_backward(record.graph, backward, n_inputs, record.captured,
                                                                      record.outputs, self.partition, self.fn)
            except Unsupported as error:
                record.failure = f"its outputs' backward cannot be compiled: {error}"
                return Plan(record, key)
            compiled_backward.stats = self.stats
        graph, report, unfused = run_pipeline(forward_graph, cache=self._passes if backward is None else None)
        if compiled_backward is not None:
            graph, unfused = compiled_backward.share_saved_duplicates(graph, len(record.graph.results), unfused)
        program = plan_program(graph)
        # captured tensors' layouts are guarded (Plan's captured meta): fused kernels may take the
        # C-contiguous ones reshaped
        program.contiguous = frozenset(slot for slot, (kind, source) in zip(program.captured_slots, record.captured)
                                       if kind == "tensor" and source._data.flags.c_contiguous)
        plan = Plan(record, key, graph=graph, unfused_graph=unfused, program=program,
                    compiled_replay=CompiledReplay(program, generate(program)), tree=tree, keep=keep,
                    global_guards=_global_guards(self.fn), pass_report=report, epoch=epoch,
                    roles=_captured_roles(record), backward=compiled_backward)
        if record.escapes:   # compiled for inspection (EscapedPlan): it does not replay
            plan.mark_escaped(record.escapes)
        return plan

    def _share_over_float_values(self, key, plan) -> None:
        """A plan traced with float arguments replays for any values of them once an earlier trace
        with other values recorded the same program (see ``float_arguments``)."""
        shared = without_float_values(key)
        if shared in self._cache:
            return
        for other_key, entries in self._cache.items():
            if other_key not in (key, shared) and without_float_values(other_key) == shared:
                if any(p.replayable and same_recording(p.record, plan.record) for p in entries):
                    self._cache[shared] = [plan]
                    return

    def _fall_back(self, reason: str) -> None:
        if self.fallback == "error":
            raise TraceError(f"staticgrad.compile({self._name}): {reason}. (Or compile with fallback=\"eager\" to "
                             "run such calls eagerly.)")
        if not self._warned:
            self._warned = True
            warnings.warn(f"staticgrad.compile({self._name}) runs eagerly for these inputs: {reason}",
                          RuntimeWarning, stacklevel=3)

    def __repr__(self) -> str:
        return f"<staticgrad.compile of {self._name}: {len(self.plans)} plan(s), {self.stats}>"


def _captured_roles(record) -> dict:
    """What each captured value is, for plan inspection: parameter, optimizer state, gradient."""
    graph = record.graph
    written_by_optimizer = {target for source, target in graph.writebacks
                            if graph.values[source].phase == "optimizer"}
    roles = dict.fromkeys(graph.inputs, "input")
    for vid, (kind, ref) in zip(graph.captured, record.captured):
        if kind != "tensor":
            roles[vid] = "gradient"
        elif ref._requires_grad:
            roles[vid] = "parameter"
        elif vid in written_by_optimizer:
            roles[vid] = "optimizer state"
        else:
            roles[vid] = "captured"
    for vid in graph.constants:
        roles[vid] = "constant"
    return roles


# ---- signatures -----------------------------------------------------------------------------------

_PLAIN = (bool, int, float, str, bytes, type(None))


def signature(args: tuple, kwargs: dict):
    """(hashable key, flat list of argument tensors, objects the key names by identity). A tensor's
    strides are part of it: a trace may decide by layout (PyTorch's matmul backward does)."""
    if not kwargs:
        for a in args:
            if type(a) is not Tensor:
                break
        else:
            key = (GradMode.enabled,) + tuple((a._data.shape, a._data.strides, a._data.dtype, a._requires_grad)
                                              for a in args)
            return key, list(args), ()
    flat, keep = [], []
    key = (GradMode.enabled, _describe(args, flat, keep), _describe(kwargs, flat, keep))
    return key, flat, tuple(keep)


def _describe(obj, flat: list, keep: list):
    if isinstance(obj, Tensor):
        flat.append(obj)
        return ("T", obj._data.shape, obj._data.strides, obj._data.dtype, obj._requires_grad)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__,) + tuple(_describe(x, flat, keep) for x in obj)
    if isinstance(obj, dict):
        return ("dict",) + tuple((k, _describe(v, flat, keep)) for k, v in obj.items())
    if isinstance(obj, _PLAIN):
        return (type(obj).__name__, obj)
    keep.append(obj)
    return ("id", id(obj))


def describe_difference(fn, old_key, new_key) -> str:
    """Which arguments of ``fn`` differ between two call signatures, in words."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    old_args, new_args = _argument_keys(old_key), _argument_keys(new_key)
    if old_key[0] != new_key[0]:
        return "grad mode changed"
    changes = []
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        if a != b:
            name = names[i] if i < len(names) else f"argument {i}"
            changes.append(f"argument '{name}' ({_describe_key(a)} -> {_describe_key(b)})")
    if len(old_args) != len(new_args):
        changes.append(f"the number of arguments ({len(old_args)} -> {len(new_args)})")
    return "; ".join(changes) or "keyword arguments changed"


def _argument_keys(key) -> tuple:
    """Per positional argument descriptions from a signature key (either form signature() makes)."""
    if len(key) == 3 and isinstance(key[1], tuple) and key[1][:1] == ("tuple",):
        return key[1][1:]
    return tuple(("T",) + k for k in key[1:])


def _describe_key(desc) -> str:
    if isinstance(desc, tuple) and desc[:1] == ("T",):
        _, shape, strides, dtype, requires_grad = desc
        contiguous = strides == np.empty(shape, dtype).strides
        return (f"{'x'.join(map(str, shape)) or 'scalar'} {dtype}{', requires_grad' if requires_grad else ''}"
                f"{'' if contiguous else f', strides {strides}'}")
    if isinstance(desc, tuple) and len(desc) == 2 and isinstance(desc[0], str):
        return f"{desc[0]} {desc[1]!r}"
    return str(desc)


@functools.lru_cache(maxsize=256)   # by the code's contents: its instructions decide the answer
def _loaded_globals(code) -> frozenset:
    """Names a code object (and the functions, lambdas and comprehensions inside it) reads as
    globals: not every name in ``co_names``, which also holds attribute names."""
    names = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _loaded_globals(const)
    return frozenset(names)


def _global_guards(fn) -> list:
    """Identity guards on the globals and closure cells ``fn`` reads (modules excepted)."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    guards = []
    namespace = getattr(fn, "__globals__", {})
    for name in sorted(_loaded_globals(code)):
        if name in namespace and not isinstance(namespace[name], types.ModuleType):
            guards.append((namespace, name, namespace[name]))
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            guards.append((cell, None, cell.cell_contents))
        except ValueError:
            pass
    return guards
