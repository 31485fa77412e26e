"""How tracing and compiling scale with the number of recorded ops: a deep, narrow MLP training
step (SGD with momentum) of growing depth; the deepest records about 10,000 ops.

    python benchmarks/scale.py [--depths 60 120 240 480 700]

For each depth: ops recorded; seconds to trace and compile (passes, plan, code generation) the
step, and to reach the first replay (Numba compiles its kernels there); and the planner's own
time, whose growth per op should stay flat up to a log factor (n log n).
"""

from __future__ import annotations

import argparse
import time

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.compiler.passes import run_pipeline
from staticgrad.compiler.planner import plan_program


def deep_step(depth: int, width: int = 4):
    layers = []
    for _ in range(depth):
        layers += [sg.nn.Linear(width, width), sg.nn.Tanh()]
    model = sg.nn.Sequential(*layers)
    step = training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    return step, (sg.randn(2, width), sg.randn(2, width))


def measure(depth: int) -> dict:
    step, (x, y) = deep_step(depth)
    compiled = sg.compile(step)
    compiled(x, y)                      # first call: optimizer state is created, not replayable
    started = time.perf_counter()
    compiled(x, y)                      # traces and compiles the steady-state plan
    traced = time.perf_counter() - started
    started = time.perf_counter()
    compiled(x, y)                      # first replay: Numba compiles the fused kernels
    first_replay = time.perf_counter() - started
    plan = next(p for p in compiled.plans if p.replayable)
    graph, _, _ = run_pipeline(plan.record.graph)
    started = time.perf_counter()
    plan_program(graph)
    planning = time.perf_counter() - started
    return {"ops": len(plan.record.graph.ops), "trace_and_compile": traced, "first_replay": first_replay,
            "planning": planning}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", nargs="+", type=int, default=[60, 120, 240, 480, 700])
    args = parser.parse_args()
    from staticgrad.bench.runner import machine_line

    print(machine_line())
    print(f"{'depth':>6} {'ops':>7} {'trace+compile s':>16} {'first replay s':>15} {'planning ms':>12} "
          f"{'planning us/op':>15}")
    for depth in args.depths:
        r = measure(depth)
        print(f"{depth:>6} {r['ops']:>7} {r['trace_and_compile']:>16.2f} {r['first_replay']:>15.2f} "
              f"{r['planning'] * 1e3:>12.1f} {r['planning'] / r['ops'] * 1e6:>15.1f}")


if __name__ == "__main__":
    main()
