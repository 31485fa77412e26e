"""A replay is never silently wrong: every case here once replayed stale or shared state.

Each test runs the same code eagerly and compiled and requires the same observable state, or a
clear error naming the cause.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

import staticgrad as sg


def test_an_argument_and_a_parameter_with_one_gradient_each_get_their_own_fresh_grad():
    """x + p routes one gradient to both; the replay returned it twice and then skipped the
    parameter's copy, leaving p.grad at the second call's value."""
    p = sg.tensor([0.5] * 3, requires_grad=True)

    @sg.compile
    def f(x):
        p.grad = None
        loss = ((x + p) ** 2).sum()
        loss.backward()
        return loss

    for k in range(5):
        x = sg.tensor([float(k)] * 3, requires_grad=True)
        f(x)
        expected = np.full(3, 2 * k + 1, np.float32)
        np.testing.assert_array_equal(p.grad.numpy(), expected)
        np.testing.assert_array_equal(x.grad.numpy(), expected)
        assert not np.shares_memory(p.grad.numpy(), x.grad.numpy())
    assert f.stats.replays == 4
    p.grad.add_(1.0)  # eager gives two tensors: changing one leaves the other
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 9, np.float32))


# ---- objects replaced between calls: a replay must use what is there now ------------------------

class Net(sg.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = sg.nn.Linear(4, 3)
        self.head = sg.nn.Linear(3, 2)

    def forward(self, x):
        return self.head(sg.tanh(self.fc(x)))


def _state_arrays(model, opt):
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().numpy().copy()
        if p.grad is not None:
            out[name + ".grad"] = p.grad.numpy().copy()
        for key, value in opt.state.get(p, {}).items() if p in opt.state else ():
            if isinstance(value, sg.Tensor):
                out[f"{name}.{key}"] = value.numpy().copy()
    return out


def _twins(make_opt):
    """Two identical (model, optimizer, step) triples; the second step compiled."""
    sg.manual_seed(0)
    model = Net()
    twin = Net()
    twin.load_state_dict(model.state_dict())
    runs = []
    for m, compiled in ((model, False), (twin, True)):
        opt = make_opt(m)

        def step(x, m=m, opt=opt):
            opt.zero_grad()
            loss = (m(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        runs.append((m, opt, sg.compile(step) if compiled else step))
    return runs


def _sgd(m):
    return sg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


def _adam(m):
    return sg.optim.Adam(m.parameters(), lr=0.01)


def _replace_weight(m, opt):
    m.fc.weight = sg.nn.Parameter(sg.ones(3, 4) * 0.1)
    opt.param_groups[0]["params"][0] = m.fc.weight   # the optimizer follows it (a list change)


def _replace_weight_only(m, opt):
    m.fc.weight = sg.nn.Parameter(sg.ones(3, 4) * 0.1)   # the optimizer keeps updating the old one


def _replace_submodule_only(m, opt):
    sg.manual_seed(6)
    m.fc = sg.nn.Linear(4, 3)


def _replace_submodule(m, opt):
    sg.manual_seed(5)
    m.head = sg.nn.Linear(3, 2)
    opt.add_param_group({"params": list(m.head.parameters())})


def _reload_checkpoint(m, opt):
    opt.load_state_dict(opt.state_dict())


def _reload_changed_checkpoint(m, opt):
    state = opt.state_dict()
    for entry in state["state"].values():
        for key, value in entry.items():
            if isinstance(value, sg.Tensor) and value.dim() > 0:
                entry[key] = value * 0.5
    opt.load_state_dict(state)


def _clear_state(m, opt):
    opt.state.clear()


def _new_buffers(m, opt):
    for p in m.parameters():
        for key, value in list(opt.state[p].items()):
            if isinstance(value, sg.Tensor) and value.dim() > 0:
                opt.state[p][key] = sg.full_like(value, 0.01)


def _delete_and_recreate_state(m, opt):
    p = m.fc.bias
    entry = dict(opt.state[p])
    del opt.state[p]
    opt.state[p] = {k: (v.clone() * 2 if isinstance(v, sg.Tensor) else v) for k, v in entry.items()}


def _registry_write(m, opt):
    m.head._parameters["bias"] = sg.nn.Parameter(sg.zeros(2))


def _load_module_state(m, opt):
    m.load_state_dict({k: v * 0.5 for k, v in m.state_dict().items()})


CHANGES = [_replace_weight, _replace_weight_only, _replace_submodule, _replace_submodule_only, _reload_checkpoint,
           _reload_changed_checkpoint, _clear_state,
           _new_buffers, _delete_and_recreate_state, _registry_write, _load_module_state]


@pytest.mark.parametrize("make_opt", [_sgd, _adam], ids=["sgd", "adam"])
@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__[1:] for c in CHANGES])
def test_a_replay_after_a_change_between_calls_equals_eager(change, make_opt):
    """Replaced parameters, submodules, optimizer state (checkpoint loads, new buffers, cleared or
    recreated entries): the next calls read what is there now, as eager does."""
    (m_e, o_e, eager), (m_c, o_c, compiled) = _twins(make_opt)
    rng = np.random.default_rng(0)
    data = [sg.tensor(rng.standard_normal((5, 4), dtype=np.float32)) for _ in range(3)]
    for k in range(4):
        eager(data[k % 3])
        compiled(data[k % 3])
    assert compiled.stats.replays >= 1
    change(m_e, o_e)
    change(m_c, o_c)
    for k in range(4):
        le, lc = eager(data[k % 3]), compiled(data[k % 3])
        assert lc.item() == le.item(), f"loss of call {k} after {change.__name__}"
        expected, got = _state_arrays(m_e, o_e), _state_arrays(m_c, o_c)
        assert expected.keys() == got.keys()
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{name}, call {k}")
    assert compiled.stats.replays >= 3


def test_a_parameter_read_as_an_attribute_without_calling_its_module_is_found_again():
    lin = sg.nn.Linear(3, 2)

    @sg.compile
    def f(x):
        with sg.no_grad():
            return x @ lin.weight.t()

    x = sg.ones(4, 3)
    for _ in range(3):
        f(x)
    lin.weight = sg.nn.Parameter(sg.full((2, 3), 2.0))
    np.testing.assert_array_equal(f(x).numpy(), np.full((4, 2), 6.0, np.float32))


def test_a_global_tensor_rebound_between_calls_is_read_anew():
    global SCALE
    SCALE = sg.tensor([1.0, 2.0])

    @sg.compile
    def f(x):
        with sg.no_grad():
            return x * SCALE

    x = sg.ones(2)
    for _ in range(3):
        f(x)
    SCALE = sg.tensor([5.0, 7.0])
    np.testing.assert_array_equal(f(x).numpy(), np.array([5.0, 7.0], np.float32))


# ---- threads ------------------------------------------------------------------------------------

def test_threads_replaying_one_plan_at_once_each_get_their_own_results():
    """One plan replayed from four threads: each call works in an arena of its own."""
    sg.manual_seed(0)
    model = sg.nn.Sequential(sg.nn.Linear(16, 32), sg.nn.Tanh(), sg.nn.Linear(32, 8))

    @sg.compile
    def forward(x):
        with sg.no_grad():
            return model(x)

    rng = np.random.default_rng(0)
    inputs = [sg.tensor(rng.standard_normal((6, 16), dtype=np.float32)) for _ in range(8)]
    with sg.no_grad():
        expected = [model(x).numpy() for x in inputs]
    for x in inputs[:3]:
        forward(x)
    wrong = []

    def worker(seed):
        order = np.random.default_rng(seed).integers(0, len(inputs), 300)
        for k in order:
            got = forward(inputs[k]).numpy()
            if got.tobytes() != expected[k].tobytes():
                wrong.append(k)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    assert forward.stats.replays >= 1200


def test_grad_mode_and_the_tracer_are_per_thread():
    """A trace in one thread must not see another thread's ops (np arrays turned into tensors,
    .item() reads) nor leave a tracer behind; no_grad in one thread leaves others' grad mode."""
    lin = sg.nn.Linear(3, 2)

    @sg.compile
    def step(x):
        loss = (lin(x) ** 2).sum()
        loss.backward()
        return loss

    stop = threading.Event()
    errors = []

    def busy():
        try:
            while not stop.is_set():
                t = sg.tensor(np.ones(3, np.float32))
                float((t * 2).sum().item())
                assert sg.is_grad_enabled()
        except Exception as exc:  # any error here is a test failure
            errors.append(exc)

    other = threading.Thread(target=busy)
    other.start()
    try:
        for k in range(30):
            lin.zero_grad()
            with sg.no_grad():
                assert not sg.is_grad_enabled()
            step(sg.full((4, 3), float(k)))
    finally:
        stop.set()
        other.join()
    assert not errors, errors
    assert step.stats.traces <= 3 and step.stats.replays >= 27
    from staticgrad._state import Tracing

    assert Tracing.tracer is None
    sg.nn.Linear(3, 2)(sg.ones(1, 3))  # a plain call after the threads: no tracer left installed


# ---- plans that would grow without bound ----------------------------------------------------------

def test_plans_are_capped_and_the_warning_names_the_argument_that_keeps_changing():
    lin = sg.nn.Linear(4, 2)

    @sg.compile
    def forward(x, scale):
        with sg.no_grad():
            return lin(x) * scale

    with sg.no_grad():
        expected = {b: (lin(sg.ones(b, 4)) * 2.0).numpy() for b in range(1, 13)}
    with pytest.warns(RuntimeWarning) as caught:
        for b in range(1, 13):
            np.testing.assert_array_equal(forward(sg.ones(b, 4), 2.0).numpy(), expected[b])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert "keeps 8 plans" in messages[0] and "argument 'x' (8x4 float32 -> 9x4 float32)" in messages[0]
    assert len(forward.plans) == 8 and forward.stats.fallbacks == 4
    np.testing.assert_array_equal(forward(sg.ones(3, 4), 2.0).numpy(), expected[3])  # kept plans still replay
    assert forward.stats.replays == 1


def test_a_guard_that_fails_on_every_call_is_capped_and_named():
    holder = sg.nn.Linear(3, 1)

    @sg.compile(max_plans=2)
    def forward(x):
        with sg.no_grad():
            return holder(x)

    with pytest.warns(RuntimeWarning, match="the parameters, buffers and submodules of a Linear changed"):
        for k in range(4):
            holder.weight = sg.nn.Parameter(sg.full((1, 3), float(k)))
            np.testing.assert_array_equal(forward(sg.ones(2, 3)).numpy(),
                                          (3.0 * k + holder.bias.detach().numpy()).reshape(1, 1).repeat(2, 0))
    assert len(forward.plans) == 2


def test_max_plans_must_be_positive():
    with pytest.raises(ValueError, match="max_plans must be a positive int"):
        sg.compile(lambda x: x, max_plans=0)


# ---- smaller differences from eager and PyTorch -----------------------------------------------------

def test_one_tensor_returned_twice_is_one_object_on_replay_too():
    p = sg.tensor([1.0, 2.0], requires_grad=True)

    @sg.compile
    def f(x):
        p.grad = None
        loss = (x * p).sum()
        loss.backward()
        return loss, loss

    for _ in range(3):
        a, b = f(sg.ones(2))
        assert a is b
    assert f.stats.replays == 2


def test_an_optimizer_deep_copies_with_its_state():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (sg, torch):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        (p * p).sum().backward()
        opt.step()
        twin = copy.deepcopy(opt)
        q = twin.param_groups[0]["params"][0]
        assert q is not p
        assert twin.state[q]["momentum_buffer"] is not opt.state[p]["momentum_buffer"]
        results.append(twin.state[q]["momentum_buffer"].detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1])


def test_sequential_items_can_be_replaced_and_deleted_as_in_pytorch():
    torch = pytest.importorskip("torch")
    shapes = []
    for lib in (sg, torch):
        seq = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Tanh(), lib.nn.Linear(3, 4))
        seq[2] = lib.nn.Linear(3, 5)
        seq[-2] = lib.nn.ReLU()
        del seq[0]
        shapes.append(([type(m).__name__ for m in seq], list(dict(seq.named_children())), seq(lib.ones(1, 3)).shape))
        with pytest.raises(IndexError, match="index 7 is out of range"):
            seq[7] = lib.nn.Tanh()
    assert shapes[0][:2] == shapes[1][:2] and tuple(shapes[0][2]) == tuple(shapes[1][2])


def test_a_backward_into_an_arguments_outside_graph_is_refused_or_run_eagerly():
    """An argument computed by eager code (w * 2): the backward inside the call goes on into its
    graph. A replay would repeat the recorded graph (w * 2) for any argument (w * 3, v.exp())."""
    def run(mode):
        sg.manual_seed(0)
        m = sg.nn.Linear(4, 2)

        def step(x):
            m.zero_grad()
            loss = (m(x) ** 2).sum()
            loss.backward()
            return loss
        f = step if mode is None else sg.compile(step, fallback=mode)
        w, v = sg.ones(3, 4, requires_grad=True), sg.ones(3, 4, requires_grad=True)
        for x in (w * 2, w * 2, w * 2, w * 3, v.exp()):
            f(x)
        return w.grad.numpy(), v.grad.numpy()

    with pytest.raises(sg.TraceError, match="backward reached the autograd graph of argument 0"):
        run("error")
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        got = run("eager")
    for a, b in zip(got, run(None)):
        np.testing.assert_array_equal(a, b)


def _log_step():
    p = sg.tensor([1.5, 2.0], requires_grad=True)
    opt = sg.optim.SGD([p], lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = (p * x).log().sum() + (x * p * 0.1).exp().sum()
        loss.backward()
        opt.step()
        return loss
    return p, step


@pytest.mark.parametrize("bad", [[0.0, 1.0], [1000.0, 1.0]], ids=["log of zero", "exp overflow"])
def test_a_step_under_errstate_raise_fails_as_eager_does(bad):
    """Under np.errstate(all="raise") a compiled step raises the FloatingPointError eager raises,
    at the same op, leaving the state eager leaves (zero_grad's None .grad): fused kernels would not
    signal the error at all, so such calls run eagerly."""
    (p_eager, eager), (p_compiled, compiled) = _log_step(), _log_step()
    compiled = sg.compile(compiled)
    for k in range(3):
        x = sg.tensor([1.0 + k, 2.0])
        assert np.array_equal(eager(x).detach().numpy(), compiled(x).detach().numpy())
    assert compiled.stats.replays >= 1
    results = []
    for p, step in ((p_eager, eager), (p_compiled, compiled)):
        with np.errstate(all="raise"), pytest.raises(FloatingPointError) as info:
            step(sg.tensor(bad))
        results.append((str(info.value), p.grad, p.detach().numpy().copy()))
    assert results[0][0] == results[1][0]
    assert results[0][1] is None and results[1][1] is None
    assert np.array_equal(results[0][2], results[1][2])
    x = sg.tensor([4.0, 2.0])
    assert np.array_equal(eager(x).detach().numpy(), compiled(x).detach().numpy())
    assert np.array_equal(p_eager.detach().numpy(), p_compiled.detach().numpy())


def test_a_compiled_step_reading_grads_rechecks_when_grads_appear_or_go():
    """.grad appearing or going moves its own epoch (a training loop moves it every step): plans
    that read a .grad re-check it, the others keep their zero-cost replay."""

    def run(compiled):
        p = sg.tensor([1.0, 2.0], requires_grad=True)
        opt = sg.optim.SGD([p], lr=0.1)
        step = sg.compile(opt.step) if compiled else opt.step
        out = []
        for _ in range(4):
            (p * p).sum().backward()
            step()
            out.append(p.detach().numpy().copy())
            opt.zero_grad()
            step()   # no gradients: a step that changes nothing
            out.append(p.detach().numpy().copy())
        return np.array(out)

    assert np.array_equal(run(False), run(True))


def test_an_op_whose_forward_ignores_out_stops_the_replay():
    """A forward that returns a new array instead of writing into the planned ``out`` would leave
    the buffer stale and later steps would read it: the replay raises instead."""
    from staticgrad._eager.dispatch import dispatch
    from staticgrad.errors import PlanError
    from staticgrad.ops import OPS, OpDef, register

    def doubled_ignoring_out(a, out=None):
        return a * 2.0

    op = register(OpDef("test_doubled_ignoring_out", doubled_ignoring_out, "other", dtype_rule="same"))
    try:
        @sg.compile
        def f(x):
            return dispatch(op, (x,), {}) + 1.0

        f(sg.randn(3))
        with pytest.raises(PlanError, match=r"test_doubled_ignoring_out.*out="):
            f(sg.randn(3))
    finally:
        del OPS["test_doubled_ignoring_out"]


def test_an_output_whose_graph_a_backward_inside_the_call_freed_replays_and_refuses_backward_as_eager():
    """``return y.sum()`` after ``y``'s graph ran backward inside the step: eager returns it (a backward
    through it fails, its saved values are gone); compiling raised that error at the first call."""
    import torch

    results = []
    for lib, compiled in ((torch, False), (sg, False), (sg, True)):
        w = lib.nn.Parameter(lib.ones(3, 4) * 0.5)
        opt = lib.optim.SGD([w], lr=0.1)

        def step(x, w=w, opt=opt):
            opt.zero_grad()
            y = x * w
            y.mul(2).sum().backward()
            opt.step()
            return y.sum()

        fn = sg.compile(step) if compiled else step
        seen = []
        for k in range(4):
            z = fn(lib.ones(3, 4) * (k + 1))
            with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second time"):
                z.backward()
            seen.append((z.item(), type(z.grad_fn).__name__, w.detach().numpy().tolist()))
        if compiled:
            assert fn.stats.replays == 3
        results.append(seen)
    assert results[2] == results[1]
    np.testing.assert_allclose([s[0] for s in results[1]], [s[0] for s in results[0]], rtol=1e-6)
    assert [s[1] for s in results[1]] == [s[1] for s in results[0]]
