"""The record the compiler puts in place of a family of identical 0-dim op chains (passes/scalars.py):
an optimizer's step count and bias corrections, the same few ops once per parameter.

The op's ``program`` attribute (text, see ``program_text``) holds ``chain``, ``exports`` and
``members``. ``chain`` describes one member: steps ``(op, args, attrs, dtype)``, each arg ``("x", k)`` for the
member's k-th input or ``("t", j)`` for the j-th step's result, an attribute read at replay time as
``("slot", k)`` (the op's keyword ``s<k>``). ``members`` gives each member's inputs (positions among the
op's inputs). The output is one 1-dim array of the exports' dtype holding the steps ``exports`` names,
member after member; the compiler reads each as a 0-dim view (``select``). A member whose inputs hold
the same bits as an earlier member's takes that member's results without computing them again.

A step computes on NumPy scalars what its op computes on 0-dim arrays, exactly: the op's scalar
expression (the IEEE operations of the fused kernels) in the step's dtype, a cast as NumPy casts, and
``np.power`` as the ufunc it is (NumPy's SIMD power differs from libm's in the last bit).
"""

from __future__ import annotations

import ast
import re

import numpy as np

from staticgrad.ops.registry import OPS, OpDef, register

# The ops a chain may hold besides to_dtype and the powers: their scalar expressions use only
# + - * /, negation and sqrt, which NumPy scalars compute as the ufuncs and the kernels do.
EXPRESSION_OPS = frozenset(("add", "sub", "mul", "div", "add_scalar", "sub_scalar", "rsub_scalar", "mul_scalar",
                            "div_scalar", "neg", "reciprocal", "sqrt", "rsqrt", "clone"))
POWER_OPS = frozenset(("pow_scalar", "rpow_scalar"))
CHAIN_OPS = EXPRESSION_OPS | POWER_OPS | {"to_dtype"}


class _Name:
    """Prints as itself inside the generated chain function."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _number(value, slot_text: str) -> str:
    """An attribute as an argument of a NumPy call: a slot's value as read, a number as written."""
    if isinstance(value, tuple):
        return slot_text.format(value[1])
    return repr(value)


# A literal of the op's dtype as the scalar expressions print it (``lit``): made once, not per call.
_LITERAL = re.compile(r"\bT\((-?\d+\.\d*(?:e[-+]?\d+)?)\)")


def chain_source(chain: tuple, exports: tuple, n_inputs: int, n_slots: int) -> str:
    """Source of ``build(np)``, which returns ``chain(x0, .., s0, ..)``: one member's exported
    results as NumPy scalars, from its inputs as NumPy scalars and its replay-time scalars."""
    params = [f"x{k}" for k in range(n_inputs)] + [f"s{k}" for k in range(n_slots)]
    constants, lines = {}, []
    current = None
    for j, (name, args, attrs, dtype) in enumerate(chain):
        names = [f"{kind}{k}" for kind, k in args]
        at = dict(attrs)
        if name == "to_dtype":
            source = chain[args[0][1]][3] if args[0][0] == "t" else None
            # float64 -> float32 through a Python float: the same rounding, half the time
            expression = f"np.{dtype}(float({names[0]}))" if dtype == "float32" and source != "float32" \
                else f"np.{dtype}({names[0]})"
        elif name == "rpow_scalar":
            expression = f"np.power({_number(at.get('base', 1), 's{}')}, {names[0]})"
        elif name == "pow_scalar" and at.get("exponent") not in (2, 0.5):
            expression = f"np.power({names[0]}, {_number(at.get('exponent', 1), 's{}')})"
        else:
            if dtype != current:
                lines.append(f"        T = np.{dtype}")
                current = dtype
            # a slot converts as the kernels convert it: to the op's dtype, NumPy's weak-scalar rule
            rendered = {k: _Name(f"T(s{v[1]})") if isinstance(v, tuple) else v for k, v in at.items()}
            expression = _LITERAL.sub(lambda m, dtype=dtype: constants.setdefault(f"np.{dtype}({m.group(1)})",
                                                                                  f"c{len(constants)}"),
                                      OPS[name].scalar_expr(names, rendered))
        lines.append(f"        t{j} = {expression}")
    head = ["def build(np):", "    sqrt = np.sqrt"] + [f"    {c} = {value}" for value, c in constants.items()]
    head.append(f"    def chain({', '.join(params)}):")
    lines.append(f"        return ({''.join(f't{j}, ' for j in exports)})")
    return "\n".join(head + lines + ["    return chain", ""])


def program_text(chain: tuple, exports: tuple, members: tuple) -> str:
    """The op's one attribute: its chain, exports and members as text. A string stays one constant
    object of the replay's code (a number there becomes a variable of the code's template), so a
    call finds its compiled chain by a hash the string keeps."""
    return repr((chain, exports, members))


class _Chains:
    """A program text, ready to run: its chain function and members."""

    __slots__ = ("dtype", "fn", "inputs", "members", "n_exports", "slot_names")

    def __init__(self, program: str):
        chain, exports, members = ast.literal_eval(program)
        n_slots = len({value[1] for _, _, attrs, _ in chain for _, value in attrs if isinstance(value, tuple)})
        namespace = {}
        exec(compile(chain_source(chain, exports, len(members[0]), n_slots), "<scalar chain>", "exec"), namespace)
        self.fn = namespace["build"](np)
        self.members = members
        self.inputs = sorted({p for positions in members for p in positions})
        self.n_exports = len(exports)
        self.slot_names = tuple(f"s{k}" for k in range(n_slots))
        self.dtype = np.dtype(chain[exports[0]][3])


_COMPILED: dict = {}   # _Chains by program text
_COMPILED_KEPT = 256


def _chains(program: str) -> _Chains:
    if len(_COMPILED) >= _COMPILED_KEPT:
        _COMPILED.clear()
    chains = _COMPILED[program] = _Chains(program)
    return chains


def _forward(*arrays, out=None, program="", **slots):
    """Write member m's k-th export into ``out[m * n_exports + k]``."""
    chains = _COMPILED.get(program) or _chains(program)
    members, n = chains.members, chains.n_exports
    if out is None:
        out = np.empty(len(members) * n, chains.dtype)
    scalars = [slots[name] for name in chains.slot_names]
    first = arrays[0].tobytes()
    same = True
    for p in chains.inputs:
        if arrays[p].tobytes() != first:
            same = False
            break
    if same:
        # the usual case: every input holds the same bits (every parameter at the same step), so
        # every member has the first one's results
        made = chains.fn(*[arrays[p][()] for p in members[0]], *scalars)
        if len(members) > 2:
            out.reshape(len(members), n)[...] = made   # one store (0.6 us), not one per element (35 ns)
            return out
        made *= len(members)
    else:
        made_for = {}
        made = []
        for positions in members:
            key = b"".join([arrays[p].tobytes() for p in positions])
            results = made_for.get(key)
            if results is None:
                results = made_for[key] = chains.fn(*[arrays[p][()] for p in positions], *scalars)
            made += results
    for position, value in enumerate(made):
        out[position] = value
    return out


register(OpDef("scalar_chains", _forward, "other", dtype_rule="same"))
