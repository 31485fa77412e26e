"""plan.profile: every step of a program timed, as rows and as a Chrome trace; the timed twin
computes what the replay computes; profiling leaves the user's state as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.compiler.codegen import replay_source
from staticgrad.errors import PlanError
from staticgrad.inspect.profile import OVERHEAD_ROWS, TIMERS
from staticgrad.runtime.timed import TimedReplay

F = sg.nn.functional
REQUIRED = ("name", "cat", "ph", "ts", "dur", "pid", "tid", "args")


def _training_step(seed=0, dropout=0.0):
    sg.manual_seed(seed)
    model = sg.nn.Sequential(sg.nn.Linear(6, 16), sg.nn.Tanh(), sg.nn.Dropout(dropout), sg.nn.Linear(16, 3))
    opt = sg.optim.Adam(model.parameters(), lr=1e-2)

    @sg.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def _batch(seed=1, rows=8):
    rng = np.random.default_rng(seed)
    return (sg.tensor(rng.standard_normal((rows, 6)).astype(np.float32)),
            sg.tensor(rng.standard_normal((rows, 3)).astype(np.float32)))


def _state(model, opt) -> list:
    """Every array the user can see: parameters, their .grad, optimizer state; with version counters."""
    arrays = []
    for p in model.parameters():
        arrays.append(("param", p.detach().numpy().copy(), p._version))
        arrays.append(("grad", None if p.grad is None else p.grad.numpy().copy(), None))
        for key, value in sorted(opt.state[p].items()):
            arrays.append((key, value.numpy().copy() if isinstance(value, sg.Tensor) else value,
                           value._version if isinstance(value, sg.Tensor) else None))
    return arrays


def _same_state(a, b) -> bool:
    return len(a) == len(b) and all(
        ka == kb and va == vb and (np.array_equal(xa, xb) if isinstance(xa, np.ndarray) else xa == xb)
        for (ka, xa, va), (kb, xb, vb) in zip(a, b))


def _check_rows(program, plan_program):
    rows = program.rows()
    steps = [row for row in rows if row.name not in OVERHEAD_ROWS]
    assert sum(row.count for row in steps) == len(plan_program.steps)
    labels = {row.name for row in steps}
    assert {step.label for step in program.steps} == labels
    assert all(row.total_us >= 0 and row.mean_us >= 0 and row.share >= 0 for row in rows)
    total = program.call_ns.mean() / 1e3
    assert sum(row.total_us for row in rows) <= total * (1 + 1e-9) + 1e-6
    assert program.step_ns.shape == (len(program.readings), len(plan_program.steps))
    assert [row.total_us for row in steps] == sorted((row.total_us for row in steps), reverse=True)


def _check_trace(profile, path):
    profile.save_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and all(all(key in e for key in REQUIRED) for e in complete)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in complete)
    assert all(isinstance(e["args"], dict) for e in complete)
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(names) == list(range(1, len(profile.programs) + 1))
    for tid, program in enumerate(profile.programs, start=1):
        steps = [e for e in complete if e["tid"] == tid and e["cat"] in ("op", "kernel")]
        assert len(steps) == profile.calls * len(program.steps)
        calls = [e for e in complete if e["tid"] == tid and e["cat"] == "call"]
        assert len(calls) == profile.calls
    return events


def test_a_training_step_profile_covers_every_step_and_leaves_the_state_alone(tmp_path):
    model, opt, step = _training_step()
    twin_model, twin_opt, twin_step = _training_step()
    x, y = _batch()
    for s in (step, twin_step):
        s(x, y)
        s(x, y)
    before = _state(model, opt)
    profile = step.plan.profile(x, y, calls=3)
    assert _same_state(before, _state(model, opt))
    assert [p.name for p in profile.programs] == ["step"]
    program = profile.programs[0]
    assert len(program.readings) == 3
    _check_rows(program, step.plan.program)
    kernels = profile.kernels
    assert kernels and all(row.members and row.name.startswith("k_") for row in kernels)
    assert sum(row.count for row in kernels) == len(step.plan.program.kernel_calls)
    _check_trace(profile, tmp_path / "step.json")
    table = profile.table()
    assert "op or fused kernel" in table and "replay overhead" in table and TIMERS in table
    assert str(profile) == table
    # the next call goes on from the state as it was: it equals the twin's that was never profiled
    assert np.array_equal(step(x, y).detach().numpy(), twin_step(x, y).detach().numpy())
    assert _same_state(_state(model, opt), _state(twin_model, twin_opt))
    assert step.stats.replays == twin_step.stats.replays


def test_profiling_leaves_the_random_generator_as_it_was():
    *_, step = _training_step(dropout=0.5)
    x, y = _batch()
    step(x, y)
    step(x, y)
    expected = np.random.default_rng(0)
    expected.bit_generator.state = sg.ops.factory.generator().bit_generator.state
    step.plan.profile(x, y, calls=2)
    assert sg.ops.factory.generator().random() == expected.random()


def test_a_compiled_models_backward_program_is_profiled_on_its_own_track(tmp_path):
    sg.manual_seed(0)
    net = sg.nn.Sequential(sg.nn.Linear(6, 16), sg.nn.Tanh(), sg.nn.Linear(16, 3))
    model = sg.compile(net)
    x, y = _batch()
    for _ in range(2):
        F.mse_loss(model(x), y).backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    versions = [p._version for p in net.parameters()]
    plan = model.plan
    assert plan.backward is not None
    profile = plan.profile(x, calls=2)
    assert [p.name for p in profile.programs] == ["forward", "backward"]
    _check_rows(profile.programs[0], plan.program)
    _check_rows(profile.programs[1], plan.backward.program)
    events = _check_trace(profile, tmp_path / "model.json")
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {1: "forward program", 2: "backward program"}
    assert all(np.array_equal(p.grad.numpy(), g) for p, g in zip(net.parameters(), grads))
    assert [p._version for p in net.parameters()] == versions
    assert "backward program" in profile.table()


def test_the_timed_twin_computes_what_the_replay_computes():
    _, _, step = _training_step()
    x, y = _batch()
    step(x, y)
    step(x, y)
    plan = step.plan
    program = plan.program
    plain, timed = plan.bind([x, y], copy=True), plan.bind([x, y], copy=True)
    expected = plan.compiled_replay.run(*plain)
    twin = TimedReplay(program, replay_source(program, timed=True))
    results, readings = twin.run(*timed)
    assert len(readings) == len(program.steps) + 3 and readings == sorted(readings)
    assert all(np.array_equal(a, b) for a, b in zip(expected, results))
    assert all(np.array_equal(a, b) for a, b in zip(plain.captured, timed.captured))
    assert "_clock" not in plan.compiled_replay.source


def test_profile_refuses_arguments_its_plan_does_not_replay():
    _, _, step = _training_step()
    x, y = _batch()
    step(x, y)
    step(x, y)
    with pytest.raises(PlanError, match="tensor argument 0"):
        step.plan.profile(*_batch(rows=5))
    with pytest.raises(PlanError, match="takes 2 tensor argument"):
        step.plan.profile(x)
    with pytest.raises(ValueError, match="calls"):
        step.plan.profile(x, y, calls=0)


def test_rows_by_step_name_each_step_once():
    _, _, step = _training_step()
    x, y = _batch()
    step(x, y)
    step(x, y)
    profile = step.plan.profile(x, y, calls=2)
    rows = [row for row in profile.step_rows if row.name not in OVERHEAD_ROWS]
    assert len(rows) == len(step.plan.program.steps) and all(row.count == 1 for row in rows)
    assert sorted(int(row.name.split()[0][1:]) for row in rows) == list(range(len(rows)))
    assert "#" in profile.table(limit=5, by="step") and "more step(s)" in profile.table(limit=5, by="step")
    by_op = sum(row.total_us for row in profile.rows)
    assert abs(sum(row.total_us for row in profile.step_rows) - by_op) <= 1e-6 * max(by_op, 1.0)
    with pytest.raises(ValueError, match="by must be"):
        profile.table(by="kernel")


def test_an_argument_the_program_writes_into_is_left_alone():
    w = sg.randn(4, 3)

    @sg.compile
    def scale_into(x):
        x.mul_(2.0)
        return (x @ w).sum()

    x = sg.randn(5, 4)
    scale_into(x)
    scale_into(x)
    kept, version = x.numpy().copy(), x._version
    scale_into.plan.profile(x, calls=2)
    assert np.array_equal(x.numpy(), kept) and x._version == version


def test_the_profile_command_prints_the_table_and_writes_the_trace(tmp_path, capsys):
    from staticgrad.cli import main  # the command line, for this test only

    path = tmp_path / "trace.json"
    assert main(["profile", "--calls", "2", "--limit", "5", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "step program" in out and "op or fused kernel" in out and str(path) in out
    assert json.loads(path.read_text())["traceEvents"]
