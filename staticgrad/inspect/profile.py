"""Where a replay's time goes: every step of a program (op or fused kernel) timed over several
calls, as a table sorted by time and as a Chrome trace-event file that Perfetto and
``chrome://tracing`` open.

Steps are timed in each program's timed twin (``replay_source(program, timed=True)``): the same
generated lines with a clock reading between them, a function of its own, so the plain replay
carries no timer. The cost of one reading is measured first and taken off each step; what is
left of it shows as its own row. The plain replay runs the same calls too, for the time per call
without timers.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from staticgrad.compiler.codegen import replay_source
from staticgrad.compiler.ir import fused_members
from staticgrad.runtime.program import KERNEL
from staticgrad.runtime.timed import TimedReplay, timer_cost_ns

# Rows that are no step of the program: parts of a call around its steps.
BINDING = "(binding, result buffers)"
WRITEBACKS = "(writebacks)"
CALL = "(call and return)"
TIMERS = "(timer readings)"
OVERHEAD_ROWS = (BINDING, WRITEBACKS, CALL, TIMERS)


@dataclass(frozen=True)
class Timed:
    """A program to time: its name (the trace's track), program and graph (their steps and ops
    align), its plain replay, and ``bind(previous_results)``: (inputs, captured, scalars) for a
    call, given the results of the program timed before it in the same call (None for the first)."""

    name: str
    program: object
    graph: object
    plain: object
    bind: Callable


@dataclass(frozen=True)
class StepInfo:
    index: int
    op: str              # "fused" for a kernel call
    kernel: str | None   # the fused kernel's name
    members: tuple       # the ops a kernel fuses
    inputs: tuple        # input shapes
    outputs: tuple       # output shapes

    @property
    def label(self) -> str:
        return self.kernel or self.op


@dataclass(frozen=True)
class ProfileRow:
    """One line of a profile: an op, a fused kernel or a part of the call around the steps, in
    one program. Times are per call (means over the timed calls); ``mean_us`` per occurrence;
    ``share`` of the program's timed call."""

    program: str
    name: str
    members: tuple
    count: int
    total_us: float
    mean_us: float
    share: float

    @property
    def label(self) -> str:
        return f"{self.name} ({'+'.join(self.members)})" if self.members else self.name


@dataclass(frozen=True)
class ProgramTimes:
    """The timed calls of one program. ``readings[c]``: the timed twin's clock readings (ns) in
    call c (start, after binding, after each step, after the writebacks); ``spans[c]``: the clock
    just before and after that call's run; ``plain_ns[c]``: the plain replay's time for the call."""

    name: str
    steps: tuple
    readings: np.ndarray
    spans: np.ndarray
    plain_ns: np.ndarray
    timer_ns: float
    n_writebacks: int

    @property
    def step_ns(self) -> np.ndarray:
        """(calls, steps): each step's time with one reading's cost taken off (not below zero)."""
        return np.maximum(np.diff(self.readings[:, 1:-1], axis=1) - self.timer_ns, 0.0)

    @property
    def call_ns(self) -> np.ndarray:
        return (self.spans[:, 1] - self.spans[:, 0]).astype(np.float64)

    def rows(self, by: str = "op") -> list:
        """Ops and kernels (``by="op"``), or single steps (``by="step"``, named ``#index op
        input shapes -> output shapes``), by time per call (largest first); then the parts of a
        call around the steps."""
        if by not in ("op", "step"):
            raise ValueError(f"by must be 'op' or 'step', got {by!r}")
        calls = len(self.readings)
        total = self.call_ns.mean()
        step_ns = self.step_ns
        groups = {}
        for step in self.steps:
            groups.setdefault(step.label if by == "op" else _step_name(step), []).append(step.index)
        rows = []
        for label, indices in groups.items():
            first = self.steps[indices[0]]
            spent = step_ns[:, indices].sum() / calls
            rows.append(self._row(label, first.members, len(indices), spent, total))
        rows.sort(key=lambda row: -row.total_us)
        readings = self.readings.astype(np.float64)
        binding = np.maximum(readings[:, 1] - readings[:, 0] - self.timer_ns, 0.0).mean()
        writebacks = np.maximum(readings[:, -1] - readings[:, -2] - self.timer_ns, 0.0).mean()
        inside = (readings[:, -1] - readings[:, 0]).mean()
        timers = inside - binding - writebacks - step_ns.sum() / calls
        rows.append(self._row(BINDING, (), 1, binding, total))
        if self.n_writebacks:
            rows.append(self._row(WRITEBACKS, (), self.n_writebacks, writebacks, total))
        rows.append(self._row(CALL, (), 1, max(total - inside, 0.0), total))
        rows.append(self._row(TIMERS, (), len(self.steps) + 2, max(timers, 0.0), total))
        return rows

    def _row(self, name, members, count, spent_ns, total_ns) -> ProfileRow:
        return ProfileRow(self.name, name, tuple(members), count, spent_ns / 1e3, spent_ns / 1e3 / count,
                          spent_ns / total_ns if total_ns else 0.0)


class Profile:
    """The result of ``Plan.profile``: ``rows`` (every op and kernel of every program, and the
    parts of a call around the steps), ``kernels`` (the fused kernels' rows), ``table()``, and
    ``chrome_trace()`` / ``save_chrome_trace(path)``. ``programs`` holds the raw readings."""

    def __init__(self, programs: list, calls: int, warmup: int):
        self.programs = programs
        self.calls = calls
        self.warmup = warmup

    @property
    def rows(self) -> list:
        """Every program's ops and kernels, then the parts of its calls around the steps."""
        return [row for program in self.programs for row in program.rows()]

    @property
    def step_rows(self) -> list:
        """Every program's steps one by one (which of 27 matmuls takes the time)."""
        return [row for program in self.programs for row in program.rows("step")]

    @property
    def kernels(self) -> list:
        return [row for row in self.rows if row.members]

    @property
    def total_us(self) -> float:
        """Time per call, every program together, timed (mean over the calls)."""
        return sum(program.call_ns.mean() for program in self.programs) / 1e3

    @property
    def plain_us(self) -> float:
        """Time per call of the plain replays (no timers), every program together."""
        return sum(program.plain_ns.mean() for program in self.programs) / 1e3

    def table(self, limit: int | None = 30, by: str = "op") -> str:
        """Each program's rows as a table, largest first (the ``limit`` largest ops and kernels, or
        steps with ``by="step"``; None: all), with the time of its steps against the replay's own
        overhead."""
        lines = [f"{self.calls} calls timed after {self.warmup} warm-up call(s): {self.total_us:.1f} us per call "
                 f"timed, {self.plain_us:.1f} us without timers (one reading costs "
                 f"{self.programs[0].timer_ns:.0f} ns, taken off each step)"]
        for program in self.programs:
            lines.append("")
            lines += _program_table(program, limit, by)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        names = ", ".join(f"{p.name} {len(p.steps)} steps" for p in self.programs)
        return f"<Profile of {self.calls} calls: {names}; {self.total_us:.1f} us per call>"

    def chrome_trace(self) -> dict:
        """The calls as Chrome trace events (``{"traceEvents": [...]}``, times in microseconds
        from the first call's start): per program a track (thread) with an event per call and,
        inside it, one per step and per part of the call around the steps."""
        origin = min(int(p.spans[0, 0]) for p in self.programs)
        events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "staticgrad replay"}}]
        for tid, program in enumerate(self.programs, start=1):
            events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                           "args": {"name": f"{program.name} program"}})
            events += _program_events(program, tid, origin)
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def save_chrome_trace(self, path) -> None:
        """Write ``chrome_trace()`` as JSON to ``path`` (open it in https://ui.perfetto.dev)."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)


def _step_name(step: StepInfo) -> str:
    shapes = ", ".join("x".join(map(str, shape)) or "()" for shape in step.inputs)
    outputs = ", ".join("x".join(map(str, shape)) or "()" for shape in step.outputs)
    return f"#{step.index} {step.label} {shapes} -> {outputs}"


def _program_table(program: ProgramTimes, limit: int | None, by: str) -> list:
    rows = program.rows(by)
    ops = [row for row in rows if row.name not in OVERHEAD_ROWS]
    around = [row for row in rows if row.name in OVERHEAD_ROWS]
    shown = ops if limit is None else ops[:limit]
    total = program.call_ns.mean() / 1e3
    in_steps = sum(row.total_us for row in ops)
    kernel_steps = [step for step in program.steps if step.kernel]
    kernel_us = sum(row.total_us for row in ops if row.members)
    head = ("op or fused kernel" if by == "op" else "step", "count", "total us", "mean us", "share")
    table = [head]
    for row in shown + around:
        label = row.label if len(row.label) <= 72 else row.label[:69] + "..."
        table.append((label, str(row.count), f"{row.total_us:.1f}", f"{row.mean_us:.2f}", f"{100 * row.share:.1f}%"))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    text = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
            for r in table]
    text.insert(1, "  ".join("-" * w for w in widths))
    if len(shown) < len(ops):
        text.insert(len(shown) + 2, f"... {len(ops) - len(shown)} more " + ("op(s) and kernel(s)" if by == "op"
                                                                            else "step(s)"))
    summary = (f"{program.name} program: {len(program.steps)} steps, {total:.1f} us per call timed "
               f"({program.plain_ns.mean() / 1e3:.1f} us without timers)")
    timers = sum(row.total_us for row in around if row.name == TIMERS)
    overhead = total - in_steps - timers
    return [summary] + text + [
        f"steps {in_steps:.1f} us ({100 * in_steps / total:.1f}%), replay overhead {overhead:.1f} us "
        f"({100 * overhead / total:.1f}%), timer readings {timers:.1f} us; fused kernels: "
        f"{len(kernel_steps)} call(s) of {len({step.kernel for step in kernel_steps})}, {kernel_us:.1f} us"]


def _program_events(program: ProgramTimes, tid: int, origin: int) -> list:
    events = []

    def event(name, category, start, end, args):
        events.append({"name": name, "cat": category, "ph": "X", "ts": (start - origin) / 1e3,
                       "dur": max(end - start, 0) / 1e3, "pid": 1, "tid": tid, "args": args})

    for call, (readings, span) in enumerate(zip(program.readings.tolist(), program.spans.tolist())):
        event(f"{program.name} call {call}", "call", span[0], span[1], {"call": call})
        event(BINDING, "overhead", readings[0], readings[1], {})
        for step in program.steps:
            args = {"step": step.index, "op": step.op, "inputs": [list(s) for s in step.inputs],
                    "outputs": [list(s) for s in step.outputs]}
            if step.kernel:
                args["fuses"] = "+".join(step.members)
            event(step.label, "kernel" if step.kernel else "op", readings[step.index + 1],
                  readings[step.index + 2], args)
        if program.n_writebacks:
            event(WRITEBACKS, "overhead", readings[-2], readings[-1], {"copies": program.n_writebacks})
    return events


def _steps(program, graph) -> tuple:
    kernel_names = iter(program.kernel_calls)
    shapes = program.shapes
    steps = []
    for index, (step, op) in enumerate(zip(program.steps, graph.ops)):
        kernel = next(kernel_names) if step.mode == KERNEL else None
        steps.append(StepInfo(index, step.op, kernel, tuple(fused_members(op)) if kernel else (),
                              tuple(tuple(shapes.get(v, ())) for v in step.inputs),
                              tuple(tuple(shapes.get(v, ())) for v in step.outputs)))
    return tuple(steps)


def measure(programs: list, calls: int, warmup: int = 1) -> Profile:
    """Time ``programs`` (``Timed``, run one after another in each call) over ``calls`` calls after
    ``warmup`` untimed ones; each call runs every program's plain replay and its timed twin."""
    if not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a positive int, got {calls!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative int, got {warmup!r}")
    timed = [TimedReplay(t.program, replay_source(t.program, timed=True)) for t in programs]
    n = len(programs)
    readings = [[] for _ in range(n)]
    spans = [[] for _ in range(n)]
    plain = [[] for _ in range(n)]
    clock = time.perf_counter_ns
    collecting = gc.isenabled()
    gc.disable()   # a collection in the middle of a step would be charged to that step
    try:
        timer = timer_cost_ns()
        for call in range(warmup + calls):
            previous = None
            for k, (program, twin) in enumerate(zip(programs, timed)):
                inputs, captured, scalars = program.bind(previous)
                started = clock()   # each run gets a list of its own: a backward program empties it
                program.plain.run(list(inputs), captured, scalars)
                plain_ns = clock() - started
                started = clock()
                previous, ticks = twin.run(list(inputs), captured, scalars)
                ended = clock()
                if call >= warmup:
                    readings[k].append(ticks)
                    spans[k].append((started, ended))
                    plain[k].append(plain_ns)
    finally:
        if collecting:
            gc.enable()
    return Profile([ProgramTimes(t.name, _steps(t.program, t.graph), np.array(readings[k], dtype=np.int64),
                                 np.array(spans[k], dtype=np.int64), np.array(plain[k], dtype=np.float64), timer,
                                 len(t.program.writebacks))
                    for k, t in enumerate(programs)], calls, warmup)
