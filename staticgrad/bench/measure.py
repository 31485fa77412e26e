"""Timing and memory for the bench, measured side by side in one process.

Systems run in alternating blocks of steps (not one step each, which would make every system
pay for the others' cache misses), repeated in rounds; each system's figure is the median of
its per-step times over all rounds.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc


def interleaved_medians(systems: dict, steps: int, block: int = 25, progress=None) -> dict:
    """{name: median seconds per call} for zero-argument callables, run in alternating blocks."""
    times = {name: [] for name in systems}
    rounds = max(1, steps // block)
    for _ in range(rounds):
        for name, fn in systems.items():
            record = times[name]
            for _ in range(block):
                start = time.perf_counter()
                fn()
                record.append(time.perf_counter() - start)
            if progress is not None:
                progress.update(1)
    return {name: statistics.median(values) for name, values in times.items()}


def peak_bytes(fn, repeats: int = 3) -> int:
    """The most bytes allocated at once during one call of ``fn`` beyond what was live before it
    (NumPy reports its buffers to tracemalloc); the largest over a few calls."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    peak = 0
    try:
        for _ in range(repeats):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            fn()
            peak = max(peak, tracemalloc.get_traced_memory()[1] - before)
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak
