"""An optimizer's per-parameter scalar work (Adam's step counts and bias corrections) replays as one
step per parameter group (passes/scalars.py, ops/scalar_chains.py), and replay stays equal to eager
bit for bit: both dtypes, every Adam branch, several groups, hyperparameters changed between calls,
parameters whose step counts differ."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.compiler.ir import Graph, Op, Value
from staticgrad.compiler.passes.scalars import gather_scalar_chains
from tests.test_bitexact import same_bytes


def mlp(depth: int, dtype: str = "float32"):
    sg.manual_seed(0)
    layers = [sg.nn.Linear(6, 16), sg.nn.Tanh()]
    for _ in range(depth - 2):
        layers += [sg.nn.Linear(16, 16), sg.nn.Tanh()]
    model = sg.nn.Sequential(*layers, sg.nn.Linear(16, 3))
    return model.double() if dtype == "float64" else model


def batches(n: int, dtype: str = "float32"):
    rng = np.random.default_rng(1)
    return [tuple(sg.tensor(rng.standard_normal((32, width)).astype(dtype)) for width in (6, 3)) for _ in range(n)]


def assert_same_state(eager_model, eager_opt, compiled_model, compiled_opt) -> None:
    for (name, pe), pc in zip(eager_model.named_parameters(), compiled_model.parameters()):
        same_bytes(pc.detach().numpy(), pe.detach().numpy(), f"parameter {name}")
        same_bytes(pc.grad.numpy(), pe.grad.numpy(), f"gradient of {name}")
        assert sorted(compiled_opt.state[pc]) == sorted(eager_opt.state[pe])
        for key, value in eager_opt.state[pe].items():
            same_bytes(compiled_opt.state[pc][key].numpy(), value.numpy(), f"{key} of {name}")


def run_twins(model, opt, data, change=None):
    """Train ``model`` with ``opt`` eagerly and a deep copy of both compiled, on the same batches;
    ``change(i, opt)`` edits hyperparameters before step i (on both sides). Returns the compiled step."""
    twin_model, twin_opt = copy.deepcopy((model, opt))
    eager, compiled = training_step(sg, model, opt), sg.compile(training_step(sg, twin_model, twin_opt))
    for i, (x, y) in enumerate(data):
        if change is not None:
            change(i, opt)
            change(i, twin_opt)
        same_bytes(compiled(x, y).detach().numpy(), eager(x, y).detach().numpy(), f"loss of step {i}")
    assert_same_state(model, opt, twin_model, twin_opt)
    return compiled


def hyperparameters_change(i: int, opt) -> None:
    for k, group in enumerate(opt.param_groups):
        group["lr"] = 0.01 / (1 + i + k)
        if i >= 6:
            group["betas"] = (0.8 + 0.01 * i, 0.99 + 0.0005 * i)
        if i >= 8 and group["weight_decay"] != 0:
            group["weight_decay"] = 0.05 + 0.01 * i
        group["eps"] = 1e-8 * (1 + i)


CASES = [("Adam", {}), ("Adam", dict(weight_decay=0.1)), ("Adam", dict(amsgrad=True)),
         ("Adam", dict(maximize=True, weight_decay=0.1, amsgrad=True)), ("AdamW", {}), ("AdamW", dict(weight_decay=0)),
         ("AdamW", dict(amsgrad=True))]


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=["Adam", "Adam-l2", "Adam-amsgrad", "Adam-all", "AdamW",
                                                   "AdamW-no-decay", "AdamW-amsgrad"])
def test_adam_replays_eager_bit_for_bit_with_hyperparameters_changed_between_calls(name, kwargs, dtype):
    model = mlp(3, dtype)
    opt = getattr(sg.optim, name)(model.parameters(), lr=0.01, **kwargs)
    compiled = run_twins(model, opt, batches(12, dtype), hyperparameters_change)
    # the first call makes the state (another branch), the second records the step every later call replays
    assert compiled.stats.traces == 2 and compiled.stats.replays == 10, compiled.stats


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_with_three_param_groups_of_their_own_lr_and_betas_replays_eager_bit_for_bit(dtype):
    model = mlp(4, dtype)
    linears = [m for m in model.modules() if isinstance(m, sg.nn.Linear)]
    opt = sg.optim.AdamW([{"params": linears[0].parameters(), "lr": 0.1, "betas": (0.5, 0.9)},
                          {"params": list(linears[1].parameters()) + list(linears[2].parameters()), "weight_decay": 0},
                          {"params": linears[3].parameters(), "lr": 0.003}], lr=0.02)
    compiled = run_twins(model, opt, batches(10, dtype), hyperparameters_change)
    assert compiled.stats.traces == 2, compiled.stats


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_parameters_whose_step_counts_differ_replay_eager_bit_for_bit(dtype):
    """Steps where only the first layer had a gradient leave its step count ahead of the others':
    each distinct count gets its own bias corrections."""
    model = mlp(3, dtype)
    opt = sg.optim.Adam(model.parameters(), lr=0.01)
    for x, _ in batches(3, dtype):
        opt.zero_grad()
        model[0](x).sum().backward()
        opt.step()
    counts = {opt.state[p]["step"].item() for p in model.parameters() if p in opt.state}
    assert counts == {3.0}
    run_twins(model, opt, batches(8, dtype))
    assert {opt.state[p]["step"].item() for p in model.parameters()} == {11.0, 8.0}


def scalar_part(plan) -> list:
    """The optimizer's ops that compute 0-dim values (views of them aside)."""
    graph = plan.graph
    return [op.op for op in graph.ops if graph.values[op.outputs[0]].phase == "optimizer" and not op.opdef.is_view
            and (op.op == "scalar_chains" or all(len(graph.values[v].shape) == 0 for v in op.outputs))]


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_scalar_work_is_one_op_per_group_whatever_the_parameter_count(name):
    parts, kernels = [], []
    x, y = batches(1)[0]
    for depth in (2, 8):
        model = mlp(depth)
        opt = getattr(sg.optim, name)(model.parameters(), lr=0.01)
        step = sg.compile(training_step(sg, model, opt))
        for _ in range(3):
            step(x, y)
        graph = step.plan.graph
        parts.append(scalar_part(step.plan))
        updates = [op for op in graph.ops
                   if op.op == "fused" and any(graph.values[v].phase == "optimizer" for v in op.outputs)]
        kernels.append((len(updates), len({op.attr_dict["kernel"] for op in updates})))
    assert parts == [["scalar_chains"], ["scalar_chains"]]
    # 4 and 16 parameters: an update per parameter, all of them running one of two kernels (weights,
    # biases), compiled once whatever the parameter count (fuse: repeated kernels are not merged)
    assert kernels == [(4, 2), (16, 2)], kernels


def test_the_pass_merges_identical_chains_and_keeps_a_lone_op():
    """Two chains that differ only in their input become one op with a 0-dim view per export;
    a lone 0-dim op stays as it is; unchanged graphs report no change."""
    values = {i: Value(i, (), "float32", "captured") for i in range(3)}
    ops = []
    for source, first, second in ((0, 3, 4), (1, 5, 6)):
        values[first] = Value(first, (), "float32", "op")
        values[second] = Value(second, (), "float32", "op")
        ops += [Op("add_scalar", (source,), (first,), (("alpha", 1), ("other", 1))),
                Op("mul_scalar", (first,), (second,), (("other", 0.5),))]
    values[7] = Value(7, (), "float32", "op")
    ops.append(Op("neg", (2,), (7,)))
    graph = Graph(values=values, ops=ops, captured=[0, 1, 2], results=[4, 6, 7])
    lowered, changed = gather_scalar_chains(graph)
    assert changed
    assert [op.op for op in lowered.ops] == ["scalar_chains", "select", "select", "neg"]
    pack = lowered.ops[0]
    assert pack.inputs == (0, 1) and lowered.values[pack.outputs[0]].shape == (2,)
    forward = sg.ops.OPS["scalar_chains"].forward
    for arrays in ([np.array(3.0, np.float32), np.array(-0.0, np.float32)], [np.array(7.0, np.float32)] * 2):
        out = forward(*arrays, **pack.attr_dict)
        expected = [np.multiply(np.add(a, 1), 0.5) for a in arrays]
        same_bytes(out, np.array(expected, np.float32), "the chains' results")
    assert gather_scalar_chains(lowered) == (lowered, False)
