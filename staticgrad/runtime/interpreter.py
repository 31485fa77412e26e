"""Run a Program: bind a call's arrays to slots, run each step's kernel over arena views,
write back in-place updates, hand back the results.

This is the plain interpreter: the oracle every faster way of running a program must match.
"""

from __future__ import annotations

import numpy as np

from staticgrad.errors import PlanError
from staticgrad.ops import OPS
from staticgrad.ops.quiet import restore, silence
from staticgrad.runtime.arena import Arena
from staticgrad.runtime.program import MULTI, OUT, VIEW, Program


class Interpreter:
    """Runs a program step by step. Each call works in an arena of its own from a pool, so that
    calls from several threads at once do not share buffers."""

    def __init__(self, program: Program):
        self.program = program
        self._fresh = [(spec.slot, spec.shape, spec.dtype) for spec in program.buffers if spec.offset is None]
        self._idle = [self._new_template()]
        # an op's working memory is a new array on every call here (the arena's place is the planner's claim)
        self._steps = [(OPS[s.op].forward, s.inputs, s.outputs, dict(s.attrs), s.dynamic, s.mode, s.scratch,
                        OPS[s.op].fills_outputs) for s in program.steps]
        # results that must be copies: constants, and a slot returned a second time (no two results
        # share memory)
        seen = set(program.constants)
        self._copy_results = []
        for slot in program.result_slots:
            self._copy_results.append(slot in seen)
            seen.add(slot)

    def _new_template(self) -> list:
        """Slots filled with a new arena's views and the constants."""
        program = self.program
        self.arena = Arena(program.arena_bytes, program.alignment)  # the newest, for inspection
        template = [None] * program.n_slots
        for spec in program.buffers:
            if spec.offset is not None:
                template[spec.slot] = self.arena.view(spec.offset, spec.shape, spec.dtype)
        for slot, array in program.constants.items():
            template[slot] = array
        return template

    def run(self, inputs: list, captured: list, scalars: list, recycled: list | None = None) -> list:
        program = self.program
        if len(inputs) != len(program.input_slots) or len(captured) != len(program.captured_slots):
            raise PlanError(f"plan expects {len(program.input_slots)} inputs and {len(program.captured_slots)} "
                            f"captured arrays, got {len(inputs)} and {len(captured)}")
        try:
            template = self._idle.pop()
        except IndexError:
            template = self._new_template()
        quiet = silence()  # floating-point errors give nan/inf silently, as in eager
        try:
            return self._run(template, inputs, captured, scalars, recycled)
        finally:
            restore(quiet)
            self._idle.append(template)

    def _run(self, template: list, inputs: list, captured: list, scalars: list, recycled) -> list:
        program = self.program
        env = template.copy()
        for slot, array in zip(program.input_slots, inputs):
            env[slot] = array
        for slot, array in zip(program.captured_slots, captured):
            env[slot] = array
        for slot, shape, dtype in self._fresh:
            env[slot] = np.empty(shape, dtype)
        if recycled is not None:
            for slot, array, copy in zip(program.result_slots, recycled, self._copy_results):
                if array is not None and not copy:
                    env[slot] = array
        for slot, target in program.aliases.items():
            env[slot] = env[target]
        for forward, ins, outs, attrs, dynamic, mode, working, fills in self._steps:
            if dynamic or working:
                attrs = dict(attrs)
                for name, index in dynamic:
                    attrs[name] = scalars[index]
                if working:
                    attrs["scratch"] = np.empty(working[1], np.uint8)
            args = [env[i] for i in ins]
            if mode == OUT:
                forward(*args, out=env[outs[0]], **attrs)
            elif mode == VIEW:
                env[outs[0]] = forward(*args, **attrs)
            elif fills:   # a multi-output forward that writes into the buffers it is handed
                forward(*args, out=tuple(env[slot] for slot in outs), **attrs)
            else:
                for slot, array in zip(outs, forward(*args, **attrs)):
                    env[slot] = np.asarray(array, order="C")  # eager's layout for an owned result; keeps 0-dim
        for source, target in program.writebacks:
            np.copyto(env[target], env[source])
        return [env[s].copy() if copy else env[s] for s, copy in zip(program.result_slots, self._copy_results)]


__all__ = ["MULTI", "OUT", "VIEW", "Interpreter"]
