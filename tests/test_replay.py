"""@staticgrad.compile: replay leaves exactly eager's observable state, or it is refused/retraced."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.errors import TraceError


def mlp(seed=0, width=16, depth=2, out=3):
    sg.manual_seed(seed)
    layers = []
    for i in range(depth):
        layers += [sg.nn.Linear(8 if i == 0 else width, width), sg.nn.Tanh()]
    layers.append(sg.nn.Linear(width, out))
    return sg.nn.Sequential(*layers)


def batches(n, batch=4, seed=1):
    sg.manual_seed(seed)
    return [(sg.randn(batch, 8), sg.randn(batch, 3)) for _ in range(n)]


def params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_twenty_replayed_steps_equal_twenty_eager_steps():
    m_eager, m_comp = mlp(), mlp()
    o_eager = sg.optim.SGD(m_eager.parameters(), lr=0.05, momentum=0.9)
    o_comp = sg.optim.SGD(m_comp.parameters(), lr=0.05, momentum=0.9)
    eager, compiled = training_step(sg, m_eager, o_eager), sg.compile(training_step(sg, m_comp, o_comp))
    for x, y in batches(20):
        le, lc = eager(x, y), compiled(x, y)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
    assert compiled.stats.replays >= 17 and compiled.stats.traces <= 3
    for pe, pc in zip(params(m_eager), params(m_comp)):
        np.testing.assert_allclose(pc, pe, rtol=1e-5, atol=1e-7)
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-7)
        assert pc._version == pe._version
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        be, bc = o_eager.state[pe]["momentum_buffer"], o_comp.state[pc]["momentum_buffer"]
        np.testing.assert_allclose(bc.numpy(), be.numpy(), rtol=1e-5, atol=1e-7)


def test_replay_creates_fresh_outputs_and_fresh_grads():
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.01)
    step = sg.compile(training_step(sg, model, opt))
    data = batches(4)
    losses = [step(x, y) for x, y in data]
    assert len({id(l) for l in losses}) == 4
    assert len({l.item() for l in losses}) == 4, "each returned loss keeps its own value"
    grads = [p.grad for p in model.parameters()]
    step(*data[0])
    assert all(p.grad is not g for p, g in zip(model.parameters(), grads))


def test_replayed_loss_looks_like_eager_loss_and_refuses_second_backward():
    model = mlp()
    step = sg.compile(training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.01)))
    for x, y in batches(3):
        loss = step(x, y)
    assert step.stats.replays >= 1
    assert loss.requires_grad and loss.grad_fn.name() == "MseLossBackward0"
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_batch_size_change_traces_a_new_plan():
    model = mlp()
    step = sg.compile(training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.01)))
    for x, y in batches(3, batch=4):
        step(x, y)
    traces = step.stats.traces
    for x, y in batches(3, batch=6):
        step(x, y)
    assert step.stats.traces == traces + 1
    shapes = {plan.graph.values[plan.graph.inputs[0]].shape for plan in step.plans if plan.graph is not None}
    assert {(4, 8), (6, 8)} <= shapes


def test_changing_lr_between_calls_takes_effect():
    m_eager, m_comp = mlp(), mlp()
    o_eager = sg.optim.SGD(m_eager.parameters(), lr=0.1, momentum=0.5)
    o_comp = sg.optim.SGD(m_comp.parameters(), lr=0.1, momentum=0.5)
    eager, compiled = training_step(sg, m_eager, o_eager), sg.compile(training_step(sg, m_comp, o_comp))
    for i, (x, y) in enumerate(batches(8)):
        lr = 0.1 / (1 + i)
        o_eager.param_groups[0]["lr"] = lr
        o_comp.param_groups[0]["lr"] = lr
        eager(x, y)
        compiled(x, y)
    assert compiled.stats.traces <= 2, "an lr change is read on replay, not retraced"
    for pe, pc in zip(params(m_eager), params(m_comp)):
        np.testing.assert_allclose(pc, pe, rtol=1e-6, atol=1e-7)


def test_momentum_turned_off_retraces():
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = sg.compile(training_step(sg, model, opt))
    data = batches(6)
    for x, y in data[:3]:
        step(x, y)
    traces = step.stats.traces
    opt.param_groups[0]["momentum"] = 0.0
    step(*data[3])
    assert step.stats.traces == traces + 1


def test_item_inside_raises_trace_error_naming_cause_and_way_out():
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.01)

    @sg.compile
    def step(x, y):
        opt.zero_grad()
        loss = sg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    with pytest.raises(TraceError) as info:
        step(*batches(1)[0])
    message = str(info.value)
    assert "item()" in message and "fallback=\"eager\"" in message and "return the tensor" in message
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: float(t), lambda t: bool(t > 0),
                                  lambda t: t.detach().numpy(), lambda t: repr(t)],
                         ids=["item", "float", "bool", "numpy", "print"])
def test_every_read_into_python_is_refused(read):
    @sg.compile
    def f(x):
        s = (x * 2).sum()
        read(s)
        return s

    with pytest.raises(TraceError):
        f(sg.randn(3))


def test_fallback_eager_warns_once_and_matches_eager():
    model_e, model_c = mlp(), mlp()
    opt_e = sg.optim.SGD(model_e.parameters(), lr=0.1)
    opt_c = sg.optim.SGD(model_c.parameters(), lr=0.1)

    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = sg.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if loss.item() > 0:  # data-dependent control flow
                opt.step()
            return loss
        return step

    eager = make(model_e, opt_e)
    compiled = sg.compile(make(model_c, opt_c), fallback="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x, y in batches(5):
            eager(x, y)
            compiled(x, y)
    assert len([w for w in caught if "runs eagerly" in str(w.message)]) == 1
    assert compiled.stats.fallbacks == 4 and compiled.stats.replays == 0
    for pe, pc in zip(params(model_e), params(model_c)):
        np.testing.assert_array_equal(pc, pe)


def test_plans_and_networkx_view():
    model = mlp()
    step = sg.compile(training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.01)))
    for x, y in batches(3):
        step(x, y)
    plan = next(p for p in step.plans if p.replayable)
    g = plan.to_networkx()
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    ops = [d for _, d in g.nodes(data=True) if d["kind"] == "op"]
    names = {name for d in ops for name in d["members"]}
    assert {"mm", "add", "tanh", "mse_loss", "mse_loss_backward", "tanh_backward"} <= names
    assert all("shape" in d and "dtype" in d for d in ops)
    assert step.stats.compile_seconds > 0


def test_inference_function_returning_tensors():
    model = mlp()

    @sg.compile
    def predict(x):
        with sg.no_grad():
            return model(x).softmax(-1), model(x).argmax(-1)

    for x, _ in batches(4):
        probs, labels = predict(x)
        with sg.no_grad():
            expected = model(x)
        np.testing.assert_allclose(probs.numpy(), expected.softmax(-1).numpy(), rtol=1e-6)
        np.testing.assert_array_equal(labels.numpy(), expected.argmax(-1).numpy())
    assert predict.stats.replays == 3


def test_two_outputs_eager_computed_apart_keep_eager_layout_when_merged():
    """Two equal transposed results merged into one value are returned as two arrays, the second
    a copy in the same (transposed) layout: strides as eager's, and a matmul reading it takes the
    same BLAS path as in eager."""
    def f(x):
        return (x + 1).t(), (x + 1).t()

    compiled = sg.compile(f)
    x = sg.randn(3, 5)
    for _ in range(3):
        a, b = compiled(x)
        assert [a.stride(), b.stride()] == [t.stride() for t in f(x)] == [(1, 5), (1, 5)]
        assert a.data_ptr() != b.data_ptr()
    assert compiled.stats.replays == 2


def test_function_of_inputs_without_parameters():
    f = sg.compile(lambda a, b: (a @ b).tanh() * 2 + 1)
    for _ in range(3):
        a, b = sg.randn(3, 4), sg.randn(4, 2)
        np.testing.assert_allclose(f(a, b).numpy(), ((a @ b).tanh() * 2 + 1).numpy(), rtol=1e-6)


def test_tensor_kept_in_outside_state_is_refused():
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.01)
    history = []

    @sg.compile
    def step(x, y):
        opt.zero_grad()
        loss = sg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss.detach())
        return loss

    data = batches(2)
    step(*data[0])
    with pytest.raises(TraceError, match="still referenced after it returned"):
        step(*data[1])


def test_random_ops_resample_on_replay_and_match_eager_under_seed():
    def f(x):
        return x + sg.randn(3)

    compiled = sg.compile(f)
    x = sg.zeros(3)
    sg.manual_seed(7)
    eager_draws = [f(x).numpy().copy() for _ in range(4)]
    sg.manual_seed(7)
    replay_draws = [compiled(x).numpy().copy() for _ in range(4)]
    assert compiled.stats.replays == 3
    for e, r in zip(eager_draws, replay_draws):
        np.testing.assert_array_equal(r, e)
    assert not np.array_equal(replay_draws[1], replay_draws[2])


def test_rebinding_a_global_retraces():
    global SCALE
    SCALE = sg.tensor([2.0])
    f = sg.compile(_scaled)
    x = sg.ones(1)
    assert f(x).item() == 2.0 and f(x).item() == 2.0
    SCALE = sg.tensor([3.0])
    assert f(x).item() == 3.0
    assert f.stats.traces == 2


SCALE = None


def _scaled(x):
    return x * SCALE


def test_captured_tensor_is_read_by_reference():
    w = sg.tensor([1.0, 2.0])
    f = sg.compile(lambda x: x * w)
    x = sg.ones(2)
    f(x)
    f(x)
    with sg.no_grad():
        w.mul_(10)
    np.testing.assert_array_equal(f(x).numpy(), [10.0, 20.0])
    w.data = sg.tensor([5.0, 6.0])
    np.testing.assert_array_equal(f(x).numpy(), [5.0, 6.0])
    w.data = sg.tensor([5.0, 6.0, 7.0])
    np.testing.assert_array_equal(f(sg.ones(3)).numpy(), [5.0, 6.0, 7.0])


def test_frozen_parameter_retraces():
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.1)
    step = sg.compile(training_step(sg, model, opt))
    data = batches(5)
    for x, y in data[:3]:
        step(x, y)
    first = model[0].weight.detach().numpy().copy()
    model[0].weight.requires_grad_(False)
    traces = step.stats.traces
    step(*data[3])
    assert step.stats.traces == traces + 1
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), first)


def test_gradient_accumulation_across_calls_without_zero_grad():
    m_e, m_c = mlp(), mlp()

    def make(model):
        def accumulate(x, y):
            loss = sg.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        return accumulate

    eager, compiled = make(m_e), sg.compile(make(m_c))
    for x, y in batches(5):
        eager(x, y)
        compiled(x, y)
    assert compiled.stats.replays >= 3
    for pe, pc in zip(m_e.parameters(), m_c.parameters()):
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-6)
    for p in m_c.parameters():
        p.grad = None
    for p in m_e.parameters():
        p.grad = None
    x, y = batches(1, seed=9)[0]
    eager(x, y)
    compiled(x, y)
    for pe, pc in zip(m_e.parameters(), m_c.parameters()):
        np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-6)


def test_a_gradient_assigned_as_a_view_of_an_argument_is_replayed():
    w = sg.zeros(3, 4, requires_grad=True)

    def set_grad(x):
        w.grad = x.t()
        return x.sum()

    compiled = sg.compile(set_grad)
    for x, _ in batches(4, batch=4):
        x = x[:, :3]
        compiled(x)
        np.testing.assert_array_equal(w.grad.numpy(), x.numpy().T)
    assert compiled.stats.replays == 3


def test_inplace_update_of_an_argument_is_replayed():
    @sg.compile
    def bump(x):
        x.add_(1)
        return x * 2

    x = sg.zeros(2)
    for i in range(1, 4):
        out = bump(x)
        np.testing.assert_array_equal(x.numpy(), [i, i])
        np.testing.assert_array_equal(out.numpy(), [2 * i, 2 * i])
    assert x._version == 3


def test_tensor_from_numpy_inside_is_refused():
    @sg.compile
    def f(x):
        return x + sg.tensor(np.ones(2))

    with pytest.raises(TraceError, match="pass the data in"):
        f(sg.zeros(2))


def test_python_scalar_arguments_are_part_of_the_signature():
    f = sg.compile(lambda x, k: x * k)
    x = sg.ones(2)
    assert f(x, 2.0).numpy().tolist() == [2.0, 2.0]
    assert f(x, 3.0).numpy().tolist() == [3.0, 3.0]
    assert f(x, 3.0).numpy().tolist() == [3.0, 3.0]
    assert f.stats.traces == 2 and f.stats.replays == 1


def test_interpreter_replay_is_bitwise_equal_to_eager():
    m_e, m_c = mlp(), mlp()
    eager = training_step(sg, m_e, sg.optim.SGD(m_e.parameters(), lr=0.05, momentum=0.9))
    compiled = sg.compile(training_step(sg, m_c, sg.optim.SGD(m_c.parameters(), lr=0.05, momentum=0.9)))
    for x, y in batches(6):
        eager(x, y)
        compiled(x, y)
    for pe, pc in zip(params(m_e), params(m_c)):
        np.testing.assert_array_equal(pc, pe)


def test_fused_generated_replay_equals_the_interpreter_oracle():
    """The optimised program (passes, fusion, generated code, direct writebacks) computes exactly
    what the plain interpreter computes on the unfused program."""
    from staticgrad.compiler.planner import plan_program
    from staticgrad.runtime.interpreter import Interpreter

    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
    step = sg.compile(training_step(sg, model, opt))
    data = batches(4)
    for x, y in data[:3]:
        step(x, y)
    plan = next(p for p in step.plans if p.replayable)
    assert any(op.op == "fused" for op in plan.graph.ops)
    x, y = data[3]
    inputs, fast_captured, scalars = plan.bind([x, y])
    _, oracle_captured, _ = plan.bind([x, y])
    fast = plan.compiled_replay.run(inputs, fast_captured, scalars)
    oracle = Interpreter(plan_program(plan.unfused_graph)).run(inputs, oracle_captured, scalars)
    assert len(fast) == len(oracle)
    for a, b in zip(fast, oracle):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(fast_captured, oracle_captured):
        np.testing.assert_array_equal(a, b)


def test_in_place_reuse_never_writes_through_a_view_into_an_argument():
    @sg.compile
    def f(x):
        return (x.transpose(0, 1).contiguous() * 2).sum(0)

    x = sg.randn(4, 7, 3)
    before = x.numpy().copy()
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), (x.transpose(0, 1).contiguous() * 2).sum(0).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(x.numpy(), before)
    assert f.stats.replays == 2


def test_each_param_group_keeps_its_own_lr_on_replay():
    m_eager, m_comp = mlp(), mlp()

    def groups(model):
        return [{"params": model[0].parameters(), "lr": 0.1}, {"params": model[2].parameters(), "lr": 0.001}]

    eager = training_step(sg, m_eager, sg.optim.SGD(groups(m_eager), lr=0.5, momentum=0.9))
    compiled = sg.compile(training_step(sg, m_comp, sg.optim.SGD(groups(m_comp), lr=0.5, momentum=0.9)))
    for x, y in batches(6):
        eager(x, y)
        compiled(x, y)
    assert compiled.stats.replays >= 3
    for pe, pc in zip(params(m_eager), params(m_comp)):
        np.testing.assert_array_equal(pc, pe)


def test_attribute_names_are_not_guarded_as_globals():
    """A module-level loop variable that shares its name with an attribute the step reads
    (``for step in ...`` and ``opt.step()``) is not a guard: replays go on."""
    model = mlp()
    opt = sg.optim.SGD(model.parameters(), lr=0.01)

    def run(x, y):
        opt.zero_grad()
        sg.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    compiled = sg.compile(run)
    namespace = run.__globals__
    for number, (x, y) in enumerate(batches(5)):
        namespace["step"] = number
        compiled(x, y)
    del namespace["step"]
    assert compiled.stats.replays >= 3


def test_a_custom_module_branching_on_training_retraces_when_the_mode_flips():
    class Noisy(sg.nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x

    module = Noisy()
    f = sg.compile(lambda x: module(x))
    x = sg.ones(2)
    for _ in range(3):
        assert f(x).numpy().tolist() == [2.0, 2.0]
    module.eval()
    assert f(x).numpy().tolist() == [1.0, 1.0]
    assert f.stats.traces == 2


def test_in_place_update_of_memory_shared_by_two_captured_tensors_is_refused():
    base = sg.zeros(4)
    alias = base.detach()

    @sg.compile
    def f(x):
        with sg.no_grad():
            base.add_(x)
        return alias * 2

    with pytest.raises(TraceError, match="memory that another tensor it reads also uses"):
        f(sg.ones(4))
