"""THE op table: one record per op, read by eager dispatch, autograd, the tracer and codegen.

Each ``OpDef`` holds an op's NumPy forward (``forward(*arrays, out=None, **attrs)``), its
dtype rule, what its backward needs saved (only what the formula uses), the backward formula
written with staticgrad ops (``backward(F, grad, saved, attrs, needs)``, where ``F`` calls any
op in this table on tensors, so the same formula serves eager backward, ``create_graph`` and
tracing), and for elementwise ops a scalar expression the fusion code generator can inline.

A leaf: imports only NumPy (and its own submodules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# What an op is, for the passes that care: fusion groups "elementwise", the planner aliases
# "view" outputs to their input, constant folding evaluates "factory", never "random".
KINDS = ("elementwise", "reduction", "view", "matmul", "factory", "random", "other")

# How an op's output dtype follows its inputs (see dispatch in staticgrad.tensor):
#   promote: PyTorch type promotion over tensor inputs and scalar attrs
#   float:   promote, then integer results become the default float
#   same:    the first input's dtype
#   bool:    comparisons
#   attr:    the "dtype" attribute (factories)
DTYPE_RULES = ("promote", "float", "same", "bool", "attr", "index")


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
    grad_inputs: tuple[int, ...] | None = None  # inputs that can receive a gradient; None: all

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


def shape_str(shape) -> str:
    return "x".join(str(d) for d in shape)


# The op families fill OPS on import.
from staticgrad.ops import elementwise, reductions, shape, linalg, loss, factory  # noqa: E402,F401
