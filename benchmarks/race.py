"""Race staticgrad's replay against eager, the hand-written floors and the peers on the bench MLP.

    python benchmarks/race.py [--sizes tiny medium large] [--rounds 10] [--threads 1] [--json PATH]

Systems run in alternating blocks of steps, repeated for several rounds; each figure is the
median per-step time. With ``--threads N`` the BLAS and framework thread pools are set to N
(the script re-runs itself with the environment set before NumPy loads).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

BLOCK = {"tiny": 25, "medium": 10, "large": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "medium", "large"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="BLAS/framework threads (default: library default)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (slow to compile)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    from staticgrad.bench.runner import machine_line

    print(machine_line())
    if args.threads and os.environ.get("STATICGRAD_RACE_THREADS") != str(args.threads):
        env = dict(os.environ, STATICGRAD_RACE_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
                   OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
                   XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
                   if args.threads == 1 else os.environ.get("XLA_FLAGS", ""))
        sys.exit(subprocess.call([sys.executable] + sys.argv, env=env))
    run(args)


def run(args) -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from systems import floor_systems, jax_systems, staticgrad_systems, torch_systems

    from staticgrad.bench.measure import interleaved_medians
    from staticgrad.bench.models import SIZES

    if args.threads:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    report = {"threads": args.threads or "default", "sizes": {}}
    for name in args.sizes:
        size = SIZES[name]
        started = time.perf_counter()
        systems, compiled = staticgrad_systems(size)
        systems.update(floor_systems(size))
        systems.update(torch_systems(size, with_compile=not args.no_compile))
        systems.update(jax_systems(size))
        for fn in systems.values():
            for _ in range(3):
                fn()
        block = BLOCK.get(name, 10)
        medians = interleaved_medians(systems, block * args.rounds, block)
        plan = next(p for p in compiled.plans if p.replayable)
        report["sizes"][name] = {
            "model": size.describe(), "ms": {k: v * 1e3 for k, v in medians.items()},
            "replayed_ops": len(plan.graph.ops), "recorded_ops": len(plan.record.graph.ops),
            "seconds": time.perf_counter() - started,
        }
        print(_table(name, report["sizes"][name]), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


def _table(name: str, result: dict) -> str:
    ms = result["ms"]
    replay = ms["staticgrad replay"]
    lines = [f"\n{name}: {result['model']}  (median ms per training step)"]
    for system, value in sorted(ms.items(), key=lambda item: item[1]):
        lines.append(f"  {system:<18} {value:9.3f}   {value / replay:5.2f}x replay")
    overhead = (replay - ms["numba floor"]) / result["replayed_ops"] * 1e3
    lines.append(f"  replay overhead above the Numba floor: {overhead:.2f} us per replayed op "
                 f"({result['replayed_ops']} ops; eager records {result['recorded_ops']})")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
