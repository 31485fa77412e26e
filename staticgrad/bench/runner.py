"""One bench run per model: eager, each compiled mode, the recorded kernels alone, and PyTorch eager."""

from __future__ import annotations

import ctypes
import itertools
import os
import platform
import time

import numpy as np

import staticgrad
from staticgrad.bench.families import BenchModel, as_tensors, bench_model, build, training_step
from staticgrad.bench.measure import interleaved_medians, peak_bytes
from staticgrad.bench.report import MODES, Report
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


def prepare(bench: BenchModel, use_torch: bool = True) -> dict:
    """Build every system for one bench model, each from the same initial weights: zero-argument
    step callables (one per mode, and the recorded kernels alone) and facts."""
    data = as_tensors(staticgrad, bench.batches(4))
    model, opt = build(staticgrad, bench)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    eager_step = training_step(staticgrad, bench, model, opt)
    model, opt = build(staticgrad, bench, state)
    compiled = staticgrad.compile(training_step(staticgrad, bench, model, opt))
    started = time.perf_counter()
    for x, y in data[:3]:   # the first calls trace (and create the optimizer state)
        compiled(x, y)
    first_calls = time.perf_counter() - started
    plan = next(p for p in compiled.plans if p.replayable)
    model, opt = build(staticgrad, bench, state)
    model_loop = training_step(staticgrad, bench, staticgrad.compile(model), opt)
    model, opt = build(staticgrad, bench, state)
    model_and_step_loop = training_step(staticgrad, bench, staticgrad.compile(model), opt, staticgrad.compile(opt.step))
    systems = {"eager": cycle_batches(eager_step, data), "replay": cycle_batches(compiled, data),
               "model": cycle_batches(model_loop, data), "model+step": cycle_batches(model_and_step_loop, data),
               "kernels": _kernels_only(plan, data)}
    torch = _torch() if use_torch else None
    if torch is not None:
        t_model, t_opt = build(torch, bench, state)
        t_data = as_tensors(torch, bench.batches(4))
        systems["torch"] = cycle_batches(training_step(torch, bench, t_model, t_opt), t_data)
    return {"systems": systems, "compiled": compiled, "plan": plan, "first_calls_seconds": first_calls,
            "data": data, "eager_step": eager_step, "torch": torch}


def _kernels_only(plan, data):
    """The eager step's own NumPy calls, as recorded, run back to back by the plain interpreter:
    no Tensor, no graph node, no dispatch (parameters updated in copies)."""
    interpreter = Interpreter(plan_program(plan.record.graph))
    _, captured, scalars = plan.bind(list(data[0]))
    inputs = itertools.cycle([[x._data, y._data] for x, y in data])
    return lambda: interpreter.run(next(inputs), captured, scalars)


def run_model(bench: BenchModel, steps: int, progress=None, use_torch: bool = True) -> dict:
    setup = prepare(bench, use_torch)
    systems = setup["systems"]
    for fn in systems.values():
        for _ in range(5):
            fn()
    medians = interleaved_medians(systems, steps, block=_block(bench), progress=progress)
    plan, compiled = setup["plan"], setup["compiled"]
    x, y = setup["data"][0]
    eager_peak = peak_bytes(lambda: setup["eager_step"](x, y))
    replay_peak = peak_bytes(lambda: compiled(x, y))
    recorded_ops = len(plan.record.graph.ops)
    eager, kernels = medians["eager"], medians["kernels"]
    overhead = max(eager - kernels, 0.0)
    result = {
        "size": bench.name, "family": bench.family, "shape": bench.shape, "optimizer": bench.optimizer_name,
        "steps_per_system": steps,
        "ms": {name: seconds * 1e3 for name, seconds in medians.items()},
        "replay_speedup": eager / medians["replay"],
        "speedup_over_eager": {name: eager / medians[name] for name in MODES if name in medians},
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


def _block(bench: BenchModel) -> int:
    """Steps per block: 25 for the small MLPs, fewer for the models whose steps take milliseconds."""
    return 25 if bench.family == "mlp" and bench.name != "large" else 5


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


def run(models, steps: int, use_torch: bool = True, show_progress: bool = True) -> dict:
    """Bench every model in ``models`` (BenchModel, or an MLP size name)."""
    models = [bench_model("mlp", m) if isinstance(m, str) else m for m in models]
    progress = None
    if show_progress:
        from tqdm import tqdm  # only for a progress bar

        systems = len(MODES) + 1 if use_torch and _torch() is not None else len(MODES)
        progress = tqdm(total=sum(max(1, steps // _block(m)) for m in models) * systems,
                        desc="staticgrad bench", unit="block", leave=False)
    try:
        results = [run_model(m, steps, progress, use_torch) for m in models]
    finally:
        if progress is not None:
            progress.close()
    return Report(environment=environment(), results=results)


def machine_line() -> str:
    """The CPU and BLAS kernels a benchmark ran on, for the head of every report."""
    env = environment()
    return (f"{env['cpus']} CPUs ({env['cpu']}), OpenBLAS core {env['blas_core']}, numpy {env['numpy']}, "
            f"torch {env['torch'] or 'not installed'}")
