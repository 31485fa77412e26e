"""The bench table as text."""

from __future__ import annotations

HOW = ("eager = graph rebuilt every step; replay = @staticgrad.compile; kernels = the eager step's own NumPy "
       "calls replayed back to back from its recording (no Tensor, no graph node, no dispatch); "
       "graph+dispatch share = (eager - kernels) / eager.")


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
    from staticgrad.bench.runner import MODES  # the modes the runner times, in order

    rows = []
    for r in report["results"]:
        for mode, label in MODES.items():
            if mode in r["ms"]:
                rows.append([r["size"], label, f"{r['ms'][mode]:.3f}", f"{r['speedup_over_eager'][mode]:.2f}x"])
    return "\n".join(_columns(["model", "mode", "ms per step", "vs eager"], rows))


def table(report: dict) -> str:
    results = report["results"]
    has_torch = any("torch" in r["ms"] for r in results)
    head = ["size", "model", "eager ms", "replay ms"] + (["torch ms"] if has_torch else []) + [
        "speedup", "graph+dispatch", "us/op", "peak memory eager / replay"]
    rows = []
    for r in results:
        ms, mem = r["ms"], r["memory_bytes"]
        row = [r["size"], r["shape"], f"{ms['eager']:.3f}", f"{ms['replay']:.3f}"]
        if has_torch:
            row.append(f"{ms['torch']:.3f}" if "torch" in ms else "-")
        row += [f"{r['replay_speedup']:.1f}x", f"{r['graph_and_dispatch_share']:.0%}",
                f"{r['eager_overhead_us_per_op']:.1f}",
                f"{_kib(mem['eager_step_peak'])} / {_kib(mem['replay_total'])}"]
        rows.append(row)
    lines = _columns(head, rows)
    env = report["environment"]
    lines.append("")
    lines += modes_table(report).split("\n")
    lines.append("")
    models = "; ".join(f"{r['size']}: {r['family']}, {r['optimizer']}" for r in results)
    lines.append(f"{models}. Median per training step, {results[0]['steps_per_system']} steps per system in "
                 "alternating blocks.")
    lines.append(HOW)
    lines.append("us/op = (eager - kernels) / ops the eager step records; replay memory = its arena plus what a "
                 "replay allocates (outputs, new .grad tensors).")
    lines.append(f"numpy {env['numpy']}, torch {env['torch'] or 'not installed'}, {env['cpus']} CPUs "
                 f"({env['cpu']}), OpenBLAS core {env['blas_core']}.")
    return "\n".join(lines)
