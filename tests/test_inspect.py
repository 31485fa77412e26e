"""staticgrad.inspect: the facts a graph snapshot reports (saved slots, bytes, held/freed,
storage shared with user tensors, totals), how it prints, converts and draws."""

from __future__ import annotations

import gc
import re
import weakref

import numpy as np
import pytest

import staticgrad
from staticgrad import inspect
from tests.oracle import torch

# ---- saved buffers: names, shapes, bytes --------------------------------------------------------

def test_bytes_shape_and_dtype_per_saved_buffer():
    x = staticgrad.randn(4, 3, requires_grad=True)
    b = staticgrad.randn(4, 3, dtype=staticgrad.float64)
    node = inspect.graph(x * b)[0]
    assert node.name == "MulBackward0"
    other = node.slot("other")
    assert (other.shape, other.dtype, other.nbytes, other.held) == ((4, 3), "float64", 96, True)
    with pytest.raises(KeyError):
        node.slot("self")  # only other's value is needed for self's gradient

    values, _indices = x.max(dim=1)
    saved = inspect.graph(values)[0].slot("indices")
    assert (saved.shape, saved.dtype, saved.nbytes) == ((4,), "int64", 32)


def test_saved_slots_match_pytorchs_saved_attributes():
    """Every tensor slot the inspector lists exists on PyTorch's node with the same shape."""
    sg_x, sg_w, sg_b = staticgrad.randn(5, 3, requires_grad=True), staticgrad.randn(2, 3), staticgrad.randn(2)
    sg_w.requires_grad_()
    t_x, t_w, t_b = (torch.tensor(t.detach().numpy()) for t in (sg_x, sg_w, sg_b))
    t_x.requires_grad_()
    t_w.requires_grad_()
    sg_out = staticgrad.nn.functional.mse_loss(staticgrad.nn.functional.linear(sg_x, sg_w, sg_b).tanh(),
                                               staticgrad.zeros(5, 2))
    t_out = torch.nn.functional.mse_loss(torch.nn.functional.linear(t_x, t_w, t_b).tanh(), torch.zeros(5, 2))
    g = inspect.graph(sg_out)
    t_nodes, stack = [], [t_out.grad_fn]
    while stack:
        n = stack.pop()
        if n is not None and n not in t_nodes:
            t_nodes.append(n)
            stack.extend(m for m, _ in n.next_functions)
    t_name = {n: n.name().replace("torch::autograd::", "") for n in t_nodes}
    assert sorted(n.name for n in g.nodes) == sorted(t_name.values())
    for node in g.nodes:
        t_node = next(n for n in t_nodes if t_name[n] == node.name)
        for buffer in node.saved:
            value = getattr(t_node, "_saved_" + buffer.name)
            if buffer.is_tensor:
                assert tuple(value.shape) == buffer.shape, (node.name, buffer.name)
            else:
                assert value == buffer.value, (node.name, buffer.name)


def test_scalars_are_listed_and_not_freed():
    x = staticgrad.randn(2, 3, requires_grad=True)
    out = (x + x).sum()
    out.backward()
    g = inspect.graph(out)
    sizes = g.find("SumBackward0")[0].slot("self_sym_sizes")
    alpha = g.find("AddBackward0")[0].slot("alpha")
    assert (sizes.is_tensor, sizes.value, sizes.freed) == (False, (2, 3), False)
    assert (alpha.value, alpha.freed) == (1, False)
    assert "self_sym_sizes=(2, 3)" in str(g) and "alpha=1" in str(g)


# ---- held and freed ----------------------------------------------------------------------------------

def test_backward_frees_saved_tensors_and_the_snapshot_remembers_their_shape():
    x = staticgrad.randn(3, 4, requires_grad=True)
    y = x.exp().sum()
    before = inspect.graph(y)
    assert before.find("ExpBackward0")[0].slot("result").held
    y.backward()
    result = inspect.graph(y).find("ExpBackward0")[0].slot("result")
    assert result.freed and not result.held
    assert (result.shape, result.dtype, result.nbytes) == ((3, 4), "float32", 48)
    assert "result: float32[3, 4], 48 bytes, freed" in str(inspect.graph(y))
    assert before.find("ExpBackward0")[0].slot("result").held, "a snapshot does not change afterwards"


def test_retain_graph_keeps_buffers_held_until_a_backward_without_it():
    w = staticgrad.randn(3, requires_grad=True)
    y = (w * w).sum()
    y.backward(retain_graph=True)
    g = inspect.graph(y)
    assert all(b.held for _, b in g.buffers())
    assert g.held_bytes == 12
    y.backward()
    g = inspect.graph(y)
    assert [b.freed for _, b in g.buffers() if b.is_tensor] == [True, True]
    assert g.held_bytes == 0


def test_a_freed_wrapped_scalar_is_marked_freed():
    x = staticgrad.randn(3, requires_grad=True)
    y = x * 2
    assert not inspect.graph(y)[0].slot("other").freed
    y.sum().backward()
    other = inspect.graph(y)[0].slot("other")
    assert (other.is_tensor, other.value, other.freed) == (False, 2, True)


# ---- storage shared with user tensors ----------------------------------------------------------------

def test_saved_input_is_shared_while_the_user_holds_it():
    a = staticgrad.randn(3, requires_grad=True)
    b = staticgrad.randn(3, requires_grad=True)
    c = a * b
    assert inspect.graph(c)[0].slot("other").shared
    del b
    gc.collect()
    g = inspect.graph(c)
    assert not g[0].slot("other").shared
    assert g[0].slot("self").shared, "a is still the user's"
    assert (g.held_bytes, g.graph_only_bytes, g.shared_bytes) == (24, 12, 12)


def test_saved_output_is_shared_while_the_result_tensor_is_alive():
    x = staticgrad.randn(5, requires_grad=True)
    y = x.tanh()
    loss = y.sum()
    assert inspect.graph(loss).find("TanhBackward0")[0].slot("result").shared
    del y
    gc.collect()
    assert not inspect.graph(loss).find("TanhBackward0")[0].slot("result").shared


def test_storage_reached_through_views_detach_and_numpy_counts_as_shared():
    w = staticgrad.randn(3, 3, requires_grad=True)
    x = staticgrad.randn(2, 3, requires_grad=True)
    out = x @ w.t()  # saves a view of w: the storage is w's
    del x
    assert inspect.graph(out)[0].slot("mat2").shared
    assert not inspect.graph(out)[0].slot("self").shared

    y = staticgrad.randn(4, requires_grad=True).exp()
    m = y.detach()
    loss = y.sum()
    del y
    assert inspect.graph(loss).find("ExpBackward0")[0].slot("result").shared, "m shares the storage"
    del m
    gc.collect()
    z = staticgrad.randn(4, requires_grad=True).exp()
    array = z.detach().numpy()
    loss = z.sum()
    del z
    gc.collect()
    assert inspect.graph(loss).find("ExpBackward0")[0].slot("result").shared, "the array is the storage"
    del array
    gc.collect()
    assert not inspect.graph(loss).find("ExpBackward0")[0].slot("result").shared


def test_a_tensor_saved_by_two_nodes_of_one_graph_is_graph_only_once_the_user_drops_it():
    x = staticgrad.randn(6, requires_grad=True)
    h = x.tanh()
    loss = (h * h).sum()
    del h
    gc.collect()
    g = inspect.graph(loss)
    assert not any(b.shared for _, b in g.buffers() if b.is_tensor)
    assert len({b.storage for _, b in g.buffers() if b.is_tensor}) == 1
    assert (g.held_bytes, g.graph_only_bytes) == (24, 24)


def test_the_snapshot_keeps_nothing_alive():
    a = staticgrad.randn(1000, requires_grad=True)
    b = staticgrad.randn(1000)
    ref = weakref.ref(b)
    c = (a * b).sum()
    snapshot = inspect.graph(c)
    del b
    c.backward()
    gc.collect()
    assert ref() is None
    assert snapshot.held_bytes == 4000


# ---- totals ------------------------------------------------------------------------------------------

def test_totals_count_each_storage_once_at_its_full_size():
    x = staticgrad.randn(4, 3, requires_grad=True)
    g = inspect.graph(x * x)
    assert sum(b.nbytes for _, b in g.buffers()) == 96
    assert g.held_bytes == 48

    small = staticgrad.randn(1, 3)
    wide = x.sum() * small.expand(1000, 3)
    other = inspect.graph(wide)[0].slot("other")
    assert (other.nbytes, other.storage_nbytes) == (12000, 12)
    assert inspect.graph(wide).held_bytes == 12
    assert "12000 bytes (a view of 12)" in str(inspect.graph(wide))


def test_summary_line_adds_up():
    model = staticgrad.nn.Sequential(staticgrad.nn.Linear(4, 8), staticgrad.nn.Tanh(), staticgrad.nn.Linear(8, 2))
    x, y = staticgrad.randn(5, 4), staticgrad.randn(5, 2)
    loss = staticgrad.nn.functional.mse_loss(model(x), y)
    g = inspect.graph(loss)
    assert g.held_bytes == g.graph_only_bytes + g.shared_bytes
    # tanh's output is saved by TanhBackward0 and as the second Linear's mat1: one storage
    assert g.held_bytes == 40 + 40 + 160 + 64 + 80
    assert g.graph_only_bytes == 40 + 160
    assert str(g).splitlines()[-1] == ("saved tensors: 6 held, 0 freed; held bytes: 384 "
                                       "(200 graph only, 184 shared with user tensors)")


# ---- printing -------------------------------------------------------------------------------------

def test_tree_prints_the_graph_with_saved_buffers():
    lin = staticgrad.nn.Linear(3, 3)
    a = staticgrad.randn(2, 3)
    y = staticgrad.sum(lin(a))
    assert str(inspect.graph(y)) == """\
SumBackward0  self_sym_sizes=(2, 3)
└─ AddmmBackward0  mat2_sym_sizes=(3, 3) mat2_sym_strides=(1, 3) alpha=1 beta=1
   │  mat1: float32[2, 3], 24 bytes, held (shared with a user tensor)
   ├─ AccumulateGrad float32[3]
   ├─ None
   └─ TBackward0
      └─ AccumulateGrad float32[3, 3]
saved tensors: 1 held, 0 freed; held bytes: 24 (0 graph only, 24 shared with user tensors)"""


def test_shared_subgraph_is_printed_once_and_referenced_after():
    t = staticgrad.eye(2, requires_grad=True)
    a = staticgrad.ones(2, requires_grad=True)
    y = t @ a
    loss0 = (t @ (y * 2)).sum()
    loss1 = (t @ (y * 3)).sum()
    g = inspect.graph(loss0, loss1)
    text = str(g)
    shared = g.find("MvBackward0")
    inner = next(n for n in shared if sum(target == n.index for m in g.nodes for target, _ in m.inputs) == 2)
    label = f"[{inner.index}] MvBackward0"
    assert text.count(label) == 2
    assert text.count(label + " (shown above)") == 1
    assert text.count("vec: float32[2], 8 bytes, held (shared with a user tensor)") == 1, \
        "the shared node's buffers are printed once"
    assert len(g.roots) == 2 and g.nodes[g.roots[1]].name == "SumBackward0"
    assert not re.search(r"0x[0-9a-f]+", text), "no memory addresses"


def test_leaf_and_no_grad_tensors():
    x = staticgrad.randn(2, 2, requires_grad=True)
    assert str(inspect.graph(x)).splitlines()[0] == "AccumulateGrad float32[2, 2]"
    g = inspect.graph(staticgrad.randn(2))
    assert len(g) == 0 and str(g) == "no graph: the tensor does not require grad"
    with pytest.raises(TypeError):
        inspect.graph(np.zeros(2))


def test_deep_graphs_need_no_recursion():
    h = staticgrad.randn(4, requires_grad=True)
    for _ in range(3000):
        h = h * 1.0001
    g = inspect.graph(h)
    assert len(g) == 3001
    assert g.to_networkx().number_of_edges() == 3000
    assert str(g).count("MulBackward0") == 3000


def test_a_replayed_output_shows_its_node_with_nothing_saved():
    lin = staticgrad.nn.Linear(3, 1)

    @staticgrad.compile
    def step(x):
        lin.zero_grad()
        loss = lin(x).pow(2).mean()
        loss.backward()
        return loss

    x = staticgrad.randn(4, 3)
    for _ in range(3):
        replays = step.stats.replays
        loss = step(x)
    assert step.stats.replays == replays + 1, "the last call replayed"
    g = inspect.graph(loss)
    assert len(g) == 1 and g[0].replayed and g[0].name == "MeanBackward0"
    assert "returned by a replay" in str(g)


# ---- networkx and pictures ----------------------------------------------------------------------

def test_networkx_graph_matches_next_functions():
    x = staticgrad.randn(3, requires_grad=True)
    w = staticgrad.randn(3, requires_grad=True)
    out = (x * w + x.tanh() * x).sum()
    g = inspect.graph(out).to_networkx()

    live, stack = {}, [out.grad_fn]
    while stack:
        node = stack.pop()
        if node not in live:
            live[node] = len(live)
            stack.extend(n for n, _ in node.next_functions if n is not None)
    # the graph labels a leaf's node by its class, AccumulateGrad (name() gives PyTorch's torch::autograd::...)
    assert sorted(g.nodes[n]["name"] for n in g) == sorted(n.name().split("::")[-1] for n in live)
    expected = sorted((node.name(), position, nxt.name().split("::")[-1], nr) for node in live
                      for position, (nxt, nr) in enumerate(node.next_functions) if nxt is not None)
    actual = sorted((g.nodes[u]["name"], k, g.nodes[v]["name"], data["output_nr"])
                    for u, v, k, data in g.edges(keys=True, data=True))
    assert actual == expected
    assert g.nodes[0]["name"] == "SumBackward0" and g.in_degree(0) == 0, "edges point the way gradients flow"
    tanh = next(n for n in g if g.nodes[n]["name"] == "TanhBackward0")
    assert [b.name for b in g.nodes[tanh]["saved"]] == ["result"]
    assert g.nodes[tanh]["held_bytes"] == 12


def test_render_writes_a_png(tmp_path):
    t = staticgrad.eye(2, requires_grad=True)
    y = t @ staticgrad.ones(2, requires_grad=True)
    loss = (t @ y).sum()
    loss.backward()
    path = tmp_path / "graph.png"
    inspect.graph(loss).render(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000
    empty = tmp_path / "empty.png"
    inspect.graph(staticgrad.randn(2)).render(empty)
    assert empty.exists()
