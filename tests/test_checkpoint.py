"""torch.utils.checkpoint (checkpoint, checkpoint_sequential) and the saved-tensor hooks it rests on
(torch.autograd.graph.saved_tensors_hooks), against PyTorch: values, gradients, node names, the
saved bytes that go away, dropout's mask on recompute, errors and warnings, and compiled replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.inspect import graph
from tests.oracle import same_error, torch
from tests.replay_check import same_bits

rng = np.random.default_rng(31)
X = rng.standard_normal((4, 6))
W = rng.standard_normal((6, 6))


def _leaves(lib, dtype=np.float64):
    return (lib.tensor(X.astype(dtype), requires_grad=True), lib.tensor(W.astype(dtype), requires_grad=True))


def _block(w):
    return lambda a: ((a @ w).tanh() * a).sin().sum(1, keepdim=True) * a


def _run(lib, reentrant, dtype=np.float64):
    x, w = _leaves(lib, dtype)
    y = lib.utils.checkpoint.checkpoint(_block(w), x, use_reentrant=reentrant)
    (y * y).sum().backward()
    return y, x.grad, w.grad


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_gradients_and_node_name_match_torch(reentrant, dtype):
    ours, theirs = _run(sg, reentrant, dtype), _run(torch, reentrant, dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for s, t in zip(ours, theirs):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
    assert ours[0].grad_fn.name() == type(theirs[0].grad_fn).__name__
    assert ours[0].grad_fn.name() == ("CheckpointFunctionBackward" if reentrant else "MulBackward0")


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradients_equal_the_plain_call_bit_for_bit(reentrant):
    x, w = _leaves(sg)
    (_block(w)(x) ** 2).sum().backward()
    plain = (x.grad.numpy().copy(), w.grad.numpy().copy())
    checkpointed = _run(sg, reentrant)
    same_bits(checkpointed[1].numpy(), plain[0], "input gradient")
    same_bits(checkpointed[2].numpy(), plain[1], "weight gradient")


def test_non_reentrant_holds_no_activations():
    x, w = _leaves(sg)
    plain = graph(_block(w)(x))
    checkpointed = graph(sg.utils.checkpoint.checkpoint(_block(w), x, use_reentrant=False))
    assert plain.graph_only_bytes > 0
    assert checkpointed.held_bytes == 0
    assert [n.name for n in checkpointed.nodes] == [n.name for n in plain.nodes]
    assert "packed by a saved-tensor hook" in str(checkpointed)


def test_checkpointed_model_keeps_only_its_input():
    sg.manual_seed(0)
    model = sg.nn.Sequential(sg.nn.Linear(32, 64), sg.nn.Tanh(), sg.nn.Linear(64, 64), sg.nn.Tanh())
    x = sg.randn(16, 32, requires_grad=True)
    plain = graph(model(x)).graph_only_bytes
    checkpointed = graph(sg.utils.checkpoint.checkpoint(model, x, use_reentrant=False))
    assert plain >= 16 * 64 * 4 and checkpointed.held_bytes == 0
    reentrant = graph(sg.utils.checkpoint.checkpoint(model, x, use_reentrant=True))
    assert [n.name for n in reentrant.nodes] == ["CheckpointFunctionBackward", "AccumulateGrad"]
    assert reentrant.held_bytes == 16 * 32 * 4 and reentrant.graph_only_bytes == 0  # the input, the user's too


@pytest.mark.parametrize("reentrant", [False, True])
def test_dropout_draws_the_same_mask_on_recompute(reentrant):
    x, w = _leaves(sg)
    block = lambda a: sg.nn.functional.dropout((a @ w).tanh(), 0.5, True) * a
    sg.manual_seed(3)
    (block(x) ** 2).sum().backward()
    plain, after_plain = (x.grad.numpy().copy(), w.grad.numpy().copy()), sg.rand(3).numpy()
    x.grad = w.grad = None
    sg.manual_seed(3)
    y = sg.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant)
    (y ** 2).sum().backward()
    same_bits(x.grad.numpy(), plain[0], "input gradient")
    same_bits(w.grad.numpy(), plain[1], "weight gradient")
    same_bits(sg.rand(3).numpy(), after_plain, "draw after backward (the recompute puts the state back)")


def test_without_preserved_rng_state_the_recompute_draws_anew():
    x, w = _leaves(sg)
    block = lambda a: sg.nn.functional.dropout(a @ w, 0.5, True)
    sg.manual_seed(3)
    block(x).sum().backward()
    plain = x.grad.numpy().copy()
    x.grad = None
    sg.manual_seed(3)
    sg.utils.checkpoint.checkpoint(block, x, use_reentrant=False, preserve_rng_state=False).sum().backward()
    assert not np.array_equal(x.grad.numpy(), plain)


def test_non_reentrant_serves_autograd_grad_kwargs_and_retain_graph():
    for lib in (torch, sg):
        x, w = _leaves(lib)
        y = lib.utils.checkpoint.checkpoint(lambda a, scale, w=w: (a @ w).sin() * scale, x, use_reentrant=False,
                                            scale=2.0)
        first = lib.autograd.grad(y.sum(), [x, w], retain_graph=True)
        second = lib.autograd.grad(y.sum(), [w])
        if lib is torch:
            expected = [g.numpy() for g in first + second]
        else:
            for g, e in zip(first + second, expected):
                np.testing.assert_allclose(g.numpy(), e, rtol=1e-12, atol=1e-12)


def test_early_stop_ends_the_recompute_at_the_last_saved_tensor():
    for lib in (torch, sg):
        for early_stop, expected in ((True, ["before", "after", "before"]),
                                     (False, ["before", "after", "before", "after"])):
            calls = []
            x, _ = _leaves(lib)

            def block(a, calls=calls):
                calls.append("before")
                y = a.sin()
                calls.append("after")
                return y

            lib.utils.checkpoint.checkpoint(block, x, use_reentrant=False, early_stop=early_stop).sum().backward()
            assert calls == expected, (lib.__name__, early_stop, calls)


def test_set_checkpoint_early_stop_overrides_each_call_like_torch():
    for lib in (torch, sg):
        calls = []
        x, _ = _leaves(lib)

        def block(a, calls=calls):
            y = a.sin()
            calls.append("after")
            return y

        with lib.utils.checkpoint.set_checkpoint_early_stop(False):
            y = lib.utils.checkpoint.checkpoint(block, x, use_reentrant=False, early_stop=True)
        y.sum().backward()
        assert calls == ["after", "after"], lib.__name__


def test_recompute_that_saves_differently_raises_checkpoint_error():
    for lib in (torch, sg):
        x, _ = _leaves(lib)
        state = {"first": True}

        def block(a, state=state):
            out = a.sin() if state.pop("first", False) else a * 2.0
            return out.exp()

        y = lib.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        with pytest.raises(lib.utils.checkpoint.CheckpointError, match=r"metadata|different number"):
            y.sum().backward()


def test_use_reentrant_unspecified_warns_and_runs_reentrant():
    for lib in (torch, sg):
        x, w = _leaves(lib)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = lib.utils.checkpoint.checkpoint(_block(w), x)
        messages = [str(c.message) for c in caught if "use_reentrant" in str(c.message)]
        assert len(messages) == 1 and "use_reentrant=False is recommended" in messages[0]
        assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward" or y.grad_fn.name() == \
            "CheckpointFunctionBackward"


def test_reentrant_without_an_input_that_requires_grad_warns_like_torch():
    outputs = []
    for lib in (torch, sg):
        lib.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = lib.utils.checkpoint.checkpoint(lib.nn.Linear(3, 1), lib.ones(2, 3), use_reentrant=True)
        outputs.append(([str(c.message) for c in caught], y.requires_grad))
    assert outputs[0] == outputs[1] == (["None of the inputs have requires_grad=True. Gradients will be None"], False)


def test_reentrant_errors_match_torch():
    def grad_call(lib):
        x, w = _leaves(lib)
        y = lib.utils.checkpoint.checkpoint(_block(w), x, use_reentrant=True)
        lib.autograd.grad(y.sum(), [x])

    def backward_inputs(lib):
        x, w = _leaves(lib)
        lib.utils.checkpoint.checkpoint(_block(w), x, use_reentrant=True).sum().backward(inputs=[x])

    same_error(grad_call)
    same_error(backward_inputs)
    same_error(lambda lib: lib.utils.checkpoint.checkpoint(lambda a: a, _leaves(lib)[0], use_reentrant=True, foo=1))
    same_error(lambda lib: lib.utils.checkpoint.checkpoint(lambda a: a, _leaves(lib)[0], use_reentrant=True,
                                                           debug=True))
    same_error(lambda lib: lib.utils.checkpoint.checkpoint_sequential([lambda a: a], 1, _leaves(lib)[0],
                                                                      use_reentrant=False, foo=1))


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("segments", [1, 2, 3])
def test_checkpoint_sequential_matches_torch(reentrant, segments):
    results = []
    for lib in (torch, sg):
        lib.manual_seed(0)
        layers = [lib.nn.Linear(5, 7), lib.nn.Tanh(), lib.nn.Linear(7, 7), lib.nn.Sigmoid(), lib.nn.Linear(7, 2)]
        model = lib.nn.Sequential(*layers).double()
        if lib is sg:  # the same weights as torch's
            for mine, theirs in zip(model.parameters(), results[0][2]):
                mine.data = sg.tensor(theirs)
        x = lib.tensor(rng.standard_normal((3, 5)) if lib is torch else results[0][3], requires_grad=True)
        y = lib.utils.checkpoint.checkpoint_sequential(model, segments, x, use_reentrant=reentrant)
        y.pow(2).sum().backward()
        results.append(([y.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()],
                        y.grad_fn, [p.detach().numpy().copy() for p in model.parameters()], x.detach().numpy()))
    for s, t in zip(results[1][0], results[0][0]):
        np.testing.assert_allclose(s, t, rtol=1e-12, atol=1e-12)
    assert results[1][1].name() == type(results[0][1]).__name__


def test_saved_tensors_hooks_pack_and_unpack_like_torch():
    for lib in (torch, sg):
        log = []

        def pack(t, log=log):
            log.append(("pack", tuple(t.shape)))
            return t * 1

        def unpack(t, log=log):
            log.append(("unpack", tuple(t.shape)))
            return t

        x = lib.tensor(X, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (x.exp() * x).sum()
        y.backward()
        if lib is torch:
            expected_log, expected_grad = log, x.grad.numpy()
        else:
            assert sorted(log) == sorted(expected_log)
            np.testing.assert_allclose(x.grad.numpy(), expected_grad, rtol=1e-12)


def test_saved_tensors_hooks_errors_match_torch():
    def not_a_tensor(lib):
        x = lib.tensor(X, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda t: 3):
            y = x.sin()
        y.sum().backward()

    def disabled(lib):
        with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"), \
                lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass

    same_error(not_a_tensor)
    same_error(disabled)


def _twin_steps(block_of):
    """An eager and a compiled training step on twin models whose hidden block is checkpointed."""
    runs = []
    for compiled in (False, True):
        sg.manual_seed(0)
        model = sg.nn.Sequential(sg.nn.Linear(6, 8), sg.nn.Tanh(), sg.nn.Linear(8, 8), sg.nn.Tanh(),
                                 sg.nn.Linear(8, 1))
        opt = sg.optim.SGD(model.parameters(), lr=0.05)
        block = block_of(model)

        def step(x, model=model, opt=opt, block=block):
            opt.zero_grad()
            loss = (model[4](block(x)) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        runs.append((model, sg.compile(step) if compiled else step))
    return runs


def test_compiled_step_with_checkpoint_replays_eager_bit_for_bit():
    def block_of(model):
        inner = sg.nn.Sequential(*list(model)[:4])
        return lambda x: sg.utils.checkpoint.checkpoint(inner, x, use_reentrant=False)

    (m_eager, eager), (m_comp, compiled) = _twin_steps(block_of)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 6)).astype(np.float32))
        same_bits(compiled(x).detach().numpy(), eager(x).detach().numpy(), f"loss of call {call}")
        for a, b in zip(m_comp.parameters(), m_eager.parameters()):
            same_bits(a.detach().numpy(), b.detach().numpy(), f"parameter after call {call}")
    assert compiled.stats.replays >= 2


def test_compiled_checkpoint_with_dropout_refuses_to_replay():
    def block_of(model):
        inner = sg.nn.Sequential(*list(model)[:4], sg.nn.Dropout(0.5))
        return lambda x: sg.utils.checkpoint.checkpoint(inner, x, use_reentrant=False)

    (_, _), (_, compiled) = _twin_steps(block_of)
    with pytest.raises(sg.errors.TraceError, match="draws random numbers"):
        compiled(sg.tensor(rng.standard_normal((5, 6)).astype(np.float32)))


def test_nested_checkpoints_match_torch():
    grads = []
    for lib in (torch, sg):
        x, w = _leaves(lib)

        def inner(a, w=w):
            return (a @ w).tanh()

        def outer(a, lib=lib, inner=inner):
            return lib.utils.checkpoint.checkpoint(inner, a * 2, use_reentrant=False).sin() * a

        y = lib.utils.checkpoint.checkpoint(outer, x, use_reentrant=False)
        (y ** 2).sum().backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for s, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(s, t, rtol=1e-12, atol=1e-12)


def test_compiled_step_with_reentrant_checkpoint_replays_eager_bit_for_bit():
    def block_of(model):
        inner = sg.nn.Sequential(*list(model)[:4])
        return lambda x: sg.utils.checkpoint.checkpoint(inner, x * 1.0 + 0.0 * model[0].bias.sum(),
                                                        use_reentrant=True)

    (m_eager, eager), (m_comp, compiled) = _twin_steps(block_of)
    for call in range(4):
        x = sg.tensor(rng.standard_normal((5, 6)).astype(np.float32))
        same_bits(compiled(x).detach().numpy(), eager(x).detach().numpy(), f"loss of call {call}")
        for a, b in zip(m_comp.parameters(), m_eager.parameters()):
            same_bits(a.detach().numpy(), b.detach().numpy(), f"parameter after call {call}")
    assert compiled.stats.replays >= 2


def test_compiled_model_with_a_checkpointed_block_trains_as_eager():
    class Model(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = sg.nn.Linear(6, 8), sg.nn.Linear(8, 1)

        def forward(self, x):
            return self.b(sg.utils.checkpoint.checkpoint(lambda t: self.a(t).tanh(), x, use_reentrant=False))

    runs = []
    for compiled in (False, True):
        sg.manual_seed(0)
        model = Model()
        forward = sg.compile(model) if compiled else model
        opt = sg.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for i in range(4):
            x = sg.tensor(np.random.default_rng(i).standard_normal((5, 6)).astype(np.float32))
            opt.zero_grad()
            loss = forward(x).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach().numpy())
        runs.append((losses, [p.detach().numpy() for p in model.parameters()]))
    for (a, b) in zip(runs[0][0] + runs[0][1], runs[1][0] + runs[1][1]):
        same_bits(b, a, "loss or parameter")


# ---- context_fn: a context manager around the forward run and one around each recompute -------------

def _recording_contexts(lib, log):
    """context_fn whose two context managers note, in ``log``, when they are entered and left, with
    the grad mode then and whether the block's function runs inside."""
    class Recorder:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(("enter", self.name, lib.is_grad_enabled()))

        def __exit__(self, kind, value, traceback):
            log.append(("exit", self.name, None if kind is None else kind.__name__.lstrip("_")))

    def context_fn():
        log.append(("context_fn",))
        return Recorder("forward"), Recorder("recompute")
    return context_fn


def _run_with_contexts(lib, early_stop=True):
    log = []
    x, w = _leaves(lib)
    block = _block(w)

    def noted(a):
        log.append(("function",))
        return block(a)

    y = lib.utils.checkpoint.checkpoint(noted, x, use_reentrant=False, early_stop=early_stop,
                                        context_fn=_recording_contexts(lib, log))
    log.append(("forward done",))
    (y * y).sum().backward()
    log.append(("backward done",))
    return log, (y, x.grad, w.grad)


@pytest.mark.parametrize("early_stop", [True, False])
def test_context_fn_wraps_the_forward_and_the_recompute_like_torch(early_stop):
    ours, values = _run_with_contexts(sg, early_stop)
    theirs, _ = _run_with_contexts(torch, early_stop)
    # the early stop leaves the recompute's context by the exception that ends the recompute: its
    # class is each library's own, so only its presence is compared
    def normalised(log):
        return [entry[:2] + ("by an exception",) if entry[0] == "exit" and entry[2] else entry for entry in log]

    assert normalised(ours) == normalised(theirs)
    assert ("enter", "recompute", True) in ours
    x, w = _leaves(sg)
    y = _block(w)(x)
    (y * y).sum().backward()
    same_bits(values[0].detach().numpy(), y.detach().numpy(), "output")
    same_bits(values[1].numpy(), x.grad.numpy(), "input gradient")
    same_bits(values[2].numpy(), w.grad.numpy(), "weight gradient")


def test_context_fn_under_no_grad_and_its_errors_match_torch():
    logs = []
    for lib in (torch, sg):
        log = []
        with lib.no_grad():
            lib.utils.checkpoint.checkpoint(lambda a: a * 2, _leaves(lib)[0], use_reentrant=False,
                                            context_fn=_recording_contexts(lib, log))
        logs.append(log)
    assert logs[1] == logs[0] == [("context_fn",)]   # called, but the forward runs outside its context

    def checkpointed(lib, context_fn, reentrant=False):
        return lib.utils.checkpoint.checkpoint(_block(_leaves(lib)[1]), _leaves(lib)[0], use_reentrant=reentrant,
                                               context_fn=context_fn)

    same_error(lambda lib: checkpointed(lib, _recording_contexts(lib, []), reentrant=True))
    same_error(lambda lib: checkpointed(lib, lambda: (lib.no_grad(),)))

    class Swallow:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return True

    def failing(lib):
        def function(a):
            raise ValueError("inside")
        lib.utils.checkpoint.checkpoint(function, _leaves(lib)[0], use_reentrant=False,
                                        context_fn=lambda: (Swallow(), Swallow()))
    same_error(failing)


def test_context_fn_recompute_context_is_entered_again_on_a_second_backward():
    """The same recompute context object each time: a one-shot one fails on the second recompute in both."""
    import contextlib

    def once(lib):
        @contextlib.contextmanager
        def nothing():
            yield

        x, w = _leaves(lib)
        y = lib.utils.checkpoint.checkpoint(_block(w), x, use_reentrant=False, early_stop=False,
                                            context_fn=lambda: (nothing(), nothing()))
        y.sum().backward(retain_graph=True)
        y.sum().backward()
    same_error(once)
