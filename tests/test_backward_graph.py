"""A backward through a graph holding a compiled model's node (an eager loss of its outputs) is
recorded whole the second time its structure is seen and replayed after: every case against an
eager twin, bit for bit, with the compile stats showing which path ran."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import staticgrad as sg
from tests.test_compiled_model import _family_twins, _same_grads, _same_parameters

F = sg.nn.functional
FAMILIES = ["mlp", "cnn", "lstm", "transformer"]


@pytest.mark.bitexact
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_replays_the_loops_backward_as_eager(name):
    """zero_grad, forward, eager loss, backward, step: from the third step on, backward replays
    one recorded program; parameters equal the eager twin's after every step."""
    eager, model, data, loss_fn = _family_twins(name)
    opts = [sg.optim.Adam(net.parameters(), lr=0.01) for net in (eager, model)]
    for k, (x, y) in enumerate((data * 6)[:6]):
        losses = []
        for net, opt in zip((eager, model), opts):
            sg.manual_seed(100 + k)   # the same dropout masks
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach().numpy())
        assert np.array_equal(*losses), f"loss differs at step {k}"
        assert _same_parameters(eager, model), f"parameters differ at step {k}"
    stats = model.stats
    # the first call traces (an eager graph), the second sees the structure, the third records it
    assert (stats.backward_eager, stats.backward_recorded, stats.backward_replays) == (1, 1, 3), stats


@pytest.mark.bitexact
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_replays_outstanding_forwards_and_accumulation_as_eager(name):
    """Four forwards outstanding and one backward of the summed loss, four (forward, backward)
    pairs accumulating into .grad, each pattern four times: the same gradients as eager's."""
    eager, model, data, loss_fn = _family_twins(name)
    data = (data * 4)[:4]

    def losses(net):
        out = []
        for k, (x, y) in enumerate(data):
            sg.manual_seed(100 + k)
            out.append(loss_fn(net(x), y))
        return out

    for round_ in range(4):
        for net in (eager, model):
            net.zero_grad()
            sum(losses(net)).backward()
        assert _same_grads(eager, model), f"summed loss, round {round_}"
        for net in (eager, model):
            for loss in losses(net):
                loss.backward()
        assert _same_grads(eager, model), f"accumulated pairs, round {round_}"
    assert model.stats.backward_replays >= 2 + 4 * 2, model.stats


def test_retain_graph_then_the_second_backward_error_as_eager():
    _eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(3):
        loss_fn(model(x), y).backward()
    loss = loss_fn(model(x), y)
    replays = model.stats.backward_replays
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward()
    assert model.stats.backward_replays == replays + 3
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    freed = sg.inspect.graph(loss)
    assert freed.held_bytes == 0


def test_a_saved_tensor_changed_in_place_raises_as_eager_after_replays():
    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for net in (eager, model):
        for _ in range(3):
            loss_fn(net(x), y).backward()
    messages = []
    for net in (eager, model):
        loss = loss_fn(net(x), y)
        with sg.no_grad():
            net[2].weight.mul_(2.0)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        messages.append(str(info.value).split(";")[0])
    assert messages[0] == messages[1] and "modified by an inplace operation" in messages[0]


def test_an_output_changed_in_place_before_backward_raises_as_eager_after_replays():
    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    messages = []
    for net in (eager, model):
        for _ in range(3):
            loss_fn(net(x), y).backward()
        out = net(x)
        loss = (out * out).sum()
        for _ in range(3):
            (net(x) * net(x)).sum().backward()
        with sg.no_grad():
            out.add_(1.0)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        messages.append(str(info.value).split(";")[0])
    assert messages[0] == messages[1] and "modified by an inplace operation" in messages[0]


def test_hooks_and_retain_grad_run_through_the_engine():
    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for net in (eager, model):
        for _ in range(4):   # a trace, a first sight of the structure, its recording, a replay
            loss_fn(net(x), y).backward()
    assert model.stats.backward_replays == 1
    seen = []
    handle = model[0].weight.register_hook(lambda g: seen.append(g.shape))
    loss_fn(model(x), y).backward()
    assert [tuple(shape) for shape in seen] == [(8, 4)] and model.stats.backward_eager == 2
    assert "hooks" in model.stats.backward_eager_reason
    handle.remove()
    out = model(x)
    out.retain_grad()
    loss_fn(out, y).backward()
    assert out.grad is not None and out.grad.shape == (5, 3)
    replays = model.stats.backward_replays
    loss_fn(model(x), y).backward()
    assert model.stats.backward_replays == replays + 1
    eager.zero_grad()
    model.zero_grad()
    for net in (eager, model):
        loss_fn(net(x), y).backward()
    assert _same_grads(eager, model)


@pytest.mark.bitexact
def test_given_gradients_a_passed_through_gradient_and_existing_grads_as_eager():
    """out.backward(g) on a non-scalar output, a leaf the given gradient reaches unchanged (its
    .grad is a copy, not g), and .grad accumulating over steps: each as eager, replayed."""
    eager, model, data, _ = _family_twins("mlp")
    shifts = [sg.zeros(5, 3, requires_grad=True) for _ in range(2)]
    for k in range(5):
        x = data[k % len(data)][0]
        g = sg.tensor(np.random.default_rng(k).standard_normal((5, 3)).astype(np.float32))
        for net, shift in zip((eager, model), shifts):
            (net(x) + shift).backward(g)
        assert _same_grads(eager, model), f"call {k}"
        assert np.array_equal(shifts[0].grad.numpy(), shifts[1].grad.numpy())
    assert model.stats.backward_replays == 2   # calls 3 and 4 (a trace, a first sight, a recording)
    for net, shift in zip((eager, model), shifts):
        shift.grad = None
        g = sg.ones(5, 3)
        (net(x) + shift).backward(g)
        g.add_(1.0)
        assert shift.grad is not g and np.array_equal(shift.grad.numpy(), np.ones((5, 3), np.float32))


@pytest.mark.bitexact
def test_eager_layers_before_and_after_the_compiled_model_replay_as_eager():
    """An eager Linear before the compiled model (its input's gradient flows on into eager
    parameters) and an eager head after it, in one recorded backward."""
    eager, model, data, _loss_fn = _family_twins("mlp")
    sg.manual_seed(3)
    pre_e, head_e = sg.nn.Linear(4, 4), sg.nn.Linear(3, 2)
    pre_c, head_c = sg.nn.Linear(4, 4), sg.nn.Linear(3, 2)
    pre_c.load_state_dict(pre_e.state_dict())
    head_c.load_state_dict(head_e.state_dict())
    for k in range(5):
        x, y = data[k % len(data)]
        for net, pre, head in ((eager, pre_e, head_e), (model, pre_c, head_c)):
            for m in (net, pre, head):
                m.zero_grad()
            F.mse_loss(head(net(pre(x))), y[:, :2]).backward()
        assert _same_grads(eager, model) and _same_grads(pre_e, pre_c) and _same_grads(head_e, head_c)
    assert model.stats.backward_replays == 2


def test_each_loss_structure_gets_its_own_recording():
    eager, model, data, _ = _family_twins("mlp")
    for k in range(8):
        x, y = data[k % len(data)]
        loss_fn = F.mse_loss if k % 2 else F.l1_loss
        for net in (eager, model):
            net.zero_grad()
            loss_fn(net(x), y).backward()
        assert _same_grads(eager, model)
    # k=0 traces; k=1, 2 see each structure first; k=3, 4 record them; k=5, 6, 7 replay
    assert model.stats.backward_recorded == 2 and model.stats.backward_replays == 3


def test_a_new_default_dtype_runs_the_engine():
    _eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(4):
        loss_fn(model(x), y).backward()
    assert model.stats.backward_replays == 1
    previous = sg.get_default_dtype()
    loss = loss_fn(model(x), y)
    sg.set_default_dtype(sg.float64)   # between the forward and its backward
    try:
        loss.backward()
    finally:
        sg.set_default_dtype(previous)
    assert model.stats.backward_replays == 1 and "default dtype" in model.stats.backward_eager_reason


def test_replays_from_several_threads_at_once_equal_eager():
    """Threads run (forward, backward) pairs through one compiled model at once, each scaling its
    input by a leaf of its own: every replayed backward gives each thread's leaf the gradient an
    eager twin gives it (the model's own .grad, which all threads add into, is not compared)."""
    eager, model, data, loss_fn = _family_twins("mlp")
    for x, y in data[:3]:
        loss_fn(model(x * sg.tensor(1.0)), y).backward()
    scales = [sg.tensor(1.0 + k / 8, requires_grad=True) for k in range(4)]
    results, errors = {k: [] for k in range(4)}, []

    def work(k):
        try:
            x, y = data[k % len(data)]
            for _ in range(25):
                scales[k].grad = None
                loss_fn(model(x * scales[k]), y).backward()
                results[k].append(scales[k].grad.numpy().copy())
        except Exception as error:   # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(4):
        x, y = data[k % len(data)]
        scale = sg.tensor(1.0 + k / 8, requires_grad=True)
        loss_fn(eager(x * scale), y).backward()
        assert all(np.array_equal(g, scale.grad.numpy()) for g in results[k]), f"thread {k}"
    assert model.stats.backward_replays >= 90


def test_a_backward_with_no_compiled_node_alive_goes_straight_to_the_engine(monkeypatch):
    """Once no compiled model's node is alive (its graph dropped), an eager backward is not walked;
    while one is alive, a graph without it is walked and runs through the engine."""
    import gc

    from staticgrad.record import backward_graph

    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(4):
        loss_fn(model(x), y).backward()
    walks = []
    real_walk = backward_graph.walk
    monkeypatch.setattr(backward_graph, "walk", lambda *a, **k: walks.append(1) or real_walk(*a, **k))
    gc.collect()
    loss_fn(eager(x), y).backward()
    assert walks == []
    kept = model(x)
    loss_fn(eager(x), y).backward()
    assert walks == [1]
    loss_fn(kept, y).backward()
    assert model.stats.backward_replays == 2


@pytest.mark.bitexact
@pytest.mark.parametrize("zero", [0.0, np.float32(0.0)])
def test_an_attribute_of_negative_zero_is_another_structure(zero):
    """w * 0.0 and w * -0.0 give gradients of other signs: a key tells them apart (they are equal,
    with equal hashes, as Python numbers); the gradients' bytes, signs of zero included, are eager's."""
    eager, model, data, _ = _family_twins("mlp")
    weights = [sg.ones(3, requires_grad=True) for _ in range(2)]
    x, _ = data[0]
    for factor in [zero] * 4 + [-zero, zero, -zero]:
        grads = []
        for net, w in zip((eager, model), weights):
            w.grad = None
            (net(x).sum() + (w * factor).sum()).backward()
            grads.append(w.grad.numpy().tobytes())
        assert grads[0] == grads[1], f"factor {factor!r}"
    assert model.stats.backward_replays >= 2


def test_describe_shows_the_recorded_loss_backward():
    _eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(5):
        loss_fn(model(x), y).backward()
    text = model.plan.describe()
    assert "loss backward through it, recorded whole: 1 graph structure(s)" in text
    assert "2 replayed, 1 through the engine" in text


def test_unused_outputs_and_a_gradient_penalty_graph_replay_as_eager():
    """Several outputs, one unused in the loss (its incoming gradient is zeros), and the backward of
    loss + a gradient penalty made with create_graph=True through the node (its graph rebuilt
    eagerly, the node rewired into it): both recorded and replayed, bit for bit as eager. The
    penalty's path reaches the node's output too (the loss's incoming gradient 2a depends on a):
    each path's gradient joins the rebuilt tanh's buffer as it comes, in eager's order."""
    sg.manual_seed(0)
    w_e = sg.randn(4, 3, requires_grad=True)
    w_c = sg.tensor(w_e.detach().numpy().copy(), requires_grad=True)

    def two(w):
        return lambda x: ((x @ w).tanh(), (x @ w).sum(dim=1))

    eager, compiled = two(w_e), sg.compile(two(w_c))
    x = sg.tensor(np.random.default_rng(4).standard_normal((5, 4)).astype(np.float32))
    for _ in range(6):
        for f, w in ((eager, w_e), (compiled, w_c)):
            w.grad = None
            a, _unused = f(x)
            (a * a).sum().backward()
        assert np.array_equal(w_e.grad.numpy(), w_c.grad.numpy())
    replays = compiled.stats.backward_replays
    assert replays >= 3
    for _ in range(6):
        penalties = []
        for f, w in ((eager, w_e), (compiled, w_c)):
            w.grad = None
            loss = (f(x)[0] ** 2).sum()
            (g,) = sg.autograd.grad(loss, [w], create_graph=True)
            penalty = (g * g).sum()
            (loss + penalty).backward()
            penalties.append(penalty.detach().numpy())
        assert np.array_equal(*penalties)
        assert np.array_equal(w_c.grad.numpy(), w_e.grad.numpy())
    assert compiled.stats.backward_replays >= replays + 3


def test_trapped_floating_point_errors_run_the_engine():
    """Under np.errstate(..., "raise") a backward runs through the engine, whose ops raise where
    eager's would (a replay never signals floating-point errors); outside it, replays resume."""
    _eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(4):
        loss_fn(model(x), y).backward()
    replays = model.stats.backward_replays
    w = sg.zeros(5, 3, requires_grad=True)
    for _ in range(3):   # this structure is recorded (sqrt's backward divides by 2 * sqrt(0) = 0)
        (model(x) * 0 + w).sqrt().sum().backward()
    replays = model.stats.backward_replays
    loss = (model(x) * 0 + w).sqrt().sum()
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        loss.backward()
    assert model.stats.backward_replays == replays
    loss_fn(model(x), y).backward()
    assert model.stats.backward_replays == replays + 1


# ---- random programs: the loss outside a compiled model ----------------------------------------------

MODEL_CALLS = 6   # call 0 traces the model, 1 sees the backward's structure, 2 records it, 3-5 replay it


def _model_mode(program, compiled: bool, calls_per_step: int = 1, chained: bool = False) -> list:
    """Snapshots after each call of ``program`` split in two: its ops as a model (compiled or not)
    returning every value they make, and the loss, backward and optimizer step outside it. With
    ``calls_per_step`` > 1 each step calls the model that often (later calls on its arguments
    scaled by -0.5) and backpropagates the sum of the losses: calls outstanding together, whose
    gradients add up in the engine's running sums. ``chained``: later calls' float arguments also
    add an eighth of the sum of the previous call's last value (a graph through both calls)."""
    import textwrap

    from tests.test_differential import snapshot

    names = [line.split(" = ")[0] for line in program.lines]
    args = ", ".join(leaf.name for leaf in program.inputs)
    outputs = ", ".join(names) + ","
    forward = f"def forward({args}):\n" + textwrap.indent("\n".join(program.lines + [f"return ({outputs})"]), "    ")
    link = f" + {names[-1]}.sum().to({{x}}.dtype) * 0.125" if chained else ""
    scaled = ", ".join(leaf.name if leaf.kind == "labels" else f"{leaf.name} * -0.5" + link.format(x=leaf.name)
                       for leaf in program.inputs)
    calls = []
    for k in range(calls_per_step):
        calls += [f"{outputs} = model({args if k == 0 else scaled})", f"loss{k} = {program.loss}"]
    total = " + ".join(f"loss{k}" for k in range(calls_per_step))
    body = (["opt.zero_grad()"] if program.optimizer else []) + calls + [f"loss = {total}", "loss.backward()"]
    body += ["opt.step()"] if program.optimizer else []
    step = f"def step({args}):\n" + textwrap.indent("\n".join(body + ["return loss"]), "    ")
    params = [sg.tensor(array.copy(), requires_grad=True) for array in program.initial_params().values()]
    namespace = {"lib": sg, "F": sg.nn.functional, "params": params}
    namespace.update({p.name: t for p, t in zip(program.params, params)})
    opt = eval(program.optimizer, namespace) if program.optimizer else None
    namespace["opt"] = opt
    exec(forward, namespace)
    namespace["model"] = sg.compile(namespace["forward"]) if compiled else namespace["forward"]
    exec(step, namespace)
    shots = [snapshot(program, namespace["step"](*[sg.tensor(a) for a in program.call_inputs(call % 4)]),
                      params, opt) for call in range(MODEL_CALLS)]
    return shots, namespace["model"]


@pytest.mark.bitexact
def test_random_programs_with_the_loss_outside_a_compiled_model_replay_as_eager():
    """The differential net's random programs, their ops compiled as a model and the loss, backward
    and optimizer step outside it: every call's loss, .grad, parameters and optimizer state equal
    the uncompiled split's bit for bit, and the loss's backward replays a recording of it."""
    from hypothesis import assume, given, note, settings

    from tests.test_differential import COMMON, assert_replay_equals_eager, programs

    replayed_some = []

    @settings(max_examples=40, **COMMON)
    @given(programs())
    def one(program):
        assume(program.lines)   # a model to compile: some ops before the loss
        note(repr(program))
        eager, _ = _model_mode(program, compiled=False)
        compiled, model = _model_mode(program, compiled=True)
        assert_replay_equals_eager(compiled, eager)
        replayed_some.append(model.stats.backward_replays)

    one()
    assert sum(1 for n in replayed_some if n >= 3) >= 0.9 * len(replayed_some), replayed_some


@pytest.mark.bitexact
def test_random_programs_calling_a_compiled_model_twice_per_loss_replay_as_eager():
    """As above with two calls of the model per step and one backward of the summed losses: the second
    node to run adds into the running sums the first left (the loss may leave outputs unused)."""
    from hypothesis import assume, given, note, settings

    from tests.test_differential import COMMON, assert_replay_equals_eager, programs

    @settings(max_examples=15, **COMMON)
    @given(programs(max_ops=6))
    def one(program):
        assume(program.lines)
        note(repr(program))
        eager, _ = _model_mode(program, compiled=False, calls_per_step=2)
        compiled, _ = _model_mode(program, compiled=True, calls_per_step=2)
        assert_replay_equals_eager(compiled, eager)

    one()


@pytest.mark.bitexact
def test_random_programs_calling_a_compiled_model_on_its_own_output_replay_as_eager():
    """As above, the second call's float arguments carrying the first call's graph (an eighth of its
    last value's sum added): the engine goes on from the second node into the first call."""
    from hypothesis import assume, given, note, settings

    from tests.test_differential import COMMON, assert_replay_equals_eager, programs

    @settings(max_examples=20, **COMMON)
    @given(programs(max_ops=6))
    def one(program):
        assume(program.lines)
        note(repr(program))
        eager, _ = _model_mode(program, compiled=False, calls_per_step=2, chained=True)
        compiled, _ = _model_mode(program, compiled=True, calls_per_step=2, chained=True)
        assert_replay_equals_eager(compiled, eager)

    one()


def test_an_autograd_function_in_the_graph_runs_through_the_engine():
    """A custom autograd.Function's backward reads whatever its forward left on the ctx (here a
    scale that differs per call), which no key can compare: such a graph runs through the engine,
    and its gradients are eager's."""

    class Scale(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for k in range(6):
        for net in (eager, model):
            net.zero_grad()
            loss_fn(Scale.apply(net(x), 1.0 + k), y).backward()
        assert _same_grads(eager, model), f"call {k}"
    assert model.stats.backward_replays == 0 and "ctx" in model.stats.backward_eager_reason.lower()


def test_a_recording_frees_the_compiled_nodes_idle_arenas_and_the_engine_still_runs_them():
    """Once the loss's backward is recorded whole, the node's own backward program runs only where
    the engine runs: its idle arena is freed, and a backward through the engine (a hook) makes it a
    new one, with eager's gradients."""
    eager, model, data, loss_fn = _family_twins("mlp")
    x, y = data[0]
    for _ in range(3):
        loss_fn(model(x), y).backward()
    node_program = model.plan.backward.replay
    assert model.stats.backward_recorded == 1 and node_program._idle == []
    seen = []
    for net in (eager, model):
        net.zero_grad()
        handle = net[0].weight.register_hook(lambda g: seen.append(1))
        loss_fn(net(x), y).backward()
        handle.remove()
    assert seen == [1, 1] and _same_grads(eager, model) and len(node_program._idle) == 1


@pytest.mark.bitexact
def test_random_programs_with_zero_dim_tensors_split_as_a_compiled_model_replay_as_eager():
    """As above, with 0-d leaves and values among the programs' tensors."""
    from hypothesis import assume, given, note, settings

    from tests.test_differential import COMMON, assert_replay_equals_eager, programs

    @settings(max_examples=15, **COMMON)
    @given(programs(zero_dim=True))
    def one(program):
        assume(program.lines)
        note(repr(program))
        eager, _ = _model_mode(program, compiled=False)
        compiled, _ = _model_mode(program, compiled=True)
        assert_replay_equals_eager(compiled, eager)

    one()


@pytest.mark.bitexact
def test_replaced_parameters_and_a_reloaded_state_replay_as_eager():
    """A parameter replaced by a new one (the model's plan traces again: a new node, a new key) and
    a state dict loaded in place between steps: every step's gradients and parameters are eager's."""
    eager, model, data, loss_fn = _family_twins("mlp")
    opts = [sg.optim.SGD(net.parameters(), lr=0.1, momentum=0.9) for net in (eager, model)]
    for k in range(12):
        x, y = data[k % len(data)]
        if k == 5:
            for net in (eager, model):
                net[2].weight = sg.nn.Parameter(net[2].weight.detach() * 0.5)
            opts = [sg.optim.SGD(net.parameters(), lr=0.1, momentum=0.9) for net in (eager, model)]
        if k == 9:
            state = {name: t * 1.25 for name, t in eager.state_dict().items()}
            for net in (eager, model):
                net.load_state_dict(state)
        for net, opt in zip((eager, model), opts):
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
        assert _same_grads(eager, model) and _same_parameters(eager, model), f"step {k}"
    assert model.stats.backward_replays >= 4, model.stats


def _twin_runs(forward_of, loss_of, leaves_of, calls=6):
    """``calls`` steps of an uncompiled and a compiled copy of ``forward_of(*leaves)``, each step the
    backward of ``loss_of(model, *leaves)``: each step's leaves' .grad (None or bytes)."""
    runs = []
    for compiled in (False, True):
        leaves = leaves_of()
        forward = forward_of(*leaves)
        model = sg.compile(forward) if compiled else forward
        steps = []
        for _ in range(calls):
            for t in leaves:
                t.grad = None
            loss_of(model, *leaves).backward()
            steps.append([None if t.grad is None else t.grad.numpy().tobytes() for t in leaves])
        runs.append((steps, model))
    return runs


@pytest.mark.bitexact
def test_a_parameter_only_unused_outputs_reach_gets_no_gradient_as_eager():
    """p1 reaches only an output the loss ignores: eager never gets to it, so its .grad stays None (a
    zero gradient would make momentum and weight decay move it), every call, replayed or not."""
    rng = np.random.default_rng(0)
    starts = [rng.standard_normal((3, 1)).astype(np.float32) for _ in range(2)]
    x = sg.tensor(rng.standard_normal((3, 1)).astype(np.float32))

    def forward_of(p0, p1):
        return lambda: (sg.maximum(x, p1), -p0.unsqueeze(0))

    (eager, _), (compiled, model) = _twin_runs(forward_of, lambda model, p0, p1: model()[1].mean(),
                                               lambda: [sg.tensor(a.copy(), requires_grad=True) for a in starts])
    assert compiled == eager
    assert all(step[1] is None for step in compiled)
    assert model.stats.backward_replays >= 3, model.stats


@pytest.mark.bitexact
def test_an_input_whose_only_path_is_unused_keeps_the_gradient_the_loss_gave_it():
    """x (made by eager code) feeds the loss directly and, inside the model, only an unused output:
    the engine's running sum for x passes through the node unchanged, as eager never adds to it (a
    zero-filled gradient run through the unused path would add 0 * inf there)."""
    rng = np.random.default_rng(1)
    base_start, w_start = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    w_start[1, 2] = np.inf   # a zero incoming gradient times inf: a NaN, were the unused path run

    def leaves_of():
        return [sg.tensor(base_start.copy(), requires_grad=True), sg.tensor(w_start.copy(), requires_grad=True)]

    def forward_of(base, w):
        return lambda x: (x * w, w * 2.0)

    def loss_of(model, base, w):
        x = base * 1.5
        return model(x)[1].sum() + (x * x).sum()

    (eager, _), (compiled, _) = _twin_runs(forward_of, loss_of, leaves_of)
    assert compiled == eager


@pytest.mark.bitexact
@pytest.mark.parametrize("uses", ["same_output", "other_outputs"])
def test_partly_used_calls_adding_into_one_running_sum_keep_eager_signed_zeros(uses):
    """Two calls outstanding over one parameter, each leaving an output unused: the second node to run
    adds into the sum the first left, without the unused output's path (an added +0 from it would
    turn eager's -0 + -0 into +0). With other outputs per call, each call needs a program of its own."""
    rng = np.random.default_rng(3)
    w_start = rng.standard_normal(6)
    xs = [rng.standard_normal(6) for _ in range(2)]
    for x in xs:
        x[:3] = -0.0

    def forward_of(w):
        return lambda x: (x * w, w * 2.0, (w * x).exp())

    def loss_of(model, w):
        second = 0 if uses == "same_output" else 2
        return model(sg.tensor(xs[0]))[0].sum() + model(sg.tensor(xs[1]))[second].sum() * 0.0

    (eager, _), (compiled, model) = _twin_runs(forward_of, loss_of,
                                               lambda: [sg.tensor(w_start.copy(), requires_grad=True)])
    assert all(np.signbit(np.frombuffer(step[0])[:3]).all() for step in eager)
    assert compiled == eager
    assert model.stats.backward_replays >= 3, model.stats


@pytest.mark.bitexact
def test_a_held_sum_no_gradient_of_the_call_reaches_goes_back_unchanged_each_call():
    """The engine holds a sum for x (the loss used x directly) when the node runs, but only an unused
    output of the call reaches x: the sum goes back as it was, in the engine and in its recording."""
    rng = np.random.default_rng(5)
    base_start, w_start = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    base_start[0] = -0.0

    def leaves_of():
        return [sg.tensor(base_start.copy(), requires_grad=True), sg.tensor(w_start.copy(), requires_grad=True)]

    def forward_of(base, w):
        return lambda x: (w * 3.0, x * w)

    def loss_of(model, base, w):
        x = base * -1.0
        return model(x)[0].sum() + (x * 0.5).sum() + model(x)[0].sum()

    (eager, _), (compiled, _) = _twin_runs(forward_of, loss_of, leaves_of)
    assert compiled == eager


@pytest.mark.bitexact
def test_a_sum_made_inside_the_call_is_not_the_running_sum_of_the_parameter_it_flows_to():
    """v0 = p - x is an output and feeds another (sigmoid): the engine adds v0's two gradients in
    SubBackward's buffer, and the sum flows on to p unchanged. With two calls outstanding, eager adds
    each call's whole gradient to p's buffer (held + (a + b)); taking that inner sum for p's own
    running sum gave (held + a) + b, an ulp off (found by a random campaign)."""
    rng = np.random.default_rng(880)
    p_start = rng.uniform(-2, 2, (2, 3, 3))
    data = [(rng.uniform(-2, 2, ()), rng.uniform(-1, 1, (2, 3, 3))) for _ in range(4)]

    def forward_of(p):
        def forward(x):
            v0 = p - x
            return v0, v0.sigmoid()
        return forward

    calls = {}   # per model: the twins see the same data

    def loss_of(model, p):
        k = calls[id(model)] = calls.get(id(model), -1) + 1
        x, target = data[k % 4]
        total = 0
        for scale in (1.0, -0.5):
            v0, v1 = model(sg.tensor(x * scale))
            total = total + F.mse_loss(v1, sg.tensor(target)) + v0.sum() * 0.25
        return total

    (eager, _), (compiled, model) = _twin_runs(forward_of, loss_of,
                                               lambda: [sg.tensor(p_start.copy(), requires_grad=True)])
    assert compiled == eager
    assert model.stats.backward_replays >= 3, model.stats


@pytest.mark.bitexact
def test_one_gradient_given_to_two_parameters_is_not_added_twice():
    """v = p0 + p1: the node's program gives one array as both parameters' gradient. Eager's engine
    sees AddBackward0 pass one tensor to both and owns neither; two tensors over that array, each
    taken as the engine's own, had the second call's sum for p0 added into p1's too (two calls
    outstanding: p1's gradient off by the other's; found by a random campaign)."""
    rng = np.random.default_rng(1029)
    starts = [rng.uniform(-2, 2, (3, 1)).astype(np.float32) for _ in range(2)]
    xs = [rng.uniform(-2, 2, (3, 1)).astype(np.float32) for _ in range(4)]

    def forward_of(p0, p1):
        return lambda: p0 + p1

    calls = {}

    def loss_of(model, p0, p1):
        k = calls[id(model)] = calls.get(id(model), -1) + 1
        x = sg.tensor(xs[k % 4])
        return (model() * x).sum() + (model() * (x * -0.5)).sum()

    (eager, _), (compiled, model) = _twin_runs(forward_of, loss_of,
                                               lambda: [sg.tensor(a.copy(), requires_grad=True) for a in starts])
    assert compiled == eager
    assert model.stats.backward_replays >= 3, model.stats


@pytest.mark.bitexact
def test_parameters_given_one_gradient_by_the_node_get_gradients_of_their_own():
    """Through the engine (retain_grad on the output keeps the loss's backward from being replayed
    whole), each parameter's .grad is an array of its own, as in eager: scaling one in place leaves
    the other."""
    starts = [np.full((3, 1), 1.0, np.float32), np.full((3, 1), 2.0, np.float32)]
    runs = []
    for compiled in (False, True):
        p0, p1 = (sg.tensor(a.copy(), requires_grad=True) for a in starts)

        def forward(p0=p0, p1=p1):
            return p0 + p1

        model = sg.compile(forward) if compiled else forward
        shots = []
        for _ in range(4):
            p0.grad = p1.grad = None
            out = model()
            out.retain_grad()
            (out * 3.0).sum().backward()
            with sg.no_grad():
                p0.grad.mul_(0.5)
            shots.append((p0.grad.numpy().tobytes(), p1.grad.numpy().tobytes()))
        runs.append(shots)
    assert runs[1] == runs[0]
    assert np.array_equal(np.frombuffer(runs[1][-1][1], np.float32), np.full(3, 3.0, np.float32))


@pytest.mark.bitexact
@pytest.mark.parametrize("cell_kind", ["RNNCell", "GRUCell", "LSTMCell"])
def test_a_compiled_cell_applied_to_its_own_last_state_trains_as_eager(cell_kind):
    """h = cell(x_t, h) with the cell compiled: each call's state argument carries the graph of the
    call before, which leads back to the cell's own weights. The call's recorded backward counts only
    paths inside the call; the engine then takes the state's gradient on into the earlier calls, as
    in eager (before, recording the backward ran into the earlier calls' graph and refused)."""
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]

    def run(compiled):
        sg.manual_seed(0)
        cell = getattr(sg.nn, cell_kind)(4, 5)
        step = sg.compile(cell) if compiled else cell
        opt = sg.optim.SGD(cell.parameters(), lr=0.1, momentum=0.9)
        shots = []
        for _ in range(4):
            opt.zero_grad()
            state = sg.zeros(3, 5)
            state = (state, sg.zeros(3, 5)) if cell_kind == "LSTMCell" else state
            total = 0
            for x in xs:
                state = step(sg.tensor(x), state)
                h = state[0] if cell_kind == "LSTMCell" else state
                total = total + (h * h).mean()
            total.backward()
            opt.step()
            shots.append([p.grad.numpy().tobytes() for p in cell.parameters()]
                         + [p.detach().numpy().tobytes() for p in cell.parameters()])
        return shots, step

    (eager, _), (compiled, model) = run(False), run(True)
    assert compiled == eager
    assert model.stats.backward_replays >= 1, model.stats


@pytest.mark.bitexact
def test_arguments_sharing_a_history_get_their_gradients_as_eager():
    """f(x, x * 2) with x a leaf: the second argument's graph leads back to the first. Its path is
    the engine's to follow after the node ran, not part of the call's recorded backward."""
    base = np.random.default_rng(0).standard_normal((3, 4))

    def f(a, b):
        return (a * b).tanh(), a.exp()

    def run(fn):
        shots = []
        for i in range(5):
            x = sg.tensor(base + i, requires_grad=True)
            y = x * 2
            u, v = fn(x, y)
            (u.sum() + v.mean() + y.sum()).backward()
            shots.append(x.grad.numpy().tobytes())
        return shots

    compiled = sg.compile(f)
    assert run(compiled) == run(f)
    assert compiled.stats.backward_replays >= 2, compiled.stats


@pytest.mark.bitexact
def test_a_held_sum_the_call_does_not_reach_passes_back_and_is_recorded():
    """Call b reaches both parameters, call a only p0: a's node adds into p0's held sum and hands
    p1's back as it was (a copy where the engine did not own it, taken before any sum is added in
    place). The loss's backward is recorded and replayed with it, as eager's values."""
    starts = [np.full((3, 1), 1.0), np.full((3, 1), 2.0)]

    def forward_of(p0, p1):
        return lambda: ((p0 + p1) * 3.0, p0 * 2.0)

    def loss_of(model, p0, p1):
        return model()[1].sum() + model()[0].sum()

    (eager, _), (compiled, model) = _twin_runs(forward_of, loss_of,
                                               lambda: [sg.tensor(a.copy(), requires_grad=True) for a in starts])
    assert compiled == eager
    assert np.array_equal(np.frombuffer(compiled[-1][1]), np.full(3, 3.0))
    assert model.stats.backward_replays >= 3, (model.stats, model.stats.backward_eager_reason)


def _stacked_product(p0, p1, p2):
    def forward():
        v1 = F.log_softmax(p0.softmax(-2), dim=-3)
        return v1, sg.stack([v1, p1], dim=0) @ p2
    return forward


def _vector_times_matrix(p0, p1, p2):
    def forward():
        v1 = p1 @ p0[-2]
        return v1, (p1.abs() + 0.5).log().unsqueeze(1)[1] @ p2
    return forward


EXPANDED = {   # (starting shapes, forward): a sum of the model's output reaches a reshape's backward
    "reshape_then_matrix_vector": ([(3, 3, 2), (3, 3, 2), (2,)], _stacked_product,
                                   lambda outputs: outputs[1].sum() + outputs[0].sum() * 0.25),
    "unsqueezed_vector_times_matrix": ([(2, 1), (2, 1), (1, 3)], _vector_times_matrix,
                                       lambda outputs: outputs[1].sum() + outputs[0].sum() * 0.5),
}


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(EXPANDED))
def test_an_expanded_incoming_gradient_gives_eager_bits(case, dtype):
    """A sum of the model's output hands the node an expanded (stride 0) gradient. The node's program
    must read it in that layout, as eager's nodes do (a contiguous copy would take the BLAS path where
    eager's product of a stride-0 operand takes NumPy's own, or the reverse), and must not carry a
    choice its trace made for the contiguous gradient it was recorded with (eager's reshape backward
    copied a stride-0 gradient; the recording had viewed the contiguous one)."""
    shapes, forward_of, loss_of = EXPANDED[case]
    rng = np.random.default_rng(14694)
    starts = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    (eager, _), (compiled, model) = _twin_runs(forward_of, lambda model, *_: loss_of(model()),
                                               lambda: [sg.tensor(a.copy(), requires_grad=True) for a in starts])
    assert compiled == eager
    assert model.stats.backward_replays >= 3, model.stats



@pytest.mark.bitexact
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_partly_used_call_backpropagates_as_eager_bit_for_bit(seed, dtype):
    """Only one of the call's outputs reaches the loss: the node runs its backward as eager's engine
    does without the unused output, a program of its own per set of used outputs (not the full one on
    zeros, whose zero paths flipped the sign of a zero gradient and whose sums of a zero path made a
    stride-0 gradient contiguous: another matrix-vector path, 1 ulp). A gradient only the unused
    output reaches is None, as eager's."""
    shapes, forward_of, _ = EXPANDED["unsqueezed_vector_times_matrix"]
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    (eager, _), (compiled, model) = _twin_runs(forward_of, lambda model, *_: model()[1].sum(),
                                               lambda: [sg.tensor(a.copy(), requires_grad=True) for a in starts])
    assert compiled == eager
    assert all(step[0] is None for step in compiled)
    assert model.stats.backward_replays >= 3, model.stats


def _sum_and_shift(x0, p2):
    def forward(x1):
        v3 = x0 @ p2
        return v3, v3 + x1 * 0.5
    return forward


@pytest.mark.bitexact
@pytest.mark.parametrize("seed", [7, 12, 17, 18, 19, 21])
def test_an_unused_output_adds_nothing_to_a_used_one(seed):
    """v3 is returned and also feeds an unused output: eager's engine hands v3's stride-0 gradient (a
    sum's) straight to the matrix-vector product; the full program would first add the unused path's
    zeros to it, a contiguous array, and the product would take BLAS instead of NumPy's loop (1 ulp
    off at these starts)."""
    rng = np.random.default_rng(seed)
    x0 = sg.tensor(rng.standard_normal((3, 1)).astype(np.float32))
    start = rng.standard_normal(1).astype(np.float32)
    x1 = sg.tensor(rng.standard_normal((3, 3)).astype(np.float32))
    (eager, _), (compiled, model) = _twin_runs(lambda p2: (lambda: _sum_and_shift(x0, p2)(x1)),
                                               lambda model, p2: model()[0].sum() * 0.25,
                                               lambda: [sg.tensor(start.copy(), requires_grad=True)])
    assert compiled == eager
    assert model.stats.backward_replays >= 3, model.stats


@pytest.mark.bitexact
def test_saved_duplicates_merge_when_an_output_is_saved_too():
    """Two linears over one 3-D input save one folded view of it twice (merged into one saved array),
    while tanh saves its output, which is also returned: the merge keeps that output's position (it
    raised KeyError while compiling)."""
    starts = [np.random.default_rng(k).standard_normal(shape).astype(np.float32)
              for k, shape in enumerate([(1, 2), (3, 2), (1, 3)])]
    runs = []
    for compiled in (False, True):
        params = [sg.tensor(a.copy(), requires_grad=True) for a in starts]
        opt = sg.optim.Adam(params, lr=0.01)

        def forward(x, p0=params[0], p1=params[1], p2=params[2]):
            hidden = F.linear(x, p1).tanh()
            return F.linear(x, p0), hidden, F.linear(hidden, p2)

        model = sg.compile(forward) if compiled else forward
        steps = []
        for call in range(6):
            x = sg.tensor(np.random.default_rng(10 + call % 4).standard_normal((1, 3, 2)).astype(np.float32))
            opt.zero_grad()
            model(x)[2].mean().backward()
            opt.step()
            steps.append([p.detach().numpy().tobytes() for p in params])
        runs.append(steps)
    assert runs[1] == runs[0]
    assert model.stats.backward_replays >= 3, model.stats
