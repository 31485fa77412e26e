"""How does data-parallel training scale from 1 to 2 ranks, and what does averaging the gradients
in one Allreduce save over one Allreduce per tensor?

    python benchmarks/distributed.py [--sizes tiny medium] [--ranks 1 2] [--steps 200]

Launches ``mpiexec -n R`` for each rank count: every rank trains the bench tanh MLP (SGD with
momentum) wrapped in DistributedDataParallel on its share of the same global batch (strong
scaling), eagerly and as a compiled step, with the gradients averaged in one bucket (one
Allreduce per step), one bucket per tensor (``bucket_cap_mb=0``), and four buckets. Each bucket's
Iallreduce starts as soon as backward has produced its gradients (eager: when the hook after its
last gradient's accumulation fires; compiled: right after the op that produced it); the eager rows
also time the same buckets reduced after backward, blocking one after the other ("blocking ms")
and the time overlap saves against that. Prints the median ms per step (the slowest rank's),
scaling efficiency T(1) / (R x T(R)), Allreduce calls per step and the median us per step blocked
in them (waiting for the other rank included; for started buckets, the starts and the final wait:
what overlap leaves). On a machine with fewer cores than ranks x BLAS threads the ranks compete
for cores: the machine line and the load say so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# How the gradients are averaged: bucket_cap_mb of DistributedDataParallel, or "quarter": buckets of
# a quarter of the model's gradient bytes (each starts as soon as backward has produced it and runs
# while the rest of backward does; "eager blocking": one by one after backward).
BUCKETS = {"one bucket": None, "per tensor": 0, "quarter buckets": "quarter"}
MODES = ("eager", "compiled", "compiled-model")   # the rows; compiled-model: DDP(compile(model)), eager loss and step
TIMED = ("eager", "eager blocking", "compiled", "compiled-model")


def worker(sizes: list, steps: int) -> None:
    """One rank: time every (size, mode, bucket) configuration in interleaved blocks; rank 0 prints
    the slowest rank's figures as one JSON line."""
    import staticgrad as sg  # here: the launcher itself never loads staticgrad or MPI
    import staticgrad.distributed as dist
    from staticgrad.bench.measure import interleaved_medians
    from staticgrad.bench.models import SIZES, batches, build, initial_weights
    from staticgrad.bench.runner import cycle_batches
    from staticgrad.nn.parallel import DistributedDataParallel
    from staticgrad.ops.collective import World

    dist.init_process_group()
    rank, ranks = dist.get_rank(), dist.get_world_size()
    systems, counters = {}, {}
    for size_name in sizes:
        size = SIZES[size_name]
        per_rank = size.batch // ranks
        shard = slice(rank * per_rank, (rank + 1) * per_rank)
        data = [(sg.tensor(x[shard]), sg.tensor(y[shard])) for x, y in batches(size)]
        for mode in TIMED:
            for bucket, cap in BUCKETS.items():
                model, _, _ = build(sg, size, initial_weights(size))
                if cap == "quarter":
                    cap = sum(p.numel() * p.element_size() for p in model.parameters()) / 4 / 2**20 * 1.01
                ddp = DistributedDataParallel(sg.compile(model) if mode == "compiled-model" else model,
                                              bucket_cap_mb=cap)
                ddp._overlap_backward = mode != "eager blocking"
                opt = sg.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
                step = _step(sg, ddp, opt)
                if mode == "compiled":
                    step = sg.compile(step)
                key = f"{size_name}|{mode}|{bucket}"
                systems[key] = _counting(cycle_batches(step, data), key, counters, World)
    for fn in systems.values():
        for _ in range(5):
            fn()
    for key in counters:
        counters[key] = [0, [], 0]
    medians = interleaved_medians(systems, steps, block=25)
    spent = {key: statistics.median(entry[1]) for key, entry in counters.items()}
    gathered = World.comm.gather({"medians": medians, "allreduce": spent}, root=0)
    if rank == 0:
        result = {key: {"ms": max(g["medians"][key] for g in gathered) * 1e3,
                        "allreduce_calls_per_step": counters[key][0] / len(counters[key][1]),
                        "packing_copies_per_step": counters[key][2] / len(counters[key][1]),
                        "allreduce_us_per_step": max(g["allreduce"][key] for g in gathered) * 1e6}
                  for key in systems}
        print("RESULT " + json.dumps({"ranks": ranks, "per_rank_batch": {s: SIZES[s].batch // ranks for s in sizes},
                                      "results": result}), flush=True)
    dist.destroy_process_group()


def _step(sg, model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = sg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _counting(fn, key: str, counters: dict, world):
    """``fn`` counting the Allreduce calls it makes, the seconds spent in them per call (waiting
    for the slower rank included), and the gradient packing copies before them (none where a
    compiled step laid its gradients out in one block)."""
    counters[key] = [0, [], 0]

    def call():
        calls, seconds, copies = world.allreduce_calls, world.allreduce_seconds, world.packing_copies
        fn()
        entry = counters[key]
        entry[0] += world.allreduce_calls - calls
        entry[1].append(world.allreduce_seconds - seconds)
        entry[2] += world.packing_copies - copies
    return call


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def launch(ranks: int, sizes: list, steps: int) -> dict:
    command = [mpiexec(), "-n", str(ranks), sys.executable, __file__, "--worker", "--sizes", *sizes,
               "--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def table(reports: dict, sizes: list) -> str:
    ranks = sorted(reports)
    head = ["model", "mode", "all-reduce"]
    for r in ranks:
        head += [f"{r} rank{'s' if r > 1 else ''} ms", f"blocking ms ({r})", f"overlap saves ({r})",
                 f"calls/step ({r})", f"copies/step ({r})", f"allreduce us ({r})"]
    head += [f"efficiency {r}" for r in ranks if r != ranks[0]]
    rows = []
    for size in sizes:
        for mode in MODES:
            for bucket in BUCKETS:
                key = f"{size}|{mode}|{bucket}"
                row = [size, mode, bucket]
                for r in ranks:
                    res = reports[r]["results"][key]
                    blocking = reports[r]["results"].get(f"{size}|eager blocking|{bucket}") if mode == "eager" else None
                    row += [f"{res['ms']:.3f}", "-" if blocking is None else f"{blocking['ms']:.3f}",
                            "-" if blocking is None else f"{1 - res['ms'] / blocking['ms']:.0%}",
                            f"{res['allreduce_calls_per_step']:.0f}",
                            f"{res['packing_copies_per_step']:.0f}",
                            f"{res['allreduce_us_per_step']:.1f}"]
                base = reports[ranks[0]]["results"][key]["ms"] * ranks[0]
                row += [f"{base / (r * reports[r]['results'][key]['ms']):.0%}" for r in ranks if r != ranks[0]]
                rows.append(row)
    widths = [max(len(str(x)) for x in column) for column in zip(head, *rows)]
    lines = ["  ".join(str(x).rjust(w) for x, w in zip(line, widths)) for line in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "medium"])
    parser.add_argument("--ranks", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.sizes, args.steps)
        return
    from staticgrad.bench.runner import machine_line  # here: the worker runs without the report's imports

    print(machine_line() + f" (OPENBLAS_NUM_THREADS {os.environ.get('OPENBLAS_NUM_THREADS', 'default')})")
    reports = {r: launch(r, args.sizes, args.steps) for r in args.ranks}
    print(f"global batch split over the ranks (per-rank batch with {max(reports)} ranks: "
          f"{reports[max(reports)]['per_rank_batch']}); SGD(momentum=0.9); median ms per step of the slowest rank; "
          f"{args.steps} steps per configuration")
    print(table(reports, args.sizes))
    print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
