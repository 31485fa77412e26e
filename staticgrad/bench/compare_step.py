"""``staticgrad.bench.compare``: the user's own training step, eager against compiled (and its
PyTorch twin), timed as ``staticgrad bench`` times its models, with the compiled plan's facts and
a check that the compiled step really replayed."""

from __future__ import annotations

import itertools
import statistics
import time
import warnings

import staticgrad
from staticgrad.bench.measure import interleaved_medians, peak_bytes
from staticgrad.bench.report import MODES, Report
from staticgrad.bench.runner import _torch, environment
from staticgrad.bench.user_step import BenchStep, arguments, as_bench_step, label
from staticgrad.record.compiled import CompiledFunction

# A block of steps should take about this long: long enough that switching systems costs little,
# short enough that every system sees the machine in the same state (BLAS speed drifts over minutes).
BLOCK_SECONDS = 0.02
MAX_BLOCK = 25


def compare(step, batches=None, *, torch_step=None, torch_batches=None, name=None, steps: int = 100,
            warmup: int = 3, block: int | None = None, use_torch: bool = True, show_progress: bool = False) -> Report:
    """Time ``step`` eagerly, compiled (``staticgrad.compile(step, fallback="eager")``), and its
    PyTorch twin ``torch_step`` when given; return the report (a dict; ``print`` shows the table).

    ``step(*batch)`` is called once per batch of ``batches``, cycling (a batch that is not a tuple
    or list is the one argument). Eager and compiled call the same function, so they train the same
    model in turn: a replay reads parameters and optimizer state by reference, as eager does.
    ``step`` may also be a ``BenchStep`` (batches, twin and name in it), or an already compiled
    function (its options kept; its ``.fn`` is the eager step). ``torch_batches`` defaults to
    ``batches`` copied into torch tensors.

    Each system first runs ``warmup`` calls; the compiled one keeps calling until a whole pass
    over the batches traced nothing (its first calls trace). Then the systems run in alternating
    blocks of ``block`` steps (default: about 20 ms of eager steps, at most 25) for at least
    ``steps`` steps each; figures are medians per step. The report says how many timed calls
    of the compiled step replayed, and, when they ran eagerly instead, why."""
    spec = step if isinstance(step, BenchStep) else as_bench_step(
        {"step": step, "batches": batches, "torch_step": torch_step, "torch_batches": torch_batches, "name": name},
        "compare")
    if not isinstance(steps, int) or steps < 1 or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"steps and warmup must be positive ints, got steps={steps!r}, warmup={warmup!r}")
    if isinstance(spec.step, CompiledFunction):
        eager_fn, compiled = spec.step.fn, spec.step
    else:
        eager_fn, compiled = spec.step, staticgrad.compile(spec.step, fallback="eager")

    with warnings.catch_warnings():
        # a recording that cannot replay warns that those calls run eagerly: the report says it, and why
        warnings.filterwarnings("ignore", r"staticgrad\.compile\(.*\) runs eagerly", RuntimeWarning)
        return _compare(spec, eager_fn, compiled, steps, warmup, block, use_torch, show_progress)


def _compare(spec, eager_fn, compiled, steps, warmup, block, use_torch, show_progress) -> Report:
    data = [arguments(batch) for batch in spec.batches]
    eager_seconds = _warm_up_eager(eager_fn, data, warmup)
    started = time.perf_counter()
    warmup_calls = warm_up(compiled, data, warmup)
    warmup_seconds = time.perf_counter() - started
    systems = {"eager": _cycling(eager_fn, data), "replay": _cycling(compiled, data)}
    torch = _torch() if use_torch and spec.torch_step is not None else None
    if torch is not None:
        torch_data = [arguments(b) for b in spec.torch_batches] if spec.torch_batches is not None \
            else [tuple(_to_torch(torch, value) for value in args) for args in data]
        for k in range(warmup):
            spec.torch_step(*torch_data[k % len(torch_data)])
        systems["torch"] = _cycling(spec.torch_step, torch_data)

    block = block or max(1, min(MAX_BLOCK, round(BLOCK_SECONDS / max(eager_seconds, 1e-9))))
    rounds = -(-steps // min(block, steps))   # at least ``steps`` steps per system,
    block = -(-steps // rounds)               # in blocks as even as that allows
    progress = None
    if show_progress:
        from tqdm import tqdm  # only for a progress bar

        progress = tqdm(total=rounds * len(systems), desc=f"staticgrad bench {label(spec)}", unit="block",
                        leave=False)
    before = _stats(compiled)
    try:
        medians = interleaved_medians(systems, rounds * block, block=block, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    after = _stats(compiled)
    timed = {key: after[key] - before[key] for key in ("traces", "replays", "fallbacks")}

    first = data[0]
    eager_peak = peak_bytes(lambda: eager_fn(*first))
    replay_peak = peak_bytes(lambda: compiled(*first))
    plan = compiled.plan if compiled.plan is not None and compiled.plan.replayable else \
        next((p for p in compiled.plans if p.replayable), None)
    failed = [p.reason for p in compiled.plans if not p.replayable]
    eager = medians["eager"]
    result = {
        "size": label(spec), "family": "user step", "shape": describe_batches(data),
        "steps_per_system": rounds * block, "block": block,
        "ms": {system: seconds * 1e3 for system, seconds in medians.items()},
        "speedup_over_eager": {system: eager / medians[system] for system in MODES if system in medians},
        "replay_speedup": eager / medians["replay"],
        "compiled": {
            "timed_calls": rounds * block, **timed, "replayed": timed["replays"] > 0,
            "all_replayed": timed["replays"] == rounds * block, "plans": sum(p.replayable for p in compiled.plans),
            "fell_back_because": failed[0] if failed else None,
            "warmup_calls": warmup_calls, "stats": after,
        },
        "recorded_ops": len(plan.record.graph.ops) if plan else None,
        "replayed_ops": len(plan.graph.ops) if plan else None,
        "fused_kernels": len(plan.program.kernels) if plan else None,
        "memory_bytes": {
            "eager_step_peak": eager_peak,
            "replay_arena": plan.program.arena_bytes if plan else None,
            "replay_step_allocations": replay_peak,
            "replay_total": plan.program.arena_bytes + replay_peak if plan else replay_peak,
            "arena_lower_bound": plan.program.lower_bound if plan else None,
        },
        "warmup_seconds": warmup_seconds,
        "compile_seconds": compiled.stats.compile_seconds,
    }
    if "torch" in medians:
        result["torch_speedup_of_replay"] = medians["torch"] / medians["replay"]
    return Report(environment=environment(), results=[result])


def warm_up(compiled, data: list, calls: int) -> int:
    """Call ``compiled`` over ``data``, cycling, at least ``calls`` times and until a whole pass over
    the batches traced nothing (a first call traces; a step whose optimizer creates its state on
    the first call traces again on the second). Gives up after a few passes. Returns the calls made."""
    limit = calls + 3 * len(data) + 2
    made = untraced = 0
    while (made < calls or untraced < len(data)) and made < limit:
        traces = compiled.stats.traces
        compiled(*data[made % len(data)])
        made += 1
        untraced = untraced + 1 if compiled.stats.traces == traces else 0
    return made


def _warm_up_eager(fn, data: list, calls: int) -> float:
    """Run ``fn`` ``calls`` times over ``data``; the median seconds of a call."""
    seconds = []
    for k in range(calls):
        start = time.perf_counter()
        fn(*data[k % len(data)])
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def _cycling(fn, data: list):
    batches = itertools.cycle(data)
    return lambda: fn(*next(batches))


def _stats(compiled) -> dict:
    stats = compiled.stats
    return {"traces": stats.traces, "replays": stats.replays, "fallbacks": stats.fallbacks}


def _to_torch(torch, value):
    """A staticgrad tensor as a torch tensor of the same values, dtype and requires_grad; other values as they are."""
    if not isinstance(value, staticgrad.Tensor):
        return value
    return torch.from_numpy(value.detach().numpy().copy()).requires_grad_(value.requires_grad)


def describe_batches(data: list) -> str:
    """``step(32x64 float32, 32x10 float32), 4 batches``: the first batch's arguments."""
    def one(value):
        if isinstance(value, staticgrad.Tensor):
            return f"{'x'.join(map(str, value.shape)) or 'scalar'} {str(value.dtype).rpartition('.')[2]}"
        return type(value).__name__
    count = f"{len(data)} batch{'es' if len(data) > 1 else ''}"
    return f"step({', '.join(one(v) for v in data[0])}), {count}"
