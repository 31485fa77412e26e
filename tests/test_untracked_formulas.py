"""Backward formulas that compute on arrays when nothing records their ops (``F.untracked``): the
matrix products' gradients. They must give the bits of the op-by-op form (what create_graph=True
and a trace run) and PyTorch's values, strides and errors, in every operand layout."""

import numpy as np
import pytest
import torch

import staticgrad
from staticgrad._eager import dispatch as dispatch_module

rng = np.random.default_rng(7)


def _operands(lib, a, b, layout):
    """mat1 and mat2 as leaves, each contiguous ("c") or the t() of a contiguous one ("t")."""
    leaves = [lib.tensor(a if kind == "c" else np.ascontiguousarray(a.T), requires_grad=True) if i == 0 else
              lib.tensor(b if kind == "c" else np.ascontiguousarray(b.T), requires_grad=True)
              for i, kind in enumerate(layout)]
    mats = [leaf if kind == "c" else leaf.t() for leaf, kind in zip(leaves, layout)]
    return leaves, mats


def _grads(lib, a, b, bias, g, layout, op, create_graph=False, **scales):
    leaves, (m1, m2) = _operands(lib, a, b, layout)
    strides = []
    for m in (m1, m2):
        if m.requires_grad and m.grad_fn is not None:
            m.register_hook(lambda grad: strides.append(grad.stride()))
    if op == "addmm":
        out = lib.addmm(lib.tensor(bias), m1, m2, **scales)
    else:
        out = lib.mm(m1, m2)
    grads = lib.autograd.grad(out, leaves, lib.tensor(g), create_graph=create_graph)
    return [x.detach().numpy() for x in grads], strides


@pytest.mark.parametrize("layout", ["cc", "ct", "tc", "tt"])
@pytest.mark.parametrize("op", ["mm", "addmm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_product_gradients_on_arrays_equal_the_op_by_op_form(layout, op, dtype):
    a, b = rng.standard_normal((5, 7)).astype(dtype), rng.standard_normal((7, 3)).astype(dtype)
    bias, g = rng.standard_normal(3).astype(dtype), rng.standard_normal((5, 3)).astype(dtype)
    fast, fast_strides = _grads(staticgrad, a, b, bias, g, layout, op)
    recorded, recorded_strides = _grads(staticgrad, a, b, bias, g, layout, op, create_graph=True)
    expected, expected_strides = _grads(torch, a, b, bias, g, layout, op)
    for x, y, z in zip(fast, recorded, expected):
        assert x.dtype == dtype and np.array_equal(x, y)
        np.testing.assert_allclose(x, z, rtol=1e-5, atol=1e-6)
    assert fast_strides == recorded_strides == expected_strides   # what a hook on mat1/mat2 sees


def test_matrix_product_gradients_dispatch_no_op_when_untracked(monkeypatch):
    """Without create_graph or a trace the products' gradients dispatch no transpose or mm."""
    x = staticgrad.randn(4, 6, requires_grad=True)
    linear = staticgrad.nn.Linear(6, 3)
    loss = linear(x).sum()
    seen = []
    original = dispatch_module.dispatch

    def spy(op, *args, **kwargs):
        seen.append(op.name)
        return original(op, *args, **kwargs)

    monkeypatch.setattr(dispatch_module, "dispatch", spy)
    loss.backward()
    assert "mm" not in seen and "t" in seen   # TBackward0's own transpose of the weight's gradient remains
    assert seen.count("t") == 1


@pytest.mark.parametrize("scales", [{"alpha": 2.0}, {"beta": 0.5}, {"alpha": -1.5, "beta": 3.0}])
def test_scaled_addmm_gradients_keep_their_bits(scales):
    a, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    bias, g = rng.standard_normal(2).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    for layout in ("cc", "ct"):
        fast, _ = _grads(staticgrad, a, b, bias, g, layout, "addmm", **scales)
        recorded, _ = _grads(staticgrad, a, b, bias, g, layout, "addmm", create_graph=True, **scales)
        expected, _ = _grads(torch, a, b, bias, g, layout, "addmm", **scales)
        for x, y, z in zip(fast, recorded, expected):
            assert np.array_equal(x, y)
            np.testing.assert_allclose(x, z, rtol=1e-5, atol=1e-6)


def test_mixed_dtype_gradient_takes_the_op_by_op_form():
    """A gradient of another dtype than the operands (an autograd.grad grad_outputs in float64 for a
    float32 product) is cast first, as PyTorch does; the result is in the operands' dtype."""
    m1 = staticgrad.randn(3, 4, requires_grad=True)
    m2 = staticgrad.randn(4, 2, requires_grad=True)
    out = m1 @ m2
    g1, g2 = staticgrad.autograd.grad(out, (m1, m2), staticgrad.ones(3, 2, dtype=staticgrad.float64))
    t1 = torch.tensor(m1.detach().numpy(), requires_grad=True)
    t2 = torch.tensor(m2.detach().numpy(), requires_grad=True)
    e1, e2 = torch.autograd.grad(t1 @ t2, (t1, t2), torch.ones(3, 2, dtype=torch.float64))
    assert g1.dtype == staticgrad.float32 and e1.dtype == torch.float32
    np.testing.assert_allclose(g1.numpy(), e1.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g2.numpy(), e2.numpy(), rtol=1e-6)


def test_double_backward_through_the_products_still_records_nodes():
    """create_graph=True keeps the op-by-op form, whose gradients have PyTorch's graph."""
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    results = []
    for lib in (staticgrad, torch):
        m1, m2 = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        g1, g2 = lib.autograd.grad((m1 @ m2.t().t()).sum(), (m1, m2), create_graph=True)
        names = (type(g1.grad_fn).__name__, type(g2.grad_fn).__name__)
        (second,) = lib.autograd.grad((g1 * g1).sum() + (g2 ** 3).sum(), (m2,))
        results.append((names, second.detach().numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)
