"""Every system the race times on one bench model (staticgrad/bench/families.py), each built from
the same initial weights (staticgrad's state dict) and batches, and returned as a zero-argument
callable that runs one training step on the next batch.

Each builder returns (systems, skipped, facts): ``skipped`` maps a system that could not run to
the reason, which the race prints instead of a time; ``facts`` are numbers for the report.
"""

from __future__ import annotations

import logging
import re
import time

from floors import NumbaFloor, NumPyFloor
from functional_optim import init_state, optimizer_spec, update

import staticgrad
from staticgrad.bench.families import as_tensors, build, training_step
from staticgrad.bench.runner import cycle_batches

BATCHES = 4   # batches each system cycles through


def initial_state(bench) -> dict:
    """staticgrad's initial weights of ``bench`` (seed 0), from which every system starts."""
    model, _ = build(staticgrad, bench)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def staticgrad_systems(bench, state: dict):
    """Eager; the whole step compiled (already replaying); a loop around the compiled model with a
    compiled ``opt.step``. Facts: the compiled step's replayed and recorded op counts."""
    data = as_tensors(staticgrad, bench.batches(BATCHES))
    model, opt = build(staticgrad, bench, state)
    eager = training_step(staticgrad, bench, model, opt)
    model, opt = build(staticgrad, bench, state)
    compiled = staticgrad.compile(training_step(staticgrad, bench, model, opt))
    for x, y in data[:3]:   # the first calls trace (and create the optimizer state)
        compiled(x, y)
    model, opt = build(staticgrad, bench, state)
    loop = training_step(staticgrad, bench, staticgrad.compile(model), opt, staticgrad.compile(opt.step))
    plan = next(p for p in compiled.plans if p.replayable)
    systems = {"staticgrad replay": cycle_batches(compiled, data), "staticgrad eager": cycle_batches(eager, data),
               "staticgrad model+step": cycle_batches(loop, data)}
    facts = {"replayed_ops": len(plan.graph.ops), "recorded_ops": len(plan.record.graph.ops),
             "fused_kernels": len(plan.program.kernels)}
    return systems, {}, facts


def floor_systems(bench, state: dict):
    """The hand-written NumPy and Numba floors of the tanh MLP (floors.py)."""
    if bench.family != "mlp":
        return {}, {}, {}
    layers = sorted({int(name.split(".")[0]) for name in state})
    weights = [state[f"{i}.weight"].numpy().copy() for i in layers]
    biases = [state[f"{i}.bias"].numpy().copy() for i in layers]
    raw = bench.batches(BATCHES)
    group = build(staticgrad, bench, state)[1].param_groups[0]
    systems = {}
    for name, cls in (("numpy floor", NumPyFloor), ("numba floor", NumbaFloor)):
        floor = cls([w.copy() for w in weights], [b.copy() for b in biases], raw[0][0].shape[0], group["lr"],
                    group["momentum"])
        systems[name] = cycle_batches(floor, raw)
    return systems, {}, {}


def torch_systems(bench, state: dict, with_compile: bool = True):
    """PyTorch eager, and ``torch.compile`` of the whole step as one graph (when it compiles here)."""
    try:
        import torch  # the optional PyTorch peer
    except ImportError:
        return {}, {"torch eager": "torch is not installed", "torch.compile": "torch is not installed"}, {}
    data = as_tensors(torch, bench.batches(BATCHES))
    model, opt = build(torch, bench, state)
    systems = {"torch eager": cycle_batches(training_step(torch, bench, model, opt), data)}
    if not with_compile:
        return systems, {"torch.compile": "not asked for (--no-compile)"}, {}
    try:
        step, seconds = torch_compiled_step(torch, bench, state, data)
    except Exception as error:   # any compiler failure is reported, not raised
        return systems, {"torch.compile": reason(error)}, {}
    systems["torch.compile"] = cycle_batches(step, data)
    return systems, {}, {"torch_compile_first_two_calls_seconds": seconds}


def torch_compiled_step(torch, bench, state: dict, data: list):
    """The whole training step (forward, loss, gradients, optimizer update) as one pure function
    compiled with ``fullgraph=True``: the gradients come from ``torch.func.grad_and_value`` (a
    ``loss.backward()`` inside a compiled function breaks the graph) and the optimizer is
    functional_optim's. Returns (step(x, y), seconds of its first two calls, which compile)."""
    import torch._dynamo

    torch._dynamo.reset()                    # each model compiles afresh (the step's code object is shared)
    torch._dynamo.config.allow_rnn = True    # otherwise nn.LSTM breaks the graph
    model, opt = build(torch, bench, state)
    spec = optimizer_spec(opt)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())

    def loss_of(params, x, y):
        if bench.family == "lstm":
            return bench.loss(torch, _lstm_by_steps(torch, params, x), y)
        return bench.loss(torch, torch.func.functional_call(model, (params, buffers), (x,)), y)

    @torch.compile(fullgraph=True)
    def compiled(params, opt_state, x, y):
        grads, loss = torch.func.grad_and_value(loss_of)(params, x, y)
        params, opt_state = update(spec, params, grads, opt_state)
        return params, opt_state, loss

    held = {"params": params, "opt": init_state(spec, params, torch.zeros_like, torch.zeros(()))}

    def step(x, y):
        held["params"], held["opt"], loss = compiled(held["params"], held["opt"], x, y)
        return loss

    started = time.perf_counter()
    quiet = logging.getLogger("torch._subclasses.fake_tensor")   # logs a failed trace's traceback, then raises
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        for x, y in data[:2]:
            step(x, y)
    finally:
        quiet.setLevel(level)
    return step, time.perf_counter() - started


def _lstm_by_steps(torch, params: dict, x):
    """The bench LSTM's forward (nn.LSTM, batch first, then the head on the last step) written with
    tensor ops, PyTorch's gate order (input, forget, cell, output): what torch.compile compiles for
    this family, since nn.LSTM under torch.func.grad_and_value fails in its fake-tensor trace."""
    w_ih, w_hh = params["lstm.weight_ih_l0"], params["lstm.weight_hh_l0"]
    bias = params["lstm.bias_ih_l0"] + params["lstm.bias_hh_l0"]
    h = c = x.new_zeros(x.shape[0], w_hh.shape[1])
    for step in range(x.shape[1]):
        i, f, g, o = (x[:, step] @ w_ih.t() + h @ w_hh.t() + bias).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h @ params["head.weight"].t() + params["head.bias"]


def reason(error: Exception) -> str:
    """One line saying why a peer failed to compile: the error's first line and, when the compiler
    quotes the error its tracing raised (``got RuntimeError("...")``), that error."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = f"{type(error).__name__}: {lines[0] if lines else ''}"
    inner = re.search(r"got (\w+(?:Error|Exception)\(.*?\))\s*$", text, re.MULTILINE)
    return f"{said}: {inner.group(1)}" if inner else said


__all__ = ["floor_systems", "initial_state", "staticgrad_systems", "torch_compiled_step", "torch_systems"]
