"""One helper to compare staticgrad with PyTorch: same function, same inputs, both libraries;
forward values, gradients and raised errors must agree. Plus finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad
from staticgrad._eager.node import Node as FunctionNode

torch = pytest.importorskip("torch")


def _make(lib, arrays, requires_grad):
    out = []
    for a, rg in zip(arrays, requires_grad):
        if isinstance(a, np.ndarray):
            t = lib.tensor(a.copy())
            if rg and a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _np(t):
    if isinstance(t, (list, tuple)):
        return [_np(x) for x in t]
    if hasattr(t, "detach"):
        return t.detach().numpy(force=True)  # force: PyTorch's ZeroTensor (a known-zero gradient)
    return np.asarray(t)


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flat(o)]
    return [out]


def compare(fn, arrays, requires_grad=None, atol=1e-6, rtol=1e-5, grad=True, seed=0, double=False):
    """Run ``fn(lib, *tensors)`` in PyTorch and staticgrad; compare outputs and input gradients.

    Returns the staticgrad outputs. ``fn`` gets the library module first so one lambda serves
    both (``lambda lib, x: lib.tanh(x)``)."""
    if requires_grad is None:
        requires_grad = [True] * len(arrays)
    t_in = _make(torch, arrays, requires_grad)
    s_in = _make(staticgrad, arrays, requires_grad)
    t_out = fn(torch, *t_in)
    s_out = fn(staticgrad, *s_in)
    t_flat, s_flat = _flat(t_out), _flat(s_out)
    assert len(t_flat) == len(s_flat)
    for t, s in zip(t_flat, s_flat):
        assert tuple(s.shape) == tuple(t.shape), f"shape {tuple(s.shape)} != torch {tuple(t.shape)}"
        assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"dtype {s.dtype} != torch {t.dtype}"
        np.testing.assert_allclose(_np(s), _np(t), atol=atol, rtol=rtol)
        if t.grad_fn is not None:
            assert s.grad_fn is not None and s.grad_fn.name() == t.grad_fn.name(), (
                f"grad_fn {s.grad_fn and s.grad_fn.name()} != torch {t.grad_fn.name()}")
    if not grad:
        return s_out
    rng = np.random.default_rng(seed)
    pairs = [(t, s) for t, s in zip(t_flat, s_flat) if t.requires_grad and t.dtype.is_floating_point]
    if not pairs:
        return s_out
    weights = [rng.standard_normal(tuple(t.shape)).astype(_np(t).dtype) for t, _ in pairs]
    t_loss = sum((t * torch.tensor(w)).sum() for (t, _), w in zip(pairs, weights))
    s_loss = sum((s * staticgrad.tensor(w)).sum() for (_, s), w in zip(pairs, weights))
    t_leaves = [x for x in t_in if hasattr(x, "requires_grad") and x.requires_grad]
    s_leaves = [x for x in s_in if hasattr(x, "requires_grad") and x.requires_grad]
    t_grads = torch.autograd.grad(t_loss, t_leaves, allow_unused=True, create_graph=double)
    s_grads = staticgrad.autograd.grad(s_loss, s_leaves, allow_unused=True, create_graph=double)
    for i, (tg, sg) in enumerate(zip(t_grads, s_grads)):
        if tg is None:
            assert sg is None or np.allclose(_np(sg), 0), f"input {i}: staticgrad has a gradient, torch has none"
            continue
        assert sg is not None, f"input {i}: torch has a gradient, staticgrad has none"
        np.testing.assert_allclose(_np(sg), _np(tg), atol=atol, rtol=rtol, err_msg=f"gradient of input {i}")
    if double:
        _compare_double(t_leaves, s_leaves, t_grads, s_grads, rng, atol, rtol)
    return s_out


def _compare_double(t_leaves, s_leaves, t_grads, s_grads, rng, atol, rtol):
    """Differentiate sum(v * grad) once more in both libraries (where PyTorch's grads have a graph)."""
    pairs = [(tg, sg) for tg, sg in zip(t_grads, s_grads) if tg is not None and tg.requires_grad]
    if not pairs:
        return
    weights = [rng.standard_normal(tuple(tg.shape)).astype(_np(tg).dtype) for tg, _ in pairs]
    t_loss = sum((tg * torch.tensor(w)).sum() for (tg, _), w in zip(pairs, weights))
    s_loss = sum((sg * staticgrad.tensor(w)).sum() for (_, sg), w in zip(pairs, weights))
    t_second = torch.autograd.grad(t_loss, t_leaves, allow_unused=True)
    s_second = staticgrad.autograd.grad(s_loss, s_leaves, allow_unused=True)
    for i, (tg, sg) in enumerate(zip(t_second, s_second)):
        if tg is None:
            assert sg is None or np.allclose(_np(sg), 0), f"input {i}: staticgrad has a second derivative, torch none"
            continue
        if sg is None:
            assert not np.any(_np(tg)), f"input {i}: torch has a nonzero second derivative, staticgrad has none"
            continue
        np.testing.assert_allclose(_np(sg), _np(tg), atol=atol, rtol=rtol, err_msg=f"second derivative of input {i}")


def same_error(fn, *args):
    """``fn(lib, *args)`` raises the same exception type and message in both libraries."""
    with pytest.raises(Exception) as t_info:
        fn(torch, *args)
    with pytest.raises(Exception) as s_info:
        fn(staticgrad, *args)
    assert type(s_info.value) is type(t_info.value) or isinstance(s_info.value, type(t_info.value)), (
        f"{type(s_info.value).__name__} != torch {type(t_info.value).__name__}")
    t_msg = str(t_info.value).replace("torch.", "").split("\n")[0]
    s_msg = str(s_info.value).replace("staticgrad.", "").split("\n")[0]
    assert s_msg == t_msg or t_msg.startswith(s_msg) or s_msg.startswith(t_msg), \
        f"\n  staticgrad: {s_msg}\n  torch:      {t_msg}"
    return s_info.value


def finite_difference_check(fn, arrays, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0):
    """Gradients of sum(w * fn(*xs)) against central differences, in float64."""
    rng = np.random.default_rng(seed)
    inputs = [staticgrad.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    out = fn(*inputs)
    w = rng.standard_normal(tuple(out.shape))
    loss = (out * staticgrad.tensor(w)).sum()
    grads = staticgrad.autograd.grad(loss, inputs, allow_unused=True)

    def scalar(values):
        with staticgrad.no_grad():
            o = fn(*[staticgrad.tensor(v) for v in values])
            return float((o.numpy() * w).sum())

    base = [a.astype(np.float64) for a in arrays]
    for i, g in enumerate(grads):
        numeric = np.zeros_like(base[i])
        for idx in np.ndindex(base[i].shape):
            plus = [b.copy() for b in base]
            minus = [b.copy() for b in base]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            numeric[idx] = (scalar(plus) - scalar(minus)) / (2 * eps)
        analytic = np.zeros_like(base[i]) if g is None else g.numpy()
        np.testing.assert_allclose(analytic, numeric, atol=atol, rtol=rtol, err_msg=f"input {i}")


def node_names(fn) -> list:
    """A graph's node names depth first from ``fn``, None for an edge to nothing (staticgrad's
    ``name()``; PyTorch's class names, which are its node names)."""
    names, stack = [], [fn]
    while stack:
        node = stack.pop()
        if node is None:
            names.append(None)
            continue
        names.append(node.name() if isinstance(node, FunctionNode) else type(node).__name__)
        stack.extend(next_fn for next_fn, _ in reversed(node.next_functions))
    return names
