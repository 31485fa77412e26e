"""Autograd semantics against PyTorch: what backward frees, retain_graph, accumulation,
grad modes, detach, node names and next_functions, and PyTorch's error messages."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import staticgrad
from staticgrad.errors import BACKWARD_TWICE
from tests.oracle import same_error, torch


def test_second_backward_raises_pytorchs_error():
    a = staticgrad.tensor(2.0, requires_grad=True)
    c = a * 5
    c.backward()
    with pytest.raises(RuntimeError) as info:
        c.backward()
    assert str(info.value) == BACKWARD_TWICE
    t = torch.tensor(2.0, requires_grad=True)
    tc = t * 5
    tc.backward()
    with pytest.raises(RuntimeError) as t_info:
        tc.backward()
    assert str(t_info.value) == str(info.value)


def test_graph_whose_nodes_save_nothing_can_be_backpropagated_again():
    a = staticgrad.tensor([2.0, 3.0], requires_grad=True)
    c = (a + 5).sum()
    c.backward()
    c.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0])


def test_retain_graph_allows_a_second_backward_and_grads_accumulate():
    x = staticgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy())


def test_backward_releases_saved_input_buffers():
    x = staticgrad.randn(3, requires_grad=True)
    other = staticgrad.randn(3)
    ref = weakref.ref(other)
    z = x * other
    del other
    gc.collect()
    assert ref() is not None, "the graph holds the saved factor until backward"
    assert z.grad_fn._saved_other is ref()
    z.sum().backward()
    gc.collect()
    assert ref() is None, "backward must free the saved factor"
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.grad_fn._saved_other  # noqa: B018  (the read itself must raise)


def test_retain_graph_keeps_saved_buffers():
    x = staticgrad.randn(3, requires_grad=True)
    y = x.exp()
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(y.grad_fn._saved_result.detach().numpy(), y.detach().numpy())


def test_saves_only_what_the_formula_needs():
    x = staticgrad.randn(3, requires_grad=True)
    c = staticgrad.randn(3)
    node = (x * c).grad_fn
    assert node._saved_other is c
    assert node._saved_self is None, "self is only needed for other's gradient"
    t = torch.randn(3, requires_grad=True)
    assert (t * torch.randn(3)).grad_fn._saved_self is None


def test_seed_loop_reusing_a_subgraph_raises_on_second_iteration():
    """Seed thread: y = t @ a built once, reused by each iteration's loss."""
    t = staticgrad.eye(2, dtype=staticgrad.float64, requires_grad=True)
    a = staticgrad.ones(2, dtype=staticgrad.float64, requires_grad=True)
    x = staticgrad.tensor([1.0, 0.0], dtype=staticgrad.float64)
    y = t @ a
    for i in range(2):
        x_out = t @ (x + y)
        loss = staticgrad.nn.MSELoss()(x_out, x)
        if i == 0:
            loss.backward()
        else:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                loss.backward()


def test_seed_module_output_outside_loop():
    """Seed thread: x_out = lin(a) outside the loop fails on the second backward."""
    lin = staticgrad.nn.Linear(3, 3)
    a = staticgrad.randn(2, 3)
    x_out = lin(a)
    staticgrad.sum(x_out).backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        staticgrad.sum(x_out).backward()
    for _ in range(3):
        staticgrad.sum(lin(a)).backward()


def test_inplace_change_to_saved_tensor_raises_and_unrelated_change_is_fine():
    self_t = staticgrad.randn(10, requires_grad=True)
    other = staticgrad.randn(10)
    output = self_t * other
    output.backward(staticgrad.ones_like(output))
    output = self_t * other
    with staticgrad.no_grad():
        self_t.add_(1)
    output.backward(staticgrad.ones_like(output))
    output = self_t * other
    other.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        output.backward(staticgrad.ones_like(output))
    assert "is at version 1; expected version 0 instead" in str(info.value)


def test_leaf_requiring_grad_cannot_change_in_place_except_under_no_grad():
    same_error(lambda lib: lib.randn(3, requires_grad=True).add_(1))
    v = staticgrad.randn(3, requires_grad=True)
    with staticgrad.no_grad():
        v.add_(1)
    assert v._version == 1


def test_detach_shares_storage_and_version():
    x = staticgrad.randn(3, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    with staticgrad.no_grad():
        x.mul_(2)
    np.testing.assert_array_equal(d.numpy(), x.detach().numpy())
    assert d._version == x._version == 1


def test_seed_detach_leaves_graph_behind():
    x = staticgrad.tensor([3.0], requires_grad=True)
    k = x * 2
    k.backward()
    m = k
    assert m.requires_grad and m.grad_fn.name() == "MulBackward0"
    m = k.detach()
    assert not m.requires_grad and m.grad_fn is None


def test_no_grad_builds_no_graph_and_enable_grad_restores():
    x = staticgrad.randn(3, requires_grad=True)
    with staticgrad.no_grad():
        y = x * 2
        with staticgrad.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad
    with staticgrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert staticgrad.is_grad_enabled()


def test_linear_node_structure_matches_pytorch():
    lin = staticgrad.nn.Linear(3, 4)
    out = lin(staticgrad.randn(2, 3))
    node = out.grad_fn
    assert node.name() == "AddmmBackward0"
    names = [None if f is None else f.name() for f, _ in node.next_functions]
    assert names == ["torch::autograd::AccumulateGrad", None, "TBackward0"]
    assert node.next_functions[0][0].variable is lin.bias
    assert node.next_functions[2][0].next_functions[0][0].variable is lin.weight
    t_lin = torch.nn.Linear(3, 4)
    t_next = t_lin(torch.randn(2, 3)).grad_fn.next_functions
    t_names = [None if f is None else f.name() for f, _ in t_next]
    assert names == t_names


@pytest.mark.parametrize("fn", [
    lambda lib: (lib.randn(3, requires_grad=True) * 2).backward(),
    lambda lib: lib.randn(3).sum().backward(),
    lambda lib: lib.randn(3, requires_grad=True).numpy(),
    lambda lib: lib.randn(2, 3) @ lib.randn(4, 5),
    lambda lib: lib.bmm(lib.randn(7, 2, 3), lib.randn(7, 4, 5)),
    lambda lib: lib.randn(2, 3) @ lib.randn(4),
    lambda lib: lib.randn(2, 3) + lib.randn(4),
    lambda lib: lib.randn(2, 3) * lib.randn(2, 4),
    lambda lib: lib.randn(2, 3).t().view(6),
    lambda lib: lib.randn(2, 3).sum(5),
    lambda lib: lib.randn(2, 3).reshape(4),
    lambda lib: lib.randn(2, 3).transpose(0, 2),
    lambda lib: float(lib.randn(2)),
    lambda lib: bool(lib.randn(2)),
    lambda lib: lib.randn(2).item(),
    lambda lib: (lib.randn(2, requires_grad=True) * 2).requires_grad_(False),
    lambda lib: lib.tensor([1, 2]).requires_grad_(),
    lambda lib: lib.nn.Linear(3, 4)(lib.randn(2, 5)),
    lambda lib: lib.randn(3).t().t().permute(1, 0),
    lambda lib: lib.randn(2, 3).expand(3, 3),
], ids=["implicit-grad-nonscalar", "no-grad-fn", "numpy-requires-grad", "mm-shapes", "bmm-shapes", "mv-shapes",
        "broadcast", "broadcast-2", "view-noncontiguous", "dim-out-of-range", "reshape-invalid",
        "transpose-dim", "float-of-many", "bool-of-many", "item-of-many", "requires-grad-nonleaf",
        "requires-grad-int", "linear-shapes", "permute-dims", "expand-size"])
def test_error_messages_match_pytorch(fn):
    same_error(fn)


def test_backward_with_gradient_for_non_scalar_output():
    x = staticgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.backward(staticgrad.tensor([1.0, 0.5]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * x).backward(staticgrad.ones(3))


def test_non_leaf_grad_access_warns_and_is_none():
    x = staticgrad.randn(3, requires_grad=True)
    w = x * 2
    w.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert w.grad is None


def test_gradient_is_stolen_when_fresh_and_cloned_when_shared():
    x = staticgrad.randn(3, requires_grad=True)
    seed = staticgrad.ones(3)
    (x * 1.0).backward(seed)
    assert x.grad is not seed
    a = staticgrad.randn(3, requires_grad=True)
    b = staticgrad.randn(3, requires_grad=True)
    (a + b).sum().backward()
    with staticgrad.no_grad():
        a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(3))
