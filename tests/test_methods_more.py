"""The method forms and in-place forms of methods_more (where, addmm, addmm_, absolute, sign_, rsqrt_,
reciprocal_, square_, true_divide_, fmod_, remainder_, tril_, triu_) and storage_offset, against PyTorch:
values, node names, versions, gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staticgrad as sg

X = np.array([[0.3, -1.2, 2.5], [1.5, -0.4, 0.8], [2.0, 0.7, -3.1]])

CASES = {
    "where": lambda L, y: y.where(y > 0, L.zeros(3, dtype=L.float64)),
    "addmm": lambda L, y: y.addmm(y, y.t(), beta=0.5, alpha=2),
    "addmm_": lambda L, y: y.addmm_(L.tensor(X).t(), L.tensor(X), beta=0.5, alpha=2),
    "addmm_ of a tensor needing grad": lambda L, y: (y * 1).addmm_(y, y, alpha=-1),
    "absolute": lambda L, y: y.absolute(), "absolute_": lambda L, y: y.absolute_(),
    "sign_": lambda L, y: y.sign_(), "rsqrt_": lambda L, y: y.abs().rsqrt_(),
    "reciprocal_": lambda L, y: y.reciprocal_(),
    "square_": lambda L, y: y.square_(), "true_divide_": lambda L, y: y.true_divide_(3.0),
    "fmod_ by a number": lambda L, y: y.fmod_(1.1), "fmod_ by a tensor": lambda L, y: y.fmod_(L.tensor(X[::-1].copy())),
    "remainder_ by a number": lambda L, y: y.remainder_(1.1),
    "remainder_ by a tensor": lambda L, y: y.remainder_(L.tensor(X[::-1].copy())),
    "tril_": lambda L, y: y.tril_(), "triu_ 1": lambda L, y: y.triu_(1), "tril_ -1": lambda L, y: y.tril_(-1),
    "tril_ of a view": lambda L, y: y[1:].tril_(),
    "cumsum_": lambda L, y: y.cumsum_(0), "cumprod_": lambda L, y: y.cumprod_(-1),
    "cumsum_ then cumprod_ of a view": lambda L, y: y.t()[1:].cumsum_(1).cumprod_(0),
}


def _run(lib, call):
    x = lib.tensor(X, requires_grad=True)
    y = x * 1
    r = call(lib, y)
    (r * lib.tensor(np.arange(r.numel(), dtype=np.float64).reshape(r.shape))).sum().backward()
    return r is y, r.grad_fn.name(), y._version, r.detach().numpy().copy(), x.grad.numpy().copy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_nodes_versions_and_gradients_match_torch(name):
    mine, theirs = _run(sg, CASES[name]), _run(torch, CASES[name])
    assert mine[:3] == theirs[:3]
    np.testing.assert_allclose(mine[3], theirs[3], rtol=1e-12)
    np.testing.assert_allclose(mine[4], theirs[4], rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda L: L.ones(3, requires_grad=True).sign_(),
    lambda L: L.ones(3, requires_grad=True).tril_(),
    lambda L: L.ones(2, 2).tril_(),
    lambda L: L.ones(3, 3).tril_(),   # fine: no error
    lambda L: L.ones(3, dtype=L.float64).addmm_(L.ones(3, 2, dtype=L.float64), L.ones(3, 3, dtype=L.float64)),
    lambda L: L.ones(3).addmm_(L.ones(3, 2), L.ones(2, 3)),
    lambda L: L.ones(3).fmod_("a"),
    lambda L: L.tensor([1.0, 2.0]).cumsum_(0, dtype=L.float64),
    lambda L: L.tensor([1, 2]).cumprod_(0, dtype=L.float32),
    lambda L: L.ones(3).cumsum_(1),
    lambda L: L.ones(3, requires_grad=True).cumprod_(0),
], ids=["leaf sign_", "1-d tril_", "leaf-free tril_", "tril_ ok", "addmm_ shapes", "addmm_ broadcast self",
        "fmod_ of a string", "cumsum_ dtype", "cumprod_ dtype", "cumsum_ dim", "leaf cumprod_"])
def test_errors_match_torch(call):
    outcomes = []
    for lib in (torch, sg):
        try:
            call(lib)
            outcomes.append("ok")
        except (RuntimeError, TypeError, IndexError) as exc:
            outcomes.append((type(exc).__name__, str(exc).split("\n")[0]))
    assert outcomes[0] == outcomes[1] or (outcomes[0][0] == outcomes[1][0] == "TypeError")


def test_integer_and_bool_scans_in_place_as_torch():
    for lib in (torch, sg):
        t = lib.tensor([1, 2, 3], dtype=lib.int32)
        assert t.cumsum_(0).tolist() == [1, 3, 6] and t.dtype == lib.int32 and t._version == 1
        with pytest.raises(NotImplementedError, match="cumsum_out_cpu"):
            lib.tensor([True, False]).cumsum_(0)


def test_storage_offset_counts_elements_into_the_base():
    for lib in (torch, sg):
        b = lib.arange(12.0).reshape(3, 4)
        assert [b.storage_offset(), b[1:].storage_offset(), b[:, 2:].t().storage_offset(), b[2, 1:].storage_offset(),
                b.view(-1)[5:].view(1, 7)[0, 3:].storage_offset(), (b + 1).storage_offset()] == [0, 4, 2, 9, 8, 0]
