"""Compile time of the tiny bench step: trace + passes + plan + code generation, and Numba's
compile of the fused kernels at the first replay; cold (empty kernel cache) and warm (a second
process loading the kernels from the on-disk cache).

    python benchmarks/compile_time.py [--size tiny]
"""

from __future__ import annotations

import argparse
import json
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from staticgrad.bench.runner import machine_line

    print(machine_line())
    if args.child:
        print(json.dumps(measure(args.size)))
        return
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, STATICGRAD_CACHE_DIR=cache)
        runs = []
        for label in ("cold", "warm"):
            out = subprocess.run([sys.executable, __file__, "--size", args.size, "--child"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            runs.append((label, json.loads(out.strip().splitlines()[-1])))
    for label, r in runs:
        print(f"{label}: compile {r['compile_seconds']:.2f} s (trace + passes + plan {r['trace_and_plan_seconds']:.3f} s, "
              f"Numba {r['numba_seconds']:.2f} s for {r['kernels']} kernels); steady replay "
              f"{r['steady_replay_seconds'] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
