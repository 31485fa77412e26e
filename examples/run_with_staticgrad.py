"""Run a PyTorch script unchanged with ``torch`` bound to staticgrad.

Usage: ``python examples/run_with_staticgrad.py SCRIPT.py [script arguments...]``

Every ``import torch`` / ``import torch.X.Y`` / ``from torch.X import Z`` in the script (and in
anything it imports) resolves to ``staticgrad`` / ``staticgrad.X.Y``; the script then runs as
``__main__`` with ``sys.argv`` set to its own name and arguments, as ``python SCRIPT.py`` would.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys


class _TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import ``torch.X`` as the already-imported (or importable) module ``staticgrad.X``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        target_name = "staticgrad" + fullname[len("torch"):]
        target_spec = importlib.util.find_spec(target_name)
        if target_spec is None:
            return None
        is_package = target_spec.submodule_search_locations is not None
        return importlib.util.spec_from_loader(fullname, self, is_package=is_package)

    def create_module(self, spec):
        return importlib.import_module("staticgrad" + spec.name[len("torch"):])

    def exec_module(self, module):
        """The aliased module was executed when staticgrad imported it; nothing more to run."""


def bind_torch_to_staticgrad() -> None:
    """Make ``torch`` and every public ``torch.*`` submodule name the matching staticgrad module."""
    import staticgrad

    sys.meta_path.insert(0, _TorchAlias())
    sys.modules["torch"] = staticgrad
    for name, module in list(sys.modules.items()):
        parts = name.split(".")
        if parts[0] == "staticgrad" and len(parts) > 1 and not any(p.startswith("_") for p in parts):
            sys.modules["torch." + ".".join(parts[1:])] = module


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__.strip().splitlines()[2])
    script = argv[0]
    bind_torch_to_staticgrad()
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
