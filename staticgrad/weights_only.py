"""What a weights-only ``load`` may unpickle: PyTorch's allowlist of globals.

A file whose pickled objects name only allowed globals (a few builtins and containers, staticgrad's
own plain-data types, and the classes and functions a user allowlists with ``add_safe_globals`` or
the ``safe_globals`` context manager) loads with the default ``weights_only=True``. Unpickling
resolves every global through ``WeightsUnpickler.find_class``, which refuses any other name before
importing anything, so a file can build objects of allowlisted classes and call nothing else: a
malicious ``os.system`` or ``exec`` never runs. Without any user allowlist, ``load`` refuses such a
file before reading a pickle byte (a module class is never allowed by default)."""

from __future__ import annotations

import _codecs
import _compat_pickle
import builtins
import collections
import pickle
import threading

from staticgrad._eager.tensor import Device, Size
from staticgrad.nn.module import _Registry
from staticgrad.ops.dtypes import from_numpy_dtype

_USER: list = []           # add_safe_globals: the process-wide allowlist
_SCOPED = threading.local()  # safe_globals(...): the context manager's entries, per thread


def _default_allowed() -> dict:
    """The globals allowed without asking, as PyTorch allows them, plus staticgrad's own plain
    types that modules keep in their state (parameter registries, dtypes, sizes, devices)."""
    allowed = [builtins.bytearray, builtins.complex, builtins.set, builtins.frozenset,
               collections.Counter, collections.OrderedDict, _codecs.encode, _Registry, from_numpy_dtype, Size, Device]
    return {_name_of(obj): obj for obj in allowed}


def _name_of(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _entries(safe_globals) -> list:
    """The entries as a list: callables, or ``(callable, "module.name")`` pairs naming where a file
    finds them. Like PyTorch, nothing else is checked (``add_safe_globals(1)`` fails as iterating does)."""
    return list(safe_globals)


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes and functions (or ``(obj, "module.name")`` pairs) in weights-only loads,
    for the rest of the process. Only allowlist what you trust: loading can build and call them."""
    _USER.extend(_entries(safe_globals))


def get_safe_globals() -> list:
    """The process-wide allowlist ``add_safe_globals`` built."""
    return list(_USER)


def clear_safe_globals() -> None:
    """Empty the process-wide allowlist."""
    _USER.clear()


class safe_globals:
    """``with safe_globals([MyModel, ...]):`` allows these globals in weights-only loads inside the
    block only (on this thread), as PyTorch's context manager does."""

    def __init__(self, safe_globals: list):
        self.safe_globals = _entries(safe_globals)

    def __enter__(self):
        stack = getattr(_SCOPED, "stack", None)
        if stack is None:
            stack = _SCOPED.stack = []
        stack.append(self.safe_globals)

    def __exit__(self, *exc):
        _SCOPED.stack.pop()
        return False


def user_allowed() -> dict:
    """Every global a user allowlisted (process-wide and in open ``safe_globals`` blocks), by full name."""
    entries = list(_USER) + [e for block in getattr(_SCOPED, "stack", []) for e in block]
    named = {}
    for entry in entries:
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str):
            named[entry[1]] = entry[0]
        elif hasattr(entry, "__module__") and hasattr(entry, "__qualname__"):
            named[_name_of(entry)] = entry
    return named


def refusal(detail: str) -> pickle.UnpicklingError:
    """PyTorch's weights-only error, with what the weights-only unpickler found."""
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two options, \x1b[1mdo those "
        "steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) Re-running `staticgrad.load` with "
        "`weights_only` set to `False` will likely succeed, but it can result in arbitrary code execution. Do it "
        "only if you got the file from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` "
        f"please check the recommended steps in the following error message.\n\tWeightsUnpickler error: {detail}")


def unsupported_global(name: str) -> pickle.UnpicklingError:
    return refusal(
        f"Unsupported global: GLOBAL {name} was not an allowed global by default. Please use "
        f"`staticgrad.serialization.add_safe_globals([{name}])` or the "
        f"`staticgrad.serialization.safe_globals([{name}])` context manager to allowlist this global if you trust "
        "this class/function.")


class WeightsUnpickler(pickle.Unpickler):
    """An unpickler that resolves only allowlisted globals: every other name raises before import."""

    def __init__(self, file, allowed: dict, **kwargs):
        super().__init__(file, **kwargs)
        self._allowed = allowed

    def find_class(self, module: str, name: str):
        # Protocol 2 pickles name Python 2 modules (``__builtin__.set``); map them as pickle does.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        obj = self._allowed.get(full)
        if obj is None:
            raise unsupported_global(full)
        return obj


def allowed_globals() -> dict:
    """The defaults and the user's allowlist, by full name."""
    return {**_default_allowed(), **user_allowed()}
