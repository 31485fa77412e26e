"""The bench table as text: for the bench models (``staticgrad bench``) and for the user's own
step (``staticgrad bench --step``, ``staticgrad.bench.compare``)."""

from __future__ import annotations

# The systems a report may time, in the order rows print.
MODES = {
    "eager": "eager: the graph rebuilt every step",
    "replay": "compiled step: the whole step replayed",
    "model": "compiled model: loss, backward, opt.step eager",
    "model+step": "compiled model and compiled opt.step",
    "torch": "PyTorch eager",
}
USER_STEP = "user step"   # the family of a result of compare()

HOW = ("eager = graph rebuilt every step; replay = @staticgrad.compile; kernels = the eager step's own NumPy "
       "calls replayed back to back from its recording (no Tensor, no graph node, no dispatch); "
       "graph+dispatch share = (eager - kernels) / eager.")


class Report(dict):
    """A bench report: a dict (``environment``, and ``results``, one per model or step) that
    prints as the table ``staticgrad bench`` prints."""

    def __str__(self) -> str:
        return table(self)


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 10 * 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MiB"


def _columns(head: list, rows: list) -> list:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    return lines


def modes_table(report: dict) -> str:
    """A row per model and mode: median ms per training step and speed against eager."""
    rows = []
    for r in report["results"]:
        for mode, label in MODES.items():
            if mode in r["ms"]:
                if mode == "replay":
                    label = _replay_label(r, label)
                rows.append([r["size"], label, f"{r['ms'][mode]:.3f}", f"{r['speedup_over_eager'][mode]:.2f}x"])
    only_steps = all(r["family"] == USER_STEP for r in report["results"])
    return "\n".join(_columns(["step" if only_steps else "model", "mode", "ms per step", "vs eager"], rows))


def table(report: dict) -> str:
    results = report["results"]
    has_torch = any("torch" in r["ms"] for r in results)
    only_steps = all(r["family"] == USER_STEP for r in results)
    head = ["step" if only_steps else "size", "batches" if only_steps else "model", "eager ms", "replay ms"]
    head += (["torch ms"] if has_torch else []) + ["speedup"] + (
        [] if only_steps else ["graph+dispatch", "us/op"]) + ["peak memory eager / replay"]
    rows = []
    for r in results:
        ms, mem = r["ms"], r["memory_bytes"]
        row = [r["size"], r["shape"], f"{ms['eager']:.3f}", f"{ms['replay']:.3f}"]
        if has_torch:
            row.append(f"{ms['torch']:.3f}" if "torch" in ms else "-")
        row.append(f"{r['replay_speedup']:.1f}x")
        if not only_steps:   # the share needs the recorded kernels timed alone, which only the bench models time
            share = r.get("graph_and_dispatch_share")
            row += ["-" if share is None else f"{share:.0%}",
                    f"{r['eager_overhead_us_per_op']:.1f}" if "eager_overhead_us_per_op" in r else "-"]
        row.append(f"{_kib(mem['eager_step_peak'])} / {_kib(mem['replay_total'])}")
        rows.append(row)
    lines = _columns(head, rows)
    lines.append("")
    lines += modes_table(report).split("\n")
    lines.append("")
    models = [r for r in results if r["family"] != USER_STEP]
    if models:
        names = "; ".join(f"{r['size']}: {r['family']}, {r['optimizer']}" for r in models)
        lines.append(f"{names}. Median per training step, {models[0]['steps_per_system']} steps per system in "
                     "alternating blocks.")
        lines.append(HOW)
        lines.append("us/op = (eager - kernels) / ops the eager step records; replay memory = its arena plus what a "
                     "replay allocates (outputs, new .grad tensors).")
    for r in results:
        if r["family"] == USER_STEP:
            lines += user_step_notes(r)
    lines.append(machine(report["environment"]))
    return "\n".join(lines)


def machine(env: dict) -> str:
    """The line every report ends with: the library versions, the CPU, the BLAS kernels and the
    threads each library may use (several threads on a busy machine can slow a step many times)."""
    torch = f"torch {env['torch']} (torch threads {env['torch_threads']})" if env["torch"] else "torch not installed"
    return (f"numpy {env['numpy']}, {torch}, {env['cpus']} CPUs ({env['cpu']}), OpenBLAS core "
            f"{env['blas_core']} (OPENBLAS_NUM_THREADS {env['blas_threads']}).")


def _replay_label(r: dict, label: str) -> str:
    """The compiled step's row label, saying so when its timed calls did not all replay."""
    compiled = r.get("compiled")
    if compiled is None or compiled["all_replayed"]:
        return label
    return "compiled step: FELL BACK TO EAGER, never replayed" if not compiled["replayed"] else \
        "compiled step: partly replayed, partly eager"


def _size(n) -> str:
    return "-" if n is None else _kib(n)


def user_step_notes(r: dict) -> list:
    """What a user step's rows mean, whether its compiled step replayed, and its plan's facts."""
    c, mem = r["compiled"], r["memory_bytes"]
    lines = [f"{r['size']}: {r['shape']}; median per step, {r['steps_per_system']} steps per system in "
             f"alternating blocks of {r['block']}. eager = the step as written; compiled = "
             "staticgrad.compile(step); both train the same model in turn."]
    if not c["replayed"]:
        why = f" Why: {c['fell_back_because']}." if c["fell_back_because"] else (
            " No recording failed: the calls passed the compiled step's plan cap (see its warning), or NumPy traps "
            "floating-point errors (np.seterr), which replays never run under.")
        lines.append(f"WARNING: the compiled step did not replay: all {c['timed_calls']} timed calls ran eagerly "
                     f"({c['fallbacks']} fallbacks, {c['traces']} traces), so its row times eager again.{why}")
    elif not c["all_replayed"]:
        lines.append(f"WARNING: only {c['replays']} of {c['timed_calls']} timed calls of the compiled step "
                     f"replayed ({c['traces']} traced anew, {c['fallbacks']} ran eagerly): its row mixes replay "
                     "and eager.")
    else:
        plans = f"{c['plans']} plan{'s' if c['plans'] != 1 else ''}"
        lines.append(f"compiled: all {c['timed_calls']} timed calls replayed ({plans}; {c['warmup_calls']} warm-up "
                     f"calls took {r['warmup_seconds']:.2f} s, {r['compile_seconds']:.2f} s of it tracing and "
                     "compiling).")
    if r["recorded_ops"] is not None:
        bound, arena = mem["arena_lower_bound"], mem["replay_arena"]
        ratio = f" ({arena / bound:.2f}x)" if bound else ""
        lines.append(f"plan: {r['recorded_ops']} ops recorded, {r['replayed_ops']} replayed, "
                     f"{r['fused_kernels']} fused kernel call(s); arena {_size(arena)}, lower bound {_size(bound)}"
                     f"{ratio}; peak memory of a step: eager {_size(mem['eager_step_peak'])}, replay "
                     f"{_size(mem['replay_total'])} (arena + what a replay allocates).")
    return lines
