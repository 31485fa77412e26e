"""The saved-tensor hooks in force (``torch.autograd.graph.saved_tensors_hooks``): a per-thread
stack of (pack, unpack) pairs. A node made while a pair is in force stores ``pack(tensor)`` in place
of each tensor it saves and calls ``unpack`` on it in backward; activation checkpointing
(``staticgrad.utils.checkpoint``) is built on this."""

from __future__ import annotations

import threading


class _SavedHooks(threading.local):
    """``stack``: the (pack, unpack) pairs in force in this thread, innermost last; ``disabled``:
    the message ``disable_saved_tensors_hooks`` raises with, or None."""

    stack: tuple = ()
    disabled: str | None = None


SavedHooks = _SavedHooks()
_count_lock = threading.Lock()


class AnyHooks:
    """How many saved-tensor hook contexts are open in all threads: a plain class attribute, which
    saving a tensor (a hot path) reads before it looks at its own thread's stack."""

    open = 0


class saved_tensors_hooks:
    """Context manager: every tensor saved for backward inside goes through ``pack_hook`` when saved
    and ``unpack_hook`` when backward reads it (PyTorch's ``torch.autograd.graph.saved_tensors_hooks``)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if SavedHooks.disabled is not None:
            raise RuntimeError(SavedHooks.disabled)
        SavedHooks.stack = SavedHooks.stack + ((self.pack_hook, self.unpack_hook),)
        with _count_lock:
            AnyHooks.open += 1
        return self

    def __exit__(self, *exc):
        SavedHooks.stack = SavedHooks.stack[:-1]
        with _count_lock:
            AnyHooks.open -= 1
        return False


class disable_saved_tensors_hooks:
    """Context manager: registering saved-tensor hooks inside raises ``RuntimeError(error_message)``."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._previous = SavedHooks.disabled
        SavedHooks.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        SavedHooks.disabled = self._previous
        return False
