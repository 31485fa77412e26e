"""Generate the replay function for a Program: straight-line Python over arena views.

Each step becomes one direct NumPy call when its op has an ``emit`` rule, else a call of the
op's ``forward``. The result is source text; the runtime execs it (runtime/replay.py), so a
saved plan runs without the compiler. There is no per-op interpretation loop in the hot path.
"""

from __future__ import annotations

import collections
import hashlib
import math

from staticgrad.compiler.coalesce import coalesce, reshaped
from staticgrad.compiler.ir import KernelScalar
from staticgrad.ops import OPS
from staticgrad.runtime.kernels import LOOP_PREFIX
from staticgrad.runtime.program import KERNEL, MULTI, OUT, VIEW, Program


class _Variable:
    """A name that prints as itself inside generated code (a value read at replay time)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _names(program: Program) -> dict:
    names = {}
    for slot in program.input_slots:
        names[slot] = f"x{slot}"
    for slot in program.captured_slots:
        names[slot] = f"c{slot}"
    for slot in program.constants:
        names[slot] = f"k{slot}"
    for spec in program.buffers:
        names[spec.slot] = f"b{spec.slot}" if spec.offset is not None else f"r{spec.slot}"
    for slot, target in program.aliases.items():
        names[slot] = names[target]
    return names


def generate(program: Program) -> str:
    """Fill ``program.kernels`` with the fused kernels' sources; return the replay source."""
    fused = _kernel_steps(program)
    program.kernels = {name: source for name, source, _ in fused[0].values()}
    program.kernel_calls = [name for name, _, _ in fused[0].values()]
    return replay_source(program, fused)


def _kernel_steps(program: Program) -> tuple:
    """({step index: (kernel name, kernel source, the call's text)} for the program's fused steps,
    each kernel's dims coalesced where its arrays allow (compiler/coalesce.py); the build's lines
    making the reshaped arena buffers and constants they take, once per arena, not per call)."""
    names = _names(program)
    contiguous = {names[s] for s in program.contiguous if s in names}
    contiguous.update(n for n in names.values() if n[0] in "br")   # planned buffers, fresh results
    contiguous.update(names[s] for s, array in program.constants.items() if array.flags.c_contiguous)
    for step in program.steps:   # (a multi-output op's results are made C-contiguous: _statement)
        if step.mode == MULTI and not OPS[step.op].fills_outputs:
            contiguous.update(names.get(v, f"v{v}") for v in step.outputs)
    built = {}   # reshape expression -> its name in the build

    def reshaped_argument(name: str, shape: tuple) -> str:
        expression = f"{name}.reshape({shape!r})"
        if name[0] in "bk":   # an arena buffer or a constant: the same array on every call
            return built.setdefault(expression, f"_c{len(built)}")
        return expression

    shapes = program.shapes
    steps = {}
    for i, step in enumerate(program.steps):
        if step.mode == KERNEL:
            ins = [names.get(v, f"v{v}") for v in step.inputs]
            outs = [names.get(v, f"v{v}") for v in step.outputs]
            layout = ([shapes.get(v) for v in step.inputs + step.outputs], contiguous, reshaped_argument)
            name, source, args = kernel_for_step(step, ins, outs, layout)
            steps[i] = (name, source, f"{name}({', '.join(args)})")
    return steps, [f"    {built_name} = {expression}" for expression, built_name in built.items()]


def replay_source(program: Program, fused: tuple | None = None, timed: bool = False) -> str:
    """Source of ``build(views, constants, forwards, kernels, np)`` returning
    ``replay(inputs, captured, scalars, recycled)``; ``recycled[k]``, if not None, is an array
    the k-th result may be written into instead of a new one. ``fused``: ``_kernel_steps``'s
    result, when made already.

    ``timed``: the profiler's twin of that function, the same lines with a clock reading between
    them; its ``build`` takes two more arguments, ``clock`` (``time.perf_counter_ns``) and ``tick``
    (a list's ``append``), and each call appends ``len(program.steps) + 3`` readings: at the start,
    after binding and allocating the fresh results, after each step, after the writebacks."""
    names = _names(program)
    shapes = {spec.slot: spec.shape for spec in program.buffers}
    shapes.update({slot: array.shape for slot, array in program.constants.items()})
    shapes.update(program.shapes)

    def name(slot: int) -> str:
        return names.get(slot) or names.setdefault(slot, f"v{slot}")

    head = ["def build(views, constants, forwards, kernels, np" + (", _clock, _tick):" if timed else "):")]
    for spec in program.buffers:
        if spec.offset is not None:
            head.append(f"    b{spec.slot} = views[{spec.slot}]")
        else:
            head.append(f"    d{spec.slot} = np.dtype({spec.dtype.str!r})")
    for working in dict.fromkeys(step.scratch for step in program.steps if step.scratch):
        head.append(f"    {_scratch_name(working)} = views[('scratch', {working[0]}, {working[1]})]")
    for slot in program.constants:
        head.append(f"    k{slot} = constants[{slot}]")
    fused_steps, reshaped = fused if fused is not None else _kernel_steps(program)
    head += reshaped
    for kernel_name in program.kernels:
        head.append(f"    {kernel_name} = kernels[{kernel_name!r}]")
    used_forwards = sorted({step.op for step in program.steps if step.mode != KERNEL})
    for op in used_forwards:
        head.append(f"    f_{op} = forwards[{op!r}]")
    hoisted = _static_views(program, name)
    head += _hoisted_lines(program, hoisted, name, shapes)

    body = ["    def replay(inputs, captured, scalars, recycled):"]
    reading = ["        _tick(_clock())"] if timed else []
    body += reading
    body += _unpack([name(s) for s in program.input_slots], "inputs")
    drops = _drops(program, name) if program.consumes_inputs else {}
    if program.consumes_inputs and program.input_slots:
        body.append("        inputs.clear()")
    body += _unpack([name(s) for s in program.captured_slots], "captured")
    body += _unpack([f"s{i}" for i in range(program.n_scalars)], "scalars")
    result_position = {}
    for k, slot in enumerate(program.result_slots):
        result_position.setdefault(slot, k)
    # A buffer of its own (a result, or one the arena does not hold) is made just before the step
    # that first writes it, so that a backward's gradients do not all take memory from the start.
    allocations = {}
    members = [spec for spec in program.buffers if spec.block is not None]
    for spec in program.buffers:
        if spec.block is not None:   # a gradient an all-reduce reads: its part of the gradient block
            stop = spec.block + math.prod(spec.shape)
            line = f"        r{spec.slot} = _block[{spec.block}:{stop}].reshape({tuple(spec.shape)!r})"
            allocations.setdefault(min(spec.first, len(program.steps)), []).append(line)
        elif spec.offset is None:
            empty = f"np.empty({tuple(spec.shape)!r}, d{spec.slot})"
            if spec.slot in result_position:
                k = result_position[spec.slot]
                line = f"        r{spec.slot} = {empty} if recycled[{k}] is None else recycled[{k}]"
            else:
                line = f"        r{spec.slot} = {empty}"
            allocations.setdefault(min(spec.first, len(program.steps)), []).append(line)
    if members:   # one block per call for them all, made before the first of them is written
        size = sum(math.prod(spec.shape) for spec in members)
        first = min(min(spec.first, len(program.steps)) for spec in members)
        allocations[first].insert(0, f"        _block = np.empty({size}, d{members[0].slot})")
    body += reading
    for i, step in enumerate(program.steps):
        body += allocations.pop(i, [])
        line = fused_steps[i][2] if i in fused_steps else None
        if line is None:
            line = _statement(step, name, shapes)
            if i in hoisted:   # made once per arena in build; made here only if that gave a copy
                out, made = name(step.outputs[0]), f"_h{step.outputs[0]}"
                line = f"{out} = {made} if {made} is not None else {_value(line, out)}"
        body.append("        " + line)
        if i in drops:
            body.append(f"        del {', '.join(drops[i])}")
        body += reading
    for lines in allocations.values():   # buffers no step writes (returned as they are)
        body += lines
    for source, target in program.writebacks:
        body.append(f"        np.copyto({name(target)}, {name(source)})")
    body += reading
    results = []
    for k, slot in enumerate(program.result_slots):
        # a constant, or a slot already returned (two tensors eager computed apart, one value here):
        # a copy, so that no two results share memory where eager's did not; in the value's own
        # layout (a transposed view stays transposed), as a later matmul reading it chooses its
        # BLAS path by layout
        copied = slot in program.constants or result_position[slot] != k
        results.append(f"{name(slot)}.copy(order='K')" if copied else name(slot))
    body.append(f"        return [{', '.join(results)}]")
    return "\n".join(head + body + ["    return replay", ""])


def _static_views(program: Program, name) -> set:
    """Indices of the view steps whose value is the same on every call: views (without scalars read
    per call) of arena buffers, constants and such views. Their build makes them once per arena,
    instead of each call making them again (a reshape, a transpose, a slice: about a microsecond
    each). Never a result or a value written back (those keep the call's own)."""
    kept = set(program.result_slots) | {s for pair in program.writebacks for s in pair}
    static = set()
    hoisted = set()
    for i, step in enumerate(program.steps):
        # an arena buffer (or a value written into one in place), a constant
        static.update(s for s in step.inputs if name(s)[0] in "bk")
        if (step.mode == VIEW and not step.dynamic and len(step.outputs) == 1 and step.outputs[0] not in kept
                and step.inputs and all(s in static for s in step.inputs)):
            hoisted.add(i)
            static.add(step.outputs[0])
    return hoisted


def _hoisted_lines(program: Program, hoisted: set, name, shapes) -> list:
    """The build's lines making the hoisted views, as ``_h<slot>``. A view op may hand back a copy
    (a reshape the layout does not allow as a view): then ``_h<slot>`` is None, and the replay makes
    that value, and every view of it, on each call as before."""
    made = {program.steps[i].outputs[0] for i in hoisted}

    def build_name(slot):
        return f"_h{slot}" if slot in made else name(slot)

    lines = []
    for i in sorted(hoisted):
        step = program.steps[i]
        out = build_name(step.outputs[0])
        statement = _statement(step, build_name, shapes)
        first = build_name(step.inputs[0])
        missing = [build_name(s) for s in step.inputs if s in made]
        expression = _value(statement, out)
        if missing:
            expression = f"None if {' is None or '.join(missing)} is None else {expression}"
        lines.append(f"    {out} = {expression}")
        lines.append(f"    if {out} is not None and not np.may_share_memory({out}, {first}): {out} = None")
    return lines


def _value(statement: str, out: str) -> str:
    """The expression a view step's statement (``out = expression``) assigns."""
    assert statement.startswith(f"{out} = "), statement
    return statement[len(out) + 3:]


def _drops(program: Program, name) -> dict:
    """{step index: local names no later step reads}: inputs, views and fresh buffers that are
    neither returned nor written back, each dropped after the last step that uses it."""
    kept = {name(s) for s in program.result_slots} | {name(s) for pair in program.writebacks for s in pair}
    last = {}
    for i, step in enumerate(program.steps):
        for slot in step.inputs + step.outputs:
            last[name(slot)] = i
    drops = {}
    for local, i in last.items():
        if local[0] in "xrv" and local not in kept:
            drops.setdefault(i, []).append(local)
    return {i: sorted(names) for i, names in drops.items()}


def _unpack(targets: list, source: str) -> list:
    if not targets:
        return []
    return [f"        {', '.join(targets)}, = {source}"]


def _statement(step, name, shapes) -> str:
    op = OPS[step.op]
    attrs = dict(step.attrs)
    for attr, index in step.dynamic:
        attrs[attr] = _Variable(f"s{index}")
    if step.scratch:
        attrs["scratch"] = _Variable(_scratch_name(step.scratch))
    ins = [name(s) for s in step.inputs]
    in_shapes = [shapes.get(s) for s in step.inputs]
    if step.mode == MULTI and op.fills_outputs:   # the same check as an out= step's, per output
        outs = [name(s) for s in step.outputs]
        call = f"(_filled := f_{step.op}({_call_args(ins, attrs, '(' + ', '.join(outs) + ',)')}))"
        unfilled = " or ".join(f"{call if k == 0 else '_filled'}[{k}] is not {out}" for k, out in enumerate(outs))
        return f"if {unfilled}: _out_ignored({step.op!r})"
    if step.mode == MULTI:
        outs = ", ".join(name(s) for s in step.outputs)
        # C-contiguous, the layout eager gives every result that owns its memory (asarray with
        # order "C", not ascontiguousarray, which would make a 0-dim result 1-dim)
        return f"{outs}, = [np.asarray(a, order='C') for a in f_{step.op}({_call_args(ins, attrs)})]"
    out = name(step.outputs[0])
    if op.emit is not None:
        statement = op.emit(ins, out, attrs, in_shapes + [shapes.get(step.outputs[0])])
        if statement is not None:
            return statement
    if step.mode == VIEW:
        return f"{out} = f_{step.op}({_call_args(ins, attrs)})"
    assert step.mode == OUT
    # A forward must write into ``out`` and return it: one that returned a new array instead
    # would leave the planned buffer stale, and later steps would read it silently.
    return f"if f_{step.op}({_call_args(ins, attrs, out)}) is not {out}: _out_ignored({step.op!r})"


def _scratch_name(working: tuple) -> str:
    """The build's name for the arena bytes [offset, offset + size): an op's working memory."""
    return f"_z{working[0]}_{working[1]}"


def kernel_for_step(step, names: list, outs: list, layout: tuple | None = None) -> tuple:
    """(name, source, argument list) of a fused step's kernel, given its inputs' and outputs'
    variable names: an output named like an input is written into that input's array.
    ``layout``: (the arrays' shapes, inputs then outputs; the names of the C-contiguous ones; the
    text passing an array reshaped, ``(name, shape) -> str``): with it, the kernel's dims are
    coalesced where every array allows, its arrays passed reshaped."""
    attrs = dict(step.attrs)
    for attr, index in step.dynamic:
        attrs[attr] = _Variable(f"s{index}")
    kernel = attrs["kernel"]
    dims = attrs["dims"]
    same_as = tuple(names.index(out) if out in names else None for out in outs)
    by_value = tuple(k for k in kernel.value_inputs if names[k] not in outs)
    names, outs = list(names), list(outs)
    if layout is not None and None not in layout[0]:
        coalesced = _coalesced(kernel, names, outs, same_as, layout[1])
        if coalesced is not None:
            kernel, dim_groups, array_groups = coalesced
            dims = reshaped(dims, dim_groups)
            shapes = layout[0]
            for (kind, k), groups in array_groups.items():
                shape = shapes[k if kind == "in" else len(names) + k]
                if len(groups) != len(shape):
                    args = names if kind == "in" else outs
                    args[k] = layout[2](args[k], reshaped(shape, groups))
    name, source, explicit_dims = kernel_source(kernel, same_as, by_value)
    scalars = [repr(attrs[f"s{k}"]) if not isinstance(attrs[f"s{k}"], _Variable) else attrs[f"s{k}"].name
               for k in range(kernel.n_scalars)]
    ins = [f"float({n})" if k in by_value else n for k, n in enumerate(names)]
    args = ins + [o for o, alias in zip(outs, same_as) if alias is None] + scalars
    args += [str(dims[d]) for d in explicit_dims]
    return name, source, args


# coalesce's results by (kernel object, which arguments are contiguous), the kernel held so that its id
# stays its own: the coalesced kernel is then one object per structure, which kernel_source memoizes
_COALESCED: dict = {}


def _coalesced(kernel, names: list, outs: list, same_as: tuple, contiguous: set):
    flags = (tuple(n in contiguous for n in names),
             tuple(names[a] in contiguous if a is not None else o in contiguous for o, a in zip(outs, same_as)))

    def is_contiguous(key):
        return flags[0 if key[0] == "in" else 1][key[1]]

    memo_key = (id(kernel), flags)
    kept = _COALESCED.get(memo_key)
    if kept is not None and kept[0] is kernel:
        return kept[1]
    result = coalesce(kernel, is_contiguous)
    if result is not None and any(a is not None and result[2].get(("out", j)) != result[2].get(("in", a))
                                  for j, a in enumerate(same_as)):
        result = None   # (an output written into an input must be reshaped as that input is)
    if len(_COALESCED) >= _SOURCES_KEPT:
        _COALESCED.clear()
    _COALESCED[memo_key] = (kernel, result)
    return result


def _call_args(ins: list, attrs: dict, out: str | None = None) -> str:
    parts = list(ins)
    if out is not None:
        parts.append(f"out={out}")
    parts += [f"{k}={v!r}" for k, v in attrs.items()]
    return ", ".join(parts)


# ---- fused kernels ---------------------------------------------------------------------------

KERNEL_HEADER = '''"""A staticgrad fused kernel (generated; cached by its structure).
Its loop_<hash> functions run from modules staticgrad_loop_<hash>, shared with other kernels."""
import numpy as np
from numba import njit

from staticgrad.ops.loops import fused_multiply_add as fma

sqrt = np.sqrt
'''


# A kernel is called from Python only: no C wrapper (a tenth of a kernel's compile time).
KERNEL_DECORATOR = "@njit(cache=True, error_model='numpy', nogil=True, no_cfunc_wrapper=True)"
# A shared loop nest is called from its kernel only: no wrappers for calls from Python or C, which
# would cost as much to compile as the loop (Numba builds them per function, per argument).
LOOP_DECORATOR = "@njit(error_model='numpy', nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)"


# kernel_source's results by kernel object (held, so that its id stays its own): the passes' result
# for a structure is reused by every batch size (compiler/generic.py), kernel objects and all, so a
# new batch size generates no kernel source. By identity, not equality: equal kernels may still
# differ in how they print (an attribute 1 against 1.0).
_SOURCES: dict = {}
_SOURCES_KEPT = 512


def kernel_source(kernel, same_as: tuple = (), by_value: tuple | None = None) -> tuple:
    """(name, module source, explicit dims) of a fused group's Numba kernel. The name hashes the
    source, so the same pattern (in every layer, every model) compiles once.

    ``same_as[k]`` is the input whose array output k is written into (an in-place update), or
    None: such an output is not a separate argument, its stores go to that input. Besides saving
    dispatch time, one argument for both lets LLVM see the loop reads and writes one array.
    ``by_value``: the inputs passed as a float, not an array (of ``kernel.value_inputs``, those
    that no output is written into; by default all but ``same_as``'s)."""
    same_as = tuple(same_as) or (None,) * kernel.n_outputs
    if by_value is None:
        by_value = tuple(k for k in kernel.value_inputs if k not in same_as)
    key = (id(kernel), same_as, by_value)
    kept = _SOURCES.get(key)
    if kept is not None and kept[0] is kernel:
        return kept[1]
    result = _kernel_source(kernel, same_as, by_value)
    if len(_SOURCES) >= _SOURCES_KEPT:
        _SOURCES.clear()
    _SOURCES[key] = (kernel, result)
    return result


def _kernel_source(kernel, same_as: tuple, by_value: tuple) -> tuple:
    # an input taken by value is parameter v<k> (a float), cast once to the loops' dtype as w<k>
    arrays = {("in", k): _Value(f"w{k}") if k in by_value else f"a{k}" for k in range(kernel.n_inputs)}
    for k, source in enumerate(same_as):
        arrays[("out", k)] = f"a{source}" if source is not None else f"o{k}"
    explicit_dims = sorted({d for loop in kernel.loops if _shape_source(loop) is None for d in loop.dims})
    args = ([f"v{k}" if k in by_value else f"a{k}" for k in range(kernel.n_inputs)]
            + [f"o{k}" for k in range(kernel.n_outputs) if same_as[k] is None]
            + [f"s{k}" for k in range(kernel.n_scalars)] + [f"n{d}" for d in explicit_dims])
    lines = [f"    T = np.{kernel.loops[0].dtype}"]
    lines += [f"    q{k} = T(s{k})" for k in range(kernel.n_scalars)]
    lines += [f"    w{k} = T(v{k})" for k in by_value]
    shared = [_shared_loop(loop, arrays) for loop in kernel.loops]
    uses = collections.Counter(helper for helper, _ in shared)
    helpers = {}
    for number, (loop, (helper, call_args)) in enumerate(zip(kernel.loops, shared)):
        if uses[helper] > 1:   # a loop nest the kernel runs more than once: one function, compiled once
            helper_name = helpers.setdefault(helper, LOOP_PREFIX + hashlib.sha1(helper.encode()).hexdigest()[:16])
            lines.append(f"    {helper_name}({', '.join(call_args)})")
        else:
            lines += _loop_lines(number, loop, arrays)
    body = "\n".join(lines)
    definitions = "".join(f"\n\n{LOOP_DECORATOR}\ndef {helper_name}{helper}\n"
                          for helper, helper_name in helpers.items())
    # the name hashes everything the module's text holds (its header and decorators too), so a
    # cached source under this name is this very text: another staticgrad's kernel gets another name
    name = "k_" + hashlib.sha1((KERNEL_HEADER + KERNEL_DECORATOR + LOOP_DECORATOR + ",".join(args) + "\n"
                                + definitions + body).encode()).hexdigest()[:16]
    source = (KERNEL_HEADER + definitions + f"\n\n{KERNEL_DECORATOR}\n"
              f"def {name}({', '.join(args)}):\n{body}\n")
    return name, source, explicit_dims


def _shared_loop(loop, arrays: dict) -> tuple:
    """(a loop nest's function, from its parameter list on, the arguments a kernel calls it with).
    The text depends only on the loop's structure: its arrays, scalars and sizes are parameters in
    order of first use (two keys naming one array, an output written into its input, stay one
    parameter), so a kernel's loops that do the same work on other arrays (an optimizer's update of
    each parameter) have one function, and Numba types and LLVM optimises that loop once. The calls
    run the same operations in the same order as the loop written inline."""
    keys = [("out", out) for _, out, _ in loop.sums] + [source for source, _ in loop.loads]
    keys += [("out", out) for _, out, _ in loop.stores]
    names = list(dict.fromkeys(arrays[key] for key in keys))
    parameters = {name: _Value(f"p{k}") if isinstance(name, _Value) else f"p{k}" for k, name in enumerate(names)}
    scalars = list(dict.fromkeys(v for _, _, attrs in loop.body for _, v in attrs if isinstance(v, KernelScalar)))
    dims = list(loop.dims) if _shape_source(loop) is None else []
    local_lines = _loop_lines(0, loop, {key: parameters[name] for key, name in arrays.items() if name in parameters},
                              scalar_names={v: f"c{k}" for k, v in enumerate(scalars)},
                              dim_names={d: f"m{k}" for k, d in enumerate(dims)})
    header = (list(parameters.values()) + [f"c{k}" for k in range(len(scalars))]
              + [f"m{k}" for k in range(len(dims))])
    text = f"({', '.join(header)}):\n    T = np.{loop.dtype}\n" + "\n".join(local_lines)
    call_args = names + [_scalar_name(v) for v in scalars] + [f"n{d}" for d in dims]
    return text, call_args


def _scalar_name(v: KernelScalar) -> str:
    """A kernel scalar inside the kernel: ``s<k>`` as passed (raw), else ``q<k>``, cast to the loop dtype."""
    return f"{'s' if v.raw else 'q'}{v.index}"


class _Value(str):
    """The name of an input a kernel (or its loop function) takes by value, not as an array: a
    load reads it as it is, with no index."""

    __slots__ = ()


def _shape_source(loop):
    """An array indexed by every iteration dim in order (its shape gives the loop sizes)."""
    full = tuple(range(loop.ndim))
    for _, out, pattern in loop.stores:
        if pattern == full:
            return ("out", out)
    for source, pattern in loop.loads:
        if pattern == full:
            return source
    return None


def _index(pattern: tuple) -> str:
    if not pattern:
        return "()"
    return ", ".join(f"i{d}" if d >= 0 else "0" for d in pattern)


def _zero_lines(array: str, ndim: int) -> list:
    """Lines setting every element of an ``ndim``-dimensional array to zero, as a loop nest: not
    ``array.fill``, whose Numba implementation is a function of Numba's own that every process
    loading the kernel from the cache would have to import (numba.np.arrayobj)."""
    if ndim == 0:
        return [f"    {array}[()] = T(0.0)"]
    lines, indent = [], "    "
    for d in range(ndim):
        lines.append(f"{indent}for z{d} in range({array}.shape[{d}]):")
        indent += "    "
    lines.append(f"{indent}{array}[{', '.join(f'z{d}' for d in range(ndim))}] = T(0.0)")
    return lines


def _loop_lines(number: int, loop, arrays: dict, scalar_names: dict | None = None,
                dim_names: dict | None = None) -> list:
    """The lines of a loop nest (indented for a function body); the arrays, scalars and explicit
    sizes by the names given (by default a kernel's: ``q<k>``/``s<k>`` and ``n<dim>``)."""
    lines = []
    for _, out, pattern in loop.sums:
        lines += _zero_lines(arrays["out", out], len(pattern))
    hoisted, inner = [], []
    for k, (source, pattern) in enumerate(loop.loads):
        array = arrays[source]
        read = array if isinstance(array, _Value) else f"{array}[{_index(pattern)}]"
        line = f"x{number}_{k} = {read}"
        (hoisted if all(d < 0 for d in pattern) else inner).append(line)
    lines += [f"    {line}" for line in hoisted]
    shape_source = _shape_source(loop)
    indent = "    "
    for d in range(loop.ndim):
        if shape_source is not None:
            size = f"{arrays[shape_source]}.shape[{d}]"
        else:
            size = dim_names[loop.dims[d]] if dim_names else f"n{loop.dims[d]}"
        lines.append(f"{indent}for i{d} in range({size}):")
        indent += "    "
    statements = list(inner)
    for j, (op_name, args, attrs) in enumerate(loop.body):
        names = [f"x{number}_{k}" if kind == "in" else f"t{number}_{k}" for kind, k in args]
        rendered = {k: _Variable(scalar_names[v] if scalar_names else _scalar_name(v))
                    if isinstance(v, KernelScalar) else v for k, v in attrs}
        statements.append(f"t{number}_{j} = {OPS[op_name].scalar_expr(names, rendered)}")
    for t, out, pattern in loop.stores:
        statements.append(f"{arrays['out', out]}[{_index(pattern)}] = t{number}_{t}")
    for t, out, pattern in loop.sums:
        statements.append(f"{arrays['out', out]}[{_index(pattern)}] += t{number}_{t}")
    lines += [f"{indent}{s}" for s in statements]
    return lines
