"""Differential tests over random small programs: replay == eager bit for bit, eager ~= PyTorch.

Hypothesis writes a training step as Python source over a library module ``lib``: a few
parameters and inputs, a chain of ops (elementwise with broadcasting, matmul/linear, reductions,
views, softmax, cat/stack), a scalar loss, ``backward()`` and optionally an optimizer step. The
same source runs three ways from identical starting weights, over 4 calls with new inputs:

- eagerly in staticgrad;
- under ``@staticgrad.compile`` (the first calls trace, the later ones replay a fused program);
- eagerly in PyTorch.

After every call, replay must equal eager exactly (the returned loss, every ``.grad``, every
parameter, every optimizer state tensor; dtypes and shapes too), and eager must equal PyTorch
within a floating-point tolerance. A program's ``repr`` is its source, so a falsifying example
prints as code.

Any failure fails the test (hypothesis shrinks it and prints the program). The last section pins
the minimal repro of every failure this suite has found.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

import staticgrad

torch = pytest.importorskip("torch")

CALLS = 4       # call 0 traces (no .grad yet), call 1 traces again (.grad present) or replays, then replays
MAX_NDIM = 4


# ---- program descriptions -------------------------------------------------------------------------

@dataclass(frozen=True)
class Leaf:
    """A tensor from outside the step: a parameter (captured, requires grad), an input (a new
    array every call) or integer class labels (an input too)."""
    name: str
    shape: tuple
    kind: str                  # "param" | "input" | "labels"
    classes: int = 0           # labels: values are drawn from range(classes)


@dataclass(frozen=True)
class Value:
    """A tensor the program reads or computes, with a bound on its magnitude (keeps exp finite)."""
    name: str
    shape: tuple
    bound: float
    params: frozenset = frozenset()     # the parameters it depends on


@dataclass
class Program:
    """A training step as data: its leaves, its lines of source, its loss and optimizer."""
    dtype: str
    seed: int = 0                      # of the initial parameters and of every call's inputs
    leaves: list = field(default_factory=list)
    lines: list = field(default_factory=list)
    loss: str = ""
    optimizer: str | None = None       # source over ``params``, e.g. "lib.optim.SGD(params, lr=0.1)"
    zero_dim: bool = False             # some leaf or value is 0-d

    @property
    def params(self) -> list:
        return [leaf for leaf in self.leaves if leaf.kind == "param"]

    @property
    def inputs(self) -> list:
        return [leaf for leaf in self.leaves if leaf.kind != "param"]

    def source(self) -> str:
        """The step as Python source over ``lib`` (staticgrad or torch), ``F`` (its nn.functional),
        the parameters by name and ``opt``."""
        body = ["opt.zero_grad()"] if self.optimizer else []
        body += self.lines + [f"loss = {self.loss}", "loss.backward()"]
        body += ["opt.step()"] if self.optimizer else []
        args = ", ".join(leaf.name for leaf in self.inputs)
        return f"def step({args}):\n" + textwrap.indent("\n".join(body + ["return loss"]), "    ") + "\n"

    def __repr__(self) -> str:
        leaves = ", ".join(f"{leaf.name}{list(leaf.shape)} {leaf.kind}" for leaf in self.leaves)
        return (f"Program(dtype={self.dtype}, seed={self.seed}, optimizer={self.optimizer!r})\n"
                f"# {leaves}\n{self.source()}")

    def initial_params(self) -> dict:
        rng = np.random.default_rng(self.seed)
        return {p.name: np.asarray(rng.uniform(-1, 1, p.shape), self.dtype) for p in self.params}

    def call_inputs(self, call: int) -> list:
        """The arrays of one call, in argument order; ndarrays even when 0-d (never NumPy scalars)."""
        rng = np.random.default_rng([self.seed, call + 1])
        arrays = []
        for leaf in self.inputs:
            if leaf.kind == "labels":
                arrays.append(np.asarray(rng.integers(0, leaf.classes, leaf.shape), np.int64))
            else:
                arrays.append(np.asarray(np.clip(rng.standard_normal(leaf.shape), -3, 3), self.dtype))
        return arrays


def hand_written(dtype: str, leaves: dict, lines: list, loss: str, optimizer: str | None = None,
                 seed: int = 0) -> Program:
    """A Program written out by hand: ``leaves`` maps names to (shape, kind)."""
    program = Program(dtype=dtype, seed=seed, lines=list(lines), loss=loss, optimizer=optimizer)
    program.leaves = [Leaf(name, tuple(shape), kind, 3 if kind == "labels" else 0)
                      for name, (shape, kind) in leaves.items()]
    return program


# ---- the generator -------------------------------------------------------------------------------

def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _broadcast(*shapes) -> tuple:
    return tuple(np.broadcast_shapes(*shapes))


def _compatible(a, b) -> bool:
    try:
        _broadcast(a, b)
        return True
    except ValueError:
        return False


class Builder:
    """Grows one Program a line at a time, tracking each value's shape, magnitude bound and the
    parameters it depends on.

    Two features are opt-in, each with searches of its own that weight it: 0-d values
    (``zero_dim``) and a single element broadcast over more (``size_one_broadcast``)."""

    def __init__(self, draw, dtype: str, seed: int, zero_dim: bool, size_one_broadcast: bool,
                 sizes: tuple, max_numel: int):
        self.draw = draw
        self.zero_dim = zero_dim
        self.size_one_broadcast = size_one_broadcast
        self.sizes = sizes              # dimension sizes to draw from
        self.max_numel = max_numel      # ops that would make a bigger value are skipped
        self.program = Program(dtype=dtype, seed=seed)
        self.pool: list[Value] = []
        self.counts = {"param": 0, "input": 0, "labels": 0, "value": 0}

    def leaf(self, kind: str, shape: tuple, classes: int = 0) -> Value:
        name = f"{dict(param='p', input='x', labels='y')[kind]}{self.counts[kind]}"
        self.counts[kind] += 1
        self.program.leaves.append(Leaf(name, tuple(shape), kind, classes))
        self.program.zero_dim |= tuple(shape) == ()
        value = Value(name, tuple(shape), 1.0 if kind == "param" else 3.0,
                      frozenset([name]) if kind == "param" else frozenset())
        if kind != "labels":
            self.pool.append(value)
        return value

    def emit(self, expression: str, shape: tuple, bound: float, broadcast: tuple = (), reads: str = ""):
        """Append ``vN = expression`` and return the new value; or return None and append nothing
        when the value would be 0-d, or one of the ``broadcast`` operands a single element spread
        over more, and the builder leaves that feature out. Gradients flow to the names in
        ``reads`` (default: the expression)."""
        shape = tuple(shape)
        spreads = _numel(shape) > 1 and any(_numel(v.shape) == 1 for v in broadcast)
        if (shape == () and not self.zero_dim) or (spreads and not self.size_one_broadcast):
            return None
        self.program.zero_dim |= shape == ()
        name = f"v{self.counts['value']}"
        self.counts["value"] += 1
        self.program.lines.append(f"{name} = {expression}")
        names = set(re.findall(r"\b[pv]\d+\b", reads or expression))
        params = frozenset().union(*(v.params for v in self.pool if v.name in names))
        value = Value(name, shape, float(bound), params)
        self.pool.append(value)
        return value

    def tamed(self, value: Value, limit: float = 8.0) -> Value:
        """``value`` itself when its bound is at most ``limit``, else its tanh."""
        if value.bound <= limit:
            return value
        return self.emit(f"{value.name}.tanh()", value.shape, 1.0)

    # -- shapes --

    def shape(self) -> tuple:
        ndim = self.draw(st.integers(0 if self.zero_dim else 1, 3))
        dims = self.draw(st.lists(st.sampled_from(self.sizes), min_size=ndim, max_size=ndim))
        while _numel(dims) > self.max_numel:
            dims[dims.index(max(dims))] = 1
        return tuple(dims)

    def partner_shape(self, target: tuple, grow: bool) -> tuple:
        """A shape that broadcasts with ``target``: some dims set to 1, leading dims dropped, and
        (when ``grow``) size-1 dims of ``target`` widened or a leading dim added."""
        dims = [self.draw(st.sampled_from((1,) + self.sizes)) if size == 1 and grow
                else self.draw(st.sampled_from([size, size, 1])) for size in target]
        drop = self.draw(st.integers(0, len(dims) if self.zero_dim else max(0, len(dims) - 1)))
        dims = dims[drop:]
        if grow and drop == 0 and len(dims) < MAX_NDIM and self.draw(st.booleans()):
            dims.insert(0, self.draw(st.sampled_from(self.sizes)))
        return tuple(dims)

    def spreads_one(self, a: tuple, b: tuple) -> bool:
        """Whether broadcasting a with b would spread a single element over more, when that is left out."""
        return not self.size_one_broadcast and _numel(_broadcast(a, b)) > 1 and 1 in (_numel(a), _numel(b))

    def operand(self, shape: tuple, grow: bool = True) -> Value:
        """A value broadcasting with ``shape`` (to ``shape`` unless ``grow``): one from the pool, or
        a new parameter or input."""
        def fits(v):
            if not _compatible(v.shape, shape) or (v.shape == () and not self.zero_dim):
                return False
            out = _broadcast(v.shape, shape)
            return ((grow or out == tuple(shape)) and len(out) <= MAX_NDIM and _numel(out) <= self.max_numel
                    and not self.spreads_one(v.shape, shape))
        pool = [v for v in self.pool if fits(v)]
        choice = self.draw(st.sampled_from(["param", "input"] + (["pool", "pool"] if pool else []) +
                                           (["single"] if self.size_one_broadcast else [])))
        if choice == "pool":
            return self.draw(st.sampled_from(pool))
        if choice == "single":   # a single element: (), (1,), (1, 1), ...
            ndim = self.draw(st.integers(0 if self.zero_dim else 1, max(1, len(shape))))
            return self.leaf(self.draw(st.sampled_from(["param", "input"])), (1,) * ndim)
        partner = self.partner_shape(shape, grow and (self.size_one_broadcast or _numel(shape) > 1))
        if self.spreads_one(partner, shape) or _numel(_broadcast(partner, shape)) > self.max_numel:
            partner = shape
        return self.leaf(choice, partner)

    def matrix(self, rows: int, cols: int) -> Value:
        return self.leaf(self.draw(st.sampled_from(["param", "param", "input"])), (rows, cols))

    # -- op families: each takes the value to work on, returns the new value or None if it does not apply --

    def unary(self, a: Value):
        kind = self.draw(st.sampled_from(["neg", "tanh", "sigmoid", "relu", "exp", "log", "pow", "clamp",
                                          "scalar", "square"]))
        n = a.name
        if kind == "neg":
            return self.emit(self.draw(st.sampled_from([f"-{n}", f"lib.neg({n})", f"{n}.neg()"])), a.shape, a.bound)
        if kind in ("tanh", "sigmoid"):
            return self.emit(self.draw(st.sampled_from([f"lib.{kind}({n})", f"{n}.{kind}()"])), a.shape, 1.0)
        if kind == "relu":
            return self.emit(self.draw(st.sampled_from([f"lib.relu({n})", f"{n}.relu()", f"F.relu({n})"])),
                             a.shape, a.bound)
        if kind == "exp":
            a = self.tamed(a)
            return self.emit(f"lib.exp({a.name})", a.shape, math.exp(a.bound))
        if kind == "log":
            return self.emit(f"lib.log({n}.abs() + 0.5)", a.shape, max(0.7, math.log(a.bound + 0.5)))
        if kind == "clamp":
            form = self.draw(st.sampled_from([f"{n}.clamp(-0.5, 0.75)", f"lib.clamp({n}, min=-0.25)",
                                              f"lib.clamp({n}, max=0.5)"]))
            return self.emit(form, a.shape, max(a.bound, 0.75))
        if kind == "scalar":
            form, scale = self.draw(st.sampled_from([("{} * 1.5", 1.5), ("2.0 - {}", 1.0), ("{} / 4", 0.25),
                                                     ("1 + {}", 1.0), ("{}.mul(-0.5)", 0.5)]))
            return self.emit(form.format(n), a.shape, a.bound * scale + 2)
        a = self.tamed(a, 10.0)
        n = a.name
        if kind == "square":
            return self.emit(f"lib.square({n})", a.shape, a.bound ** 2)
        exponent = self.draw(st.sampled_from([2, 3, 0.5, -1.0, 1.5]))
        if exponent in (2, 3):
            form = self.draw(st.sampled_from([f"{n} ** {exponent}", f"lib.pow({n}, {exponent})"]))
            return self.emit(form, a.shape, a.bound ** exponent)
        return self.emit(f"({n}.abs() + 0.5) ** {exponent}", a.shape, 2.0 * (a.bound + 0.5) ** 1.5 + 2)

    BINARY: ClassVar[dict] = {  # kind -> (forms over x and y, the result's bound from the operands' bounds)
        "add": (["{x} + {y}", "lib.add({x}, {y})"], lambda p, q: p + q),
        "add_alpha": (["lib.add({x}, {y}, alpha=0.5)"], lambda p, q: p + q),
        "sub": (["{x} - {y}", "lib.sub({x}, {y})", "{x}.sub({y})"], lambda p, q: p + q),
        "mul": (["{x} * {y}", "lib.mul({x}, {y})"], lambda p, q: p * q),
        "div": (["{x} / ({y}.abs() + 0.5)", "lib.div({x}, {y}.abs() + 0.5)"], lambda p, q: 2 * p),
        "maximum": (["lib.maximum({x}, {y})"], max),
        "where": (["lib.where({y} > 0, {x}, {y} * 0.5)"], max),
        "pow": (["lib.pow({x}.abs() + 0.5, {y})", "({x}.abs() + 0.5) ** {y}"], lambda p, q: (p + 0.5) ** q + 2),
    }

    def binary(self, a: Value):
        kind = self.draw(st.sampled_from(list(self.BINARY) + ["masked_fill"]))
        if kind == "masked_fill":   # the mask broadcasts to a's shape; no gradient flows through it
            mask = self.operand(a.shape, grow=False)
            return self.emit(f"{a.name}.masked_fill({mask.name} > 0, -1.5)", a.shape, max(a.bound, 1.5),
                             reads=a.name)
        forms, bound = self.BINARY[kind]
        b = self.operand(a.shape)
        if kind == "pow":
            a, b = self.tamed(a, 10.0), self.tamed(b, 1.0)
        form = self.draw(st.sampled_from(forms))
        return self.emit(form.format(x=a.name, y=b.name), _broadcast(a.shape, b.shape), bound(a.bound, b.bound),
                         broadcast=(a, b))

    def matmul(self, a: Value):
        if not a.shape:
            return None
        kind = self.draw(st.sampled_from(["linear", "mm", "matmul", "addmm"]))
        a = self.tamed(a, 10.0)
        n, k = a.name, a.shape[-1]
        out = self.draw(st.sampled_from(self.sizes))
        bound = k * a.bound * 3 + 1
        return self._matmul(kind, a, n, k, out, bound)

    def _matmul(self, kind, a, n, k, out, bound):
        if kind == "linear":
            if _numel(a.shape[:-1] + (out,)) > self.max_numel:
                return None
            weight = self.leaf("param", (out, k))
            if self.draw(st.booleans()):
                bias = self.leaf("param", (out,))
                return self.emit(f"F.linear({n}, {weight.name}, {bias.name})", a.shape[:-1] + (out,), bound + 1,
                                 broadcast=(bias,))
            return self.emit(f"F.linear({n}, {weight.name})", a.shape[:-1] + (out,), bound)
        if kind in ("mm", "addmm") and len(a.shape) != 2:
            kind = "matmul"
        if kind == "mm":
            if self.draw(st.booleans()):
                w = self.matrix(k, out)
                return self.emit(f"lib.mm({n}, {w.name})", (a.shape[0], out), bound)
            w = self.matrix(out, a.shape[0])
            return self.emit(f"lib.mm({w.name}, {n})", (out, k), a.shape[0] * a.bound * 3 + 1)
        if kind == "addmm":
            w = self.matrix(k, out)
            shape = (a.shape[0], out)
            bias = self.leaf("param", self.draw(st.sampled_from([(out,), (1, out), shape, (a.shape[0], 1)])))
            form = self.draw(st.sampled_from(["lib.addmm({}, {}, {})", "lib.addmm({}, {}, {}, beta=0.5, alpha=2)"]))
            return self.emit(form.format(bias.name, n, w.name), shape, 2 * bound + 1, broadcast=(bias,))
        right = self.draw(st.sampled_from(["matrix", "vector", "batched", "left"]))
        if right == "vector":
            w = self.leaf("param", (k,))
            return self.emit(f"{n} @ {w.name}", a.shape[:-1], bound)
        if right == "batched" and len(a.shape) <= 3:
            batch = self.draw(st.sampled_from([1, a.shape[0]] if len(a.shape) == 3 else [1, 2]))
            lead = _broadcast(a.shape[:-2], (batch,)) if len(a.shape) >= 2 else (batch,)
            shape = lead + ((a.shape[-2],) if len(a.shape) >= 2 else ()) + (out,)
            if _numel(shape) > self.max_numel:
                return None
            w = self.leaf("param", (batch, k, out))
            return self.emit(f"lib.matmul({n}, {w.name})", shape, bound)
        if right == "left":
            rows = a.shape[-2] if len(a.shape) >= 2 else k
            w = self.matrix(out, rows)
            shape = a.shape[:-2] + (out, k) if len(a.shape) >= 2 else (out,)
            return self.emit(f"{w.name} @ {n}", shape, rows * a.bound * 3 + 1)
        if _numel(a.shape[:-1] + (out,)) > self.max_numel:
            return None
        w = self.matrix(k, out)
        return self.emit(f"{n} @ {w.name}", a.shape[:-1] + (out,), bound)

    def reduction(self, a: Value):
        n, ndim = a.name, len(a.shape)
        kind = self.draw(st.sampled_from(["sum", "mean", "max", "amax", "logsumexp", "full"]))
        if kind == "full" or ndim == 0:  # 0-d values reduce fully only: a dim on 0-d is pinned apart (bug viii)
            form = self.draw(st.sampled_from([f"{n}.sum()", f"{n}.mean()", f"{n}.max()", f"lib.sum({n})"]))
            return self.emit(form, (), a.bound * (_numel(a.shape) if "sum" in form else 1))
        dim = self.draw(st.integers(0, ndim - 1))
        keepdim = self.draw(st.booleans())
        written = dim - ndim if self.draw(st.booleans()) else dim     # negative dims too
        reduced = (dim,)
        if kind in ("sum", "mean") and ndim >= 2 and self.draw(st.booleans()):
            reduced = tuple(sorted((dim, self.draw(st.sampled_from([d for d in range(ndim) if d != dim])))))
            written = reduced
        shape = tuple(1 if i in reduced else s for i, s in enumerate(a.shape)) if keepdim else \
            tuple(s for i, s in enumerate(a.shape) if i not in reduced)
        size = _numel([a.shape[i] for i in reduced])
        if kind in ("sum", "mean"):
            return self.emit(f"{n}.{kind}(dim={written}, keepdim={keepdim})", shape,
                             a.bound * (size if kind == "sum" else 1))
        if kind == "max":
            field_ = self.draw(st.sampled_from([".values", "[0]"]))
            return self.emit(f"{n}.max(dim={written}, keepdim={keepdim}){field_}", shape, a.bound)
        if kind == "amax":
            return self.emit(f"lib.amax({n}, dim={written}, keepdim={keepdim})", shape, a.bound)
        return self.emit(f"lib.logsumexp({n}, dim={written}, keepdim={keepdim})", shape,
                         a.bound + math.log(size) + 1)

    def softmax(self, a: Value):
        ndim = max(len(a.shape), 1)      # a 0-d value takes dim 0 or -1
        dim = self.draw(st.integers(-ndim, ndim - 1))
        a = self.tamed(a, 30.0)
        if self.draw(st.booleans()):
            form = self.draw(st.sampled_from(["lib.softmax({}, dim={})", "{}.softmax({})", "F.softmax({}, dim={})"]))
            return self.emit(form.format(a.name, dim), a.shape, 1.0)
        form = self.draw(st.sampled_from(["F.log_softmax({}, dim={})", "{}.log_softmax({})"]))
        return self.emit(form.format(a.name, dim), a.shape, 2 * a.bound + 3)

    def view(self, a: Value):
        ndim, n = len(a.shape), a.name
        kind = self.draw(st.sampled_from(["transpose", "reshape", "permute", "unsqueeze", "squeeze", "expand",
                                          "slice", "narrow", "index", "view", "t"]))
        if kind == "transpose" and ndim >= 2:
            d0, d1 = self.draw(st.lists(st.integers(0, ndim - 1), min_size=2, max_size=2, unique=True))
            shape = list(a.shape)
            shape[d0], shape[d1] = shape[d1], shape[d0]
            form = self.draw(st.sampled_from([f"{n}.transpose({d0}, {d1})", f"lib.transpose({n}, {d0}, {d1})"]))
            return self.emit(form, shape, a.bound)
        if kind == "t" and ndim <= 2:
            return self.emit(self.draw(st.sampled_from([f"{n}.t()", f"lib.t({n})"])), a.shape[::-1], a.bound)
        if kind == "permute" and ndim >= 2:
            order = tuple(self.draw(st.permutations(range(ndim))))
            return self.emit(f"{n}.permute{order}", tuple(a.shape[i] for i in order), a.bound)
        if kind in ("reshape", "view"):
            shape = self.regroup(a.shape)
            text = "-1" if len(shape) == 1 and self.draw(st.booleans()) else str(list(shape))
            if kind == "view":
                return self.emit(f"{n}.contiguous().view({text})", shape, a.bound)
            return self.emit(f"{n}.reshape({text})", shape, a.bound)
        if kind == "unsqueeze" and ndim < MAX_NDIM:
            dim = self.draw(st.integers(0, ndim))
            return self.emit(f"{n}.unsqueeze({dim})", a.shape[:dim] + (1,) + a.shape[dim:], a.bound)
        if kind == "squeeze" and 1 in a.shape:
            if self.draw(st.booleans()):
                return self.emit(f"{n}.squeeze()", tuple(s for s in a.shape if s != 1), a.bound)
            dim = self.draw(st.sampled_from([i for i, s in enumerate(a.shape) if s == 1]))
            return self.emit(f"{n}.squeeze({dim})", a.shape[:dim] + a.shape[dim + 1:], a.bound)
        if kind == "expand" and (1 in a.shape or ndim < 3):
            sizes = [self.draw(st.sampled_from([m for m in self.sizes if m > 1])) if s == 1 else s for s in a.shape]
            lead = [2] if ndim < 3 and self.draw(st.booleans()) else []
            if not sizes + lead or _numel(sizes + lead) > self.max_numel:
                return None
            written = [str(s) if s != old or self.draw(st.booleans()) else "-1" for s, old in zip(sizes, a.shape)]
            return self.emit(f"{n}.expand({', '.join(map(str, lead + written))})", tuple(lead + sizes), a.bound,
                             broadcast=(a,))
        wide = [i for i, s in enumerate(a.shape) if s >= 2]
        if kind == "slice" and wide:
            dim = self.draw(st.sampled_from(wide))
            start = self.draw(st.integers(0, a.shape[dim] - 1))
            stop = self.draw(st.integers(start + 1, a.shape[dim]))
            step = self.draw(st.sampled_from([1, 1, 2]))
            index = ", ".join([":"] * dim + [f"{start}:{stop}" + (f":{step}" if step > 1 else "")])
            length = len(range(start, stop, step))
            return self.emit(f"{n}[{index}]", a.shape[:dim] + (length,) + a.shape[dim + 1:], a.bound)
        if kind == "narrow" and wide:
            dim = self.draw(st.sampled_from(wide))
            start = self.draw(st.integers(0, a.shape[dim] - 1))
            length = self.draw(st.integers(1, a.shape[dim] - start))
            form = self.draw(st.sampled_from([f"{n}.narrow({dim}, {start}, {length})",
                                              f"lib.narrow({n}, {dim}, {start}, {length})"]))
            return self.emit(form, a.shape[:dim] + (length,) + a.shape[dim + 1:], a.bound)
        if kind == "index" and ndim >= 1:
            i = self.draw(st.integers(-a.shape[0], a.shape[0] - 1))
            return self.emit(f"{n}[{i}]", a.shape[1:], a.bound)
        return None

    def regroup(self, shape: tuple) -> tuple:
        """Another shape with as many elements: the prime factors regrouped, maybe a 1 added."""
        factors, rest = [], _numel(shape)
        for p in (2, 3, 5, 7, 11, 13, 17):
            while rest % p == 0:
                factors.append(p)
                rest //= p
        factors = list(self.draw(st.permutations(factors))) + ([rest] if rest > 1 else [])
        dims = []
        while factors:
            take = self.draw(st.integers(1, len(factors)))
            dims.append(_numel(factors[:take]))
            factors = factors[take:]
        dims = dims[:MAX_NDIM - 2] + ([_numel(dims[MAX_NDIM - 2:])] if len(dims) > MAX_NDIM - 2 else [])
        if self.draw(st.booleans()):
            dims.insert(self.draw(st.integers(0, len(dims))), 1)
        return tuple(dims)

    def join(self, a: Value):
        ndim = len(a.shape)
        if ndim >= 1 and self.draw(st.booleans()):   # cat along an existing dim
            dim = self.draw(st.integers(0, ndim - 1))
            pool = [v for v in self.pool if len(v.shape) == ndim and all(
                s == t for i, (s, t) in enumerate(zip(v.shape, a.shape)) if i != dim)]
            if not pool or self.draw(st.booleans()):
                shape = a.shape[:dim] + (self.draw(st.integers(1, 2)),) + a.shape[dim + 1:]
                b = self.leaf(self.draw(st.sampled_from(["param", "input"])), shape)
            else:
                b = self.draw(st.sampled_from(pool))
            parts = self.draw(st.sampled_from([[a, b], [b, a], [a, b, a]]))
            shape = a.shape[:dim] + (sum(p.shape[dim] for p in parts),) + a.shape[dim + 1:]
            if _numel(shape) > self.max_numel:
                return None
            form = self.draw(st.sampled_from(["lib.cat([{}], dim={})", "lib.cat(({}), {})"]))
            return self.emit(form.format(", ".join(p.name for p in parts), dim), shape, max(a.bound, b.bound))
        if ndim >= MAX_NDIM or _numel(a.shape) * 2 > self.max_numel:
            return None
        pool = [v for v in self.pool if v.shape == a.shape and v is not a]
        b = self.draw(st.sampled_from(pool)) if pool and self.draw(st.booleans()) else \
            self.leaf(self.draw(st.sampled_from(["param", "input"])), a.shape)
        dim = self.draw(st.integers(0, ndim))
        return self.emit(f"lib.stack([{a.name}, {b.name}], dim={dim})", a.shape[:dim] + (2,) + a.shape[dim:],
                         max(a.bound, b.bound))

    # -- the loss --

    def finish_loss(self, a: Value) -> None:
        kind = self.draw(st.sampled_from(["weighted", "sum", "mean", "mse", "cross_entropy"]))
        if kind == "cross_entropy" and a.shape:
            classes, ndim = a.shape[-1], len(a.shape)
            if ndim == 2 or (ndim == 1 and self.zero_dim):    # (N, C) with (N,) labels, (C,) with a 0-d label
                labels, logits = self.leaf("labels", a.shape[:-1], classes), a.name
            else:
                labels = self.leaf("labels", (_numel(a.shape[:-1]),), classes)
                logits = f"{a.name}.reshape(-1, {classes})"
            self.program.loss = f"F.cross_entropy({logits}, {labels.name})"
        elif kind == "mse":
            self.program.loss = f"F.mse_loss({a.name}, {self.leaf('input', a.shape).name})"
        elif kind in ("sum", "mean"):
            self.program.loss = f"{a.name}.{kind}()"
        else:
            self.program.loss = f"({a.name} * {self.leaf('input', a.shape).name}).sum()"


OP_FAMILIES = ("unary", "binary", "matmul", "reduction", "view", "softmax", "join")
BROADCASTING = ("binary", "binary", "binary", "unary", "reduction", "view")  # where single elements spread
OPTIMIZERS = (
    None,    # no step and no zero_grad: gradients accumulate across calls
    "lib.optim.SGD(params, lr=0.1)",
    "lib.optim.SGD(params, lr=0.05, momentum=0.9)",
    "lib.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)",
    "lib.optim.Adam(params, lr=0.01)",
    "lib.optim.Adam(params, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01, amsgrad=True)",
)
SMALL = dict(sizes=(1, 2, 3), max_numel=48)
LAYER_SIZED = dict(sizes=(1, 3, 8, 17), max_numel=512)   # past BLAS and pairwise-summation block sizes


@st.composite
def programs(draw, max_ops=5, zero_dim=False, size_one_broadcast=False, sizes=SMALL["sizes"],
             max_numel=SMALL["max_numel"], families=OP_FAMILIES, dtypes=("float32", "float64")):
    """A random training step: one or two leaves, 1..max_ops ops (each on the latest value, now and
    then on another from the pool), a loss that reaches a parameter (sometimes with a second head,
    so gradients meet from two paths), and an optimizer or none."""
    builder = Builder(draw, draw(st.sampled_from(dtypes)), draw(st.integers(0, 2 ** 16)),
                      zero_dim, size_one_broadcast, sizes, max_numel)
    for _ in range(draw(st.integers(1, 2))):
        builder.leaf(draw(st.sampled_from(["param", "input"])), builder.shape())
    current = builder.pool[-1]
    for _ in range(draw(st.integers(1, max_ops))):
        if draw(st.integers(0, 3)) == 0:
            current = draw(st.sampled_from(builder.pool))
        current = getattr(builder, draw(st.sampled_from(families)))(current) or current
    if not current.params:
        p = builder.leaf("param", current.shape)
        current = builder.emit(f"{current.name} * {p.name}", current.shape, current.bound)
    builder.finish_loss(current)
    heads = [v for v in builder.pool if v.params and v.name.startswith("v") and v is not current]
    if heads and draw(st.booleans()):
        builder.program.loss += f" + {draw(st.sampled_from(heads)).name}.sum() * 0.25"
    builder.program.optimizer = draw(st.sampled_from(OPTIMIZERS))
    return builder.program


# ---- running a program ----------------------------------------------------------------------------

def build(lib, program: Program):
    """(step, params, opt): ``program``'s step in ``lib`` (staticgrad or torch), over fresh copies of
    its initial parameters."""
    params = [lib.tensor(array.copy(), requires_grad=True) for array in program.initial_params().values()]
    namespace = {"lib": lib, "F": lib.nn.functional, "params": params}
    namespace.update({p.name: t for p, t in zip(program.params, params)})
    opt = eval(program.optimizer, namespace) if program.optimizer else None
    namespace["opt"] = opt
    exec(compile(program.source(), f"<program seed={program.seed}>", "exec"), namespace)
    return namespace["step"], params, opt


def _array(t):
    return None if t is None else t.detach().numpy().copy()


def snapshot(program: Program, loss, params, opt) -> dict:
    """Every observable array after a call: the loss, each .grad and parameter, each optimizer state."""
    out = {"loss": _array(loss)}
    for leaf, p in zip(program.params, params):
        out[f"{leaf.name}.grad"] = _array(p.grad)
        out[leaf.name] = _array(p)
        state = opt.state[p] if opt is not None and p in opt.state else {}
        for key, value in sorted(state.items()):
            out[f"{leaf.name}.state.{key}"] = _array(value) if hasattr(value, "detach") else np.asarray(value)
    return out


def run(lib, program: Program, compiled: bool = False):
    """(snapshots after each of CALLS calls, the step function that made them)."""
    step, params, opt = build(lib, program)
    if compiled:
        step = staticgrad.compile(step)
    shots = [snapshot(program, step(*[lib.tensor(a) for a in program.call_inputs(call)]), params, opt)
             for call in range(CALLS)]
    return shots, step


# ---- the checks ------------------------------------------------------------------------------------

class ReplayMismatch(AssertionError):
    """A replay left different arrays than the eager call did."""

    def __init__(self, call: int, differing: dict):
        self.call, self.differing = call, differing     # name -> (replayed, eager)
        lines = [describe_difference(name, r, e) for name, (r, e) in differing.items()]
        super().__init__(f"call {call}, replay != eager:\n  " + "\n  ".join(lines))


class TorchMismatch(AssertionError):
    """Eager staticgrad and PyTorch disagree beyond tolerance."""


def ulps_between(a, b) -> np.ndarray:
    """Units in the last place between corresponding floats of a and b (same dtype)."""
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    low = np.iinfo(ints).min
    ia, ib = (np.where(x.view(ints) < 0, low - x.view(ints).astype(np.int64), x.view(ints)) for x in (a, b))
    return np.abs(ia.astype(np.int64) - ib.astype(np.int64))


def describe_difference(name: str, actual, expected) -> str:
    if actual is None or expected is None or actual.dtype != expected.dtype or actual.shape != expected.shape:
        kind = lambda x: "None" if x is None else f"{x.dtype}{list(x.shape)}"
        return f"{name}: {kind(actual)} != {kind(expected)}"
    if actual.dtype.kind != "f":
        return f"{name}: {np.count_nonzero(actual != expected)} entries differ"
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    at = np.unravel_index(np.nanargmax(diff), diff.shape) if not np.all(np.isnan(diff)) else ()
    return (f"{name}: max abs diff {np.nanmax(diff):.3g} at {tuple(int(i) for i in at)} "
            f"({actual[at]!r} vs {expected[at]!r}, {int(ulps_between(actual, expected)[at])} ulps); "
            f"max {int(ulps_between(actual, expected).max())} ulps")


def same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def assert_replay_equals_eager(replayed: list, eager: list) -> None:
    """Bit for bit, after every call: the same arrays (or None) under the same names."""
    for call, (r, e) in enumerate(zip(replayed, eager)):
        assert r.keys() == e.keys(), f"call {call}: replay has {sorted(r)}, eager {sorted(e)}"
        differing = {name: (r[name], e[name]) for name in e if not same(r[name], e[name])}
        if differing:
            raise ReplayMismatch(call, differing)


def assert_close_to_torch(program: Program, ours: list, theirs: list) -> None:
    """Eager staticgrad is PyTorch within tolerance (relative, plus absolute scaled to the array).
    Adam divides by the gradient's own size, so an entry whose gradient is rounding noise (zero in
    exact arithmetic) can step either way: with Adam only the first call is compared, and a
    parameter or first moment only where both libraries' gradients agree to 0.1%."""
    rtol, atol = (2e-4, 2e-5) if program.dtype == "float32" else (1e-9, 1e-11)
    adam = "Adam" in (program.optimizer or "")
    for call, (s, t) in enumerate(zip(ours, theirs[:1] if adam else theirs)):
        if s.keys() != t.keys():
            raise TorchMismatch(f"call {call}: staticgrad has {sorted(s)}, torch {sorted(t)}")
        for name, expected in t.items():
            actual = s[name]
            if actual is None or expected is None:
                if actual is not expected:
                    raise TorchMismatch(f"call {call}: {name} is {actual} in staticgrad, {expected} in torch")
                continue
            if actual.shape != expected.shape or actual.dtype != expected.dtype:
                raise TorchMismatch(f"call {call}: {name} is {actual.dtype}{list(actual.shape)} in staticgrad, "
                                    f"{expected.dtype}{list(expected.shape)} in torch")
            keep = np.ones(expected.shape, bool)
            grad_s, grad_t = s.get(name.split(".")[0] + ".grad"), t.get(name.split(".")[0] + ".grad")
            if adam and grad_t is not None and grad_t.shape == expected.shape and not name.endswith((".grad", "_sq")):
                keep = np.abs(grad_s - grad_t) <= 1e-3 * np.abs(grad_t)
            scale = max(1.0, float(np.abs(expected).max(initial=0)))
            try:
                np.testing.assert_allclose(actual[keep], expected[keep], rtol=rtol, atol=atol * scale)
            except AssertionError as error:
                raise TorchMismatch(f"call {call}: {name} vs torch: {error}") from None


def check(program: Program) -> None:
    """The differential check: replay == eager bit for bit; eager ~= PyTorch."""
    eager, _ = run(staticgrad, program)
    replayed, step = run(staticgrad, program, compiled=True)
    assert step.stats.replays > 0, f"no call replayed: {step.stats}"
    assert_replay_equals_eager(replayed, eager)
    assert_close_to_torch(program, eager, run(torch, program)[0])


# Reproducible in CI: derandomized, no example database. DIFFERENTIAL_NO_SHRINK=1 reports the first
# failing program as found rather than shrunk (shrinking may wander from one bug to another).
COMMON = dict(deadline=None, derandomize=True, database=None, print_blob=False,
              phases=[Phase.generate] + ([] if os.environ.get("DIFFERENTIAL_NO_SHRINK") else [Phase.shrink]),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much, HealthCheck.large_base_example])


def search(strategy, max_examples: int) -> None:
    """Run ``check`` over ``max_examples`` programs; the first failure fails (shrunk and printed)."""

    @settings(max_examples=max_examples, **COMMON)
    @given(strategy)
    def one(program):
        note(repr(program))
        check(program)

    one()


# ---- random programs -------------------------------------------------------------------------------

def test_random_programs_replay_bitwise_and_match_torch():
    """Small steps over every op family, float32 and float64, SGD (momentum, nesterov, weight decay),
    Adam (amsgrad) or no optimizer: the broad net for a replay that drifts from eager, and for
    eager drifting from PyTorch."""
    search(programs(), max_examples=60)


def test_half_programs_replay_bitwise():
    """float16 steps replay eager's bits (NumPy computes float16 means differently when handed a
    planned output buffer: the bug this net found). Not compared with PyTorch, whose float16 CPU
    kernels accumulate in float32 where NumPy's do not."""

    @settings(max_examples=40, **COMMON)
    @given(programs(dtypes=("float16",), **LAYER_SIZED))
    def one(program):
        note(repr(program))
        eager, _ = run(staticgrad, program)
        replayed, step = run(staticgrad, program, compiled=True)
        assert step.stats.replays > 0, f"no call replayed: {step.stats}"
        assert_replay_equals_eager(replayed, eager)

    one()


def test_layer_sized_programs():
    """Dimensions of 8 and 17, past the sizes where BLAS kernels and NumPy's pairwise summation
    change strategy, so a replay that calls BLAS with another operand layout or sums in another
    order shows up (bug (i) under Haswell kernels)."""
    search(programs(**LAYER_SIZED), max_examples=25)


def test_programs_broadcasting_a_single_element():
    """(1,)- or (1, 1)-shaped operands spread over bigger ones, mostly elementwise: the gradient is
    a full reduction, which fused code must add in NumPy's order (bug (ii))."""
    search(programs(size_one_broadcast=True, families=BROADCASTING), max_examples=30)


def test_programs_with_zero_dim_tensors():
    """0-d parameters, inputs and intermediate values, as PyTorch allows them (bugs (iii), (iv))."""
    search(programs(zero_dim=True, size_one_broadcast=True), max_examples=30)


@pytest.mark.slow
@pytest.mark.parametrize("options, max_examples", [
    (dict(max_ops=8), 200),
    (dict(max_ops=6, **LAYER_SIZED), 60),
    (dict(max_ops=6, size_one_broadcast=True, families=BROADCASTING), 80),
    (dict(max_ops=6, zero_dim=True, size_one_broadcast=True), 80),
], ids=["small", "layer-sized", "single-element", "zero-dim"])
def test_random_programs_bigger_budget(options, max_examples):
    """The same four searches with longer programs and more examples."""
    search(programs(**options), max_examples=max_examples)


# ---- pinned repros: the smallest program for every failure found ------------------------------------

SGD = "lib.optim.SGD(params, lr=0.1)"


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype, features, out", [("float32", 16, 8), ("float64", 17, 17)])
def test_pinned_linear_weight_gradient(dtype, features, out):
    """(i) One linear layer on a batch of 8, SGD: the replayed weight gradient is eager's bit for bit
    (these sizes differ under Haswell kernels)."""
    check(hand_written(dtype, {"x0": ((8, features), "input"), "p0": ((out, features), "param"),
                               "p1": ((out,), "param"), "x1": ((8, out), "input")},
                       ["v0 = F.linear(x0, p0, p1)"], "F.mse_loss(v0, x1)", SGD))


@pytest.mark.bitexact
@pytest.mark.parametrize("leaves, line", [
    ({"x0": ((17, 17), "input"), "p0": ((1, 17), "param")}, "v0 = F.linear(x0, p0)"),
    ({"p0": ((17,), "param"), "x0": ((17, 8), "input")}, "v0 = p0 @ x0"),
    ({"x0": ((17, 1), "input"), "p0": ((1, 17), "param")}, "v0 = x0 @ p0"),
], ids=["one-output linear", "vector @ matrix", "outer product"])
def test_pinned_matmul_gradient_with_a_dimension_of_one(leaves, line):
    """(i) Matrix products with a dimension of 1, float64, SGD: the replayed gradient of the
    parameter operand is eager's bit for bit (it differs under any OpenBLAS kernels)."""
    check(hand_written("float64", leaves, [line], "v0.sum()", SGD))


@pytest.mark.bitexact
def test_pinned_folded_matmul_weight_gradient():
    """(i) A (3, 17) parameter times a (2, 17, 12) batch, which matmul folds into one mm with the
    parameter transposed, as in a linear layer: its replayed gradient is eager's bit for bit."""
    check(hand_written("float64", {"p0": ((3, 17), "param"), "x0": ((2, 17, 12), "input")},
                       ["v0 = p0 @ x0"], "v0.sum()", SGD))


@pytest.mark.bitexact
def test_pinned_single_element_parameter_broadcast():
    """(ii) A (1,) parameter added to a (2, 2, 2) input: its gradient, a sum of 8 entries, is
    eager's bit for bit."""
    check(hand_written("float64", {"p0": ((1,), "param"), "x0": ((2, 2, 2), "input"), "x1": ((2, 2, 2), "input")},
                       ["v0 = p0 + x0"], "(v0 * x1).sum()"))


@pytest.mark.parametrize("shape, line", [((), "v0 = p0 * x0"), ((2, 2), "v0 = p0.sum() * x0")],
                         ids=["0-d parameter", "0-d sum"])
def test_pinned_zero_dim_value_in_a_fused_kernel(shape, line):
    """(iii) A 0-d parameter, or a 0-d sum, broadcast over an input: the fused gradient kernel
    compiles and matches eager."""
    check(hand_written("float64", {"p0": (shape, "param"), "x0": ((3,), "input")}, [line], "v0.sum()"))


@pytest.mark.parametrize("line", ["v0 = p0.tanh()", "v0 = p0.sigmoid()", "v0 = p0.softmax(0)",
                                  "v0 = F.mse_loss(p0, x0)"])
def test_pinned_zero_dim_eager_ops(line):
    """(iv) tanh (its backward), sigmoid, softmax and mse_loss on 0-d tensors run eagerly, as in PyTorch."""
    check(hand_written("float64", {"p0": ((), "param"), "x0": ((), "input")}, [line], "v0.sum()"))


def test_pinned_product_of_two_parameters():
    """(v) grad of p1 in (p0 * p1).sum() is p0 *before* the step: the fused kernel that also
    updates p0 in place must read p0 first."""
    check(hand_written("float32", {"p0": ((2,), "param"), "p1": ((2,), "param")}, [], "(p0 * p1).sum()", SGD))


def test_pinned_loss_reads_parameters_before_the_step():
    """(v) The returned loss is computed from the parameters before the step, even when the
    forward's last elementwise work is fused with the optimizer's in-place update."""
    check(hand_written("float64", {"p0": ((2,), "param"), "x0": ((2,), "input")},
                       ["v0 = F.relu(p0)", "v1 = -p0"], "(v1 * x0).sum() + v0.sum() * 0.25", SGD))


def test_pinned_fused_sum_of_a_transposed_value():
    """(vi) square(x.t()).sum(): NumPy's square of a transposed array keeps its memory order and
    sums in that order; the replay must add in the same order."""
    for seed in range(8):
        check(hand_written("float64", {"p0": ((2, 8), "param")}, ["v0 = lib.square(p0.t())"], "v0.sum()",
                           seed=seed))


def test_pinned_expand_matmul_mean_compiles():
    """(vii) (p.expand(3, 3, 3) @ w).mean(dim=0).sum() compiles: constant folding must not call
    view() on a constant whose layout eager never produces."""
    check(hand_written("float64", {"p0": ((1, 3, 3), "param"), "p1": ((3, 1), "param")},
                       ["v0 = p0.expand(3, 3, 3) @ p1"], "v0.mean(dim=0).sum()"))


@pytest.mark.parametrize("line", ["v0 = p0.sum(dim=0)", "v0 = p0.mean(dim=-1, keepdim=True)",
                                  "v0 = lib.amax(p0, dim=0)", "v0 = p0.max(dim=0).values",
                                  "v0 = lib.logsumexp(p0, dim=0)"])
def test_pinned_zero_dim_reductions_over_dim_zero(line):
    """(viii) Reductions over dim 0 or -1 of a 0-d tensor work as in PyTorch (they raise
    "Dimension out of range (expected to be in range of [-1, 0], but got 0)")."""
    check(hand_written("float64", {"p0": ((), "param")}, [line], "v0.sum()"))


def test_pinned_numpy_float64_scalar_makes_a_float64_tensor():
    """(ix) tensor(np.float64(x)) is float64, as in PyTorch (staticgrad made float32)."""
    assert staticgrad.tensor(np.float64(0.1)).dtype == staticgrad.float64
    assert str(torch.tensor(np.float64(0.1)).dtype) == "torch.float64"


@pytest.mark.parametrize("dtype, leaves, lines, loss, optimizer", [
    ("float32", {"x0": ((1, 3, 3), "input"), "p0": ((2, 1, 3, 3), "param"), "p1": ((1, 1, 3, 3), "param"),
                 "x1": ((2, 1, 3, 3), "input")},
     ["v0 = lib.add(x0, p0, alpha=0.5)", "v1 = lib.add(v0, p1)", "v2 = lib.maximum(v1, v0)",
      "v3 = lib.maximum(v2, v0)"], "(v3 * x1).sum()", None),
    ("float64", {"p0": ((2, 3, 1), "param"), "p1": ((2,), "param")},
     ["v0 = lib.logsumexp(p0, dim=1, keepdim=True)", "v1 = v0.contiguous().view([2])", "v2 = p0.softmax(-1)",
      "v3 = lib.cat((v1, p1), 0)", "v4 = lib.maximum(p0, p0)", "v5 = lib.narrow(v4, 0, 1, 1)"], "v5.sum()",
     "lib.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)"),
], ids=["maximum-chain", "maximum-of-itself"])
def test_pinned_merged_fusion_groups_build_in_program_order(dtype, leaves, lines, loss, optimizer):
    """(x) Two fusion groups merged by a later op keep their members in program order: a kernel built
    from them out of order read, as an input, a value its own later member computes (NameError at the
    first replay)."""
    for seed in range(3):
        check(hand_written(dtype, leaves, lines, loss, optimizer, seed=seed))
