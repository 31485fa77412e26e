"""A compiled model inside an ordinary training loop, against the same loop fully eager (and
PyTorch eager when installed): the loss, backward and optimizer step stay outside the compiled
call; a third mode compiles ``opt.step`` too. Bench MLPs, medians of interleaved blocks; then the
peak memory of four forwards outstanding before one backward, eager and compiled.

    python benchmarks/compiled_model.py [--size tiny medium] [--steps 400]
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

import staticgrad
from staticgrad.bench.measure import interleaved_medians
from staticgrad.bench.models import SIZES, batches, build, initial_weights
from staticgrad.bench.runner import machine_line


def loop(lib, model, opt, data, step=None):
    """One iteration of the user's loop as a zero-argument callable, cycling over ``data``."""
    loss_fn = lib.nn.functional.mse_loss
    step = step or opt.step
    state = {"i": 0}

    def run():
        x, y = data[state["i"] % len(data)]
        state["i"] += 1
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        step()

    return run


def systems_for(size_name: str) -> dict:
    size = SIZES[size_name]
    weights = initial_weights(size)
    raw = batches(size, 4)
    data = [(staticgrad.tensor(x), staticgrad.tensor(y)) for x, y in raw]
    systems = {}
    model, opt, _ = build(staticgrad, size, weights)
    systems["staticgrad eager loop"] = loop(staticgrad, model, opt, data)
    model, opt, _ = build(staticgrad, size, weights)
    systems["compiled model"] = loop(staticgrad, staticgrad.compile(model), opt, data)
    model, opt, _ = build(staticgrad, size, weights)
    systems["compiled model + compiled opt.step"] = loop(staticgrad, staticgrad.compile(model), opt, data,
                                                         staticgrad.compile(opt.step))
    try:
        import torch  # the optional PyTorch peer: raced only when installed
    except ImportError:
        return systems
    model, opt, _ = build(torch, size, weights)
    systems["torch eager loop"] = loop(torch, model, opt, [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in raw])
    return systems


def peak_with_four_forwards(size_name: str) -> dict:
    """Peak traced bytes of four forwards kept outstanding and one backward of their summed loss,
    eager and with the model compiled (after both are warm)."""
    size = SIZES[size_name]
    weights = initial_weights(size)
    data = [(staticgrad.tensor(x), staticgrad.tensor(y)) for x, y in batches(size, 4)]
    peaks = {}
    for mode in ("eager", "compiled"):
        model, opt, _ = build(staticgrad, size, weights)
        net = staticgrad.compile(model) if mode == "compiled" else model
        for x, y in data[:2]:
            staticgrad.nn.functional.mse_loss(net(x), y).backward()
        opt.zero_grad()
        gc.collect()
        tracemalloc.start()
        total = sum(staticgrad.nn.functional.mse_loss(net(x), y) for x, y in data)
        total.backward()
        peaks[mode] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", nargs="+", default=["tiny", "medium"], choices=list(SIZES))
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    print(machine_line())
    for size_name in args.size:
        systems = systems_for(size_name)
        for fn in systems.values():
            for _ in range(10):   # trace and warm every mode
                fn()
        medians = interleaved_medians(systems, args.steps)
        base = medians["staticgrad eager loop"]
        print(f"\n{size_name}: {SIZES[size_name].describe()}")
        for name, seconds in medians.items():
            print(f"  {name:38s} {seconds * 1e3:8.3f} ms   {base / seconds:5.2f}x the eager loop")
        peaks = peak_with_four_forwards(size_name)
        print(f"  peak with four forwards outstanding: eager {peaks['eager'] / 1024:.0f} KiB, compiled model "
              f"{peaks['compiled'] / 1024:.0f} KiB ({peaks['compiled'] / peaks['eager']:.2f}x)")


if __name__ == "__main__":
    main()
