"""The plan of a trace that cannot replay because a tensor made during the call is kept outside
it: an optimizer's state, made at its first step, is the usual case, and the next call traces
again once that state exists. Such a plan is never run, so nothing of its replay is built (passes,
buffer plan, code, kernels) until something inspects it."""

from __future__ import annotations

from staticgrad.record.plan import Plan

# What the plan is compiled for at the first look: Plan's attributes a plan that never replays holds.
_COMPILED = ("graph", "unfused_graph", "program", "compiled_replay", "pass_report", "roles", "backward")


class EscapedPlan(Plan):
    """A ``Plan`` marked escaped (not replayable) whose compiled parts come from ``build()`` (which
    returns the compiled ``Plan`` of the same record) when first read."""

    def __init__(self, record, key, build):   # not Plan.__init__: it would build the replay
        self.record = record
        self.signature = key
        self.failure = record.failure
        self._build = build
        self.mark_escaped(record.escapes)

    def __getattr__(self, name):   # only called for attributes not set: the compiled ones
        if name not in _COMPILED or "_build" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        compiled = self._build()
        for attr in _COMPILED:
            setattr(self, attr, getattr(compiled, attr))
        del self._build
        return getattr(self, name)
