"""Grad mode: whether dispatched ops record autograd nodes (``no_grad``, ``enable_grad``...)."""

from __future__ import annotations

import functools
import threading


class _GradMode(threading.local):
    """The switch dispatch reads on every op; per thread, as in PyTorch (each new thread starts
    with grad enabled)."""

    enabled = True


GradMode = _GradMode()


def is_grad_enabled() -> bool:
    return GradMode.enabled


class _GradModeContext:
    """Base for the grad-mode context managers; each also works as a decorator."""

    mode = True

    def __enter__(self):
        self._previous = GradMode.enabled
        GradMode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        GradMode.enabled = self._previous
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Ops inside build no graph: results do not require grad."""

    mode = False


class enable_grad(_GradModeContext):
    """Re-enable graph building inside a ``no_grad`` block."""

    mode = True


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (staticgrad has no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        self.mode = not mode

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            previous = GradMode.enabled
            GradMode.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                GradMode.enabled = previous
        return wrapper


class set_grad_enabled(_GradModeContext):
    """Set grad mode now; used as a context manager, restore it on exit."""

    def __init__(self, mode: bool):
        self._previous = GradMode.enabled
        self.mode = bool(mode)
        GradMode.enabled = self.mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        GradMode.enabled = self._previous
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
