"""The in-place view ops (t_, transpose_, swapdims_, swapaxes_, unsqueeze_, squeeze_) against PyTorch:
shapes, strides, node names, versions, gradients (through views of bases changed in place after),
their refusals; and their refusal inside a compiled function."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staticgrad as sg

X = np.arange(1, 7, dtype=np.float64).reshape(2, 3) / 7
W = np.linspace(-1, 1, 6).reshape(3, 2)

PROGRAMS = {   # lib, leaf -> a tensor whose weighted sum is the loss
    "chain": lambda L, x: (x * 2).unsqueeze_(1).transpose_(0, 2).squeeze_(1).t_(),
    "swapdims_ and swapaxes_": lambda L, x: (x + 1).swapdims_(0, 1).swapaxes_(1, 0).t_(),
    "squeeze_ every size-1 dim": lambda L, x: (x * 1).reshape(1, 2, 1, 3).squeeze_().t_(),
    "squeeze_ listed dims": lambda L, x: (x * 1).reshape(1, 2, 1, 3).squeeze_((0, 2)).t_(),
    "unsqueeze_ negative dim": lambda L, x: (x * 3).unsqueeze_(-1).squeeze_(2).t_(),
    "t_ of a 1-d tensor": lambda L, x: (x * 1).reshape(6).t_().reshape(3, 2),
    "t_ of a view, then written": lambda L, x: _view_written(L, x),
    "base changed after a view": lambda L, x: _base_changed(L, x),
}


def _view_written(L, x):
    base = x * 1
    view = base[:, 1:]
    view.t_()
    view.mul_(L.tensor(np.array([[2.0, 3.0], [4.0, 5.0]])))
    return base.t()


def _base_changed(L, x):
    base = (x * 1).t()
    view = base[1:]
    base.t_()
    base.unsqueeze_(0).squeeze_(0)
    result = base.t()
    result.mul_(view.sum())   # the view reads the base's memory through its old layout
    return result


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_strides_node_names_and_gradients_match_torch(name):
    seen = []
    for lib in (torch, sg):
        x = lib.tensor(X, requires_grad=True)
        y = PROGRAMS[name](lib, x)
        (y * lib.tensor(W[:, :y.shape[1]] if y.shape[0] == 3 else W.T)).sum().backward()
        seen.append((tuple(y.shape), y.stride(), y.grad_fn.name(), y.detach().numpy().copy(), x.grad.numpy().copy()))
    (shape, stride, node, value, grad), theirs = seen[1], seen[0]
    assert (shape, stride, node) == theirs[:3]
    np.testing.assert_allclose(value, theirs[3], rtol=1e-12)
    np.testing.assert_allclose(grad, theirs[4], rtol=1e-12)


@pytest.mark.parametrize("method,args,node", [("t_", (), "TBackward1"), ("transpose_", (0, 1), "TransposeBackward1"),
                                              ("swapdims_", (1, 0), "TransposeBackward1"),
                                              ("unsqueeze_", (0,), "UnsqueezeBackward1"),
                                              ("squeeze_", (), "SqueezeBackward3"),
                                              ("squeeze_", (0,), "SqueezeBackward4")])
def test_the_tensor_itself_changes_its_version_bumps_and_its_history_goes_on(method, args, node):
    for lib in (torch, sg):
        x = lib.tensor(X, requires_grad=True)
        y = x * 1
        before = y.grad_fn
        assert getattr(y, method)(*args) is y
        assert y._version == 1 and y.grad_fn.name() == node and y.grad_fn.next_functions[0][0] is before
        plain = lib.tensor(X)
        getattr(plain, method)(*args)
        assert plain._version == 1 and plain.grad_fn is None and not plain.requires_grad


def test_refusals_as_torch():
    messages = []
    for lib in (torch, sg):
        errors = []
        for call in (lambda lib=lib: lib.ones(3, requires_grad=True).unsqueeze_(0),
                     lambda lib=lib: lib.ones(2, 3, 4).t_(),
                     lambda lib=lib: lib.ones(2, 3).transpose_(0, 2),
                     lambda lib=lib: lib.ones(2, 3).unsqueeze_(3)):
            with pytest.raises((RuntimeError, IndexError)) as info:
                call()
            errors.append((type(info.value).__name__, str(info.value)))
        x = lib.tensor(X, requires_grad=True)
        y = x.exp()   # saves its result
        y.t_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
        with lib.no_grad():   # a leaf may change its shape in place under no_grad
            leaf = lib.ones(2, 3, requires_grad=True)
            leaf.t_()
            assert tuple(leaf.shape) == (3, 2)
        messages.append(errors)
    assert messages[0] == messages[1]


def test_inside_a_compiled_function_it_is_refused_or_runs_eagerly():
    def f(x):
        y = x * 2
        y.unsqueeze_(0)
        return y.sum(dim=1)

    with pytest.raises(sg.TraceError, match=r"unsqueeze_\(\) changes a tensor's shape in place"):
        sg.compile(f)(sg.ones(2, 3))
    fallback = sg.compile(f, fallback="eager")
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        for _ in range(3):
            assert fallback(sg.ones(2, 3)).tolist() == [[4.0, 4.0, 4.0]]
    assert fallback.stats.replays == 0
