"""One bench run per model size: eager, replay, the recorded kernels alone, and PyTorch eager."""

from __future__ import annotations

import ctypes
import itertools
import os
import platform
import time

import numpy as np

import staticgrad
from staticgrad.bench.measure import interleaved_medians, peak_bytes
from staticgrad.bench.models import SIZES, MLPSize, batches, build, initial_weights
from staticgrad.compiler.planner import plan_program
from staticgrad.runtime.interpreter import Interpreter


def cycle_batches(step, data):
    """A zero-argument callable running ``step`` on the next batch of ``data``, round and round."""
    batches_iter = itertools.cycle(data)

    def call():
        x, y = next(batches_iter)
        return step(x, y)
    return call


def _torch():
    try:
        import torch  # the optional PyTorch peer: raced only when installed
    except ImportError:
        return None
    return torch


def staticgrad_steps(size: MLPSize, weights: list, data: list):
    """(eager step, compiled step, seconds of its first calls): two copies of the same model, the
    compiled one already called on three batches so that its optimizer state exists and it replays."""
    _, _, eager_step = build(staticgrad, size, weights)
    _, _, step = build(staticgrad, size, weights)
    compiled = staticgrad.compile(step)
    started = time.perf_counter()
    for x, y in data[:3]:
        compiled(x, y)
    return eager_step, compiled, time.perf_counter() - started


def prepare(size: MLPSize, use_torch: bool = True) -> dict:
    """Build every system for one size; returns zero-argument step callables and facts."""
    weights = initial_weights(size)
    raw = batches(size)
    data = [(staticgrad.tensor(x), staticgrad.tensor(y)) for x, y in raw]
    eager_step, compiled, first_calls = staticgrad_steps(size, weights, data)
    plan = next(p for p in compiled.plans if p.replayable)
    systems = {"eager": cycle_batches(eager_step, data), "replay": cycle_batches(compiled, data)}
    systems["kernels"] = _kernels_only(plan, data)
    torch = _torch() if use_torch else None
    if torch is not None:
        _, _, torch_step = build(torch, size, weights)
        systems["torch"] = cycle_batches(torch_step, [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in raw])
    return {"systems": systems, "compiled": compiled, "plan": plan, "first_calls_seconds": first_calls,
            "data": data, "eager_step": eager_step, "torch": torch}


def _kernels_only(plan, data):
    """The eager step's own NumPy calls, as recorded, run back to back by the plain interpreter:
    no Tensor, no graph node, no dispatch (parameters updated in copies)."""
    interpreter = Interpreter(plan_program(plan.record.graph))
    _, captured, scalars = plan.bind(list(data[0]))
    inputs = itertools.cycle([[x._data, y._data] for x, y in data])
    return lambda: interpreter.run(next(inputs), captured, scalars)


def run_size(size: MLPSize, steps: int, progress=None, use_torch: bool = True) -> dict:
    setup = prepare(size, use_torch)
    systems = setup["systems"]
    for fn in systems.values():
        for _ in range(5):
            fn()
    medians = interleaved_medians(systems, steps, progress=progress)
    plan, compiled = setup["plan"], setup["compiled"]
    x, y = setup["data"][0]
    eager_peak = peak_bytes(lambda: setup["eager_step"](x, y))
    replay_peak = peak_bytes(lambda: compiled(x, y))
    recorded_ops = len(plan.record.graph.ops)
    eager, kernels = medians["eager"], medians["kernels"]
    overhead = max(eager - kernels, 0.0)
    result = {
        "size": size.name, "shape": size.describe(), "steps_per_system": steps,
        "ms": {name: seconds * 1e3 for name, seconds in medians.items()},
        "replay_speedup": eager / medians["replay"],
        "graph_and_dispatch_share": overhead / eager,
        "eager_overhead_us_per_op": overhead / recorded_ops * 1e6,
        "recorded_ops": recorded_ops, "replayed_ops": len(plan.graph.ops),
        "fused_kernels": len(plan.program.kernels),
        "memory_bytes": {
            "eager_step_peak": eager_peak,
            "replay_arena": plan.program.arena_bytes,
            "replay_step_allocations": replay_peak,
            "replay_total": plan.program.arena_bytes + replay_peak,
            "arena_lower_bound": plan.program.lower_bound,
        },
        "first_three_calls_seconds": setup["first_calls_seconds"],
        "compile_seconds": compiled.stats.compile_seconds,
    }
    if "torch" in medians:
        result["torch_speedup_of_replay"] = medians["torch"] / medians["replay"]
    return result


def blas_core() -> str:
    """The kernel family NumPy's OpenBLAS runs (``SkylakeX``, ``Haswell``...): it sets the order in
    which a matmul adds its products, so every report names it. "unknown" where it can't be asked."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return "unknown"
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    torch = _torch()
    return {
        "python": platform.python_version(), "numpy": np.__version__, "staticgrad": staticgrad.__version__,
        "torch": getattr(torch, "__version__", None), "cpus": os.cpu_count(),
        "cpu": cpu_model(), "blas_core": blas_core(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }


def run(sizes, steps: int, use_torch: bool = True, show_progress: bool = True) -> dict:
    progress = None
    if show_progress:
        from tqdm import tqdm  # only for a progress bar

        systems = 4 if use_torch and _torch() is not None else 3
        progress = tqdm(total=len(sizes) * max(1, steps // 25) * systems, desc="staticgrad bench",
                        unit="block", leave=False)
    try:
        results = [run_size(SIZES[name], steps, progress, use_torch) for name in sizes]
    finally:
        if progress is not None:
            progress.close()
    return {"environment": environment(), "results": results}


def machine_line() -> str:
    """The CPU and BLAS kernels a benchmark ran on, for the head of every report."""
    env = environment()
    return (f"{env['cpus']} CPUs ({env['cpu']}), OpenBLAS core {env['blas_core']}, numpy {env['numpy']}, "
            f"torch {env['torch'] or 'not installed'}")
