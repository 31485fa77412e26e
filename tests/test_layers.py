"""The package's layering: no module imports a layer above its own, no import circle (counting
imports inside functions), and every import inside a function says why it is there."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import staticgrad

ROOT = Path(staticgrad.__file__).parent

# Lowest first. A module may import its own layer and the ones below; the package's own
# __init__ (the public API) sits on top.
LAYERS = [
    ("staticgrad.errors", "staticgrad._state"),
    ("staticgrad.ops",),
    ("staticgrad.runtime",),
    ("staticgrad.compiler",),
    ("staticgrad._eager",),
    ("staticgrad.autograd", "staticgrad.functional", "staticgrad.nn", "staticgrad.optim", "staticgrad.distributed"),
    ("staticgrad.inspect",),
    ("staticgrad.record",),
    ("staticgrad.bench", "staticgrad.cli", "staticgrad"),
]


def _modules() -> dict:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _imports(name: str, path: Path, source: str | None = None):
    """(imported staticgrad module, line, inside a function?) for every import in the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text() if source is None else source)
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + [base]).strip(".")
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno, id(node) in nested


def _layer(name: str) -> int:
    best = None
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (level, len(prefix))
    assert best is not None, f"{name} is in no layer: add it to LAYERS"
    return best[0]


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{name}:{line} imports {target}" for name, path in MODULES.items()
              for target, line, _ in _imports(name, path) if _layer(target) > _layer(name)]
    assert not upward, "\n".join(upward)


def test_compiler_and_runtime_never_import_the_eager_core_or_the_recorder():
    below = ("staticgrad.compiler", "staticgrad.runtime")
    above = ("staticgrad._eager", "staticgrad.record", "staticgrad.nn", "staticgrad.optim", "staticgrad.autograd")
    wrong = [f"{name} imports {target}" for name, path in MODULES.items() if name.startswith(below)
             for target, _, _ in _imports(name, path) if target.startswith(above)]
    assert not wrong, "\n".join(wrong)


def test_no_import_circle():
    graph = nx.DiGraph((name, target) for name, path in MODULES.items() for target, _, _ in _imports(name, path))
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, circles


def test_every_import_inside_a_function_says_why():
    silent = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    line = lines[node.lineno - 1]
                    if "#" not in line and not lines[node.lineno - 2].strip().startswith("#"):
                        silent.append(f"{name}:{node.lineno}: {line.strip()}")
    assert not silent, "\n".join(silent)


def test_the_checks_see_upward_relative_and_nested_imports():
    """The helpers find what they look for, so a passing run means something."""
    source = "from staticgrad.record import tracer\nfrom .. import errors\ndef f():\n    import staticgrad.nn.module\n"
    found = list(_imports("staticgrad.ops.example", ROOT / "ops" / "example.py", source))
    assert found == [("staticgrad.record.tracer", 1, False), ("staticgrad.errors", 2, False),
                     ("staticgrad.nn.module", 4, True)]
    assert _layer("staticgrad.ops.example") < _layer("staticgrad.record.tracer")
    assert _layer("staticgrad.ops.example") < _layer("staticgrad.nn.module")
