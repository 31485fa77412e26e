"""PyTorch's nodes for reshape and what is built on it (flatten, tensordot, inner): ViewBackward0 on
a contiguous tensor, ReshapeAliasBackward0 on another layout a view can express, CloneBackward0 under
UnsafeViewBackward0 where a copy is needed; tensordot to one number takes dot or the sum of a product.
Whole graphs are compared node by node (depth first, None for an edge to nothing), also under
create_graph, and a compiled step through a ReshapeAlias replays eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import node_names, torch
from tests.replay_check import replay_matches_eager


def _graphs(fn, *shapes, grads=False):
    """The node names of ``fn(lib, *leaves)``'s graph (and, with ``grads``, of its leaves' gradients
    under create_graph) in PyTorch and staticgrad, with both values."""
    results = []
    for lib in (torch, sg):
        rng = np.random.default_rng(0)
        leaves = [lib.tensor(rng.standard_normal(shape), requires_grad=True) for shape in shapes]
        y = fn(lib, *leaves)
        graphs = [node_names(y.grad_fn)]
        if grads:
            graphs += [node_names(g.grad_fn) for g in lib.autograd.grad(y.sum(), leaves, create_graph=True)]
        results.append((graphs, y.detach().numpy()))
    return results


INNER = [((3,), (3,)), ((2, 3), (4, 3)), ((2, 5, 3), (4, 3)), ((3,), (4, 3)), ((2, 3), (3,)), ((2, 5, 3), (3,)),
         ((3,), (2, 5, 3)), ((2, 5, 3), (4, 6, 3)), ((1, 3), (1, 3)), ((2, 3), (2, 1, 3)), ((), (2, 3)),
         ((2, 3), ()), ((2, 3), (1, 3)), ((5, 1, 3), (4, 3)), ((1, 1, 3), (3,)), ((0, 3), (4, 3))]


@pytest.mark.parametrize("a,b", INNER, ids=[f"{a}x{b}" for a, b in INNER])
def test_inner_graph_is_torchs(a, b):
    (t_graphs, t_value), (s_graphs, s_value) = _graphs(lambda lib, x, y: lib.inner(x, y), a, b, grads=True)
    assert s_graphs == t_graphs
    np.testing.assert_allclose(s_value, t_value, rtol=1e-12, atol=1e-12)


TENSORDOT = [((1, 3), (3, 1), ([1], [0])), ((2, 3), (2, 3), 2), ((1, 0), (1, 0), ([-1], [-1])),
             ((2, 3), (2, 3), ([1, 0], [1, 0])), ((2, 3), (3, 2), ([0, 1], [1, 0])),
             ((2, 3, 1), (3, 2), ([0, 1], [1, 0])), ((4, 2, 3), (3, 2), ([1, 2], [1, 0])),
             ((2, 3), (2, 3, 4), ([1, 0], [1, 0])), ((2, 3, 4), (3, 4), 2), ((5,), (5,), 0)]


@pytest.mark.parametrize("a,b,dims", TENSORDOT, ids=[f"{a}x{b}_{d}" for a, b, d in TENSORDOT])
def test_tensordot_graph_is_torchs(a, b, dims):
    (t_graphs, t_value), (s_graphs, s_value) = _graphs(lambda lib, x, y: lib.tensordot(x, y, dims=dims), a, b)
    assert s_graphs == t_graphs
    np.testing.assert_allclose(s_value, t_value, rtol=1e-12, atol=1e-12)


RESHAPES = [
    ("same_shape_contiguous", (4, 3), lambda x: x.reshape(4, 3)),
    ("same_shape_transposed", (4, 3), lambda x: x.t().reshape(3, 4)),
    ("transposed_viewable", (4, 3), lambda x: x.t().reshape(3, 2, 2)),
    ("transposed_copy", (4, 3), lambda x: x.t().reshape(12)),
    ("size_one_dims", (1, 3), lambda x: x.t().reshape(3)),
    ("flatten_copy", (4, 3), lambda x: x.t().flatten()),
    ("flatten_viewable", (4, 3), lambda x: x.t().unsqueeze(0).flatten(0, 1)),
    ("expanded", (3, 1), lambda x: x.expand(3, 4).reshape(3, 2, 2)),
    ("empty", (0, 3), lambda x: x.t().reshape(3, 0)),
    ("reshape_as", (4, 3), lambda x: x.t().reshape_as(x.new_zeros(3, 2, 2))),
    ("column_slice", (4, 3), lambda x: x[:, :2].reshape(4, 2, 1)),
    ("row_step", (4, 3), lambda x: x[::2].reshape(2, 3)),
]


@pytest.mark.parametrize("name,shape,fn", RESHAPES, ids=[c[0] for c in RESHAPES])
def test_reshape_node_follows_the_layout_as_torchs(name, shape, fn):
    (t_graphs, t_value), (s_graphs, s_value) = _graphs(lambda lib, x: fn(x * 2), shape, grads=True)
    assert s_graphs == t_graphs
    np.testing.assert_array_equal(s_value, t_value)


def test_reshape_alias_replays_eager_bit_for_bit():
    def op(a, b):
        return (a.t().reshape(3, 2, 8) * b.t().reshape(3, 2, 8)).sum(0)

    def inputs(rng):
        return rng.uniform(-2, 2, size=(8, 6)), rng.uniform(-2, 2, size=(8, 6))

    replay_matches_eager(op, inputs, np.float32)


BROADCASTS = [((3,), (2, 3)), ((), (2, 3)), ((1, 3), (2, 3)), ((2, 1), (2, 3)), ((1,), (2, 3)), ((1, 1), (2, 3))]


@pytest.mark.parametrize("a,b", BROADCASTS, ids=[f"{a}_by_{b}" for a, b in BROADCASTS])
def test_broadcast_gradient_reduction_builds_torchs_nodes(a, b):
    """A broadcast input's gradient under create_graph: PyTorch's sum_to (SumBackward0 to a 0-dim
    shape; SumBackward1, under ViewBackward0 where leading dims go)."""
    (t_graphs, _), (s_graphs, _) = _graphs(lambda lib, x, y: x * y, a, b, grads=True)
    assert s_graphs == t_graphs
