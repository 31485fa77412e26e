"""Compile time of the tiny bench step: trace + passes + plan + code generation, and Numba's
compile of the fused kernels at the first replay; cold (empty kernel cache) and warm (a second
process loading the kernels from the on-disk cache). Then what a new batch size costs on a warm
kernel cache (a partial last batch): its first two calls against an eager step at that size.

    python benchmarks/compile_time.py [--size tiny] [--new-batch-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def measure(size_name: str) -> dict:
    import staticgrad
    from staticgrad.bench.models import SIZES, batches, build, initial_weights

    size = SIZES[size_name]
    _, _, step = build(staticgrad, size, initial_weights(size))
    compiled = staticgrad.compile(step)
    data = [(staticgrad.tensor(x), staticgrad.tensor(y)) for x, y in batches(size, 4)]
    calls = []
    for x, y in data[:3] + data[:3]:
        started = time.perf_counter()
        compiled(x, y)
        calls.append(time.perf_counter() - started)
    steady = sorted(calls[3:])[1]
    plan = next(p for p in compiled.plans if p.replayable)
    return {"trace_and_plan_seconds": compiled.stats.compile_seconds / compiled.stats.traces,
            "first_replay_seconds": calls[2], "steady_replay_seconds": steady,
            "numba_seconds": calls[2] - steady,
            "compile_seconds": compiled.stats.compile_seconds / compiled.stats.traces + calls[2] - steady,
            "kernels": len(plan.program.kernels)}


def measure_new_batch(size_name: str, new_batch: int | None = None, repeats: int = 15,
                      eager_steps: int = 25) -> dict:
    """A compiled step warmed up (replaying) at the size's batch, then called twice with another batch
    size, a partial last batch: those two calls (a trace and a first replay) together, against an eager
    step of the same model at that batch size. Side by side in one process: each repeat builds a new
    model and compiled step (the kernels stay loaded, as in any process past its first epoch), then
    times eager steps at the new size; figures are medians over the repeats."""
    import numpy as np

    import staticgrad
    from staticgrad.bench.models import SIZES, build, initial_weights

    size = SIZES[size_name]
    new_batch = new_batch or max(1, size.batch * 5 // 8)
    rng = np.random.default_rng(2)

    def batch(n):
        return (staticgrad.tensor(rng.standard_normal((n, size.features), dtype=np.float32)),
                staticgrad.tensor(rng.standard_normal((n, size.outputs), dtype=np.float32)))

    weights = initial_weights(size)
    full, partial = batch(size.batch), batch(new_batch)
    _, _, eager_step = build(staticgrad, size, weights)
    pairs, firsts, seconds, eager = [], [], [], []
    for repeat in range(repeats + 1):   # the first repeat warms up (loads the kernels), untimed
        _, _, step = build(staticgrad, size, weights)
        compiled = staticgrad.compile(step)
        for _ in range(3):
            compiled(*full)
        started = time.perf_counter()
        compiled(*partial)
        middle = time.perf_counter()
        compiled(*partial)
        ended = time.perf_counter()
        steps = []
        for _ in range(eager_steps):
            t = time.perf_counter()
            eager_step(*partial)
            steps.append(time.perf_counter() - t)
        if repeat:
            firsts.append(middle - started)
            seconds.append(ended - middle)
            pairs.append(ended - started)
            eager.append(statistics.median(steps))
    pair, step_seconds = statistics.median(pairs), statistics.median(eager)
    return {"batch": size.batch, "new_batch": new_batch, "first_seconds": statistics.median(firsts),
            "second_seconds": statistics.median(seconds), "first_two_seconds": pair,
            "eager_step_seconds": step_seconds, "ratio": pair / step_seconds, "repeats": repeats}


def new_batch_line(r: dict) -> str:
    return (f"new batch size ({r['new_batch']} after {r['batch']}, warm kernel cache): first two calls "
            f"{r['first_two_seconds'] * 1e3:.2f} ms (trace {r['first_seconds'] * 1e3:.2f} ms, then "
            f"{r['second_seconds'] * 1e3:.2f} ms) = {r['ratio']:.1f} eager steps of "
            f"{r['eager_step_seconds'] * 1e3:.3f} ms "
            f"(medians of {r['repeats']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--new-batch-only", action="store_true",
                        help="only the cost of a new batch size, in this process (its kernel cache)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from staticgrad.bench.runner import machine_line

    print(machine_line())
    if args.new_batch_only:
        print(new_batch_line(measure_new_batch(args.size)))
        return
    if args.child:
        result = measure(args.size)
        result["new_batch"] = measure_new_batch(args.size)
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, STATICGRAD_CACHE_DIR=cache)
        runs = []
        for label in ("cold", "warm"):
            out = subprocess.run([sys.executable, __file__, "--size", args.size, "--child"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            runs.append((label, json.loads(out.strip().splitlines()[-1])))
    for label, r in runs:
        print(f"{label}: compile {r['compile_seconds']:.2f} s "
              f"(trace + passes + plan {r['trace_and_plan_seconds']:.3f} s, "
              f"Numba {r['numba_seconds']:.2f} s for {r['kernels']} kernels); steady replay "
              f"{r['steady_replay_seconds'] * 1e3:.3f} ms")
    print(new_batch_line(runs[-1][1]["new_batch"]))


if __name__ == "__main__":
    main()
