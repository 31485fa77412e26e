"""Run a program through its timed twin: the generated replay function with a clock reading
between its lines (``replay_source(program, timed=True)``), for the profiler. The plain replay
is a separate function and carries no timer."""

from __future__ import annotations

import itertools
import time

from staticgrad.runtime.program import Program
from staticgrad.runtime.replay import CompiledReplay


class TimedReplay:
    """Runs a timed replay source. ``run`` returns the results and that call's clock readings
    (ns): at its start, after binding, after each step, after the writebacks. One call at a time."""

    def __init__(self, program: Program, timed_source: str):
        self._readings = []
        self._replay = CompiledReplay(program, timed_source, (time.perf_counter_ns, self._readings.append))

    def run(self, inputs: list, captured: list, scalars: list) -> tuple:
        readings = self._readings
        readings.clear()
        results = self._replay.run(inputs, captured, scalars)
        return results, list(readings)


_TIMER_LINES = 256


def timer_cost_ns(repeats: int = 7) -> float:
    """What one reading (``_tick(_clock())``, as the timed source writes it) adds to the interval
    it ends: the median gap between readings with nothing between them."""
    source = "def readings(_clock, _tick):\n" + "    _tick(_clock())\n" * _TIMER_LINES
    namespace = {}
    exec(compile(source, "<staticgrad timer>", "exec"), namespace)
    gaps = []
    for _ in range(repeats):
        ticks = []
        namespace["readings"](time.perf_counter_ns, ticks.append)
        gaps += [b - a for a, b in itertools.pairwise(ticks)]
    gaps.sort()
    return float(gaps[len(gaps) // 2])
