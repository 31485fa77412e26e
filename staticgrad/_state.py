"""Process-wide switches the front end reads on hot paths (kept in one small module so that
tensor.py and dispatch.py can both read them without importing each other)."""


class Tracing:
    """The tracer recording a compiled function, or None when nothing is being recorded; and
    which phase of a training step is running (recorded with each op, for plan inspection)."""

    tracer = None
    phase = "forward"


class phase:
    """Mark the ops run inside as belonging to a phase ("backward", "optimizer")."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self._previous = Tracing.phase
        Tracing.phase = self.name
        return self

    def __exit__(self, *exc):
        Tracing.phase = self._previous
        return False


class Epoch:
    """Bumped whenever state a compiled plan depends on changes outside its view (a module's
    parameters reassigned, ``.data`` or ``requires_grad`` of a captured tensor changed, a module
    switched between train and eval): plans re-check their guards when it moves."""

    value = 0


def bump_epoch() -> None:
    Epoch.value += 1
