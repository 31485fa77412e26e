"""`staticgrad bench`: the main job runs, prints its table and writes every number."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import staticgrad as sg
from staticgrad.bench.families import FAMILIES, as_tensors, bench_model, build, training_step
from staticgrad.cli import main


def test_bench_tiny_writes_table_and_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "--size", "tiny", "--steps", "25", "--json", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "replay ms" in out and "graph+dispatch" in out
    assert "compiled model and compiled opt.step" in out and "vs eager" in out   # a row per mode
    report = json.loads(path.read_text())
    (result,) = report["results"]
    assert {"eager", "replay", "model", "model+step", "kernels"} <= set(result["ms"])
    assert set(result["speedup_over_eager"]) >= {"eager", "replay", "model", "model+step"}
    assert result["replay_speedup"] > 0 and 0 <= result["graph_and_dispatch_share"] <= 1
    memory = result["memory_bytes"]
    assert memory["replay_arena"] >= memory["arena_lower_bound"] > 0
    assert memory["eager_step_peak"] > 0
    assert result["recorded_ops"] > result["replayed_ops"] > 0


@pytest.mark.parametrize("family", FAMILIES)
def test_every_bench_model_has_a_torch_twin_with_the_same_weights_and_loss(family):
    """The bench races PyTorch on the same model: built from staticgrad's state dict, the torch
    twin computes the same first loss (float32 tolerance) on the same batch."""
    bench = bench_model(family)
    model, _ = build(sg, bench)
    t_model, _ = build(torch, bench, model.state_dict())
    (x, y), = bench.batches(1)
    ours = bench.loss(sg, model(sg.tensor(x)), sg.tensor(y)).item()
    theirs = bench.loss(torch, t_model(torch.tensor(x)), torch.tensor(y)).item()
    assert ours == pytest.approx(theirs, rel=1e-5)


@pytest.mark.bitexact
@pytest.mark.parametrize("family", ["cnn", "lstm", "transformer"])
def test_every_mode_of_a_family_trains_the_same_parameters(family):
    """The bench's modes run the same training: after three steps on the same batches, eager,
    the compiled step, the compiled model and the compiled model with a compiled opt.step hold
    the same parameters, bit for bit. (The LSTM's compiled model once saved a contiguous copy of
    its recurrent weight's transpose for every step but the first, where eager saves the view:
    the backward's matmuls then took another BLAS path.)"""
    bench = bench_model(family)
    model, opt = build(sg, bench)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    models = [model]
    steps = [training_step(sg, bench, model, opt)]
    for mode in ("step", "model", "model+step"):
        model, opt = build(sg, bench, state)
        models.append(model)
        if mode == "step":
            steps.append(sg.compile(training_step(sg, bench, model, opt)))
        else:
            step = sg.compile(opt.step) if mode == "model+step" else None
            steps.append(training_step(sg, bench, sg.compile(model), opt, step))
    for x, y in as_tensors(sg, bench.batches(3)):
        for step in steps:
            step(x, y)
    reference = [p.detach().numpy() for p in models[0].parameters()]
    for model in models[1:]:
        assert all(np.array_equal(a, p.detach().numpy()) for a, p in zip(reference, model.parameters()))


def test_bench_families_from_the_command_line(capsys):
    assert main(["bench", "--model", "lstm", "--steps", "5", "--quiet", "--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "lstm" in out and "compiled model: loss, backward, opt.step eager" in out and "Adam" in out
