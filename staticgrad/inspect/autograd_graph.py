"""staticgrad.inspect.autograd_graph: what a backward graph holds, and what backward has freed.

``graph(loss)`` walks the nodes reachable from a tensor's ``grad_fn`` (a leaf's AccumulateGrad)
and takes a snapshot: every node's name and inputs (``next_functions``), and every slot it saves
(``grad_fn._saved_<name>``) with shape, dtype, bytes, whether it is still held or was freed by
backward, and whether a tensor outside the graph (usually the user's) shares its storage.
The snapshot holds no tensors, so taking one never keeps memory alive.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from staticgrad._eager.node import AccumulateGrad, ReleasedNode, SavedTensor, grad_accumulator, walk
from staticgrad._eager.tensor import Tensor
from staticgrad.inspect.draw import draw, tree_lines

__all__ = ["AutogradGraph", "GraphNode", "SavedBuffer", "graph"]


@dataclass(frozen=True)
class SavedBuffer:
    """One saved slot. Tensors have shape, dtype and ``nbytes`` (numel x itemsize); scalars
    (alpha, exponent, dims, sizes) have a ``value``. ``shared`` is True while a tensor outside
    the graph uses the same storage. ``storage`` numbers the distinct storages of one graph and
    ``storage_nbytes`` is the whole storage a held slot keeps alive (differs for views). A slot a
    saved-tensor hook packed into something other than a tensor (a checkpoint) has no storage."""

    name: str
    is_tensor: bool
    freed: bool
    shape: tuple | None = None
    dtype: str | None = None
    nbytes: int = 0
    shared: bool = False
    value: object = None
    storage: int | None = None
    storage_nbytes: int = 0

    @property
    def held(self) -> bool:
        return not self.freed

    def describe(self) -> str:
        if not self.is_tensor:
            return f"{self.name}={self.value!r}" + (" (freed)" if self.freed else "")
        kind = "?" if self.shape is None else f"{self.dtype}[{', '.join(map(str, self.shape))}]"
        if self.freed:
            return f"{self.name}: {kind}, {self.nbytes} bytes, freed"
        if self.storage is None:
            return (f"{self.name}: {kind}, packed by a saved-tensor hook (0 bytes held; recomputed or restored in "
                    "backward)")
        owner = "shared with a user tensor" if self.shared else "graph only"
        view = f" (a view of {self.storage_nbytes})" if self.storage_nbytes != self.nbytes else ""
        return f"{self.name}: {kind}, {self.nbytes} bytes{view}, held ({owner})"


@dataclass(frozen=True)
class GraphNode:
    """One backward node: ``inputs`` mirrors ``next_functions`` as (node index or None, output_nr)."""

    index: int
    name: str
    inputs: tuple
    saved: tuple
    n_outputs: int = 1
    leaf_shape: tuple | None = None
    leaf_dtype: str | None = None
    replayed: bool = False

    def slot(self, name: str) -> SavedBuffer:
        for buffer in self.saved:
            if buffer.name == name:
                return buffer
        raise KeyError(f"{self.name} saves no slot named {name!r}")

    @property
    def held_bytes(self) -> int:
        return sum(b.nbytes for b in self.saved if b.is_tensor and b.held)

    def header(self) -> str:
        if self.leaf_shape is not None:
            return f"{self.name} {self.leaf_dtype}[{', '.join(map(str, self.leaf_shape))}]"
        scalars = " ".join(b.describe() for b in self.saved if not b.is_tensor)
        note = "  (returned by a replay: nothing saved)" if self.replayed else ""
        return f"{self.name}  {scalars}".rstrip() + note


class AutogradGraph:
    """A snapshot of a backward graph: ``nodes`` in the order the tree prints them (their index is
    their position and their key in ``to_networkx()``), ``roots`` the indices of the given tensors'
    nodes. Byte totals count each storage once, at its full size."""

    def __init__(self, nodes: list, roots: list, storage_bytes: dict):
        self.nodes = nodes
        self.roots = roots
        self._storage_bytes = storage_bytes

    def __getitem__(self, index: int) -> GraphNode:
        return self.nodes[index]

    def __len__(self) -> int:
        return len(self.nodes)

    def find(self, name: str) -> list:
        """Every node with this name (``MulBackward0``), in print order."""
        return [n for n in self.nodes if n.name == name]

    def buffers(self):
        """(node, SavedBuffer) for every saved slot in the graph."""
        return [(n, b) for n in self.nodes for b in n.saved]

    def _held_storages(self) -> dict:
        held = {}
        for _, b in self.buffers():
            if b.is_tensor and b.held and b.storage is not None:
                held[b.storage] = held.get(b.storage, False) or b.shared
        return held

    @property
    def held_bytes(self) -> int:
        """Bytes the saved tensors still hold (each storage counted once)."""
        return sum(self._storage_bytes[s] for s in self._held_storages())

    @property
    def shared_bytes(self) -> int:
        """Held bytes whose storage a tensor outside the graph also uses."""
        return sum(self._storage_bytes[s] for s, shared in self._held_storages().items() if shared)

    @property
    def graph_only_bytes(self) -> int:
        """Held bytes only the graph keeps alive: what backward (or dropping the graph) releases."""
        return self.held_bytes - self.shared_bytes

    def summary(self) -> str:
        tensors = [b for _, b in self.buffers() if b.is_tensor]
        held = sum(1 for b in tensors if b.held)
        return (f"saved tensors: {held} held, {len(tensors) - held} freed; held bytes: {self.held_bytes} "
                f"({self.graph_only_bytes} graph only, {self.shared_bytes} shared with user tensors)")

    def __str__(self) -> str:
        if not self.nodes:
            return "no graph: the tensor does not require grad"
        return "\n".join(tree_lines(self) + [self.summary()])

    def __repr__(self) -> str:
        return f"<staticgrad.inspect.AutogradGraph: {len(self.nodes)} nodes, {self.held_bytes} bytes held>"

    def to_networkx(self):
        """A ``networkx.MultiDiGraph``: one node per backward node (name, saved buffers, held bytes,
        leaf shape), one edge per ``next_functions`` entry, pointing the way gradients flow."""
        import networkx as nx  # networkx (0.2 s to import) loads only when a networkx graph is asked for

        g = nx.MultiDiGraph()
        for n in self.nodes:
            g.add_node(n.index, name=n.name, saved=list(n.saved), held_bytes=n.held_bytes,
                       leaf_shape=n.leaf_shape, leaf_dtype=n.leaf_dtype)
        for n in self.nodes:
            for position, (target, output_nr) in enumerate(n.inputs):
                if target is not None:
                    g.add_edge(n.index, target, key=position, input_nr=position, output_nr=output_nr)
        return g

    def render(self, path, dpi: int = 110) -> None:
        """Draw the graph as a layered picture (root on top, held buffers in orange) to ``path``."""
        draw(self, path, dpi)


def graph(*tensors) -> AutogradGraph:
    """Snapshot the backward graph reachable from ``tensors`` (several roots may share nodes)."""
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"staticgrad.inspect.autograd_graph.graph expects tensors, got {type(t).__name__}")
    live, roots = _walk(tensors)
    slots, storage_bytes = _storage_facts(live)
    position = {node: i for i, node in enumerate(live)}
    nodes = [_snapshot(i, node, position, slots[i]) for i, node in enumerate(live)]
    return AutogradGraph(nodes, roots, storage_bytes)


# ---- walking the live graph ------------------------------------------------------------------

def _walk(tensors):
    """The live nodes in tree print order (depth first, inputs in order) and the roots' indices."""
    starts = []
    for t in tensors:
        if t.grad_fn is not None:
            starts.append(t.grad_fn)
        elif t.requires_grad:
            starts.append(grad_accumulator(t))
    order = list(walk(starts))
    seen = {node: k for k, node in enumerate(order)}
    return order, [seen[s] for s in starts]


def _snapshot(index, node, position, saved) -> GraphNode:
    inputs = tuple((None if n is None else position[n], nr) for n, nr in node.next_functions)
    if type(node) is AccumulateGrad:
        data = node.variable._data
        return GraphNode(index, "AccumulateGrad", (), (), 1, tuple(data.shape), data.dtype.name)
    if isinstance(node, ReleasedNode):
        return GraphNode(index, node.name(), inputs, (), node._n_outputs, replayed=True)
    return GraphNode(index, node.name(), inputs, tuple(saved), node._n_outputs)


# ---- what the held slots keep alive, and who else uses it -----------------------------------

def _storage_facts(live):
    """Per node, its SavedBuffers; and the size of every distinct storage the graph holds.

    A storage is *shared* when something outside the graph references it, or references a tensor
    or array through which the graph reaches it. Known references (the graph's slots and leaf
    variables, ``Tensor._data``/``_base``, ``ndarray.base``) are counted and compared with
    ``sys.getrefcount``: any surplus is a reference from outside."""
    reach = _collect(live)
    counts = _refcounts(reach.objects)
    chain = reach.chain
    storage_bytes = {i: int(o.nbytes) for i, o in enumerate(reach.objects) if chain[i] is None}
    shared = _propagate([c - _BIAS - n > 0 for c, n in zip(counts, reach.incoming)], reach.holders)
    reach.objects = None  # the counted references go before the snapshot is returned
    slots = []
    for node_rows in reach.rows:
        buffers = []
        for name, kind, freed, info in node_rows:
            if kind == "scalar":
                buffers.append(SavedBuffer(name, False, freed, value=info))
            elif kind == "packed":  # a saved-tensor hook keeps something else (a checkpoint's placeholder)
                buffers.append(SavedBuffer(name, True, False, tuple(info[0]), info[1].name, 0))
            elif freed:
                shape, dtype = info if info is not None else (None, None)
                nbytes = 0 if shape is None else int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                buffers.append(SavedBuffer(name, True, True, shape, getattr(dtype, "name", None), nbytes))
            else:
                handle, shape, dtype, nbytes = info
                root = handle
                while chain[root] is not None:
                    root = chain[root]
                buffers.append(SavedBuffer(name, True, False, shape, dtype, nbytes, shared[root], storage=root,
                                           storage_nbytes=storage_bytes[root]))
        slots.append(buffers)
    return slots, storage_bytes


@dataclass
class _Reach:
    """What the graph's held slots reach: the objects, how many known references point at each,
    who holds each (-1: the graph), each one's next link towards its storage (None at the storage),
    and per node the rows of its saved slots."""

    objects: list | None
    incoming: list
    holders: list
    chain: list
    rows: list


def _collect(live):
    """Every tensor and array the graph's held slots reach, with how many of those known references
    point at each (``incoming``), who holds each (-1: the graph), each one's next link towards its
    storage (``chain``: tensor -> array -> base array; None at the storage) and per-node slot rows."""
    objects, position, incoming, holders, chain, rows = [], {}, [], [], [], []
    pending = []

    def add(obj, holder):
        i = position.get(id(obj))
        if i is None:
            i = position[id(obj)] = len(objects)
            objects.append(obj)
            incoming.append(0)
            holders.append([])
            chain.append(None)
            pending.append(i)
        incoming[i] += 1
        holders[i].append(holder)
        return i

    for node in live:
        node_rows = []
        if type(node) is AccumulateGrad:
            add(node.variable, -1)
        elif not isinstance(node, ReleasedNode):
            declared = {s.name: s for s in node.op.saves}
            for name, value, _, freed in node.saved_slots():
                slot = declared.get(name)
                if not (slot.holds_tensor if slot is not None else isinstance(value, SavedTensor) or freed):
                    node_rows.append((name, "scalar", freed, value))
                elif freed:
                    node_rows.append((name, "tensor", True, value))
                elif value.is_packed and not isinstance(value.packed, Tensor):
                    node_rows.append((name, "packed", False, value.shape_dtype))
                else:
                    held = (value.packed if value.is_packed else value.tensor if value.tensor is not None
                            else value.array)
                    data = held._data if value.is_packed else value.data
                    node_rows.append((name, "tensor", False,
                                      (add(held, -1), tuple(data.shape), data.dtype.name, int(data.nbytes))))
        rows.append(node_rows)
        while pending:
            i = pending.pop()
            obj = objects[i]
            if isinstance(obj, np.ndarray):
                if isinstance(obj.base, np.ndarray):
                    chain[i] = add(obj.base, i)
            else:
                chain[i] = add(obj._data, i)
                if obj._base is not None:
                    add(obj._base, i)
    return _Reach(objects, incoming, holders, chain, rows)


def _refcounts(objects: list) -> list:
    return [sys.getrefcount(obj) for obj in objects]


# References _refcounts itself adds (the list, the loop variable, the call's argument).
_BIAS = _refcounts([object()])[0]


def _propagate(shared: list, holders: list) -> list:
    """An object is shared if referenced from outside, or held by a shared object."""
    children = [[] for _ in shared]
    for child, owners in enumerate(holders):
        for owner in owners:
            if owner >= 0:
                children[owner].append(child)
    stack = [i for i, s in enumerate(shared) if s]
    while stack:
        for child in children[stack.pop()]:
            if not shared[child]:
                shared[child] = True
                stack.append(child)
    return shared
