"""Run a Program through its generated replay function (straight-line NumPy calls).

The source text comes with the Program; this module only execs it, binding arena views,
constants and op forwards, so a saved plan runs without the compiler.
"""

from __future__ import annotations

import re
import threading

import numpy as np

from staticgrad.errors import PlanError
from staticgrad.ops import OPS
from staticgrad.ops.quiet import restore, silence
from staticgrad.ops.reductions import column_sums_into
from staticgrad.runtime.arena import Arena
from staticgrad.runtime.kernels import load_kernel
from staticgrad.runtime.program import KERNEL, Program


def _out_ignored(op: str):
    raise PlanError(f"op {op!r} did not write its result into the planned buffer given as out= (its forward "
                    "returned another array); the replay would read a stale buffer, so it stops here. The op's "
                    "forward must write into out and return it.")


# Names generated code may use for values that print as bare words, its one error, and the
# column-sum helper the sum ops emit.
_NAMESPACE = {"inf": float("inf"), "nan": float("nan"), "dtype": np.dtype, "_out_ignored": _out_ignored,
              "_column_sums": column_sums_into}


# Idle arenas a plan keeps for later calls; calls beyond this many at once build their own.
MAX_IDLE_ARENAS = 8


class CompiledReplay:
    """Runs a program's generated replay function. Every call works in an arena of its own, taken
    from a pool (one per call running at the same time), so threads may replay one plan at once.

    ``build_args``: further arguments of the source's ``build`` (a timed twin's clock and tick)."""

    def __init__(self, program: Program, source: str, build_args: tuple = ()):
        self.program = program
        self.source = source
        self._build_args = build_args
        code, numbers = _code(source)
        namespace = dict(_NAMESPACE)
        namespace.update(numbers)
        exec(code, namespace)
        self._build = namespace["build"]
        self._forwards = {name: OPS[name].forward for name in {s.op for s in program.steps if s.mode != KERNEL}}
        self._kernels = {name: load_kernel(name, source) for name, source in program.kernels.items()}
        self._idle = [self._new_replay()]
        self._no_recycling = [None] * len(program.result_slots)
        self._n_inputs = len(program.input_slots)
        self._n_captured = len(program.captured_slots)

    def _new_replay(self):
        """The replay function bound to a new arena's views."""
        program = self.program
        arena = Arena(program.arena_bytes, program.alignment)
        views = {spec.slot: arena.view(spec.offset, spec.shape, spec.dtype)
                 for spec in program.buffers if spec.offset is not None}
        views.update(arena.working_memory(program))
        return self._build(views, program.constants, self._forwards, self._kernels, np, *self._build_args)

    def release_idle_arenas(self) -> None:
        """Free the arenas no call is using now; a later call makes itself a new one. For a program
        that another now runs in its place (a compiled model's backward program, once the loss's
        backward through it is recorded whole), whose arena would otherwise be held for nothing."""
        self._idle.clear()

    def run(self, inputs: list, captured: list, scalars: list, recycled: list | None = None) -> list:
        """Results as arrays; ``recycled[k]`` (optional) is an array result k may be written into."""
        if len(inputs) != self._n_inputs or len(captured) != self._n_captured:
            raise PlanError(f"plan expects {self._n_inputs} inputs and {self._n_captured} captured arrays, "
                            f"got {len(inputs)} and {len(captured)}")
        idle = self._idle
        try:
            replay = idle.pop()  # atomic: no two calls get one arena
        except IndexError:
            replay = self._new_replay()
        quiet = silence()  # floating-point errors give nan/inf silently, as in eager
        try:
            return replay(inputs, captured, scalars, recycled or self._no_recycling)
        finally:
            restore(quiet)
            if len(idle) < MAX_IDLE_ARENAS:
                idle.append(replay)


# ---- compiled code, shared by sources that differ only in their numbers ---------------------------

# A number token outside a string literal (strings are matched first and kept). Not a number that
# is part of a name (b106), follows a dot, or runs on into letters, dots or digits (1j, 0x1f, 1_0):
# those stay in the template as they are.
_TOKEN = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""   # a string literal, or
                    r"""|(?<![\w.])(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?![\w.])""")   # a number not in a name
_CODES: dict = {}          # template source -> code object
_LINES: dict = {}          # source line -> (the text around its numbers, the numbers)
_KEPT = 4096
_CODES_LOCK = threading.Lock()


def _code(source: str) -> tuple:
    """(code, names): ``source`` with each number token replaced by a name (``_sgN0``, ``_sgN1``...)
    compiled once per template, and the names bound to the numbers. A name evaluates to the object
    the literal would, so the code computes exactly what ``source`` does; sources that differ only in
    numbers (a new batch size: its shapes and element counts) share one compile. Lines are split
    once each (most lines recur from one batch size to the next); a source whose string literals
    could span lines is compiled as it is."""
    if "\"\"\"" in source or "'''" in source or "\\\n" in source:
        return compile(source, "<staticgrad replay>", "exec"), {}
    numbers = {}
    lines = []
    for line in source.split("\n"):
        split = _LINES.get(line)
        if split is None:
            split = _split_numbers(line)
            if len(_LINES) >= _KEPT:
                _LINES.clear()
            _LINES[line] = split
        texts, values = split
        if not values:
            lines.append(line)
            continue
        parts = [texts[0]]
        for value, text in zip(values, texts[1:]):
            key = f"_sgN{len(numbers)}"
            numbers[key] = value
            parts.append(key)
            parts.append(text)
        lines.append("".join(parts))
    template = "\n".join(lines)
    with _CODES_LOCK:
        code = _CODES.get(template)
    if code is None:
        code = compile(template, "<staticgrad replay>", "exec")
        with _CODES_LOCK:
            if len(_CODES) >= 64:
                _CODES.clear()
            _CODES[template] = code
    return code, numbers


def _split_numbers(line: str) -> tuple:
    """(the texts between a line's number tokens, the numbers' values)."""
    texts, values, position = [], [], 0
    for match in _TOKEN.finditer(line):
        text = match.group(2)
        if text is None:
            continue   # a string literal: kept whole
        texts.append(line[position:match.start()])
        values.append(int(text) if text.isdigit() else float(text))
        position = match.end()
    texts.append(line[position:])
    return tuple(texts), tuple(values)
