"""The supported subset as a Markdown document, generated from the op table and the public
namespaces, so that ``docs/supported.md`` cannot go stale (a test regenerates and compares it).

``python -m staticgrad.supported > docs/supported.md`` rewrites the document."""

from __future__ import annotations

import inspect as _inspect
import types

import staticgrad
import staticgrad.autograd.graph
import staticgrad.nn.utils
import staticgrad.nn.utils.rnn
import staticgrad.optim.lr_scheduler
import staticgrad.utils.checkpoint
import staticgrad.utils.data
from staticgrad import nn, optim
from staticgrad._eager.out_arg import FAMILIES as OUT_FAMILIES
from staticgrad._eager.tensor import Tensor
from staticgrad.nn import functional
from staticgrad.ops import OPS

HEADER = """# What staticgrad supports

`import staticgrad as torch` runs PyTorch code that stays inside the names below. This page is
generated from the op table and the public namespaces (`python -m staticgrad.supported`);
a test checks it matches the code.

"""


def public_names(namespace, kind=None, within: str | tuple = "staticgrad") -> list:
    """Public attributes of a module or class (functions, classes; no submodules or constants),
    those defined in the package ``within`` (or one of several; not helpers a module imported from
    elsewhere)."""
    homes = (within,) if isinstance(within, str) else within
    names = []
    for name in dir(namespace):
        if name.startswith("_"):
            continue
        value = getattr(namespace, name)
        if isinstance(value, types.ModuleType):
            continue
        home = getattr(value, "__module__", None) or ""
        if (callable(value) and not isinstance(value, type(namespace)) and home
                and not any(home == w or home.startswith(w + ".") for w in homes)):
            continue
        if kind == "class" and not _inspect.isclass(value):
            continue
        if kind == "callable" and not callable(value):
            continue
        names.append(name)
    return sorted(names)


# Modules whose functions a public namespace uses but does not offer.
_INTERNAL = ("staticgrad._eager.dispatch", "staticgrad.ops.loss")


def _namespaces() -> list:
    """(title, names) of each public namespace a training script reaches."""
    sections = [
        ("`torch.*` functions and types", public_names(staticgrad, "callable")),
        ("`Tensor` methods and properties", public_names(Tensor)),
        ("`torch.nn` modules", public_names(nn, "class")),
        ("`torch.nn.functional`", [n for n in public_names(functional, "callable")
                                   if not _inspect.isclass(getattr(functional, n))
                                   and getattr(functional, n).__module__ not in _INTERNAL]),
        ("`torch.optim`", public_names(optim, "class")),
    ]
    # (a namespace built from several modules names them all)
    for title, module, homes in (
            ("`torch.optim.lr_scheduler`", staticgrad.optim.lr_scheduler,
             ("staticgrad.optim.lr_scheduler", "staticgrad.optim.scheduler_base", "staticgrad.optim.cyclic_lr")),
            ("`torch.utils.data`", staticgrad.utils.data, None),
            ("`torch.utils.checkpoint`", staticgrad.utils.checkpoint, None),
            ("`torch.nn.utils`", staticgrad.nn.utils, None),
            ("`torch.nn.utils.rnn`", staticgrad.nn.utils.rnn, None),
            ("`torch.autograd.graph`", staticgrad.autograd.graph, ("staticgrad._eager.saved_hooks",))):
        sections.append((title, public_names(module, "callable", within=homes or module.__name__)))
    return sections


def _op_rows() -> list:
    rows = []
    for name in sorted(OPS):
        op = OPS[name]
        if op.kind == "fused" or name.startswith("_"):
            continue
        node = op.node_name if isinstance(op.node_name, str) else ("(depends on the call)" if op.node_name else "")
        saved = ", ".join(s.name for s in op.saves)
        fused = "yes" if op.scalar_expr is not None else ""
        rows.append(f"| `{name}` | {op.kind} | {node or '—'} | {fused} | {saved} |")
    return rows


def markdown() -> str:
    """The whole document."""
    parts = [HEADER]
    for title, names in _namespaces():
        parts.append(f"## {title} ({len(names)})\n\n" + ", ".join(f"`{n}`" for n in names) + "\n\n")
    parts.append(f"## The `out=` keyword ({len(OUT_FAMILIES)} `torch.*` functions)\n\nThe result is written into `out` "
                 "(cast to its dtype; resized, as PyTorch resizes it, if its shape differs); as in PyTorch, "
                 "refused when grad mode is on and an argument requires grad, and when `out` overlaps an input "
                 "where PyTorch refuses it or where PyTorch's result would depend on the order it writes in "
                 "(`staticgrad._eager.out_arg`): " + ", ".join(f"`{n}`" for n in sorted(OUT_FAMILIES)) + "\n\n")
    parts.append("## The op table\n\nEvery op the functions above reach: its kind, the autograd node it shows as "
                 "`grad_fn`, whether it can join a fused replay kernel (it has an exact scalar form) and what "
                 "its backward saves.\n\n")
    parts.append("| op | kind | node | fuses | saves |\n|---|---|---|---|---|\n")
    parts.append("\n".join(_op_rows()) + "\n")
    return "".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
