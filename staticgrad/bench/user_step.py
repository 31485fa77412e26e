"""The user's own training step for ``staticgrad bench --step`` and ``staticgrad.bench.compare``:
what a step file's ``make_step()`` returns (``BenchStep``, or a dict of the same fields), checked
with errors that say what was expected, and loading it from ``path/to/file.py:make_step``."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from staticgrad._eager.tensor import Tensor

EXPECTED = ("a staticgrad.bench.BenchStep, or a dict with the same keys: 'step' (the training step, called as "
            "step(*batch)), 'batches' (a non-empty list of batches, each a tuple of staticgrad tensors), and "
            "optionally 'torch_step' and 'torch_batches' (the PyTorch twin and its batches) and 'name'")


class StepError(ValueError):
    """A step, its batches or a step file is not what ``compare`` or ``staticgrad bench --step`` expects."""


@dataclass
class BenchStep:
    """A training step to time. ``step(*batch)`` runs one training step on one batch of ``batches``
    (a batch that is not a tuple or list is passed as the one argument); ``torch_step`` and
    ``torch_batches`` are its PyTorch twin (``torch_batches`` defaults to ``batches`` copied into
    torch tensors); ``name`` labels the report."""

    step: Callable
    batches: list
    torch_step: Callable | None = None
    torch_batches: list | None = None
    name: str | None = None

    def __post_init__(self):
        if not callable(self.step):
            raise StepError(f"step must be callable (the training step, called as step(*batch)), "
                            f"got {type(self.step).__name__}")
        _check_batches("batches", self.batches, staticgrad_side=True)
        if self.torch_step is not None and not callable(self.torch_step):
            raise StepError(f"torch_step must be callable (the PyTorch twin, called as torch_step(*batch)) or None, "
                            f"got {type(self.torch_step).__name__}")
        if self.torch_batches is not None:
            if self.torch_step is None:
                raise StepError("torch_batches was given without torch_step: give the PyTorch twin's step too")
            _check_batches("torch_batches", self.torch_batches, staticgrad_side=False)
        if self.name is not None and not isinstance(self.name, str):
            raise StepError(f"name must be a str, got {type(self.name).__name__}")


def label(step: BenchStep) -> str:
    """The report's name for ``step``: its ``name``, else the step function's name."""
    return step.name or getattr(step.step, "__name__", None) or type(step.step).__name__


def arguments(batch) -> tuple:
    """The positional arguments one batch stands for."""
    return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)


def _is_torch_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _check_batches(what: str, batches, staticgrad_side: bool) -> None:
    if not isinstance(batches, (list, tuple)) or not batches:
        got = f"an empty {type(batches).__name__}" if isinstance(batches, (list, tuple)) else type(batches).__name__
        raise StepError(f"{what} must be a non-empty list of batches (each a tuple of arguments for one step), "
                        f"got {got}")
    for index, batch in enumerate(batches):
        for value in arguments(batch):
            if staticgrad_side and _is_torch_tensor(value):
                raise StepError(f"{what}[{index}] holds a torch.Tensor: step takes staticgrad tensors (give the "
                                "PyTorch twin its own batches as torch_batches)")
            if not staticgrad_side and isinstance(value, Tensor):
                raise StepError(f"{what}[{index}] holds a staticgrad tensor: torch_step takes torch tensors")


def as_bench_step(obj, where: str = "make_step()") -> BenchStep:
    """``obj`` (a BenchStep, a dict, or an object with the same attributes) as a checked BenchStep."""
    if isinstance(obj, BenchStep):
        return obj
    names = [f.name for f in fields(BenchStep)]
    if isinstance(obj, dict):
        unknown = sorted(set(obj) - set(names), key=str)
        missing = [key for key in ("step", "batches") if key not in obj]
        if unknown or missing:
            problems = ([f"unknown key(s) {', '.join(map(repr, unknown))}"] if unknown else []) + \
                       ([f"missing key(s) {', '.join(map(repr, missing))}"] if missing else [])
            raise StepError(f"{where} returned a dict with {' and '.join(problems)}; expected {EXPECTED}")
        values = obj
    elif hasattr(obj, "step") and hasattr(obj, "batches"):
        values = {name: getattr(obj, name, None) for name in names}
    else:
        raise StepError(f"{where} returned {type(obj).__name__}; expected {EXPECTED}")
    try:
        return BenchStep(**values)
    except StepError as error:
        raise StepError(f"{where}: {error}") from None


def parse_spec(spec: str) -> tuple:
    """``path/to/file.py:function`` as (path, function); the function defaults to ``make_step``."""
    path, colon, function = spec.rpartition(":")
    if not colon or not path.endswith(".py"):
        path, function = spec, "make_step"
    if not path.endswith(".py"):
        raise StepError(f"--step {spec!r}: expected path/to/file.py:make_step (a Python file, then the name of "
                        "the function that builds the step)")
    if not function.isidentifier():
        raise StepError(f"--step {spec!r}: {function!r} is not a function name")
    return Path(path), function


def load_step(spec: str) -> BenchStep:
    """Import the file of ``spec`` (``path/to/file.py:make_step``) by its path, call the function
    with no arguments and check what it returns. The file's folder is on ``sys.path`` while the
    file is imported and the function runs, so it may import modules beside it."""
    path, function = parse_spec(spec)
    if not path.is_file():
        raise StepError(f"--step {spec!r}: no file {str(path)!r}")
    module_name = f"_staticgrad_step_{path.stem}_{abs(hash(str(path.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module   # dataclasses and pickling look a class's module up here
    try:
        loader_spec.loader.exec_module(module)
        make = getattr(module, function, None)
        if make is None:
            defined = sorted(name for name, value in vars(module).items()
                             if callable(value) and getattr(value, "__module__", None) == module_name)
            raise StepError(f"--step {spec!r}: {path.name} defines no {function!r}"
                            + (f" (it defines {', '.join(defined)})" if defined else ""))
        if not callable(make):
            raise StepError(f"--step {spec!r}: {function} in {path.name} is a {type(make).__name__}, not a function")
        step = as_bench_step(make(), f"{path.name}:{function}()")
    finally:
        sys.path.remove(folder)
    if step.name is None:
        step.name = f"{path.stem}.{label(step)}"
    return step
