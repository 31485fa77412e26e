"""The bench table as text."""

from __future__ import annotations

HOW = ("eager = graph rebuilt every step; replay = @staticgrad.compile; kernels = the eager step's own NumPy "
       "calls replayed back to back from its recording (no Tensor, no graph node, no dispatch); "
       "graph+dispatch share = (eager - kernels) / eager.")


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 10 * 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MiB"


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
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    env = report["environment"]
    lines.append("")
    lines.append(f"tanh MLP, MSE loss, SGD(momentum=0.9); median per training step, "
                 f"{results[0]['steps_per_system']} steps per system in alternating blocks.")
    lines.append(HOW)
    lines.append("us/op = (eager - kernels) / ops the eager step records; replay memory = its arena plus what a "
                 "replay allocates (outputs, new .grad tensors).")
    lines.append(f"numpy {env['numpy']}, torch {env['torch'] or 'not installed'}, {env['cpus']} CPUs "
                 f"({env['cpu']}), OpenBLAS core {env['blas_core']}.")
    return "\n".join(lines)
