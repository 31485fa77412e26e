"""Compile time of a training step per bench model family: the extra time of a compiled step's first
calls until it replays, over as many eager steps (tracing, finishing the record, passes, planning,
code generation, loading the replay and kernels, and Numba's compile of the fused kernels at the first
replay); cold (the model's kernels not on disk; the ops' own loops on disk, as on any machine where
staticgrad ran before) and warm (the kernels on disk too), each in a fresh process.

Compile time is what compiling adds to running the same step eagerly: each process runs one eager
step of a twin model first, so what any first step pays (loading Numba, loading the ops' own loops,
BLAS warm-up) is not counted as compile. That first-step cost is reported on its own, with the ops'
loops not yet on disk (staticgrad's first use on a machine: they compile, once) and on disk (every
later process); so is a compiled step's first calls with nothing on disk at all, as a process's
first work (the first use of staticgrad on a machine, compiling its loops and the model's kernels).
For the MLP, then what a new batch size costs on a warm kernel cache (a partial last batch): its first
two calls against an eager step at that size.

    python benchmarks/compile_time.py [--model mlp cnn lstm transformer] [--size tiny] [--new-batch-only]
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

# The compiler's phases, timed by wrapping the functions compile calls (in staticgrad.record.compiled's
# namespace): (phase, name there). Tracing is the rest of a tracing call; Numba is the first replay's
# time over a steady replay's (kernels compile, or load from the cache, at their first call).
PHASES = (("finish + backward record", "finish"), ("backward partition", "compile_backward"),
          ("passes", "run_pipeline"), ("planning", "plan_program"), ("codegen", "generate"),
          ("load replay + kernels", "CompiledReplay"))


def _timed_phases() -> dict:
    """Wrap the compile phases; returns {phase: seconds}, filled as compiles run."""
    import staticgrad.record.compiled as compiled_module

    totals = dict.fromkeys(name for name, _ in PHASES)
    for phase, attr in PHASES:
        inner = getattr(compiled_module, attr)
        totals[phase] = 0.0

        def timed(*args, _inner=inner, _phase=phase, **kwargs):
            started = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                totals[_phase] += time.perf_counter() - started

        setattr(compiled_module, attr, timed)
    return totals


def measure(family: str, size_name: str = "tiny", mode: str = "compiled") -> dict:
    """In a fresh process, the compiled step's calls until it first replays, against the median eager
    step of a twin model, then steady replays. Compile = those calls' time less as many steady eager
    steps (the last call less a steady replay). ``mode``: "compiled" runs one step of the eager twin
    first (untimed), so that compile is what compiling adds to eager; "compiled-first" runs the
    compiled step as the process's first work; "eager" times the eager twin's first step over its
    steady step, what a fresh process pays without compile (loading Numba and the ops' own loops,
    compiling those not on disk yet, BLAS warm-up)."""
    started = time.perf_counter()
    import staticgrad
    from staticgrad.bench.families import as_tensors, bench_model, build, training_step

    import_seconds = time.perf_counter() - started
    phases = _timed_phases()
    bench = bench_model(family, size_name)
    data = as_tensors(staticgrad, bench.batches(4))
    eager_model, eager_opt = build(staticgrad, bench)
    eager_step = training_step(staticgrad, bench, eager_model, eager_opt)
    if mode in ("eager", "compiled"):
        started = time.perf_counter()
        eager_step(*data[0])
        first = time.perf_counter() - started
        if mode == "eager":
            eager = _median_time(eager_step, data)
            return {"first_step_seconds": first, "eager_step_seconds": eager, "extra_seconds": first - eager}
        for phase in phases:   # the eager step traces nothing, but start from zero all the same
            phases[phase] = 0.0
    model, opt = build(staticgrad, bench)
    compiled = staticgrad.compile(training_step(staticgrad, bench, model, opt))
    calls, cpu, traced = [], [], []
    for i in range(10):
        before = compiled.stats.compile_seconds
        started, started_cpu = time.perf_counter(), time.process_time()
        compiled(*data[i % len(data)])
        calls.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        traced.append(compiled.stats.compile_seconds - before)
        if compiled.stats.replays:
            break
    else:
        raise RuntimeError(f"the compiled {family} step did not replay in {len(calls)} calls: {compiled.plans}")
    steady, steady_cpu = _median_time(compiled, data), _median_time(compiled, data, clock=time.process_time)
    eager_step(*data[0])
    eager_seconds, eager_cpu = _median_time(eager_step, data), _median_time(eager_step, data, clock=time.process_time)
    compile_seconds = sum(calls[:-1]) - (len(calls) - 1) * eager_seconds + calls[-1] - steady
    compile_cpu = sum(cpu[:-1]) - (len(cpu) - 1) * eager_cpu + cpu[-1] - steady_cpu
    in_phases = sum(phases.values())
    plan = next(p for p in compiled.plans if p.replayable)
    return {"family": family, "compile_seconds": compile_seconds, "compile_cpu_seconds": compile_cpu,
            "calls": len(calls),
            "phases": {"tracing": sum(traced) - in_phases - (len(calls) - 1) * eager_seconds, **phases,
                       "Numba (first replay)": calls[-1] - steady},
            "import_seconds": import_seconds, "eager_step_seconds": eager_seconds,
            "steady_replay_seconds": steady, "kernels": len(plan.program.kernels),
            "ops": len(plan.record.graph.ops)}


def _median_time(fn, data: list, count: int = 7, clock=time.perf_counter) -> float:
    seconds = []
    for i in range(count):
        started = clock()
        fn(*data[i % len(data)])
        seconds.append(clock() - started)
    return statistics.median(seconds)


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


def _child(args, family: str, cache: str, mode: str = "compiled", kernels: str = "kernels") -> dict:
    """One fresh process's measure(); staticgrad's kernels in ``cache/kernels`` and Numba's caches
    (of the ops' loops and of the kernels, each by its file's path) in ``cache/numba``."""
    env = dict(os.environ, STATICGRAD_CACHE_DIR=os.path.join(cache, kernels),
               NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
    out = subprocess.run([sys.executable, __file__, "--size", args.size, "--child", family, mode], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def report_line(label: str, r: dict) -> str:
    phases = ", ".join(f"{name} {seconds:.3f}" for name, seconds in r["phases"].items())
    return (f"  {label}: compile {r['compile_seconds']:.2f} s (CPU {r['compile_cpu_seconds']:.2f} s) "
            f"over {r['calls']} calls ({phases}); "
            f"{r['kernels']} kernels, {r['ops']} ops; eager step {r['eager_step_seconds'] * 1e3:.2f} ms, "
            f"replay {r['steady_replay_seconds'] * 1e3:.2f} ms; import staticgrad {r['import_seconds']:.2f} s")


def main() -> None:
    if "--child" in sys.argv:   # staticgrad's import is timed in the child: nothing imports it before
        at = sys.argv.index("--child")
        family, mode, size = sys.argv[at + 1], sys.argv[at + 2], sys.argv[sys.argv.index("--size") + 1]
        print(json.dumps(measure(family, size, mode)))
        return
    from staticgrad.bench.families import FAMILIES
    from staticgrad.bench.runner import machine_line

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["mlp"], choices=list(FAMILIES))
    parser.add_argument("--size", default="tiny", help="the MLP's size")
    parser.add_argument("--new-batch-only", action="store_true",
                        help="only the cost of a new batch size, in this process (its kernel cache)")
    args = parser.parse_args()
    print(machine_line())
    if args.new_batch_only:
        print(new_batch_line(measure_new_batch(args.size)))
        return
    rows = []
    for family in args.model:
        with tempfile.TemporaryDirectory() as cache:   # one empty cache per family
            # nothing on disk: compiles the ops' loops onto disk, and the model's kernels into "first"
            first_ever = _child(args, family, cache, "compiled-first", kernels="first")
            # the ops' loops on disk (staticgrad ran before on this machine), the kernels not (cold),
            # then both (warm)
            cold, warm = _child(args, family, cache), _child(args, family, cache)
            later_use = _child(args, family, cache, "eager")
        with tempfile.TemporaryDirectory() as cache:
            first_use = _child(args, family, cache, "eager")
        print(f"{family}:")
        print(report_line("cold", cold))
        print(report_line("warm", warm))
        print(report_line("nothing on disk, as the process's first work", first_ever))
        print(f"  without compile, a fresh process's first eager step takes {first_use['extra_seconds']:.2f} s "
              f"more than a steady one with the ops' loops not on disk yet, {later_use['extra_seconds']:.2f} s "
              f"with them on disk")
        rows.append((family, cold, warm, first_use, later_use, first_ever))
    if "mlp" in args.model:
        print(new_batch_line(measure_new_batch(args.size)))
    print(f"\n{'family':12s} {'cold s':>7s} {'warm s':>7s} {'cold CPU s':>11s} {'warm CPU s':>11s} "
          f"{'1st eager step +s (loops off/on disk)':>38s} {'compiled, nothing on disk s':>28s}")
    for family, cold, warm, first_use, later_use, first_ever in rows:
        print(f"{family:12s} {cold['compile_seconds']:7.2f} {warm['compile_seconds']:7.2f} "
              f"{cold['compile_cpu_seconds']:11.2f} {warm['compile_cpu_seconds']:11.2f} "
              f"{first_use['extra_seconds']:30.2f} / {later_use['extra_seconds']:5.2f} "
              f"{first_ever['compile_seconds']:28.2f}")


if __name__ == "__main__":
    main()
