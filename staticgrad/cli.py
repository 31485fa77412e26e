"""The ``staticgrad`` command: ``staticgrad bench`` (the main job), ``staticgrad inspect`` and
``staticgrad profile``, on the bench models or, with ``--step path/to/file.py:make_step`` (bench and
inspect), on the user's own training step."""

from __future__ import annotations

import argparse
import json
import sys

import staticgrad
from staticgrad.bench.compare_step import compare, describe_batches, warm_up
from staticgrad.bench.families import FAMILIES, bench_model
from staticgrad.bench.models import DEFAULT_SIZES, SIZES, batches, build, initial_weights
from staticgrad.bench.report import table
from staticgrad.bench.runner import run
from staticgrad.bench.user_step import StepError, arguments, label, load_step

STEP_HELP = ("your own training step instead of the bench models: a Python file and a function in it taking no "
             "arguments (default make_step) that returns a dict with 'step' (called as step(*batch)) and "
             "'batches' (a list of tuples of staticgrad tensors), optionally 'torch_step' and 'torch_batches' "
             "(its PyTorch twin) and 'name'")


def _bench(args) -> int:
    if args.step:
        if args.size or args.model:
            args.parser.error("--step times your own step: leave out --size and --model")
        report = compare(load_step(args.step), steps=args.steps or 100, use_torch=not args.no_torch,
                         show_progress=not args.quiet)
    else:
        sizes = args.size or list(DEFAULT_SIZES)
        sizes = list(SIZES) if "all" in sizes else sizes
        models = [bench_model(family, size) for family in args.model or ["mlp"]
                  for size in (sizes if family == "mlp" else [None])]
        report = run(models, args.steps or 300, use_torch=not args.no_torch, show_progress=not args.quiet)
    print(table(report))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
        print(f"\nwrote every number to {args.json}")
    return 0


def _inspect_step(args) -> int:
    if args.size:
        args.parser.error("--step inspects your own step: leave out --size")
    spec = load_step(args.step)
    compiled = staticgrad.compile(spec.step, fallback="eager")
    data = [arguments(batch) for batch in spec.batches]
    warm_up(compiled, data, 3)
    plan = compiled.plan if compiled.plan is not None and compiled.plan.replayable else None
    if plan is None:
        reasons = "; ".join(p.reason for p in compiled.plans if not p.replayable) or "no recording"
        print(f"{label(spec)} has no plan to inspect: its compiled step runs eagerly ({reasons})", file=sys.stderr)
        return 1
    return _show_plan(plan, f"{label(spec)} ({describe_batches(data)})", args.out)


def _inspect(args) -> int:
    if args.step:
        return _inspect_step(args)
    size = SIZES[args.size or "tiny"]
    _, _, step = build(staticgrad, size, initial_weights(size))
    compiled = staticgrad.compile(step)
    for x, y in batches(size, 3):
        compiled(staticgrad.tensor(x), staticgrad.tensor(y))
    plan = next(p for p in compiled.plans if p.replayable)
    return _show_plan(plan, f"the {size.name} bench step ({size.describe()})", args.out)


def _show_plan(plan, what: str, out: str | None) -> int:
    """Print a plan's description, and draw it into ``out`` if given."""
    print(f"plan of {what}:\n")
    print(plan.describe())
    if out:
        plan.render(out)
        print(f"\nwrote the lifetime chart and the program to {out}")
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
    bench.add_argument("--size", nargs="+", choices=list(SIZES) + ["all"],
                       help="MLP sizes to run (default: tiny medium)")
    bench.add_argument("--model", nargs="+", choices=list(FAMILIES),
                       help="model families to run (default: mlp; also cnn, lstm, transformer)")
    bench.add_argument("--step", metavar="FILE.py:make_step", help=STEP_HELP)
    bench.add_argument("--steps", type=int,
                       help="measured steps per system and model (default 300; 100 with --step)")
    bench.add_argument("--json", metavar="PATH", help="also write every number to this JSON file")
    bench.add_argument("--no-torch", action="store_true", help="skip PyTorch even if it is installed")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(run=_bench, parser=bench)
    inspect = commands.add_parser("inspect", help="print (and draw) the buffer plan of a bench model's step "
                                  "(or of your own, --step)")
    inspect.add_argument("--size", choices=list(SIZES), help="bench model (default: tiny)")
    inspect.add_argument("--step", metavar="FILE.py:make_step", help=STEP_HELP)
    inspect.add_argument("--out", metavar="PNG", default="plan.png", help="picture to write (default: plan.png)")
    inspect.set_defaults(run=_inspect, parser=inspect)
    profile = commands.add_parser("profile", help="time each op and fused kernel of a bench model's replay")
    profile.add_argument("--model", default="mlp", choices=list(FAMILIES), help="model family (default: mlp)")
    profile.add_argument("--size", default="tiny", choices=list(SIZES), help="MLP size (default: tiny)")
    profile.add_argument("--part", default="step", choices=["step", "model"],
                         help="the compiled training step, or the compiled model's forward and backward")
    profile.add_argument("--calls", type=int, default=20, help="timed calls (default 20)")
    profile.add_argument("--by", default="op", choices=["op", "step"], help="rows per op and kernel, or per step")
    profile.add_argument("--limit", type=int, default=30, help="rows shown per program (default 30)")
    profile.add_argument("--trace", metavar="JSON", help="also write a Chrome trace (Perfetto) to this file")
    profile.set_defaults(run=_profile, parser=profile)
    args = parser.parse_args(argv)
    if getattr(args, "steps", None) is not None and args.steps < 1:
        args.parser.error("--steps must be at least 1")
    try:
        return args.run(args)
    except StepError as error:   # the step file is not what --step expects: say so as a usage error
        args.parser.error(str(error))


if __name__ == "__main__":
    sys.exit(main())
