"""``Plan.profile``: time a plan's program, and a compiled model's backward program, on the
arguments of a call, leaving the user's state as it was.

The programs run on copies: of the captured state (parameters, optimizer state, gradients read),
and of every argument the program writes into. Random ops draw from the process generator, whose
state is put back afterwards. So profiling a training step updates copies of the parameters and
optimizer state, never the model's own, moves no version counter and sets no ``.grad``.
"""

from __future__ import annotations

import numpy as np

from staticgrad._eager.tensor import Tensor
from staticgrad.errors import PlanError
from staticgrad.inspect.profile import Profile, Timed, measure
from staticgrad.ops.factory import generator
from staticgrad.record.float_arguments import float_arguments
from staticgrad.record.scalars import CallFloats


def profile_plan(plan, args: tuple, kwargs: dict, calls: int, warmup: int) -> Profile:
    if plan.program is None or not plan.replayable:
        raise PlanError(f"this plan does not replay ({plan.reason}), so there is nothing to profile")
    flat = argument_tensors(args, kwargs)
    _check_arguments(plan, flat)
    previous_floats = CallFloats.values
    CallFloats.values = float_arguments(args, kwargs)   # the replay-time scalars read this call's floats
    try:
        bound = plan.bind(flat, copy=True)
    finally:
        CallFloats.values = previous_floats
    program = plan.program
    written = {target for _, target in program.writebacks} | set(program.aliases.values())
    inputs = [np.copy(array) if slot in written else array for slot, array in zip(program.input_slots, bound.inputs)]
    programs = [Timed("forward" if plan.backward is not None else "step", program, plan.graph, plan.compiled_replay,
                      lambda _: (inputs, bound.captured, bound.scalars))]
    if plan.backward is not None:
        programs.append(_backward(plan.backward, inputs, bound))
    rng = generator().bit_generator
    state = rng.state
    try:
        return measure(programs, calls, warmup)
    finally:
        rng.state = state


def _backward(backward, inputs: list, bound) -> Timed:
    """The backward program, fed each call with what that call's forward saved, the arguments it
    reads, the captured tensors' copies, and incoming gradients of ones (as ``sum().backward()``)."""
    layout = backward.layout
    incoming = [np.ones(shape, dtype) for shape, dtype in backward.trace.output_meta]
    arguments = [inputs[k] for k in layout.arg_inputs]
    captured = [bound.captured[i] for i in layout.captured]

    def bind(results):
        return [results[i] for i in layout.saved_results] + arguments + incoming, captured, bound.scalars

    return Timed("backward", backward.program, backward.graph, backward.replay, bind)


def argument_tensors(args: tuple, kwargs: dict) -> list:
    """The tensors among a call's arguments, in the order a compiled call binds them (positional
    then keyword arguments, depth first through lists, tuples and dicts)."""
    flat = []

    def walk(obj):
        if isinstance(obj, Tensor):
            flat.append(obj)
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                walk(x)
        elif isinstance(obj, dict):
            for x in obj.values():
                walk(x)

    walk(args)
    walk(kwargs)
    return flat


def _check_arguments(plan, flat: list) -> None:
    graph = plan.graph
    expected = [graph.values[v] for v in graph.inputs]
    if len(flat) != len(expected):
        raise PlanError(f"this plan takes {len(expected)} tensor argument(s), got {len(flat)}: profile a plan with "
                        "the arguments of a call that replays it")
    for k, (t, value) in enumerate(zip(flat, expected)):
        if tuple(t._data.shape) != tuple(value.shape) or str(t._data.dtype) != str(value.dtype):
            raise PlanError(f"tensor argument {k} is {t._data.dtype}{list(t._data.shape)}, this plan's is "
                            f"{value.dtype}{list(value.shape)}: profile the plan a call with these arguments "
                            "replays (call the compiled function with them first, then profile its .plan)")
    failing = plan.failing_guard(flat)
    if failing is not None:
        raise PlanError(f"this plan no longer applies ({failing}): call the compiled function again, then profile "
                        "its .plan")
