"""A compiled model inside an ordinary training loop, against the same loop fully eager (and
PyTorch eager when installed): the loss, backward and optimizer step stay outside the compiled
call; a third mode compiles ``opt.step`` too. Every bench model family; medians of interleaved
blocks; then the peak memory of four forwards outstanding before one backward, eager and compiled,
and the bytes each call keeps for its backward against what eager's graph holds.

    python benchmarks/compiled_model.py [--model mlp cnn lstm transformer] [--size tiny medium] [--steps 300]
                                        [--threads 1]

``--threads N`` sets the BLAS and PyTorch thread pools to N (the script runs itself again with the
BLAS variables set): PyTorch's own pool otherwise takes every core, and on a machine shared with
other work its threads wait on each other far longer than the step takes.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tracemalloc

import staticgrad
from staticgrad.bench.families import FAMILIES, as_tensors, bench_model, build, training_step
from staticgrad.bench.measure import interleaved_medians
from staticgrad.bench.models import SIZES
from staticgrad.bench.runner import machine_line

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def looping(step, data):
    """``step`` over ``data`` round and round, as a zero-argument callable."""
    state = {"i": 0}

    def run():
        x, y = data[state["i"] % len(data)]
        state["i"] += 1
        step(x, y)

    return run


def systems_for(bench) -> dict:
    data = as_tensors(staticgrad, bench.batches(4))
    model, opt = build(staticgrad, bench)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    systems = {"staticgrad eager loop": looping(training_step(staticgrad, bench, model, opt), data)}
    model, opt = build(staticgrad, bench, state)
    systems["compiled model"] = looping(training_step(staticgrad, bench, staticgrad.compile(model), opt), data)
    model, opt = build(staticgrad, bench, state)
    systems["compiled model + compiled opt.step"] = looping(
        training_step(staticgrad, bench, staticgrad.compile(model), opt, staticgrad.compile(opt.step)), data)
    try:
        import torch  # the optional PyTorch peer: raced only when installed
    except ImportError:
        return systems
    model, opt = build(torch, bench, state)
    systems["torch eager loop"] = looping(training_step(torch, bench, model, opt), as_tensors(torch, bench.batches(4)))
    return systems


def memory_with_four_forwards(bench) -> dict:
    """Peak traced bytes of four forwards kept outstanding and one backward of their summed loss,
    eager and with the model compiled (after both ran the same pattern three times: the planned
    arenas and the recorded backward of the pattern's graph exist, as in a training loop's steady state);
    and what one call keeps for backward."""
    data = as_tensors(staticgrad, bench.batches(4))
    model, _ = build(staticgrad, bench)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    found = {}
    for mode in ("eager", "compiled"):
        model, opt = build(staticgrad, bench, state)
        net = staticgrad.compile(model) if mode == "compiled" else model
        for x, y in data[:2]:
            bench.loss(staticgrad, net(x), y).backward()
        for _ in range(3):   # warm: this pattern's programs exist (its backward is recorded at its second run
            sum(bench.loss(staticgrad, net(x), y) for x, y in data).backward()   # and its kernels load at the third)
        opt.zero_grad()
        gc.collect()
        tracemalloc.start()
        total = sum(bench.loss(staticgrad, net(x), y) for x, y in data)
        total.backward()
        found[mode] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if mode == "compiled":
            plan = net.plan
            found["saved"] = plan.backward.saved_bytes(plan.graph)
            found["eager saved"] = staticgrad.inspect.graph(model(data[0][0])).graph_only_bytes
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--size", nargs="+", default=["tiny", "medium"], choices=list(SIZES),
                        help="MLP sizes (default: tiny medium)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=None, help="BLAS and PyTorch threads (default: theirs)")
    args = parser.parse_args()
    if args.threads and os.environ.get("STATICGRAD_BENCH_THREADS") != str(args.threads):
        threads = str(args.threads)
        env = dict(os.environ, STATICGRAD_BENCH_THREADS=threads, **dict.fromkeys(THREAD_VARIABLES, threads))
        sys.exit(subprocess.call([sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env=env))
    if args.threads:
        try:
            import torch  # the optional PyTorch peer
            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    print(machine_line())
    models = [bench_model(family, size) for family in args.model
              for size in (args.size if family == "mlp" else [None])]
    for bench in models:
        systems = systems_for(bench)
        for fn in systems.values():
            for _ in range(10):   # trace and warm every mode
                fn()
        block = 25 if bench.family == "mlp" else 5
        medians = interleaved_medians(systems, args.steps if bench.family == "mlp" else args.steps // 5, block=block)
        base = medians["staticgrad eager loop"]
        print(f"\n{bench.name}: {bench.shape}; {bench.optimizer_name}")
        for name, seconds in medians.items():
            print(f"  {name:38s} {seconds * 1e3:8.3f} ms   {base / seconds:5.2f}x the eager loop")
        memory = memory_with_four_forwards(bench)
        print(f"  peak with four forwards outstanding: eager {memory['eager'] / 1024:,.0f} KiB, compiled model "
              f"{memory['compiled'] / 1024:,.0f} KiB ({memory['compiled'] / memory['eager']:.2f}x)")
        print(f"  kept for backward per call: compiled {memory['saved'] / 1024:,.0f} KiB, eager's graph "
              f"{memory['eager saved'] / 1024:,.0f} KiB ({memory['saved'] / max(memory['eager saved'], 1):.2f}x)")


if __name__ == "__main__":
    main()
