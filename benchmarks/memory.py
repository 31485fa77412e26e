"""Memory of one training step of the bench models: staticgrad's planned arena against its lower
bound, what a replay allocates, staticgrad eager's peak, and PyTorch eager's peak.

    python benchmarks/memory.py [--model mlp cnn lstm transformer] [--sizes tiny medium large]

"Working memory" is what a step needs beyond the tensors alive before it (parameters, optimizer
state, the previous gradients): for eager, the peak of allocations during the step above that
starting point; for a replay, its arena (allocated once, reused by every step) plus the peak of
what the replay itself allocates. staticgrad's figures come from tracemalloc (NumPy reports its
buffers to it); PyTorch's from its profiler's memory timeline (best effort: a private API).
"""

from __future__ import annotations

import argparse

import staticgrad
from staticgrad.bench.families import FAMILIES, as_tensors, bench_model, build, training_step
from staticgrad.bench.measure import peak_bytes
from staticgrad.bench.models import SIZES


def staticgrad_memory(bench, state: dict) -> dict:
    data = as_tensors(staticgrad, bench.batches(4))
    eager = training_step(staticgrad, bench, *build(staticgrad, bench, state))
    compiled = staticgrad.compile(training_step(staticgrad, bench, *build(staticgrad, bench, state)))
    for x, y in data[:3]:   # the first calls trace (and create the optimizer state)
        eager(x, y)
        compiled(x, y)
    plan = next(p for p in compiled.plans if p.replayable)
    x, y = data[0]
    return {"arena": plan.program.arena_bytes, "lower_bound": plan.program.lower_bound,
            "replay_step_allocations": peak_bytes(lambda: compiled(x, y)),
            "eager_peak": peak_bytes(lambda: eager(x, y))}


def torch_memory(bench, state: dict):
    try:
        import numpy as np
        import torch
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import MemoryProfileTimeline
    except ImportError:
        return None
    step = training_step(torch, bench, *build(torch, bench, state))
    ((x, y),) = as_tensors(torch, bench.batches(1))
    for _ in range(3):
        step(x, y)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step(x, y)
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    total = np.array(sizes).sum(axis=1)
    return int(total.max() - total[0])


def mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:8.2f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["mlp"], choices=list(FAMILIES))
    parser.add_argument("--sizes", nargs="+", default=["tiny", "medium", "large"], choices=list(SIZES),
                        help="MLP sizes")
    args = parser.parse_args()
    from staticgrad.bench.runner import machine_line

    print(machine_line())
    print(f"{'model':<11} {'arena':>12} {'lower bound':>12} {'ratio':>6} {'replay allocs':>14} "
          f"{'replay total':>13} {'sg eager peak':>14} {'torch eager peak':>17}")
    models = [bench_model(family, size) for family in args.model
              for size in (args.sizes if family == "mlp" else [None])]
    for bench in models:
        model, _ = build(staticgrad, bench)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        m = staticgrad_memory(bench, state)
        torch_peak = torch_memory(bench, state)
        total = m["arena"] + m["replay_step_allocations"]
        print(f"{bench.name:<11} {mib(m['arena']):>12} {mib(m['lower_bound']):>12} "
              f"{m['arena'] / m['lower_bound']:6.2f} "
              f"{mib(m['replay_step_allocations']):>14} {mib(total):>13} {mib(m['eager_peak']):>14} "
              f"{mib(torch_peak):>17}")


if __name__ == "__main__":
    main()
