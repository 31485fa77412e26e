"""A compiled model inside ordinary code: its replay returns outputs attached to one
CompiledFunctionBackward node per call, and backward runs outside, through autograd."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg

F = sg.nn.functional


def _mlp(seed=0):
    sg.manual_seed(seed)
    return sg.nn.Sequential(sg.nn.Linear(4, 8), sg.nn.Tanh(), sg.nn.Linear(8, 3))


def _twins(make=_mlp):
    eager, compiled_model = make(), make()
    for a, b in zip(eager.parameters(), compiled_model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    return eager, compiled_model, sg.compile(lambda x: compiled_model(x))


def _batches(n, rows=5, seed=1):
    rng = np.random.default_rng(seed)
    return [(sg.tensor(rng.standard_normal((rows, 4)).astype(np.float32)),
             sg.tensor(rng.standard_normal((rows, 3)).astype(np.float32))) for _ in range(n)]


def _same_parameters(a, b) -> bool:
    return all(np.array_equal(p.detach().numpy(), q.detach().numpy()) for p, q in zip(a.parameters(), b.parameters()))


def _same_grads(a, b) -> bool:
    return all((p.grad is None and q.grad is None) or np.array_equal(p.grad.numpy(), q.grad.numpy())
               for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.bitexact
def test_loss_backward_and_step_outside_equal_eager_bit_for_bit():
    eager, model, forward = _twins()
    opt_e = sg.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches(6):
        for _net, f, opt in ((eager, eager, opt_e), (model, forward, opt_c)):
            opt.zero_grad()
            loss = F.mse_loss(f(x), y)
            loss.backward()
            opt.step()
        assert _same_parameters(eager, model)
    assert forward.stats.replays == 5
    out = forward(_batches(1)[0][0])
    assert out.grad_fn.name() == "CompiledFunctionBackward" and out.requires_grad


def test_gradient_accumulation_over_four_outstanding_forwards():
    """Four forwards, one backward of the summed loss; and four (forward, backward) pairs: each
    call's saved buffers are its own."""
    eager, model, forward = _twins()
    forward(_batches(1)[0][0])  # trace
    data = _batches(4, seed=3)
    total_e = sum(F.mse_loss(eager(x), y) for x, y in data)
    total_c = sum(F.mse_loss(forward(x), y) for x, y in data)
    total_e.backward()
    total_c.backward()
    assert np.array_equal(total_e.detach().numpy(), total_c.detach().numpy())
    assert _same_grads(eager, model)
    for x, y in data:
        F.mse_loss(eager(x), y).backward()
        F.mse_loss(forward(x), y).backward()
    assert _same_grads(eager, model)


def test_an_input_computed_by_eager_code_gets_its_gradient_and_backward_continues():
    eager, model, forward = _twins()
    pre_e, pre_c = sg.nn.Linear(4, 4), sg.nn.Linear(4, 4)
    pre_c.load_state_dict(pre_e.state_dict())
    forward(pre_c(_batches(1)[0][0]))   # trace
    for x, y in _batches(3):
        F.mse_loss(eager(pre_e(x)), y).backward()
        F.mse_loss(forward(pre_c(x)), y).backward()
    assert _same_grads(eager, model) and _same_grads(pre_e, pre_c)
    assert forward.stats.replays >= 3


def test_hooks_on_parameters_run_and_retain_graph_and_second_backward_error():
    _eager, model, forward = _twins()
    x, y = _batches(1)[0]
    forward(x)
    seen = []
    model[0].weight.register_hook(lambda g: seen.append(g.shape))
    loss = F.mse_loss(forward(x), y)
    loss.backward(retain_graph=True)
    loss.backward()
    assert seen == [(8, 4), (8, 4)]
    loss = F.mse_loss(forward(x), y)
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_changing_a_saved_tensor_in_place_before_backward_raises_as_eager():
    eager, model, forward = _twins()
    x, y = _batches(1)[0]
    forward(x)
    results = []
    for f, net in ((eager, eager), (forward, model)):
        loss = F.mse_loss(f(x), y)
        with sg.no_grad():
            net[2].weight.mul_(2.0)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        results.append(str(info.value).split(";")[0])
    assert results[0] == results[1] and "modified by an inplace operation" in results[0]


def test_unused_outputs_get_zero_gradients_and_several_outputs_work():
    sg.manual_seed(0)
    w_e = sg.randn(4, 3, requires_grad=True)
    w_c = sg.tensor(w_e.detach().numpy().copy(), requires_grad=True)

    def two(w):
        return lambda x: ((x @ w).tanh(), (x @ w).sum(dim=1), x.sum())   # the last needs no grad

    eager, compiled = two(w_e), sg.compile(two(w_c))
    for k, (x, _) in enumerate(_batches(4)):
        a, b, c = eager(x)
        p, q, r = compiled(x)
        assert not r.requires_grad and c.requires_grad is False
        loss_e = a.sum() * 2 + (b.sum() if k % 2 else 0)
        loss_c = p.sum() * 2 + (q.sum() if k % 2 else 0)
        w_e.grad = w_c.grad = None
        loss_e.backward()
        loss_c.backward()
        assert np.array_equal(w_e.grad.numpy(), w_c.grad.numpy())
    assert compiled.stats.replays == 3


def test_double_backward_through_the_node_rebuilds_the_graph_as_eager():
    """create_graph=True through CompiledFunctionBackward (a gradient penalty): the node runs the
    function again eagerly on the call's arguments and differentiates that graph, and passes later
    gradients on into it. The penalty and the final gradients equal eager's bit for bit: the loss's
    own path and the penalty's meet inside the rebuilt graph, as they meet inside eager's."""
    eager, model, forward = _twins()
    for x, y in _batches(3):
        results = []
        for net, f in ((eager, eager), (model, forward)):
            net.zero_grad()
            loss = F.mse_loss(f(x), y)
            grads = sg.autograd.grad(loss, list(net.parameters()), create_graph=True)
            penalty = sum((g * g).sum() for g in grads)
            (loss + penalty).backward()
            results.append(penalty.detach().numpy())
        assert np.array_equal(*results)
        for p, q in zip(eager.parameters(), model.parameters()):
            assert np.array_equal(q.grad.numpy(), p.grad.numpy())
    assert forward.stats.replays == 2


def test_a_double_backward_leaves_out_the_outputs_the_loss_did_not_use():
    """create_graph=True through the node when the loss uses one output: a parameter only the unused
    output reaches gets no gradient (None, as eager's engine never reaches it), not zeros from a
    zero-filled incoming gradient; the penalty and the final gradients are eager's bit for bit."""
    rng = np.random.default_rng(3)
    starts = [rng.standard_normal(3), rng.standard_normal(3)]
    xs = [rng.standard_normal(3) for _ in range(4)]

    def run(compiled):
        p0, p1 = (sg.tensor(a.copy(), requires_grad=True) for a in starts)

        def forward(x):
            return (x + p0).sigmoid(), F.log_softmax(x, dim=0) * p1

        f = sg.compile(forward) if compiled else forward
        shots = []
        for x in xs:
            p0.grad = p1.grad = None
            loss = (f(sg.tensor(x))[1] * 2.0).sum()
            g0, g1 = sg.autograd.grad(loss, [p0, p1], create_graph=True, allow_unused=True)
            assert g0 is None
            ((g1 * g1).sum() + loss).backward()
            shots.append((p0.grad, p1.grad.numpy().tobytes()))
        return shots

    assert run(True) == run(False)


def test_an_input_gradient_penalty_through_a_compiled_model_trains_as_eager():
    """A critic's gradient penalty on its input (WGAN-GP): grad of the score with respect to x with
    create_graph=True, then the score plus the penalty backpropagated and an optimizer step, every
    step bit for bit as eager's. The node is CompiledFunctionBackward before and after."""
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((6, 4)).astype(np.float32) for _ in range(5)]

    def run(compiled):
        sg.manual_seed(0)
        critic = sg.nn.Sequential(sg.nn.Linear(4, 8), sg.nn.Tanh(), sg.nn.Linear(8, 1))
        score_of = sg.compile(critic) if compiled else critic
        opt = sg.optim.SGD(critic.parameters(), lr=0.1)
        shots = []
        for i, batch in enumerate(batches):
            x = sg.tensor(batch, requires_grad=True)
            opt.zero_grad()
            score = score_of(x).sum()
            replayed = compiled and i > 0   # (the first call traces: its graph is eager's)
            assert score.grad_fn.next_functions[0][0].name() == ("CompiledFunctionBackward" if replayed
                                                                  else "AddmmBackward0")
            g, = sg.autograd.grad(score, x, create_graph=True)
            penalty = ((g.norm(dim=1) - 1) ** 2).mean()
            (score * 0.1 + penalty).backward()
            opt.step()
            shots.append([penalty.detach().numpy().tobytes()] + [p.detach().numpy().tobytes()
                                                                  for p in critic.parameters()])
        return shots

    assert run(True) == run(False)


def test_double_backward_is_refused_where_a_second_run_would_differ():
    """A forward that draws random numbers (dropout), or a weight changed in place since the call:
    running the function again would not rebuild the call's graph, so the double backward raises,
    saying why, instead of differentiating another graph."""
    sg.manual_seed(0)
    dropped = sg.compile(sg.nn.Sequential(sg.nn.Linear(4, 8), sg.nn.Dropout(0.5), sg.nn.Linear(8, 3)))
    _eager, model, forward = _twins()
    x, y = _batches(1)[0]
    for net in (dropped, forward):
        for _ in range(2):
            F.mse_loss(net(x), y).backward()
    loss = F.mse_loss(dropped(x), y)
    with pytest.raises(RuntimeError, match=r"cannot run a double backward.*draws random numbers"):
        sg.autograd.grad(loss, list(dropped.parameters()), create_graph=True)
    loss = F.mse_loss(forward(x), y)
    with sg.no_grad():
        model[0].bias.add_(1.0)   # read by the forward only: the backward alone would not notice
    with pytest.raises(RuntimeError, match=r"cannot run a double backward.*changed in place since the call"):
        sg.autograd.grad(loss, list(model.parameters()), create_graph=True)


def test_no_grad_calls_use_a_forward_only_plan():
    eager, _model, forward = _twins()
    x, _ = _batches(1)[0]
    with sg.no_grad():
        for _ in range(3):
            out = forward(x)
            assert out.grad_fn is None and not out.requires_grad
            assert np.array_equal(out.numpy(), eager(x).detach().numpy())


def test_compile_of_a_module_returns_the_module_with_its_own_keys():
    eager = _mlp()
    model = sg.compile(_mlp())
    assert isinstance(model, sg.nn.Module)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in eager.named_parameters()]
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    model.load_state_dict(eager.state_dict())
    assert _same_parameters(eager, model)
    assert len(list(model.children())) == 3 and len(list(model.parameters())) == 4
    opt_e = sg.optim.Adam(eager.parameters(), lr=0.01)
    opt_c = sg.optim.Adam(model.parameters(), lr=0.01)
    for x, y in _batches(4):
        for net, opt in ((eager, opt_e), (model, opt_c)):
            net.zero_grad()
            F.mse_loss(net(x), y).backward()
            opt.step()
    assert _same_parameters(eager, model)
    assert model.stats.replays == 3 and model.plan is model.plans[0]
    assert model.eval() is model and not model.training and not model[0].training
    x = _batches(1)[0][0]
    assert np.array_equal(model(x).detach().numpy(), eager.eval()(x).detach().numpy())
    assert model.train() is model and model.training and model[2].training
    model.extra = 3
    assert model.extra == 3 and "staticgrad.compile(Sequential(" in repr(model)


def test_keyword_arguments_to_a_compiled_forward():
    class Scaled(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _mlp()

        def forward(self, x, *, scale):
            return self.inner(x) * scale

    sg.manual_seed(0)
    eager = Scaled()
    model = sg.compile(Scaled())
    model.load_state_dict(eager.state_dict())
    for k, (x, y) in enumerate(_batches(4)):
        for net in (eager, model):
            net.zero_grad()
            F.mse_loss(net(x, scale=0.5 + k), y).backward()
        assert _same_grads(eager, model)
    assert model.stats.replays >= 2


def test_dropout_in_a_compiled_model_draws_new_masks_like_eager():
    def make():
        sg.manual_seed(0)
        return sg.nn.Sequential(sg.nn.Linear(4, 16), sg.nn.Dropout(0.5), sg.nn.Linear(16, 3))

    eager, model = make(), sg.compile(make())
    for x, y in _batches(4):
        for net, seed in ((eager, 7), (model, 7)):
            sg.manual_seed(seed)
            net.zero_grad()
            F.mse_loss(net(x), y).backward()
        assert _same_grads(eager, model)
    assert model.stats.replays == 3


@pytest.mark.parametrize("change", ["output", "view of the output", "input"])
def test_changing_an_output_or_input_the_backward_reads_raises_as_eager(change):
    w_e = sg.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    w_c = sg.tensor(w_e.detach().numpy().copy(), requires_grad=True)

    def make(w):
        def f(x):
            h = (x @ w).tanh()          # tanh saves its output for backward
            return h, h.t()
        return f

    eager, compiled = make(w_e), sg.compile(make(w_c))
    x0 = sg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    compiled(x0)
    messages = []
    for f in (eager, compiled):
        x = sg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        h, ht = f(x)
        with sg.no_grad():
            {"output": h, "view of the output": ht, "input": x}[change].mul_(2.0)
        try:
            (h.sum() + ht.sum()).backward()
            messages.append(None)
        except RuntimeError as error:
            messages.append(str(error).split(",")[0])
    assert messages[0] is not None and messages[1] is not None
    assert "modified by an inplace operation" in messages[1]


@pytest.mark.parametrize("make_opt", [lambda ps: sg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
                                      lambda ps: sg.optim.Adam(ps, lr=0.01, weight_decay=0.01)],
                         ids=["sgd", "adam"])
def test_a_compiled_optimizer_step_is_the_companion_of_a_compiled_model(make_opt):
    eager, model, forward = _twins()
    opt_e, opt_c = make_opt(eager.parameters()), make_opt(model.parameters())
    step = sg.compile(opt_c.step)
    for x, y in _batches(6):
        opt_e.zero_grad()
        opt_c.zero_grad()
        F.mse_loss(eager(x), y).backward()
        F.mse_loss(forward(x), y).backward()
        opt_e.step()
        step()
        assert _same_parameters(eager, model)
    assert step.stats.replays >= 4


def test_inspect_shows_the_node_and_what_backward_frees():
    _, _, forward = _twins()
    x, y = _batches(1)[0]
    forward(x)
    loss = F.mse_loss(forward(x), y)
    before = sg.inspect.graph(loss)
    node = next(n for n in before.nodes if n.name == "CompiledFunctionBackward")
    assert node.saved and all(b.is_tensor and not b.freed for b in node.saved)
    assert any(b.shape == (5, 4) for b in node.saved)          # the argument it reads
    loss.backward()
    after = sg.inspect.graph(loss)
    node = next(n for n in after.nodes if n.name == "CompiledFunctionBackward")
    assert all(b.freed for b in node.saved) and after.held_bytes == 0


# ---- every model family: a compiled model in an eager loop equals the eager loop, bit for bit ----

def _family(name):
    from tests import test_cnn, test_rnn, test_transformer

    if name == "cnn":
        data = [(sg.tensor(x), sg.tensor(y)) for x, y in test_cnn.cnn_batches(5, "float32")]
        return (lambda: test_cnn.small_cnn(sg)), data, F.mse_loss
    if name == "lstm":
        data = [(sg.tensor(x), sg.tensor(y)) for x, y in test_rnn.sequences(5)]
        return (lambda: test_rnn.sequence_model(sg)), data, F.mse_loss
    vocab = test_transformer.VOCAB
    data = [(sg.tensor(i), sg.tensor(t)) for i, t in test_transformer.token_batches(5)]

    def loss(logits, targets):
        return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    return (lambda: test_transformer.tiny_lm(sg, p=0.1)), data, loss


@pytest.mark.bitexact
@pytest.mark.parametrize("name", ["cnn", "lstm", "transformer"])
def test_every_family_as_a_compiled_model_equals_eager(name):
    make, data, loss_fn = _family(name)
    sg.manual_seed(0)
    eager = make()
    sg.manual_seed(0)
    model = sg.compile(make())
    model.load_state_dict(eager.state_dict())
    opt_e = sg.optim.Adam(eager.parameters(), lr=0.01)
    opt_c = sg.optim.Adam(model.parameters(), lr=0.01)
    for k, (x, y) in enumerate(data):
        losses = []
        for net, opt in ((eager, opt_e), (model, opt_c)):
            sg.manual_seed(100 + k)   # the same dropout masks for both
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach().numpy())
        assert np.array_equal(losses[0], losses[1]), f"loss differs at step {k}"
        assert _same_parameters(eager, model), f"parameters differ at step {k}"
    assert model.stats.replays >= 3
    assert model.plan.backward is not None


def test_the_plan_reports_what_each_call_saves_for_backward():
    """describe() says what a call keeps for backward; today that is exactly what eager's graph
    alone keeps (the same values: no recomputation yet)."""
    eager, _model, forward = _twins()
    x, _ = _batches(1)[0]
    forward(x)
    forward(x)
    plan = forward.plan
    assert "backward:" in plan.describe() and "saved per call" in plan.describe()
    assert plan.backward.saved_bytes(plan.graph) == sg.inspect.graph(eager(x)).graph_only_bytes


# ---- what crosses from forward to backward: saved or recomputed -----------------------------------

def _gelu_mlp(approximate="none"):
    sg.manual_seed(3)
    return sg.nn.Sequential(sg.nn.Linear(4, 16), sg.nn.LayerNorm(16), sg.nn.Linear(16, 32),
                            sg.nn.GELU(approximate), sg.nn.Linear(32, 3))


@pytest.mark.bitexact
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_the_automatic_partition_recomputes_cheap_chains_and_stays_bit_exact(approximate):
    """partition="auto" runs the GELU and the layer norm again in the backward instead of keeping
    their outputs: fewer bytes per call than eager's graph, and the same training, bit for bit
    (the GELU in one pass with its backward). partition="eager" keeps exactly what eager's graph
    keeps."""
    eager = _gelu_mlp(approximate)
    models = {p: sg.compile(_gelu_mlp(approximate), partition=p) for p in ("auto", "eager")}
    opts = {p: sg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for p, m in models.items()}
    opt_e = sg.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches(4):
        for net, opt in [(eager, opt_e)] + [(models[p], opts[p]) for p in models]:
            opt.zero_grad()
            F.mse_loss(net(x), y).backward()
            opt.step()
        for model in models.values():
            assert _same_parameters(eager, model)
    x = _batches(1)[0][0]
    eager_bytes = sg.inspect.graph(eager(x)).graph_only_bytes
    auto, saving = models["auto"].plan, models["eager"].plan
    assert sorted(auto.backward.recomputed) == ["gelu", "layer_norm_affine"]
    backward_ops = [op.op for op in auto.backward.graph.ops]
    assert "gelu_with_backward" in backward_ops and "gelu" not in backward_ops
    assert saving.backward.recomputed == []
    assert saving.backward.saved_bytes(saving.graph) == eager_bytes
    # the GELU's output (5x32) and the layer norm's (5x16) and its statistics are no longer kept
    assert auto.backward.saved_bytes(auto.graph) == eager_bytes - 4 * (5 * 32 + 5 * 16 + 2 * 5)
    assert "partition 'auto', 2 forward op(s) run again" in auto.describe()
    assert f"({auto.backward.saved_bytes(auto.graph) / eager_bytes:.2f}x the" in auto.describe()


def test_a_chain_is_never_recomputed_from_an_argument_or_an_output():
    """Recomputing from what the user holds could see an in-place change eager's saved copy would
    not: a GELU of the argument, and one whose output is returned, stay saved."""
    w = sg.randn(6, 6, requires_grad=True)

    def of_argument(x):
        return F.gelu(x) @ w

    def returns_it(x):
        h = F.gelu(x @ w)
        return h, h @ w

    for fn in (of_argument, returns_it):
        compiled = sg.compile(fn)
        x = sg.randn(2, 6)
        for _ in range(3):
            out = compiled(x)
            (out[1] if isinstance(out, tuple) else out).sum().backward()
        assert compiled.plan.backward.recomputed == []


def test_changing_a_layer_norm_bias_before_backward_raises_as_pytorch():
    """A recomputed layer norm reads its weight and bias in the backward, held with their version
    counters: changing the bias in place between forward and backward raises, as PyTorch does
    (its layer norm saves the bias)."""
    torch = pytest.importorskip("torch")
    model = sg.compile(_gelu_mlp())
    x = _batches(1)[0][0]
    for _ in range(3):
        model(x).sum().backward()
    assert "layer_norm_affine" in model.plan.backward.recomputed
    out = model(x).sum()
    with sg.no_grad():
        model[1].bias.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as ours:
        out.backward()
    t_ln, t_lin = torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    t_out = t_lin(t_ln(torch.randn(5, 16))).sum()
    with torch.no_grad():
        t_ln.bias.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as theirs:
        t_out.backward()
    assert str(ours.value).split(";")[0].split("[")[0] == str(theirs.value).split(";")[0].split("[")[0]


def test_an_unknown_partition_is_refused():
    with pytest.raises(ValueError, match="partition must be one of"):
        sg.compile(_mlp(), partition="min-cut")


# ---- every bullet of a compiled model's behaviour, on every model family --------------------------

def _family_twins(name):
    make, data, loss_fn = _family(name) if name != "mlp" else (_mlp, _batches(4), F.mse_loss)
    sg.manual_seed(0)
    eager = make()
    sg.manual_seed(0)
    model = make()
    assert _same_parameters(eager, model)
    return eager, sg.compile(model), data, loss_fn


@pytest.mark.bitexact
@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm", "transformer"])
def test_every_family_outstanding_forwards_retain_graph_and_errors_as_eager(name):
    """On each family, against its eager twin: four forwards outstanding and one backward of the
    summed loss; four (forward, backward) pairs; retain_graph twice; the second-backward error;
    the in-place error of a step taken between forward and backward; eval under no_grad."""
    eager, model, data, loss_fn = _family_twins(name)
    data = (data * 4)[:4]
    nets = (eager, model)
    for net in nets:   # trace, and a first replay
        for x, y in data[:2]:
            sg.manual_seed(7)
            loss_fn(net(x), y).backward()
        net.zero_grad()

    def losses(net):
        out = []
        for k, (x, y) in enumerate(data):
            sg.manual_seed(100 + k)   # the same dropout masks
            out.append(loss_fn(net(x), y))
        return out

    totals = [sum(losses(net)) for net in nets]
    for total in totals:
        total.backward()
    assert np.array_equal(totals[0].detach().numpy(), totals[1].detach().numpy())
    assert _same_grads(eager, model)
    for net in nets:
        for loss in losses(net):
            loss.backward()
    assert _same_grads(eager, model)
    for net in nets:
        loss = losses(net)[0]
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    assert _same_grads(eager, model)
    messages = []
    for net in nets:
        loss = losses(net)[0]
        opt = sg.optim.SGD(net.parameters(), lr=0.1)
        opt.step()
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        messages.append(str(info.value).split(";")[0])
    assert messages[0] == messages[1] and "modified by an inplace operation" in messages[0]
    for net in nets:
        net.eval()
    with sg.no_grad():
        outs = [net(data[0][0]) for net in nets for _ in range(2)]
    assert all(o.grad_fn is None for o in outs)
    assert np.array_equal(outs[0].numpy(), outs[2].numpy()) and np.array_equal(outs[1].numpy(), outs[3].numpy())
    assert model.stats.replays >= 10


@pytest.mark.bitexact
@pytest.mark.parametrize("name", ["mlp", "lstm"])
def test_outstanding_calls_and_eager_uses_of_the_same_weights_sum_as_eager(name):
    """Two calls outstanding and the weights also used by eager code in the same loss: each call's
    backward adds onto what the engine already summed for a weight (the eager use's gradient, a
    view of the loss's own gradient, is copied, never written into), in eager's order."""
    eager, model, data, loss_fn = _family_twins(name)
    (x1, y1), (x2, y2) = (data * 2)[:2]
    for net in (eager, model):
        for _ in range(2):   # trace, and a first replay
            loss_fn(net(x1), y1).backward()
        net.zero_grad()
    totals = []
    for net in (eager, model):
        weights = list(net.parameters())
        loss = loss_fn(net(x1), y1) + loss_fn(net(x2), y2) + weights[0].sum() + (weights[-1] * 3).sum()
        loss.backward()
        totals.append(loss.detach().numpy())
    assert np.array_equal(*totals)
    assert _same_grads(eager, model)


@pytest.mark.bitexact
@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm"])
def test_every_family_passes_gradients_on_into_eager_code_before_it(name):
    """An input computed by eager code (scaled by a parameter of its own) gets its gradient from
    the node, and backward continues into the eager graph before the model: the scale's gradient
    equals the eager twin's, bit for bit."""
    eager, model, data, loss_fn = _family_twins(name)
    scales = [sg.tensor(np.float32(1.5), requires_grad=True) for _ in range(2)]
    for k, (x, y) in enumerate((data * 4)[:4]):
        for net, scale in zip((eager, model), scales):
            scale.grad = None
            loss_fn(net(x * scale), y).backward()
        assert np.array_equal(scales[0].grad.numpy(), scales[1].grad.numpy()), f"call {k}"
        assert _same_grads(eager, model)
    assert model.stats.replays >= 2
