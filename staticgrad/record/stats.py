"""What a compiled function's calls did: traces, replays, eager fallbacks, compile time; and for a
compiled model, how the backward calls through its outputs' graphs ran (``backward_graph.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CompileStats:
    traces: int = 0
    replays: int = 0
    fallbacks: int = 0
    compile_seconds: float = 0.0
    # backward() calls through a graph holding this model's node: recorded whole (then compiled),
    # replayed from such a recording, or run by the engine (and why the latest one was)
    backward_recorded: int = 0
    backward_replays: int = 0
    backward_eager: int = 0
    backward_eager_reason: str | None = None

    def __repr__(self) -> str:
        text = (f"CompileStats(traces={self.traces}, replays={self.replays}, fallbacks={self.fallbacks}, "
                f"compile_seconds={self.compile_seconds:.3f}")
        if self.backward_recorded or self.backward_replays or self.backward_eager:
            text += (f", backward_recorded={self.backward_recorded}, backward_replays={self.backward_replays}, "
                     f"backward_eager={self.backward_eager}")
        return text + ")"
