"""The scripts in benchmarks/ still run against the current bench API: each imports, the race runs
the tiny MLP, the peers' functional optimizers and JAX models compute what the bench models do;
the slow cases run every script with its smallest settings."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import staticgrad as sg
from staticgrad.bench.families import FAMILIES, bench_model, build

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(path.stem for path in BENCHMARKS.glob("*.py"))


@pytest.fixture
def benchmarks(monkeypatch):
    """benchmarks/ importable by module name (as the scripts import each other), forgotten after."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    before = set(sys.modules)
    yield importlib.import_module
    for name in set(sys.modules) - before:
        if name in SCRIPTS:
            del sys.modules[name]


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_script_imports(benchmarks, script):
    benchmarks(script)


def test_race_runs_the_tiny_mlp_and_writes_every_number(benchmarks, tmp_path, capsys):
    path = tmp_path / "race.json"
    benchmarks("race").main(["--model", "mlp", "--sizes", "tiny", "--rounds", "1", "--no-compile",
                             "--json", str(path)])
    out = capsys.readouterr().out
    assert "OpenBLAS core" in out and "staticgrad replay" in out and "numba floor" in out
    assert "torch.compile not timed: not asked for (--no-compile)" in out
    tiny = json.loads(path.read_text())["families"]["mlp"]["tiny"]
    assert {"staticgrad replay", "staticgrad eager", "staticgrad model+step", "torch eager", "numpy floor",
            "numba floor"} <= set(tiny["ms"])
    assert tiny["ratio_to_replay"]["staticgrad replay"] == 1 and tiny["replayed_ops"] > 0
    assert all(value > 0 for value in tiny["ms"].values())


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_the_functional_optimizers_update_as_torch_does(benchmarks, optimizer):
    """The whole-step peers (torch.compile, JAX jit) train with functional_optim's updates: three
    steps of each equal torch's optimizer on the same gradients (float32 tolerance)."""
    functional = benchmarks("functional_optim")
    rng = np.random.default_rng(0)
    params = {name: torch.tensor(rng.standard_normal(shape, dtype=np.float32)) for name, shape in
              (("w", (4, 3)), ("b", (4,)))}
    leaves = [p.clone().requires_grad_() for p in params.values()]
    make = {"sgd": lambda: torch.optim.SGD(leaves, lr=0.01, momentum=0.9),
            "adam": lambda: torch.optim.Adam(leaves, lr=1e-3),
            "adamw": lambda: torch.optim.AdamW(leaves, lr=1e-3, weight_decay=0.01)}[optimizer]
    opt = make()
    spec = functional.optimizer_spec(opt)
    state = functional.init_state(spec, params, torch.zeros_like, torch.zeros(()))
    for _ in range(3):
        grads = {name: torch.tensor(rng.standard_normal(p.shape, dtype=np.float32)) for name, p in params.items()}
        for leaf, grad in zip(leaves, grads.values()):
            leaf.grad = grad.clone()
        opt.step()
        params, state = functional.update(spec, params, grads, state)
    for leaf, p in zip(leaves, params.values()):
        np.testing.assert_allclose(p.numpy(), leaf.detach().numpy(), rtol=1e-5, atol=1e-7)


def _numpy_stand_ins(jax_systems):
    """jax_systems' module globals with NumPy standing in for jax.numpy, and NumPy versions of the
    few lax and jax.nn calls its losses make (JAX itself is not a test dependency)."""

    def conv(x, w, window_strides, padding, dimension_numbers):   # stride 1, NCHW / OIHW
        (top, bottom), (left, right) = padding
        padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
        height, width = x.shape[2] + top + bottom - w.shape[2] + 1, x.shape[3] + left + right - w.shape[3] + 1
        return sum(np.einsum("nchw,oc->nohw", padded[:, :, a:a + height, b:b + width], w[:, :, a, b])
                   for a in range(w.shape[2]) for b in range(w.shape[3]))

    def reduce_window(x, init, computation, dims, strides, padding):   # 2x2 max, stride 2
        n, c, h, w = x.shape
        return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))

    def scan(cell, carry, xs):
        for x in xs:
            carry, _ = cell(carry, x)
        return carry, None

    def log_softmax(x, axis):
        shifted = x - x.max(axis, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))

    def softmax(x, axis):
        return np.exp(log_softmax(x, axis))

    erf = np.vectorize(math.erf)
    nn = types.SimpleNamespace(sigmoid=lambda x: 1 / (1 + np.exp(-x)), relu=lambda x: np.maximum(x, 0),
                               log_softmax=log_softmax, softmax=softmax,
                               gelu=lambda x, approximate: 0.5 * x * (1 + erf(x / math.sqrt(2))))
    return {"jnp": np, "lax": types.SimpleNamespace(conv_general_dilated=conv, reduce_window=reduce_window,
                                                    scan=scan, max=np.maximum),
            "jax": types.SimpleNamespace(nn=nn)}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_jax_models_compute_the_bench_models_loss(benchmarks, monkeypatch, family):
    """The JAX peer's models, read with NumPy in float64 standing in for jax.numpy, give the staticgrad
    bench model's first loss from its own state dict: the same layers, layouts and loss."""
    jax_systems = benchmarks("jax_systems")
    for name, value in _numpy_stand_ins(jax_systems).items():
        monkeypatch.setattr(jax_systems, name, value)
    bench = bench_model(family)
    model, _ = build(sg, bench)
    params = {k: v.detach().numpy().astype(np.float64) for k, v in model.named_parameters()}
    ((x, y),) = bench.batches(1)
    ours = bench.loss(sg, model(sg.tensor(x)), sg.tensor(y)).item()

    def widened(a):
        return a.astype(np.float64) if a.dtype == np.float32 else a
    assert float(jax_systems.LOSSES[family](params, widened(x), widened(y))) == pytest.approx(ours, rel=1e-5)


def _run(*args, timeout=900):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(BENCHMARKS.parent),
                                                                     os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_race_runs_every_family_with_torch_compile(tmp_path):
    """Every family races, torch.compile included: timed, or named with the reason it did not compile."""
    path = tmp_path / "race.json"
    out = _run(str(BENCHMARKS / "race.py"), "--model", *FAMILIES, "--sizes", "tiny", "--rounds", "1",
               "--threads", "1", "--json", str(path))
    report = json.loads(path.read_text())
    assert set(report["families"]) == set(FAMILIES) and "(OPENBLAS_NUM_THREADS 1)" in out
    for results in report["families"].values():
        for result in results.values():
            assert "torch.compile" in result["ms"] or "torch.compile" in result["skipped"]
            assert "JAX jit" in result["ms"] or "JAX jit" in result["skipped"]


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["compile_time.py", "--new-batch-only"],
    ["memory.py", "--model", *FAMILIES, "--sizes", "tiny"],
    ["scale.py", "--depths", "5"],
    ["ops_speed.py", "--only", "ops", "--rounds", "1"],
    ["compiled_model.py", "--model", "mlp", "--size", "tiny", "--steps", "20"],
], ids=lambda args: args[0])
def test_every_other_benchmark_runs_with_its_smallest_settings(args):
    assert "OpenBLAS core" in _run(str(BENCHMARKS / args[0]), *args[1:])


def test_the_lstm_that_torch_compile_compiles_is_nn_lstm_s_forward(benchmarks):
    """torch.compile gets the bench LSTM written with tensor ops (nn.LSTM does not compile under
    torch.func here): its forward equals the torch twin's, on the twin's own parameters."""
    systems = benchmarks("systems")
    bench = bench_model("lstm", None)
    model, _ = build(torch, bench, systems.initial_state(bench))
    x = torch.tensor(bench.batches(1)[0][0])
    params = dict(model.named_parameters())
    with torch.no_grad():
        torch.testing.assert_close(systems._lstm_by_steps(torch, params, x), model(x), rtol=1e-5, atol=1e-6)
