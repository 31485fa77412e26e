"""Run a Program through its generated replay function (straight-line NumPy calls).

The source text comes with the Program; this module only execs it, binding arena views,
constants and op forwards, so a saved plan runs without the compiler.
"""

from __future__ import annotations

import numpy as np

from staticgrad.errors import PlanError
from staticgrad.ops import OPS
from staticgrad.runtime.arena import Arena
from staticgrad.runtime.kernels import load_kernel
from staticgrad.runtime.program import KERNEL, Program

# Names generated code may use for values that print as bare words.
_NAMESPACE = {"inf": float("inf"), "nan": float("nan"), "dtype": np.dtype}


class CompiledReplay:
    def __init__(self, program: Program, source: str):
        self.program = program
        self.source = source
        self.arena = Arena(program.arena_bytes, program.alignment)
        views = {spec.slot: self.arena.view(spec.offset, spec.shape, spec.dtype)
                 for spec in program.buffers if spec.offset is not None}
        namespace = dict(_NAMESPACE)
        exec(compile(source, "<staticgrad replay>", "exec"), namespace)
        forwards = {name: OPS[name].forward for name in {s.op for s in program.steps if s.mode != KERNEL}}
        kernels = {name: load_kernel(name, source) for name, source in program.kernels.items()}
        self._replay = namespace["build"](views, program.constants, forwards, kernels, np)
        self._no_recycling = [None] * len(program.result_slots)
        self._n_inputs = len(program.input_slots)
        self._n_captured = len(program.captured_slots)

    def run(self, inputs: list, captured: list, scalars: list, recycled: list | None = None) -> list:
        """Results as arrays; ``recycled[k]`` (optional) is an array result k may be written into."""
        if len(inputs) != self._n_inputs or len(captured) != self._n_captured:
            raise PlanError(f"plan expects {self._n_inputs} inputs and {self._n_captured} captured arrays, "
                            f"got {len(inputs)} and {len(captured)}")
        return self._replay(inputs, captured, scalars, recycled or self._no_recycling)
