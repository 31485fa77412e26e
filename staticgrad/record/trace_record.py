"""What one trace hands to compile: its guards and its record (graph, captured state, outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field


def grad_state(t):
    """What a plan guards about a tensor's ``.grad``: None, or its (shape, dtype)."""
    g = t._grad
    return None if g is None else (g._data.shape, g._data.dtype)


@dataclass
class Guard:
    """A value a plan depends on: ``check()`` must equal ``expected`` for a replay to be valid.

    An identity guard's check returns ``(keys, objects)``: it holds while the keys are equal and
    every object is the very one recorded (the parameters a module holds, an optimizer's buffers)."""

    check: object
    expected: object
    label: str
    identity: bool = False
    reads_grad: bool = False   # re-checked when a .grad appears or goes (GradEpoch), not only on Epoch
    subject: object = None     # a .grad guard's tensor: plans check those guards inline, in one loop

    def holds(self) -> bool:
        current = self.check()
        if not self.identity:
            return current == self.expected
        (keys, objects), (expected_keys, expected_objects) = current, self.expected
        return (keys == expected_keys and len(objects) == len(expected_objects)
                and all(a is b for a, b in zip(objects, expected_objects)))


@dataclass
class TraceRecord:
    graph: object
    input_count: int
    captured: list                 # ("tensor", t) or ("grad", t): where each captured value is read
    scalar_getters: list
    state_guards: list             # Guards re-checked when the state epoch moves
    input_guards: list             # (flat input index, expected grad state) for inputs' .grad
    outputs: list                  # per output leaf: ("value", result index, info) / ("input", k) / ("object", obj)
                                   # / ("same", earlier leaf position): one tensor returned twice
    grad_slots: list               # (owner, final) -- owner ("captured", t) / ("input", k) / ("output", i)
    version_bumps: list            # (tensor or ("input", k), count)
    failure: str | None = None
    escapes: list = field(default_factory=list)
    eager_peak_bytes: int | None = None   # measured during the traced (eager) call
    float_arguments_static: bool = False  # Python made a plain value of a float argument
