"""nn.Module, Linear, containers, losses and SGD against PyTorch: the MLP family."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import torch


def mlp(lib, activation="Tanh"):
    return lib.nn.Sequential(lib.nn.Linear(6, 8), getattr(lib.nn, activation)(), lib.nn.Linear(8, 8),
                             getattr(lib.nn, activation)(), lib.nn.Linear(8, 3))


def copy_weights(source, target):
    target.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in source.state_dict().items()})


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("activation", ["Tanh", "ReLU", "Sigmoid"])
@pytest.mark.parametrize("optimizer", [dict(lr=0.1), dict(lr=0.05, momentum=0.9),
                                       dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)])
def test_mlp_trains_like_pytorch(dtype, activation, optimizer):
    t_model = mlp(torch, activation).to(getattr(torch, dtype))
    s_model = mlp(sg, activation).to(getattr(sg, dtype))
    copy_weights(t_model, s_model)
    t_opt, s_opt = torch.optim.SGD(t_model.parameters(), **optimizer), sg.optim.SGD(s_model.parameters(), **optimizer)
    rng = np.random.default_rng(0)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    for _ in range(6):
        x, y = rng.standard_normal((5, 6)).astype(dtype), rng.standard_normal((5, 3)).astype(dtype)
        losses = []
        for lib, model, opt in ((torch, t_model, t_opt), (sg, s_model, s_opt)):
            opt.zero_grad()
            loss = lib.nn.MSELoss()(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        np.testing.assert_allclose(losses[1], losses[0], **tol)
    for (name, t), s in zip(t_model.named_parameters(), s_model.parameters()):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), err_msg=name, **tol)
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), err_msg=name, **tol)


def test_linear_initialisation_matches_pytorchs_ranges():
    sg.manual_seed(0)
    layer = sg.nn.Linear(400, 300)
    bound = 1 / np.sqrt(400)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert w.shape == (300, 400) and b.shape == (300,) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound, "uniform(-bound, bound) has std bound/sqrt(3)"
    assert layer.weight.requires_grad and layer.weight.is_leaf


def test_parameters_state_dict_and_repr_match_pytorch():
    t_model, s_model = mlp(torch), mlp(sg)
    assert [n for n, _ in s_model.named_parameters()] == [n for n, _ in t_model.named_parameters()]
    assert list(s_model.state_dict()) == list(t_model.state_dict())
    assert repr(s_model) == repr(t_model)
    copy_weights(t_model, s_model)
    x = np.random.default_rng(1).standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(s_model(sg.tensor(x)).detach().numpy(), t_model(torch.tensor(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)  # torch draws the weights unseeded; float32 outputs near 0


def test_load_state_dict_errors_and_incompatible_keys():
    model = mlp(sg)
    state = model.state_dict()
    del state["0.bias"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "0\.bias"'):
        model.load_state_dict(state)
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["0.bias"] and result.unexpected_keys == []
    state = model.state_dict()
    state["0.weight"] = sg.zeros(3, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for 0\.weight"):
        model.load_state_dict(state)


def test_train_eval_zero_grad_and_requires_grad():
    model = mlp(sg)
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    model(sg.randn(2, 6)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not model(sg.randn(2, 6)).requires_grad


def test_assigning_a_tensor_as_a_parameter_is_refused_like_pytorch():
    for lib in (torch, sg):
        layer = lib.nn.Linear(2, 2)
        with pytest.raises(TypeError, match="cannot assign"):
            layer.weight = lib.zeros(2, 2)


def test_sgd_param_groups_and_zero_grad_match_pytorch():
    for lib in (torch, sg):
        model = mlp(lib)
        opt = lib.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.5}],
                            lr=0.1, momentum=0.9)
        assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
        assert set(opt.param_groups[0]) == {"params", "lr", "momentum", "dampening", "weight_decay", "nesterov",
                                            "maximize", "foreach", "differentiable", "fused"}
    with pytest.raises(ValueError, match="Invalid learning rate"):
        sg.optim.SGD(mlp(sg).parameters(), lr=-1)


def test_mse_loss_broadcast_warning_matches_pytorch():
    for lib in (torch, sg):
        with pytest.warns(UserWarning, match="Using a target size"):
            lib.nn.functional.mse_loss(lib.zeros(3, 1), lib.zeros(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_embedding_gradient_adds_rows_in_np_add_at_order(dtype):
    """The embedding's backward (a Numba loop) gives np.add.at's bits: every row added into its
    word's row in index order, repeated and padding indices included, from a strided gradient too."""
    rng = np.random.default_rng(3)
    indices = rng.integers(0, 7, (5, 9))
    indices[0, :4] = 3   # one word many times
    grad = rng.standard_normal((9, 5, 6)).astype(dtype).transpose(1, 0, 2)   # not contiguous
    for padding_idx in (-1, 3):
        expected = np.zeros((7, 6), dtype)
        keep = indices.reshape(-1) != padding_idx
        np.add.at(expected, indices.reshape(-1)[keep], grad.reshape(-1, 6)[keep])
        got = sg.ops.OPS["embedding_backward"].forward(grad, indices, num_weights=7, padding_idx=padding_idx)
        assert got.tobytes() == expected.tobytes()
