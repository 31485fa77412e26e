"""BatchNorm1d/2d/3d and F.batch_norm against PyTorch (outputs, gradients, running statistics in
train and eval), a compiled training step whose replay updates the buffers exactly as eager, and
Dropout2d."""

from __future__ import annotations

import re

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from tests.oracle import compare, finite_difference_check

torch = pytest.importorskip("torch")

CASES = [
    ("BatchNorm1d", (6, 3), {}),
    ("BatchNorm1d", (4, 3, 5), dict(momentum=None)),
    ("BatchNorm2d", (3, 2, 4, 5), dict(affine=False)),
    ("BatchNorm2d", (2, 3, 3, 3), dict(momentum=0.3, eps=1e-3)),
    ("BatchNorm2d", (2, 3, 3, 3), dict(track_running_stats=False)),
    ("BatchNorm3d", (2, 2, 3, 2, 2), {}),
]


def twin_modules(name, shape, kwargs):
    t, s = getattr(torch.nn, name)(shape[1], **kwargs).double(), getattr(sg.nn, name)(shape[1], **kwargs).double()
    rng = np.random.default_rng(7)
    if kwargs.get("affine", True):
        w, b = rng.standard_normal(shape[1]) + 1, rng.standard_normal(shape[1])
        for lib, m in ((torch, t), (sg, s)):
            with lib.no_grad():
                m.weight.copy_(lib.tensor(w))
                m.bias.copy_(lib.tensor(b))
    return t, s


def assert_buffers_equal(t, s, **tol):
    t_state, s_state = t.state_dict(), s.state_dict()
    assert list(s_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(s_state[key].numpy(), t_state[key].numpy(), err_msg=key, **tol)


@pytest.mark.parametrize("name,shape,kwargs", CASES, ids=[f"{c[0]}-{'-'.join(c[2]) or 'defaults'}" for c in CASES])
def test_train_then_eval_matches_torch(name, shape, kwargs):
    t, s = twin_modules(name, shape, kwargs)
    rng = np.random.default_rng(0)
    for step in range(4):
        x = rng.standard_normal(shape) * 2 + 0.5
        if step == 3:
            t.eval()
            s.eval()
        tx, sx = torch.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
        ty, sy = t(tx), s(sx)
        assert sy.grad_fn.name() == ty.grad_fn.name() == "NativeBatchNormBackward0"
        np.testing.assert_allclose(sy.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        weights = rng.standard_normal(shape)
        (ty * torch.tensor(weights)).sum().backward()
        (sy * sg.tensor(weights)).sum().backward()
        np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-11)
        for (pname, tp), sp in zip(t.named_parameters(), s.parameters()):
            np.testing.assert_allclose(sp.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=pname)
        assert_buffers_equal(t, s, rtol=1e-12, atol=1e-14)


def test_float32_module_matches_torch():
    t, s = torch.nn.BatchNorm2d(3), sg.nn.BatchNorm2d(3)
    x = np.random.default_rng(1).standard_normal((4, 3, 5, 5)).astype(np.float32)
    ty, sy = t(torch.tensor(x)), s(sg.tensor(x))
    assert str(sy.dtype).endswith("float32")
    np.testing.assert_allclose(sy.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_buffers_equal(t, s, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("training", [True, False])
def test_functional_batch_norm_gradients_match_torch_and_finite_differences(training):
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((5, 3, 2)), rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
    compare(lambda lib, x, w, b: lib.nn.functional.batch_norm(x, lib.tensor(rm), lib.tensor(rv), w, b,
                                                                training=training, momentum=0.2, eps=1e-4),
            [x, w, b], atol=1e-9, rtol=1e-8)
    finite_difference_check(lambda x, w, b: sg.nn.functional.batch_norm(
        x, sg.tensor(rm), sg.tensor(rv), w, b, training=training), [x, w, b])


def test_functional_batch_norm_updates_the_given_running_statistics_like_torch():
    rng = np.random.default_rng(4)
    x, rm, rv = rng.standard_normal((6, 4)), rng.standard_normal(4), rng.random(4) + 1
    t_rm, t_rv, s_rm, s_rv = torch.tensor(rm), torch.tensor(rv), sg.tensor(rm), sg.tensor(rv)
    torch.nn.functional.batch_norm(torch.tensor(x), t_rm, t_rv, training=True, momentum=0.25)
    sg.nn.functional.batch_norm(sg.tensor(x), s_rm, s_rv, training=True, momentum=0.25)
    np.testing.assert_allclose(s_rm.numpy(), t_rm.numpy(), rtol=1e-13)
    np.testing.assert_allclose(s_rv.numpy(), t_rv.numpy(), rtol=1e-13)


def test_double_backward_matches_torch():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 2, 3)), rng.standard_normal(2)

    def second(lib, x, w):
        y = lib.nn.functional.batch_norm(x, None, None, w, None, training=True)
        (gx,) = lib.autograd.grad((y * y * y).sum(), x, create_graph=True)
        return (gx * gx).sum()

    compare(second, [x, w], atol=1e-8, rtol=1e-7)


@pytest.mark.parametrize("make,shape,message", [
    (lambda lib: lib.nn.BatchNorm2d(3), (2, 3), "expected 4D input (got 2D input)"),
    (lambda lib: lib.nn.BatchNorm1d(3), (2, 3, 4, 5), "expected 2D or 3D input (got 4D input)"),
    (lambda lib: lib.nn.BatchNorm1d(3), (1, 3), "Expected more than 1 value per channel when training"),
], ids=["2d-rank", "1d-rank", "one-value"])
def test_errors_match_torch(make, shape, message):
    for lib in (torch, sg):
        with pytest.raises(ValueError, match=re.escape(message)):
            make(lib)(lib.zeros(*shape))


def test_state_dict_loads_from_torch_and_eval_uses_it():
    t = torch.nn.BatchNorm1d(3)
    t(torch.randn(8, 3) * 3 + 1)
    s = sg.nn.BatchNorm1d(3)
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})
    assert s.num_batches_tracked.item() == 1 and str(s.num_batches_tracked.dtype).endswith("int64")
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(s.eval()(sg.tensor(x)).detach().numpy(), t.eval()(torch.tensor(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def cnn(momentum):
    sg.manual_seed(0)
    return sg.nn.Sequential(sg.nn.Conv2d(2, 4, 3), sg.nn.BatchNorm2d(4, momentum=momentum), sg.nn.ReLU(),
                            sg.nn.Flatten(), sg.nn.Linear(4 * 4 * 4, 3), sg.nn.BatchNorm1d(3, momentum=momentum))


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_compiled_training_step_updates_buffers_exactly_as_eager(momentum):
    sides = []
    for compiled in (False, True):
        model = cnn(momentum)
        opt = sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        step = training_step(sg, model, opt)
        sides.append((model, sg.compile(step) if compiled else step))
    rng = np.random.default_rng(9)
    for i in range(6):
        x, y = rng.standard_normal((5, 2, 6, 6)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
        if i == 2:  # a new momentum is re-read by the replay
            for model, _ in sides:
                model[1].momentum = 0.5 if momentum is not None else None
        losses = [step(sg.tensor(x), sg.tensor(y)).item() for _, step in sides]
        assert losses[0] == losses[1]
    (eager_model, _), (model, compiled) = sides
    for (key, a), b in zip(eager_model.state_dict().items(), model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy()), key
    assert model[1].num_batches_tracked.item() == 6
    assert compiled.stats.replays >= 4 and compiled.stats.traces <= 2, compiled.stats
    for m in (eager_model, model):
        m.eval()
    x = sg.tensor(rng.standard_normal((2, 2, 6, 6)).astype(np.float32))
    forward = sg.compile(lambda x: model(x))
    for _ in range(3):
        assert np.array_equal(forward(x).detach().numpy(), eager_model(x).detach().numpy())


def test_dropout2d_drops_whole_channels_and_matches_torch_rules():
    x = sg.ones(4, 6, 3, 3, requires_grad=True)
    y = sg.nn.functional.dropout2d(x, p=0.5, training=True)
    t_y = torch.nn.functional.dropout2d(torch.ones(4, 6, 3, 3, requires_grad=True), p=0.5)
    assert y.grad_fn.name() == t_y.grad_fn.name()
    values = y.detach().numpy().reshape(4, 6, 9)
    assert np.all((values == 0) | (values == 2)) and np.all(values.min(axis=2) == values.max(axis=2))
    y.sum().backward()
    assert np.array_equal(x.grad.numpy(), y.detach().numpy())
    module = sg.nn.Dropout2d(0.3)
    assert module.eval()(x) is x
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        sg.nn.functional.dropout2d(sg.ones(2, 3, 4))
    compiled = sg.compile(lambda t: sg.nn.functional.dropout2d(t, 0.5) * 1.0)
    sg.manual_seed(1)
    eager = [sg.nn.functional.dropout2d(sg.ones(4, 6, 3, 3), 0.5).numpy() for _ in range(3)]
    sg.manual_seed(1)
    replayed = [compiled(sg.ones(4, 6, 3, 3)).numpy() for _ in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(eager, replayed)) and compiled.stats.replays >= 1
