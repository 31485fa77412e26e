"""Compiled fused kernels, cached by structure in memory and on disk.

A kernel's source is written once to ``<cache dir>/<name>.py`` (the name hashes the source) and
imported from there, so Numba's own on-disk cache (``cache=True``) lets a second process load the
machine code instead of compiling it. The cache directory is ``$STATICGRAD_CACHE_DIR``, else
``~/.cache/staticgrad/kernels``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

_LOADED: dict = {}


def cache_dir() -> Path:
    root = os.environ.get("STATICGRAD_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "staticgrad" / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_kernel(name: str, source: str):
    """The compiled-on-first-call Numba function for a kernel source."""
    kernel = _LOADED.get(name)
    if kernel is not None:
        return kernel
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
            handle.write(source)
        os.replace(handle.name, path)
    spec = importlib.util.spec_from_file_location(f"staticgrad_kernel_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kernel = _LOADED[name] = getattr(module, name)
    return kernel


def loaded_kernels() -> dict:
    return dict(_LOADED)
