"""The op table's records and the table itself: ``OpDef``, ``Save``, ``register`` and ``OPS``,
with the small helpers op modules share. Each op module imports this; ``ops/__init__`` imports
every op module, so importing ``staticgrad.ops`` fills the table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

# What an op is, for the passes that care: fusion groups "elementwise", the planner aliases
# "view" outputs to their input, constant folding evaluates "factory", never "random".
KINDS = ("elementwise", "reduction", "view", "matmul", "factory", "random", "other", "fused")

# How an op's output dtype follows its inputs (see dispatch in staticgrad.tensor):
#   promote: PyTorch type promotion over tensor inputs and scalar attrs
#   float:   promote, then integer results become the default float
#   same:    the first input's dtype
#   bool:    comparisons
#   attr:    the "dtype" attribute (factories)
DTYPE_RULES = ("promote", "float", "same", "bool", "attr", "index")


# Where a saved slot's value comes from (Save.kind).
INPUT, RESULT, ATTR, SHAPE, STRIDES = "input", "result", "attr", "shape", "strides"


@dataclass(frozen=True, slots=True)
class Save:
    """One slot a node keeps for its backward, shown as ``grad_fn._saved_<name>``.

    ``source`` is an input index, ``"result"`` (the output), or ``"attr:<key>"``. The slot is
    filled only when one of the inputs in ``when`` needs a gradient (empty: whenever the node
    exists). Tensor slots are freed by backward; ``freed=False`` marks plain Python values
    (PyTorch keeps Scalars such as ``alpha`` but frees the tensor a Python number is wrapped in).
    """

    name: str
    source: int | str
    when: tuple[int, ...] = ()
    freed: bool = True
    kind: str = field(init=False)       # INPUT, RESULT, ATTR, SHAPE or STRIDES: ``source`` parsed once
    key: int | str = field(init=False)  # the input or result index, or the attribute's name

    def __post_init__(self):
        src = self.source
        if type(src) is int:
            kind, key = INPUT, src
        else:
            head, _, tail = src.partition(":")
            kinds = {"result": RESULT, "attr": ATTR, "shape": SHAPE, "strides": STRIDES}
            if head not in kinds or (head != "result" and not tail):
                raise ValueError(f"save {self.name!r}: unknown source {src!r}")
            kind = kinds[head]
            key = tail if kind is ATTR else int(tail or 0)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "key", key)

    @property
    def holds_tensor(self) -> bool:
        """The slot keeps a tensor (an input or a result), not a plain value."""
        return self.kind is INPUT or self.kind is RESULT


# grad_inputs of an op that writes a gradient into zeros it makes (PyTorch's ``self`` there, new
# zeros, is an edge to nothing), its input 0 being what it writes
ZEROS_SELF = (None, 0)


@dataclass(frozen=True, slots=True)
class OpDef:
    name: str
    forward: Callable
    kind: str
    node_name: str | Callable[[dict], str] | None = None
    backward: Callable | None = None
    saves: tuple[Save, ...] = ()
    dtype_rule: str = "same"
    scalar_expr: Callable[[list, dict], str] | None = None
    explain: Callable | None = None
    # The inputs that can receive a gradient, in order: the node's edges, one each (PyTorch gives an
    # index, mask or target input no edge). None in it: an input PyTorch's op has and this one does
    # not (the zeros a gradient is scattered into), an edge to nothing. grad_inputs None: every input.
    grad_inputs: tuple[int | None, ...] | None = None
    # Inputs PyTorch declares not differentiable though they may be float tensors (a loss's class
    # weights, soft_margin_loss's target): (input index, PyTorch's function name, argument name).
    # One that requires grad is refused as PyTorch refuses it, rather than left without a gradient.
    nondifferentiable: tuple[tuple[int, str, str], ...] = ()
    # How generated replay code calls this op directly: emit(inputs, out, attrs, shapes) -> Python
    # statements, or None to call ``forward``. Inputs and out are variable names (a view op assigns
    # out); attrs hold Python values, those read at replay time printing as their variable names;
    # shapes are the input shapes then the output shape. A multi-statement emitter may write out
    # before it has read every input, so a planner must not give it an out that aliases an input.
    emit: Callable[[list, str, dict, list], str | None] | None = None
    # PyTorch wraps a Python number operand in a tensor that shows up as a (None, 0) edge of the
    # node (``(x * 2).grad_fn.next_functions``); ops that take it as an attribute say so here.
    wrapped_scalar: bool = False
    # The backward takes its saved values as arrays (after the version check), not as tensors: a
    # compiled function's recorded backward program, which never builds a graph.
    backward_reads_arrays: bool = False
    # Edges whose gradient the backward sums from several uses: the engine hands it what the
    # edge's buffer already holds (``running_sums={edge: tensor}``), to be added first, as eager would.
    running_sum_edges: tuple = ()
    # Working memory: scratch(input shapes, input dtypes, attrs) -> bytes the forward needs for its
    # temporaries (0: none). A planner gives it that many bytes of the arena, live during the step
    # only, as ``scratch=`` (a uint8 array); called without it, the forward allocates them itself.
    scratch: Callable[[list, list, dict], int] | None = None
    # A multi-output forward that takes ``out=`` (a tuple, one array per output) and writes every
    # output into it: its outputs get planned buffers, where other multi-output ops return new arrays.
    fills_outputs: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"op {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.dtype_rule not in DTYPE_RULES:
            raise ValueError(f"op {self.name!r}: dtype_rule {self.dtype_rule!r} is not one of {DTYPE_RULES}")
        if self.backward is not None and self.node_name is None:
            raise ValueError(f"op {self.name!r} has a backward formula but no node name")

    def grad_node_name(self, attrs: dict) -> str:
        name = self.node_name
        return name(attrs) if callable(name) else name

    @property
    def is_view(self) -> bool:
        return self.kind == "view"


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def amend(name: str, **fields) -> None:
    """Set more fields of a registered op (emitters and flags kept next to the op's family)."""
    OPS[name] = replace(OPS[name], **fields)


def with_emit(name: str, emit: Callable) -> None:
    """Attach a direct-NumPy emitter to a registered op."""
    amend(name, emit=emit)


def lit(value) -> str:
    """A scalar attribute inside a fused kernel's expression: a number becomes a literal of the
    kernel's dtype ``T`` (NumPy's weak-scalar rule); a value read at replay time prints as its name."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"T({float(value)!r})"
    return repr(value)


def as_array(value):
    """``value`` as an ndarray: a ufunc given 0-dim arrays returns a NumPy scalar, which a later
    ``out=`` cannot take (and which is immutable), so forwards wrap scratch results with this."""
    return value if type(value) is np.ndarray else np.asarray(value)


_LOOPS = None


def jit_loops():
    """The module ``staticgrad.ops.loops``, the Numba loops of the ops NumPy has no fast loop for,
    imported on first use: loading Numba takes about half a second, which ``import staticgrad``
    should not pay."""
    global _LOOPS
    if _LOOPS is None:
        from staticgrad.ops import loops  # here, not at the top: it loads Numba

        _LOOPS = loops
    return _LOOPS


def shape_str(shape) -> str:
    return "x".join(str(d) for d in shape)


# The op families fill OPS on import.
