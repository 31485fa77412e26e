"""Compiled fused kernels, cached by structure in memory and on disk.

A kernel's source is written once to ``<cache dir>/<name>.py`` (the name hashes the source) and
run as module ``staticgrad_kernel_<name>``, so Numba's own on-disk cache (``cache=True``, files
``<name>.*.nbi``/``.nbc`` in ``<cache dir>/__pycache__``) lets a second process load the machine
code instead of compiling it. The cache directory is ``$STATICGRAD_CACHE_DIR``, else
``~/.cache/staticgrad/kernels``.

Numba reads a kernel's cache entry at its first call for a signature (without the refresh of its
registries its own load starts with: ``ops.numba_cache``), so a broken entry (a truncated file,
one written under another module name) would fail a replay: each kernel's Numba
cache object is wrapped to drop such an entry and compile afresh. When the directory cannot be
written at all, kernels are compiled in memory. Both cases warn once per directory.
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

from staticgrad.ops.numba_cache import load_cached

_LOADED: dict = {}
_LOAD_LOCK = threading.Lock()      # one kernel object per name, even for concurrent first replays
_LOOPS: dict = {}                  # shared loop functions by name (the name hashes the text)
_LOOPS_LOCK = threading.Lock()
LOOP_PREFIX = "loop_"              # how a kernel module names a loop function it may share
_WARNED: set = set()               # (kind, directory) pairs already warned about in this process
_WARN_LOCK = threading.Lock()      # separate from _LOAD_LOCK: taken under Numba's compiler lock


def cache_dir() -> Path:
    path = _cache_root()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cache_root() -> Path:
    root = os.environ.get("STATICGRAD_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "staticgrad" / "kernels"


def load_kernel(name: str, source: str):
    """The compiled-on-first-call Numba function for a kernel source."""
    kernel = _LOADED.get(name)
    if kernel is None:
        with _LOAD_LOCK:
            kernel = _LOADED.get(name)
            if kernel is None:
                kernel = _LOADED[name] = _new_kernel(name, source)
    return kernel


def loaded_kernels() -> dict:
    return dict(_LOADED)


def _new_kernel(name: str, source: str):
    """Disk-cached when the cache directory can be written, else compiled in memory (one warning).
    RuntimeError is Numba's "no locator available": it found no writable place for its cache."""
    try:
        return _disk_kernel(name, source)
    except (OSError, RuntimeError) as error:
        where = _cache_root()
        _warn_once("unwritable", where,
                   f"staticgrad cannot write its kernel cache at {where} ({type(error).__name__}: {error}); "
                   "kernels are compiled in memory, so every new process compiles them again. "
                   "Point STATICGRAD_CACHE_DIR at a writable directory to keep them.")
        return _run_kernel_module(name, _without_disk_cache(source), f"<staticgrad kernel {name}>")


def _disk_kernel(name: str, source: str):
    """The kernel run from ``<cache dir>/<name>.py``, its Numba cache wrapped in _CheckedCache."""
    path = cache_dir() / f"{name}.py"
    if _write_source(path, source):
        _warn_once("broken", path.parent,
                   f"staticgrad found a corrupt kernel source {path} in its kernel cache and rewrote it. "
                   "If this keeps happening, delete that directory; another program may be writing to it.")
    kernel = _run_kernel_module(name, source, str(path))
    kernel._cache = _CheckedCache(kernel._cache, kernel, path.parent)
    return kernel


def _write_source(path: Path, source: str) -> bool:
    """Write the kernel's source unless the file holds exactly it; True if it held something else
    (garbage, binary, unreadable): the name hashes the source, so that file was corrupt."""
    data = source.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
        corrupt = True
    except FileNotFoundError:
        corrupt = False
    except OSError:          # unreadable, or a directory in its place
        corrupt = True
    _write_atomically(path, data)
    return corrupt


def _write_atomically(path: Path, data: bytes) -> None:
    """Write through a temporary file and os.replace, so no reader sees a partial file."""
    handle, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _run_kernel_module(name: str, source, filename: str):
    """Run the kernel's module (source text or syntax tree) as ``staticgrad_kernel_<name>``.
    The code is compiled from ``source`` itself, never re-read from disk; Numba's cache locates
    and stamps its entries by ``filename``."""
    module = types.ModuleType(f"staticgrad_kernel_{name}")
    module.__file__ = filename
    sys.modules[module.__name__] = module   # Numba re-imports it by name when loading an entry
    exec(compile(source, filename, "exec"), module.__dict__)
    _share_loops(module)
    return getattr(module, name)


def _share_loops(module) -> None:
    """Point a kernel module's loop functions (``loop_<hash of its text>``, called by the kernel)
    at one function per name in the process, before the kernel compiles: kernels that run the same
    loop nest (an optimizer's update, in several kernels) then compile it once per process.

    The shared function lives in its own module, ``staticgrad_loop_<hash>``, made from the first
    kernel module that defines it. A cached kernel names its loops' module (Numba re-imports it to
    rebuild their environments), and every kernel holding the loop makes that module before it
    loads, whatever order a process loads kernels in."""
    for name, value in list(vars(module).items()):
        if name.startswith(LOOP_PREFIX):
            with _LOOPS_LOCK:
                shared = _LOOPS.get(name)
                if shared is None:
                    shared = _LOOPS[name] = _loop_in_own_module(module, name, value)
            setattr(module, name, shared)


def _loop_in_own_module(kernel_module, name: str, loop):
    """A copy of the Numba function ``loop`` whose globals are module ``staticgrad_<name>`` (the
    kernel module's header names), registered in sys.modules so Numba can import it by name."""
    from numba import jit  # numba loads with the first kernel, not with staticgrad

    home = types.ModuleType(f"staticgrad_{name}")
    home.__dict__.update((key, value) for key, value in vars(kernel_module).items()
                         if not key.startswith("__") and not key.startswith(LOOP_PREFIX)
                         and key != kernel_module.__name__.removeprefix("staticgrad_kernel_"))
    home.__file__ = kernel_module.__file__
    function = loop.py_func
    copy = types.FunctionType(function.__code__, home.__dict__, function.__name__,
                              function.__defaults__, function.__closure__)
    sys.modules[home.__name__] = home
    setattr(home, name, jit(**loop.targetoptions)(copy))
    return getattr(home, name)


def _without_disk_cache(source: str) -> ast.Module:
    """The kernel module with ``cache=False`` in its decorators, to compile it without a file."""
    tree = ast.parse(source)
    for function in (node for node in tree.body if isinstance(node, ast.FunctionDef)):
        for decorator in function.decorator_list:
            for keyword in getattr(decorator, "keywords", ()):
                if keyword.arg == "cache":
                    keyword.value = ast.copy_location(ast.Constant(False), keyword.value)
    return tree


def _warn_once(kind: str, directory, message: str) -> None:
    with _WARN_LOCK:
        if (kind, str(directory)) in _WARNED:
            return
        _WARNED.add((kind, str(directory)))
    warnings.warn(message, RuntimeWarning, stacklevel=3)


class _CheckedCache:
    """One kernel's Numba cache (a ``numba.core.caching.FunctionCache``), made to drop an entry
    that fails to load or belongs to another module or signature, and to keep a kernel whose entry
    cannot be saved. Numba consults it only when a signature is first compiled, so calls pay
    nothing."""

    def __init__(self, cache, kernel, directory: Path):
        self._cache = cache
        self._directory = directory      # staticgrad's cache directory: warnings are once per directory
        self._name = kernel.__name__
        self._module = kernel.__module__

    @property
    def cache_path(self):
        return self._cache.cache_path

    def load_overload(self, sig, target_context):
        try:
            result = load_cached(self._cache, sig, target_context)
            if result is not None:
                _check_entry(result, sig, self._module)
            return result
        except Exception as error:  # any failure to load means: recompile, never fail the replay
            self._drop(error)
            return None

    def save_overload(self, sig, data):
        try:
            self._cache.save_overload(sig, data)
        except Exception as error:  # the kernel is compiled and works; only the cache missed out
            _warn_once("unsaved", self._directory,
                       f"staticgrad could not save kernel {self._name} to the cache in {self.cache_path} "
                       f"({type(error).__name__}: {error}); new processes will compile it again. "
                       "Check that the directory is writable, or delete it.")

    def enable(self):
        self._cache.enable()

    def disable(self):
        self._cache.disable()

    def flush(self):
        self._cache.flush()

    def _drop(self, error: Exception) -> None:
        """Delete this kernel's index and data files, so Numba compiles and saves a fresh entry."""
        for entry in Path(self.cache_path).glob(f"{self._name}.*.nb[ic]"):
            with contextlib.suppress(OSError):
                entry.unlink()
        _warn_once("broken", self._directory,
                   f"staticgrad found a broken kernel cache entry for {self._name} in {self.cache_path} "
                   f"({type(error).__name__}: {error}); it was deleted and the kernel recompiled. "
                   "If this keeps happening, delete that directory; another program may be writing to it.")


def _check_entry(result, sig, module: str) -> None:
    """Refuse a loaded entry compiled for another module (the file imported under another name)
    or another signature (an index and data file from two racing processes)."""
    from numba.core.sigutils import normalize_signature  # numba loads with the first kernel, not with staticgrad

    if result.fndesc.modname != module:
        raise ValueError(f"entry was compiled as module {result.fndesc.modname!r}, not {module!r}")
    wanted = tuple(normalize_signature(sig)[0])
    if tuple(result.signature.args) != wanted:
        raise ValueError(f"entry holds signature {result.signature.args}, not {wanted}")
