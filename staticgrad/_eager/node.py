"""Backward-graph nodes (what ``tensor.grad_fn`` is) and the buffers they save.

A ``Node`` keeps exactly the slots its op's record asks for. Backward frees the tensor slots
unless ``retain_graph=True``; reading a freed slot raises PyTorch's "backward through the
graph a second time" error, and reading a slot whose tensor was changed in place since it was
saved raises the "modified by an inplace operation" error.
"""

from __future__ import annotations

import itertools
import weakref

from staticgrad._eager.saved_hooks import AnyHooks, SavedHooks
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.errors import BACKWARD_TWICE, modified_inplace_message
from staticgrad.ops import OPS
from staticgrad.ops.dtypes import from_numpy_dtype

_sequence = itertools.count()


_SAVED_NAMES: dict = {}


def _saved_names_of(op) -> frozenset:
    """The ``_saved_*`` names a node shows: its op's slots, and those of every op presenting the
    same PyTorch node (``x * 2`` and ``x * y`` are both MulBackward0, with ``_saved_self``)."""
    names = _SAVED_NAMES.get(op.name)
    if names is None:
        names = {s.name for s in op.saves}
        if not callable(op.node_name):
            for other in OPS.values():
                if other.node_name == op.node_name:
                    names.update(s.name for s in other.saves)
        names = _SAVED_NAMES[op.name] = frozenset(names)
    return names


class SavedTensor:
    """A tensor a node saved: an input (held as is) or an output (held as its array, so that the
    output -> grad_fn -> saved output cycle never forms; rebuilt with its grad_fn on unpack). Under
    saved-tensor hooks it holds what the pack hook returned instead (``packed``), and its shape and
    dtype (``meta``); backward gets the tensor back from the unpack hook."""

    __slots__ = ("array", "meta", "output_nr", "packed", "tensor", "trace_value", "unpack_hook", "version",
                 "version_counter")

    def __init__(self, tensor, is_output: bool):
        self.version_counter = tensor._version_counter
        self.version = tensor._version_counter[0]
        self.trace_value = None
        if is_output:
            self.tensor = None
            self.array = tensor._data
            self.output_nr = tensor._output_nr
            tracer = Tracing.tracer
            if tracer is not None:
                self.trace_value = tracer.value_of(tensor)
        else:
            self.tensor = tensor
            self.array = None
            self.output_nr = 0
        self.unpack_hook = None
        if AnyHooks.open and SavedHooks.stack:
            self._pack(tensor, *SavedHooks.stack[-1])

    def _pack(self, tensor, pack_hook, unpack_hook) -> None:
        """Keep ``pack_hook(tensor)`` instead of the tensor (or its array)."""
        self.meta = (tensor._data.shape, tensor._data.dtype)
        self.packed = pack_hook(tensor)
        self.unpack_hook = unpack_hook
        self.tensor = self.array = None

    @property
    def is_packed(self) -> bool:
        """Saved through a pack hook: ``packed`` holds what it returned, not the tensor."""
        return self.unpack_hook is not None

    @classmethod
    def of_array(cls, array) -> SavedTensor:
        """A saved array no tensor holds (a compiled function's saved forward value): no one can
        change it in place, so its version never moves."""
        saved = cls.__new__(cls)
        saved.version_counter, saved.version, saved.trace_value = [0], 0, None
        saved.tensor, saved.array, saved.output_nr = None, array, 0
        saved.unpack_hook = None
        return saved

    @property
    def nbytes(self) -> int:
        """Bytes this slot keeps alive itself: a packed slot's packed tensor, if it is one."""
        if self.unpack_hook is not None:
            return int(self.packed._data.nbytes) if isinstance(self.packed, Tensor) else 0
        array = self.array if self.tensor is None else self.tensor._data
        return int(array.nbytes)

    @property
    def data(self):
        """The saved array (None for a packed slot: only its unpack hook can give it back)."""
        return self.array if self.tensor is None else self.tensor._data

    @property
    def shape_dtype(self) -> tuple:
        """(shape, dtype) of the tensor saved, packed or not."""
        if self.unpack_hook is not None:
            return self.meta
        data = self.array if self.tensor is None else self.tensor._data
        return data.shape, data.dtype

    def unpack(self, node):
        current = self.version_counter[0]
        if current != self.version:
            shape, dtype = self.shape_dtype
            output_of = (self.output_nr, node.name()) if self.tensor is None and self.output_nr is not None else None
            raise RuntimeError(modified_inplace_message(_type_name(dtype), shape, current, self.version, output_of))
        if self.unpack_hook is not None:
            return self._unpack_packed()
        if self.tensor is not None:
            return self.tensor
        t = Tensor._make(self.array, True, node)
        t._output_nr = self.output_nr
        t._version_counter = self.version_counter
        tracer = Tracing.tracer
        if tracer is not None and self.trace_value is not None:
            tracer.on_unpack(t, self.trace_value)
        return t


    def _unpack_packed(self):
        t = self.unpack_hook(self.packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        return t


def _type_name(np_dtype) -> str:
    return "staticgrad." + from_numpy_dtype(np_dtype).tensor_type


class _Hookable:
    """Node hooks, shared by graph nodes and AccumulateGrad."""

    __slots__ = ()

    @property
    def metadata(self) -> dict:
        """A dict for the user's own notes on this node, made on first use (as PyTorch's)."""
        metadata = self._metadata
        if metadata is None:
            metadata = self._metadata = {}
        return metadata

    @metadata.setter
    def metadata(self, value) -> None:
        raise AttributeError(f"attribute 'metadata' of '{type(self).__name__}' objects is not writable")

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after this node computes its input gradients."""
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(fn)
        return _RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; it may return replacement gradients."""
        return self._add_pre_hook(None, fn)

    def _add_pre_hook(self, output_nr, fn):
        if self._pre_hooks is None:
            self._pre_hooks = []
        entry = (output_nr, fn)
        self._pre_hooks.append(entry)
        return _RemovableHandle(self._pre_hooks, entry)


class Node(_Hookable):
    """One backward function in the graph: PyTorch's ``MulBackward0`` and friends."""

    __slots__ = (
        "__weakref__",
        "_edge_inputs",
        "_freeable",
        "_freed",
        "_input_meta",
        "_metadata",
        "_n_outputs",
        "_post_hooks",
        "_pre_hooks",
        "_released",
        "_retain_grad_refs",
        "_saved",
        "_seq",
        "attrs",
        "next_functions",
        "op",
    )

    def __init__(self, op, attrs, next_functions, input_meta, n_outputs: int = 1):
        self.op = op
        self.attrs = attrs
        self.next_functions = next_functions
        self._input_meta = input_meta
        self._saved = None
        self._freeable = ()
        self._released = False
        self._seq = next(_sequence)
        self._pre_hooks = None
        self._post_hooks = None
        self._retain_grad_refs = None
        self._metadata = None
        self._n_outputs = n_outputs
        # None: one edge per input, in order; else (the input each edge is for, every input's need):
        # an op's index, mask and target inputs have no edge, as in PyTorch (OpDef.grad_inputs)
        self._edge_inputs = None

    _plain = True   # made by an op (not a replay's ReleasedNode nor a rewired PassOn)
    _repr_prefix = ""   # a custom autograd.Function's node shows its module, as PyTorch's does

    def name(self) -> str:
        return self.op.grad_node_name(self.attrs)

    def __repr__(self) -> str:
        return f"<{self._repr_prefix}{type(self).__name__} object at {hex(id(self))}>"

    def __reduce_ex__(self, protocol):
        raise TypeError(f"cannot pickle '{type(self).__name__}' object")   # (copy and deepcopy too)

    # ---- saved values ------------------------------------------------------------------------

    def unpack_saved(self) -> dict:
        if self._released and self._freeable:
            raise RuntimeError(BACKWARD_TWICE)
        saved = self._saved
        if not saved:
            return {}
        return {name: value.unpack(self) if type(value) is SavedTensor else value for name, value in saved.items()}

    def saved_arrays(self) -> dict:
        """The saved values' arrays, each checked against its version counter as ``unpack_saved``
        checks it: for a backward that reads arrays (``OpDef.backward_reads_arrays``)."""
        if self._released and self._freeable:
            raise RuntimeError(BACKWARD_TWICE)
        arrays = {}
        for name, value in (self._saved or {}).items():
            if type(value) is SavedTensor:
                if value.version_counter[0] != value.version or value.unpack_hook is not None:
                    value = value.unpack(self)._data  # raises the "modified by an inplace operation" error
                else:
                    value = value.array if value.tensor is None else value.tensor._data
            arrays[name] = value
        return arrays

    def release(self) -> None:
        """Drop the freeable slots (what ``backward`` without ``retain_graph`` does), keeping what
        each one was (``(shape, dtype)`` for a tensor, else the value) for ``staticgrad.inspect.autograd_graph``."""
        self._released = True
        saved = self._saved
        if saved and self._freeable:
            freed = {}
            for name in self._freeable:
                value = saved.pop(name, None)
                if type(value) is SavedTensor:
                    value = value.shape_dtype
                freed[name] = value
            self._freed = freed
            if not saved:
                self._saved = None

    def saved_slots(self) -> list:
        """(name, value-or-SavedTensor, freeable, freed) for every slot the op declares and saved;
        a freed slot's value is what ``release`` kept of it: ``(shape, dtype)`` for a tensor."""
        rows = []
        saved = self._saved or {}
        declared = {s.name: s for s in self.op.saves}
        freed = getattr(self, "_freed", None) or {}  # "_freed" is set only by release()
        for name in self._saved_names():
            slot = declared.get(name)  # an autograd.Function's saved_<k> slots are declared by its ctx
            freeable = slot.freed if slot is not None else name in self._freeable
            if name in saved:
                rows.append((name, saved[name], freeable, False))
            elif self._released and freeable:
                rows.append((name, freed.get(name), freeable, True))
        return rows

    def _saved_names(self):
        names = list(self._saved or ())
        names += [n for n in self._freeable if n not in names]
        return names

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            key = name[len("_saved_"):]
            if key in _saved_names_of(self.op):
                saved = self._saved or {}
                if key in saved:
                    value = saved[key]
                    return value.unpack(self) if type(value) is SavedTensor else value
                if self._released and key in self._freeable:
                    raise RuntimeError(BACKWARD_TWICE)
                return None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    # __call__ (run this node on gradients) is installed by methods.py: it needs the engine


class AccumulateGrad(_Hookable):
    """The node that adds an incoming gradient into a leaf tensor's ``.grad``."""

    __slots__ = ("__weakref__", "_metadata", "_post_hooks", "_pre_hooks", "_seq", "variable")
    next_functions = ()
    _released = False
    _plain = False
    _n_outputs = 1

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("Cannot construct")   # as PyTorch's: only the engine makes these (grad_accumulator)

    def __init__(self, variable):
        self.variable = variable
        self._seq = float("inf")
        self._pre_hooks = None
        self._post_hooks = None
        self._metadata = None

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"   # PyTorch's name() (its class is AccumulateGrad)

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle 'AccumulateGrad' object")

    def saved_slots(self) -> list:
        return []


AccumulateGrad.__module__ = "builtins"   # ``str(type(node))`` reads "<class 'AccumulateGrad'>", as in PyTorch


def _refuse_node(cls, *args, **kwargs):
    raise TypeError(f"cannot create '{cls.__name__}' instances")


def _refuse_cpp_node(cls, *args, **kwargs):
    raise RuntimeError("Cannot construct")


def new_node(cls, op, attrs, next_functions, input_meta, n_outputs: int = 1):
    """A node of class ``cls`` (one of NODE_CLASSES), made past the ``__new__`` that refuses
    ``type(node)()`` from users, as PyTorch's node classes do."""
    node = _object_new(cls)
    _node_init(node, op, attrs, next_functions, input_meta, n_outputs)
    return node


def _bare_function_node(self, *args, **kwargs):
    """``type(fn)()`` for a custom Function's node: a node of its name with no edges, as PyTorch's
    Python node classes allow."""
    _node_init(self, type(self)._op, {}, (), ())


_object_new = object.__new__


class _NodeClasses(dict):
    """Node name -> the subclass of Node of that name (PyTorch's node class: ``MulBackward0``,
    ``CopySlices`` for ``torch::autograd::CopySlices``), made on first use, then one dict lookup."""

    __slots__ = ("base",)

    def __init__(self, base):
        super().__init__()
        self.base = base

    def __missing__(self, name: str) -> type:
        return self.make(name, "builtins")

    def make(self, name: str, module: str, op=None) -> type:
        """The class for ``name`` (made in ``module`` if it is new; a class outside builtins, a custom
        Function's, is made bare by a call, its node's op being ``op``)."""
        cls = self.get(name)
        if cls is None:
            short = name.rpartition("::")[2]
            body = {"__slots__": (), "__module__": module, "__qualname__": short}
            if module == "builtins":   # an op's node class: only the engine makes its nodes (``new_node``)
                body["__new__"] = _refuse_cpp_node if "::" in name else _refuse_node
            else:
                body["__init__"] = _bare_function_node
                body["_op"] = op
            cls = self[name] = type(self.base)(short, (self.base,), body)
            if module != "builtins":
                cls._repr_prefix = module + "."
        return cls


NODE_CLASSES = _NodeClasses(Node)
_node_init = Node.__init__


def grad_accumulator(tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node, made once and held weakly by the tensor (as PyTorch does)."""
    ref = tensor._grad_acc
    node = ref() if ref is not None else None
    if node is None:
        node = _object_new(AccumulateGrad)
        node.__init__(tensor)
        tensor._grad_acc = weakref.ref(node)
    return node


class _RemovableHandle:
    __slots__ = ("_entry", "_owner")

    def __init__(self, owner: list, entry):
        self._owner = owner
        self._entry = entry

    def remove(self) -> None:
        try:
            self._owner.remove(self._entry)
        except ValueError:
            pass


class ReleasedNode(Node):
    """The grad_fn of a tensor a replay returns: it has the name (and class name) of the node the
    eager call built, and like that node after backward its saved buffers are gone."""

    __slots__ = ("_name",)
    _plain = False

    def __new__(cls, name: str):
        return object.__new__(RELEASED_CLASSES[name] if cls is ReleasedNode else cls)

    def __init__(self, name: str):
        Node.__init__(self, None, {}, (), ())
        self._name = name
        self._released = True
        self._freeable = ("replayed",)

    def name(self) -> str:
        return self._name

    def unpack_saved(self) -> dict:
        raise RuntimeError(BACKWARD_TWICE)

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            raise RuntimeError(BACKWARD_TWICE)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


RELEASED_CLASSES = _NodeClasses(ReleasedNode)


class PassOn(Node):
    """A node whose gradients go on unchanged along its edges: a compiled call whose graph a double
    backward rebuilt, rewired to the rebuilt outputs. The engine follows its edges in its place, so
    that what reaches it joins the rebuilt graph's buffers as each gradient comes, as in eager."""

    __slots__ = ()
    _plain = False

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"


def resolved(node, nr: int) -> tuple:
    """The edge ``(node, nr)`` past any PassOn nodes: where a gradient sent along it is added."""
    while type(node) is PassOn:
        node, nr = node.next_functions[nr]
    return node, nr


def next_sequence_number() -> int:
    """A sequence number no node made so far has (nodes made later get larger ones)."""
    return next(_sequence)


def walk(starts):
    """Every node reachable from ``starts`` once, depth first with each node's inputs in order
    (the order a printed tree reads); nodes of several starts are shared, not repeated."""
    seen = set()
    for start in starts:
        stack = [start]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            yield node
            stack.extend(n for n, _ in reversed(node.next_functions) if n is not None and n not in seen)


def retain_at(node, t) -> None:
    """Have ``node`` keep the gradient it receives for ``t`` as ``t.grad`` (``retain_grad``)."""
    if node._retain_grad_refs is None:
        node._retain_grad_refs = []
    node._retain_grad_refs.append((t._output_nr, weakref.ref(t)))


def graph_freed(fn, outside=()) -> bool:
    """A backward freed the saved values of some node behind ``fn`` (a backward through ``fn`` would
    reach it and fail), not looking past the nodes whose ids are in ``outside``."""
    seen = set()
    stack = [fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen or id(node) in outside:
            continue
        seen.add(node)
        if type(node) is not AccumulateGrad and node._released and node._freeable:
            return True
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def graph_is_live(fn) -> bool:
    """Some node behind ``fn`` still holds what its backward needs (no backward released it)."""
    return any(type(node) is not AccumulateGrad and not node._released for node in walk([fn]))
