"""Race staticgrad's replayed training step against its eager step, its compiled-model loop and the
peers, on the bench model of every family (tanh MLP sizes, CNN, LSTM, Transformer LM).

    python benchmarks/race.py [--model mlp cnn lstm transformer] [--sizes tiny medium large]
                              [--rounds 10] [--threads 1] [--no-compile] [--json PATH]

Systems, all built from the same initial weights (staticgrad's state dict) and batches: staticgrad
replay (the whole step compiled), staticgrad eager, staticgrad model+step (a loop around the
compiled model with a compiled ``opt.step``), PyTorch eager, ``torch.compile`` of the whole step
as one graph, JAX ``jit`` of the whole step (jax_systems.py), and for the MLP the hand-written
NumPy and Numba floors (floors.py). A peer that is not installed or does not compile is named
with the reason instead of timed. Systems run in alternating blocks of steps, repeated for
``--rounds`` rounds; each figure is the median per-step time, and each ratio that time over
staticgrad replay's. With ``--threads N`` the BLAS and framework thread pools are set to N (the
script re-runs itself with the environment set before NumPy loads).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from staticgrad.bench.families import FAMILIES
from staticgrad.bench.models import SIZES

REPLAY = "staticgrad replay"
COLUMNS = (REPLAY, "staticgrad eager", "staticgrad model+step", "torch eager", "torch.compile", "JAX jit",
           "numpy floor", "numba floor")
BLOCK = {"tiny": 25, "medium": 10, "large": 2}   # steps per block: MLP sizes; other families take 5
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--sizes", nargs="+", default=["tiny", "medium", "large"], choices=list(SIZES),
                        help="MLP sizes")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="BLAS/framework threads (default: library default)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (slow to compile)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.threads and os.environ.get("STATICGRAD_RACE_THREADS") != str(args.threads):
        threads = str(args.threads)
        env = dict(os.environ, STATICGRAD_RACE_THREADS=threads, **dict.fromkeys(THREAD_VARIABLES, threads))
        if args.threads == 1:
            env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        sys.exit(subprocess.call([sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env=env))
    run(args)


def run(args) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from jax_systems import jax_systems
    from systems import floor_systems, initial_state, staticgrad_systems, torch_systems

    from staticgrad.bench.families import bench_model
    from staticgrad.bench.measure import interleaved_medians
    from staticgrad.bench.report import machine
    from staticgrad.bench.runner import environment

    if args.threads:
        try:
            import torch  # the optional PyTorch peer
            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    env = environment()
    env["jax"] = _jax_version()
    load_before = os.getloadavg()
    print(f"{machine(env)} JAX {env['jax'] or 'not installed'}. Load average {load_before[0]:.2f}.", flush=True)
    report = {"environment": env, "threads": args.threads or "default", "rounds": args.rounds,
              "load_average_before": load_before, "families": {}}
    for family in args.model:
        results = {}
        for size in (args.sizes if family == "mlp" else [None]):
            bench = bench_model(family, size)
            started = time.perf_counter()
            state = initial_state(bench)
            systems, skipped, facts = {}, {}, {}
            for builder in (staticgrad_systems, floor_systems, jax_systems):
                found, missing, numbers = builder(bench, state)
                systems.update(found), skipped.update(missing), facts.update(numbers)
            found, missing, numbers = torch_systems(bench, state, with_compile=not args.no_compile)
            systems.update(found), skipped.update(missing), facts.update(numbers)
            systems = {name: systems[name] for name in COLUMNS if name in systems}
            for fn in systems.values():
                for _ in range(5):   # trace, compile and warm every system
                    fn()
            block = BLOCK[bench.name] if family == "mlp" else 5
            medians = interleaved_medians(systems, block * args.rounds, block)
            ms = {name: seconds * 1e3 for name, seconds in medians.items()}
            results[bench.name] = {
                "shape": bench.shape, "optimizer": bench.optimizer_name, "ms": ms,
                "ratio_to_replay": {name: value / ms[REPLAY] for name, value in ms.items()},
                "skipped": skipped, "steps_per_system": block * args.rounds,
                "seconds": time.perf_counter() - started, **facts,
            }
        report["families"][family] = results
        print(table(family, results), flush=True)
    report["load_average_after"] = os.getloadavg()
    print(f"\nLoad average {report['load_average_after'][0]:.2f} at the end (2 CPUs shared with other work: "
          "compare within a run).")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    return report


def _jax_version():
    try:
        import jax  # the optional JAX peer
    except ImportError:
        return None
    return jax.__version__


def table(family: str, results: dict) -> str:
    """One family's table: a row per model, a column per system, "ms (system / replay)" cells."""
    columns = [c for c in COLUMNS if any(c in r["ms"] or c in r["skipped"] for r in results.values())]
    first = next(iter(results.values()))
    widths = [max(len(c), 15) for c in columns]
    name_width = max(len(name) for name in list(results) + ["model"])
    lines = [f"\n{family}: {first['optimizer']}; median ms per training step (system / staticgrad replay)",
             "  " + f"{'model':<{name_width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(columns, widths))]
    for name, r in results.items():
        cells = []
        for column, width in zip(columns, widths):
            value = r["ms"].get(column)
            cell = "-" if value is None else f"{value:.3f} ({r['ratio_to_replay'][column]:.2f}x)"
            cells.append(f"{cell:>{width}}")
        lines.append("  " + f"{name:<{name_width}}  " + "  ".join(cells))
    for name, r in results.items():
        lines.append(f"  {name}: {r['shape']}; replay runs {r['replayed_ops']} ops (eager records "
                     f"{r['recorded_ops']}), {r['fused_kernels']} fused kernels")
        if "numba floor" in r["ms"]:
            overhead = (r["ms"][REPLAY] - r["ms"]["numba floor"]) / r["replayed_ops"] * 1e3
            lines.append(f"    replay overhead above the Numba floor: {overhead:.2f} us per replayed op")
        if "torch_compile_first_two_calls_seconds" in r:
            seconds = r["torch_compile_first_two_calls_seconds"]
            lines.append(f"    torch.compile: first two calls (compiling) {seconds:.1f} s")
    reasons = {}
    for r in results.values():
        for system, why in r["skipped"].items():
            reasons.setdefault((system, why), None)
    lines += [f"  {system} not timed: {why}" for system, why in reasons]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
