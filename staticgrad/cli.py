"""The ``staticgrad`` command: ``staticgrad bench`` (the main job), ``staticgrad inspect`` and
``staticgrad profile``."""

from __future__ import annotations

import argparse
import json
import sys

import staticgrad
from staticgrad.bench.families import FAMILIES, bench_model
from staticgrad.bench.models import DEFAULT_SIZES, SIZES, batches, build, initial_weights
from staticgrad.bench.report import table
from staticgrad.bench.runner import run


def _bench(args) -> int:
    sizes = list(SIZES) if "all" in args.size else args.size
    models = [bench_model(family, size) for family in args.model for size in (sizes if family == "mlp" else [None])]
    report = run(models, args.steps, use_torch=not args.no_torch, show_progress=not args.quiet)
    print(table(report))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
        print(f"\nwrote every number to {args.json}")
    return 0


def _inspect(args) -> int:
    size = SIZES[args.size]
    _, _, step = build(staticgrad, size, initial_weights(size))
    compiled = staticgrad.compile(step)
    for x, y in batches(size, 3):
        compiled(staticgrad.tensor(x), staticgrad.tensor(y))
    plan = next(p for p in compiled.plans if p.replayable)
    print(f"plan of the {size.name} bench step ({size.describe()}):\n")
    print(plan.describe())
    if args.out:
        plan.render(args.out)
        print(f"\nwrote the lifetime chart and the program to {args.out}")
    return 0


def _profile(args) -> int:
    from staticgrad.bench import families  # the bench's model families, for this command only

    bench = families.bench_model(args.model, args.size)
    model, opt = families.build(staticgrad, bench)
    data = families.as_tensors(staticgrad, bench.batches(3))
    if args.part == "step":
        compiled = staticgrad.compile(families.training_step(staticgrad, bench, model, opt))
        for x, y in data:
            compiled(x, y)
        arguments = data[-1]
    else:
        compiled = staticgrad.compile(model)
        for x, y in data:
            bench.loss(staticgrad, compiled(x), y).backward()
        arguments = data[-1][:1]
    profile = compiled.plan.profile(*arguments, calls=args.calls)
    print(f"profile of the {bench.name} bench {args.part} ({bench.shape}):\n")
    print(profile.table(limit=args.limit, by=args.by))
    if args.trace:
        profile.save_chrome_trace(args.trace)
        print(f"\nwrote the Chrome trace to {args.trace} (open it in https://ui.perfetto.dev)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="staticgrad", description="Record-and-replay autograd on NumPy.")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="time eager vs replayed training steps (and PyTorch, if installed)")
    bench.add_argument("--size", nargs="+", default=list(DEFAULT_SIZES), choices=list(SIZES) + ["all"],
                       help="MLP sizes to run (default: tiny medium)")
    bench.add_argument("--model", nargs="+", default=["mlp"], choices=list(FAMILIES),
                       help="model families to run (default: mlp; also cnn, lstm, transformer)")
    bench.add_argument("--steps", type=int, default=300, help="measured steps per system and size (default 300)")
    bench.add_argument("--json", metavar="PATH", help="also write every number to this JSON file")
    bench.add_argument("--no-torch", action="store_true", help="skip PyTorch even if it is installed")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(run=_bench)
    inspect = commands.add_parser("inspect", help="print (and draw) the buffer plan of a bench model's step")
    inspect.add_argument("--size", default="tiny", choices=list(SIZES), help="bench model (default: tiny)")
    inspect.add_argument("--out", metavar="PNG", default="plan.png", help="picture to write (default: plan.png)")
    inspect.set_defaults(run=_inspect)
    profile = commands.add_parser("profile", help="time each op and fused kernel of a bench model's replay")
    profile.add_argument("--model", default="mlp", choices=list(FAMILIES), help="model family (default: mlp)")
    profile.add_argument("--size", default="tiny", choices=list(SIZES), help="MLP size (default: tiny)")
    profile.add_argument("--part", default="step", choices=["step", "model"],
                         help="the compiled training step, or the compiled model's forward and backward")
    profile.add_argument("--calls", type=int, default=20, help="timed calls (default 20)")
    profile.add_argument("--by", default="op", choices=["op", "step"], help="rows per op and kernel, or per step")
    profile.add_argument("--limit", type=int, default=30, help="rows shown per program (default 30)")
    profile.add_argument("--trace", metavar="JSON", help="also write a Chrome trace (Perfetto) to this file")
    profile.set_defaults(run=_profile)
    args = parser.parse_args(argv)
    if getattr(args, "steps", 1) < 1:
        parser.error("--steps must be at least 1")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
