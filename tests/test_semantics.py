"""PyTorch's autograd semantics, each case run in both libraries with identical code:
higher-order gradients, hooks, retain_grad, autograd.grad options, and the seed threads' cases of
what backward frees and when a second backward fails."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad
from tests.oracle import torch


def outcome(fn, lib):
    """What running ``fn(lib)`` gives: ("ok", values as nested lists) or ("error", type, message)."""
    try:
        result = fn(lib)
    except Exception as exc:  # the exception itself is the outcome being compared
        message = str(exc).split("\n")[0].split(" Hint:")[0]
        return ("error", type(exc).__name__, message.replace("torch.", "").replace("staticgrad.", ""))
    return ("ok", _values(result))


def _values(x):
    if isinstance(x, (list, tuple)):
        return [_values(v) for v in x]
    if x is None:
        return None
    if hasattr(x, "detach"):
        return np.asarray(x.detach().numpy(), dtype=np.float64).round(10).tolist()
    return x


def same_outcome(fn):
    t, s = outcome(fn, torch), outcome(fn, staticgrad)
    assert s == t, f"\n  staticgrad: {s}\n  torch:      {t}"
    return s


def t64(lib, values, requires_grad=True):
    return lib.tensor(values, dtype=lib.float64, requires_grad=requires_grad)


# ---- higher-order derivatives --------------------------------------------------------------------

def test_second_and_third_derivatives():
    def fn(lib):
        x = t64(lib, [0.5, -1.2, 2.0])
        y = (x ** 3 * x.tanh()).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = lib.autograd.grad(gg.sum(), x)
        return g, gg, ggg
    same_outcome(fn)


def test_hessian_vector_product_of_an_mlp_loss():
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    x, v = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))

    def fn(lib):
        a = t64(lib, w1)
        b = t64(lib, w2)
        h = (lib.tensor(x) @ a.t()).tanh()
        loss = ((h @ b.t()).sigmoid() ** 2).mean()
        grads = lib.autograd.grad(loss, (a, b), create_graph=True)
        hvp = lib.autograd.grad((grads[0] * lib.tensor(v)).sum(), (a, b))
        return grads, hvp
    same_outcome(fn)


def test_double_backward_through_mse_softmax_and_matmul():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4))

    def fn(lib):
        x = t64(lib, data)
        y = lib.softmax(x @ x.t(), -1).log_softmax(0)
        loss = lib.nn.functional.mse_loss(y, lib.zeros(3, 3, dtype=lib.float64))
        (g,) = lib.autograd.grad(loss, x, create_graph=True)
        return lib.autograd.grad((g * g).sum(), x)
    same_outcome(fn)


def test_gradient_of_gradient_keeps_graph_names():
    x = staticgrad.tensor([1.0, 2.0], requires_grad=True)
    (g,) = staticgrad.autograd.grad((x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    (tg,) = torch.autograd.grad((tx * tx).sum(), tx, create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name()


# ---- autograd.grad and backward options ----------------------------------------------------------

@pytest.mark.parametrize("case", [
    lambda lib: lib.autograd.grad((t64(lib, [1.0, 2.0]) * 3).sum(), t64(lib, [1.0])),
    lambda lib: lib.autograd.grad((t64(lib, [1.0, 2.0]) * 3).sum(), t64(lib, [1.0]), allow_unused=True),
    lambda lib: lib.autograd.grad((t64(lib, [1.0, 2.0]) * 3).sum(), t64(lib, [1.0]), allow_unused=True,
                                  materialize_grads=True),
    lambda lib: lib.autograd.grad(t64(lib, [1.0, 2.0]) * 3, t64(lib, [1.0])),
    lambda lib: _grad_outputs(lib),
    lambda lib: _retain_then_twice(lib),
    lambda lib: _backward_inputs(lib),
    lambda lib: lib.autograd.grad(t64(lib, [1.0, 2.0]).sum(), t64(lib, [1.0, 2.0], requires_grad=False)),
], ids=["unused-input", "allow-unused", "materialize", "nonscalar", "grad-outputs", "retain", "backward-inputs",
        "input-without-grad"])
def test_autograd_grad_options(case):
    same_outcome(case)


def _grad_outputs(lib):
    x = t64(lib, [1.0, 2.0, 3.0])
    y = x * x
    return lib.autograd.grad(y, x, grad_outputs=lib.tensor([1.0, 0.5, 0.0], dtype=lib.float64))


def _retain_then_twice(lib):
    x = t64(lib, [1.0, 2.0])
    y = (x.exp() * x).sum()
    first = lib.autograd.grad(y, x, retain_graph=True)
    second = lib.autograd.grad(y, x)
    third = lib.autograd.grad(y, x)
    return first, second, third


def _backward_inputs(lib):
    a = t64(lib, [1.0, 2.0])
    b = t64(lib, [3.0, 4.0])
    (a * b).sum().backward(inputs=[a])
    return a.grad, b.grad


# ---- hooks and retain_grad ------------------------------------------------------------------------

def test_tensor_hooks_observe_and_replace_gradients():
    def fn(lib):
        seen = []
        x = t64(lib, [1.0, 2.0])
        h = x * 3
        h.register_hook(lambda g: seen.append(g.clone()))
        handle = h.register_hook(lambda g: g * 10)
        x.register_hook(lambda g: g + 1)
        (h * h).sum().backward(retain_graph=True)
        first = x.grad.clone()
        handle.remove()
        (h * h).sum().backward()
        return seen, first, x.grad
    same_outcome(fn)


def test_retain_grad_on_intermediate_values():
    def fn(lib):
        x = t64(lib, [1.0, 2.0])
        h = x * x
        h.retain_grad()
        z = (h * 3).sum()
        z.backward(retain_graph=True)
        first = h.grad.clone()
        z.backward()
        return first, h.grad, h.retains_grad, x.grad
    same_outcome(fn)


def test_node_post_hook_sees_gradients():
    def fn(lib):
        calls = []
        x = t64(lib, [1.0, 2.0])
        y = x * 2
        y.grad_fn.register_hook(
            lambda grad_inputs, grad_outputs: calls.append((grad_inputs[0].clone(), grad_outputs[0].clone())))
        y.sum().backward()
        return calls
    same_outcome(fn)


# ---- what backward frees: the seed threads ------------------------------------------------------

def test_seed_new_ops_on_a_backpropagated_graph():
    """b and c survive backward as tensors; a new graph built on them works until it reaches a
    node whose buffers were freed."""
    def build(lib):
        a = lib.tensor(1.0, requires_grad=True)
        b = a * lib.tensor(2.0)
        c = b * lib.tensor(3.0)
        c.backward()
        return a, b, c

    same_outcome(lambda lib: [x * 4 for x in build(lib)[1:]])
    same_outcome(lambda lib: (build(lib)[1] * lib.tensor(4.0)).backward())
    same_outcome(lambda lib: (build(lib)[2] * lib.tensor(5.0)).backward())


def test_seed_deleting_a_saved_factor_does_not_break_backward():
    def fn(lib):
        a = lib.tensor(1.0, requires_grad=True)
        b = lib.tensor(2.0, requires_grad=True)
        c = a * b
        del b
        for _ in range(3):
            c.backward(retain_graph=True)
        return a.grad
    same_outcome(fn)


def test_seed_graph_grows_from_itself():
    """A value carried across iterations extends one graph; without retain_graph the second
    backward reaches freed buffers."""
    def fn(lib, retain):
        A = t64(lib, [[2.0, 0.5], [0.3, 1.0]])
        u = t64(lib, [1.0, -1.0])
        y = u
        for _ in range(3):
            r = A @ y - lib.tensor([1.0, 2.0], dtype=lib.float64)
            f = (r ** 2).sum()
            f.backward(retain_graph=retain)
            y = y - 0.1 * r
        return A.grad, u.grad
    same_outcome(lambda lib: fn(lib, False))
    same_outcome(lambda lib: fn(lib, True))


def test_seed_loop_with_fresh_graph_each_iteration_and_twice_in_one():
    def fn(lib):
        lin = lib.nn.Linear(3, 3)
        a = lib.ones(2, 3)
        for _ in range(3):
            y = lib.sum(lin(a))
            y.backward()
        y.backward()
    same_outcome(fn)


def test_seed_retain_graph_keeps_every_iteration_graph():
    def fn(lib):
        a = lib.ones(2, 3, requires_grad=True)
        for _ in range(5):
            y = lib.sum(a * a)
            y.backward(retain_graph=True)
        return a.grad
    same_outcome(fn)


def test_saved_scalars_survive_release_and_tensors_do_not():
    def fn(lib):
        x = t64(lib, [1.0, 2.0])
        y = x ** 3
        z = (x + 2).sum()
        y.sum().backward()
        z.backward()
        return y.grad_fn._saved_exponent, z.grad_fn.next_functions[0][0]._saved_alpha
    same_outcome(fn)
    same_outcome(lambda lib: _freed_self(lib))


def _freed_self(lib):
    x = t64(lib, [1.0, 2.0])
    y = x ** 3
    y.sum().backward()
    return y.grad_fn._saved_self


# ---- grad modes, requires_grad, .data -------------------------------------------------------------

@pytest.mark.parametrize("case", [
    lambda lib: _set_grad_enabled(lib),
    lambda lib: _no_grad_decorator(lib),
    lambda lib: _data_changes_are_not_tracked(lib),
    lambda lib: t64(lib, [1.0]).requires_grad_(False).requires_grad,
    lambda lib: (t64(lib, [1.0]) * 2).requires_grad_(True).requires_grad,
    lambda lib: lib.tensor([1, 2]).float().requires_grad_().requires_grad,
    lambda lib: _inplace_on_nonleaf(lib),
    lambda lib: _inplace_saved_output(lib),
], ids=["set-grad-enabled", "no-grad-decorator", "data", "requires-grad-off", "nonleaf-on", "int-to-float",
        "inplace-nonleaf", "inplace-saved-output"])
def test_grad_modes_and_flags(case):
    same_outcome(case)


def _set_grad_enabled(lib):
    x = t64(lib, [1.0])
    with lib.set_grad_enabled(False):
        a = x * 2
    with lib.set_grad_enabled(True):
        b = x * 2
    lib.set_grad_enabled(False)
    c = x * 2
    lib.set_grad_enabled(True)
    return a.requires_grad, b.requires_grad, c.requires_grad, lib.is_grad_enabled()


def _no_grad_decorator(lib):
    @lib.no_grad()
    def f(t):
        return t * 2
    return f(t64(lib, [1.0])).requires_grad


def _data_changes_are_not_tracked(lib):
    x = t64(lib, [1.0, 2.0])
    y = x.exp()
    x.data.mul_(2)
    y.sum().backward()
    return x.grad, x.data.requires_grad, x._version


def _inplace_on_nonleaf(lib):
    x = t64(lib, [1.0, 2.0])
    h = x * 2
    h.add_(1)
    h.mul_(h.detach())
    h.sum().backward()
    return x.grad, h.grad_fn.name()


def _inplace_saved_output(lib):
    x = t64(lib, [1.0, 2.0])
    y = x.exp()
    y.add_(1)
    y.sum().backward()


# ---- the shape of the graph ----------------------------------------------------------------------

def _tree(fn, depth=0):
    if fn is None:
        return None
    name = fn.name().split("::")[-1]
    if depth > 12:
        return name
    return (name, tuple(_tree(f, depth + 1) for f, _ in fn.next_functions))


GRAPH_CASES = {
    "mlp": lambda lib, x, w: ((x @ w.t()).tanh() * 2 - 1).pow(2).mean(),
    "linear": lambda lib, x, w: lib.nn.functional.linear(x, w, w[:, 0]).sum(),
    "broadcast": lambda lib, x, w: (x.unsqueeze(1) + w).exp().sum(dim=(0, 1)).mean(),
    "indexing": lambda lib, x, w: (x[1:, :2] * w[0, :2]).relu().sum(),
    "reshape-copy": lambda lib, x, w: x.t().reshape(-1).sigmoid().sum(),
    "matmul-batched": lambda lib, x, w: (x.unsqueeze(0).expand(2, 3, 4) @ w.t()).sum(),
    "shared": lambda lib, x, w: ((x * x) + (x * x).exp()).sum(),
}


@pytest.mark.parametrize("name", list(GRAPH_CASES))
def test_next_functions_tree_matches_pytorch(name):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    trees = []
    for lib in (torch, staticgrad):
        out = GRAPH_CASES[name](lib, t64(lib, x), t64(lib, w))
        trees.append(_tree(out.grad_fn))
    assert trees[1] == trees[0]


def test_accumulate_grad_nodes_point_at_their_leaf():
    x = staticgrad.randn(3, requires_grad=True)
    y = (x * 2).sum()
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad" and acc.variable is x   # PyTorch's name()
    assert type(acc).__name__ == "AccumulateGrad"
    assert (x * 3).grad_fn.next_functions[0][0] is acc, "one AccumulateGrad per leaf while the graph lives"


def _integer_indexes_are_views(lib):
    x = lib.tensor([1.0, 2.0])
    w = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
    first, corner, row = x[0], w[1, 0], w[0]
    x.add_(1)
    w.mul_(2)
    return first, corner, row


def test_integer_indexing_gives_views_down_to_0_dim():
    """x[0] of a vector and w[i, j] of a matrix are 0-d views: an in-place change of the base shows
    through them, as in PyTorch (a bare NumPy integer index would have copied a scalar)."""
    assert same_outcome(_integer_indexes_are_views) == ("ok", [2.0, 6.0, [2.0, 4.0]])


def _transposed_operand_gradients(lib):
    w = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
    x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], requires_grad=True)
    y = x.mm(w.t())
    z = x.t().mm(lib.ones(2, 2))
    saved = [list(y.grad_fn._saved_self_sym_strides), list(y.grad_fn._saved_mat2_sym_strides),
             list(z.grad_fn._saved_self_sym_strides)]
    (y.sum() + z.sum()).backward()
    return saved, [list(w.grad.stride()), list(x.grad.stride())], w.grad, x.grad


def test_matmul_gradients_follow_pytorch_layout_rule():
    """mm saves its operands' strides, and a column-major operand (weight.t()) gets its gradient
    computed transposed, as PyTorch does: the weight's gradient comes out in the weight's layout."""
    outcome_ = same_outcome(_transposed_operand_gradients)
    assert outcome_[1][1] == [[3, 1], [3, 1]]


@pytest.mark.parametrize("pieces, node", [
    (lambda lib, x: x.unbind(0), "UnbindBackward0"),
    (lambda lib, x: x.unbind(1), "UnbindBackward0"),
    (lambda lib, x: x.split(2), "SplitBackward0"),
    (lambda lib, x: x.chunk(3, 1), "SplitBackward0"),
    (lambda lib, x: lib.split(x, [1, 3]), "SplitWithSizesBackward0"),
])
def test_several_views_share_one_node_whose_backward_keeps_negative_zero(pieces, node):
    """unbind/split/chunk give one node for all pieces, as PyTorch's; its backward builds the
    input's gradient once (stack or cat), so a -0.0 gradient stays -0.0 (a sum with zeros would not)."""
    grads = []
    for lib in (staticgrad, torch):
        x = lib.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
        parts = pieces(lib, x)
        assert {p.grad_fn.name() for p in parts} == {node}
        assert len({id(p.grad_fn) for p in parts}) == 1
        ((parts[1] * -0.0).sum() + (parts[0] ** 2).sum()).backward()
        grads.append(x.grad.numpy())
    assert grads[0].tobytes() == grads[1].tobytes()
