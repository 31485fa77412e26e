"""The on-disk kernel cache: a warm process compiles nothing; a broken, poisoned or unwritable
cache costs a recompile and one warning naming the directory, never a failed or different replay.

Most cases run a small compiled training step in child processes (Numba reads its cache entries
in each new process, at a kernel's first call), with the child importing this checkout's
staticgrad and ``HOME`` inside tmp_path (Numba may fall back to ``~/.cache/numba``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from staticgrad.runtime import kernels

ROOT = Path(__file__).resolve().parent.parent

# One training step, eager and compiled side by side; the replays must match eager bit for bit.
# Prints what the kernels did: cache hits and misses (Numba compiled), and RuntimeWarnings.
CHILD = """
import json, warnings
import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.runtime.kernels import loaded_kernels

def build():
    sg.manual_seed(0)
    model = sg.nn.Sequential(sg.nn.Linear(8, 16), sg.nn.Tanh(), sg.nn.Linear(16, 3))
    return model, training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))

(eager_model, eager), (compiled_model, step) = build(), build()
compiled = sg.compile(step)
sg.manual_seed(1)
data = [(sg.randn(4, 8), sg.randn(4, 3)) for _ in range(4)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for x, y in data:
        assert eager(x, y).detach().numpy().tobytes() == compiled(x, y).detach().numpy().tobytes()
for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
    assert pe.detach().numpy().tobytes() == pc.detach().numpy().tobytes()
stats = [kernel.stats for kernel in loaded_kernels().values() if kernel.signatures]  # the kernels that ran
print(json.dumps({"staticgrad": sg.__file__, "replays": compiled.stats.replays, "kernels": len(stats),
                  "hits": sum(s.cache_hits.total() for s in stats),
                  "misses": sum(s.cache_misses.total() for s in stats),
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}))
"""

# Compile every kernel of the step again, from the same files, under foreign module names (as
# `importlib` on a cached file would): Numba saves entries that name the foreign module.
POISON = """
import importlib.util, shutil, sys
exec(compile(sys.argv[1], "<child>", "exec"))
for name, kernel in loaded_kernels().items():
    shutil.rmtree(kernel.stats.cache_path)
    spec = importlib.util.spec_from_file_location(f"foreign_{name}", kernel.py_func.__code__.co_filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for signature in kernel.signatures:
        getattr(module, name).compile(signature)
"""


def run_child(tmp_path: Path, cache, code: str = CHILD, *args, home=None) -> dict:
    """Run ``code`` in a fresh interpreter with STATICGRAD_CACHE_DIR=cache (unset if None)."""
    env = {k: v for k, v in os.environ.items() if k not in ("STATICGRAD_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["HOME"] = str(home or tmp_path / "home")
    if cache is not None:
        env["STATICGRAD_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    if "staticgrad" in report:
        assert Path(report["staticgrad"]).is_relative_to(ROOT), "the child must import this checkout"
    return report


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    """A kernel cache the step has filled (the first run compiles every kernel)."""
    tmp_path = tmp_path_factory.mktemp("warm")
    report = run_child(tmp_path, tmp_path / "kernels")
    assert report["misses"] == report["kernels"] > 0 and report["hits"] == 0 and not report["warnings"]
    return tmp_path / "kernels"


def copy_of(warm_cache: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(warm_cache, tmp_path / "kernels"))


def assert_clean_warm_run(tmp_path: Path, cache: Path) -> None:
    report = run_child(tmp_path, cache)
    assert report["misses"] == 0 and report["hits"] == report["kernels"], report
    assert report["warnings"] == []


def test_a_second_process_loads_every_kernel_from_disk(warm_cache, tmp_path):
    assert_clean_warm_run(tmp_path, copy_of(warm_cache, tmp_path))


def corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"garbage": b"\xff\xfe garbage \x00" * 8, "empty": b"", "truncated": data[:len(data) // 2]}[how])


@pytest.mark.parametrize("suffix,how", [(s, h) for s in ("nbi", "nbc") for h in ("garbage", "empty", "truncated")]
                         + [("py", "garbage")])
def test_a_broken_cache_file_is_dropped_recompiled_and_warned_once(warm_cache, tmp_path, suffix, how):
    cache = copy_of(warm_cache, tmp_path)
    victim = min(cache.glob("k_*.py"), key=lambda p: p.stat().st_size).stem
    files = [cache / f"{victim}.py"] if suffix == "py" else list((cache / "__pycache__").glob(f"{victim}.*.{suffix}"))
    assert files
    for path in files:
        corrupt(path, how)
    report = run_child(tmp_path, cache)
    assert len(report["warnings"]) == 1 and str(cache) in report["warnings"][0], report
    # A rewritten .py has the text its index was stamped with, so its entry loads again.
    assert report["misses"] == (0 if suffix == "py" else 1), report
    assert_clean_warm_run(tmp_path, cache)


def test_many_broken_entries_give_one_warning(warm_cache, tmp_path):
    cache = copy_of(warm_cache, tmp_path)
    for path in (cache / "__pycache__").glob("*.nbi"):
        corrupt(path, "garbage")
    report = run_child(tmp_path, cache)
    assert report["misses"] == report["kernels"] and len(report["warnings"]) == 1, report
    assert_clean_warm_run(tmp_path, cache)


def test_entries_saved_under_another_module_name_are_replaced(warm_cache, tmp_path):
    """Numba keys an entry by file, function and bytecode, not module name, but rebuilding it
    imports the module it was compiled in: in a new process that fails (ModuleNotFoundError)."""
    cache = copy_of(warm_cache, tmp_path)
    run_child(tmp_path, cache, POISON, CHILD)
    report = run_child(tmp_path, cache)
    assert report["misses"] == report["kernels"], report
    assert len(report["warnings"]) == 1 and "foreign_" in report["warnings"][0], report
    assert_clean_warm_run(tmp_path, cache)


@pytest.mark.parametrize("layout", ["file in the way", "home is a file", "numba cannot write"])
def test_an_unwritable_cache_falls_back_to_memory(tmp_path, layout):
    """Tests run as root, which chmod does not stop, so each case puts a regular file where a
    directory must go: mkdir fails with NotADirectoryError for root too."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    cache, home, named = {
        "file in the way": (blocker / "kernels", None, blocker / "kernels"),
        "home is a file": (None, blocker, blocker / ".cache" / "staticgrad" / "kernels"),
        # our directory is fine, but Numba's __pycache__ and its ~/.cache/numba fallback are not
        "numba cannot write": (tmp_path / "kernels", blocker, tmp_path / "kernels"),
    }[layout]
    if layout == "numba cannot write":
        cache.mkdir()
        (cache / "__pycache__").write_text("not a directory")
    report = run_child(tmp_path, cache, home=home)
    assert report["replays"] >= 2 and report["misses"] == report["kernels"] > 0, report
    assert len(report["warnings"]) == 1 and str(named) in report["warnings"][0], report


def tiny_kernel() -> tuple:
    """(name, source) of a fresh one-loop kernel in the generated kernels' form."""
    name = f"k_test_{uuid.uuid4().hex[:12]}"
    return name, ("import numpy as np\nfrom numba import njit\n\n\n"
                  "@njit(cache=True, error_model='numpy', nogil=True)\n"
                  f"def {name}(a0, o0):\n    for i0 in range(a0.shape[0]):\n        o0[i0] = a0[i0] + 1.0\n")


def test_an_entry_holding_another_signature_is_dropped(tmp_path, monkeypatch):
    """Two processes first compiling different signatures both pick data file 1, so the index can
    end up naming one signature and the data file holding the other: loading it would run code
    compiled for contiguous arrays on strided ones, silently wrong."""
    monkeypatch.setenv("STATICGRAD_CACHE_DIR", str(tmp_path))
    name, source = tiny_kernel()
    contiguous, strided = np.arange(4, dtype=np.float32), np.arange(8, dtype=np.float32)[::2]
    pycache = tmp_path / "__pycache__"
    kernels._disk_kernel(name, source)(contiguous, np.empty(4, np.float32))
    contiguous_data = next(pycache.glob("*.nbc")).read_bytes()
    shutil.rmtree(pycache)
    kernels._disk_kernel(name, source)(strided, np.empty(4, np.float32))
    next(pycache.glob("*.nbc")).write_bytes(contiguous_data)
    out = np.zeros(4, np.float32)
    with pytest.warns(RuntimeWarning, match="signature"):
        kernels._disk_kernel(name, source)(strided, out)
    np.testing.assert_array_equal(out, strided + 1)


def test_concurrent_first_loads_share_one_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("STATICGRAD_CACHE_DIR", str(tmp_path))
    name, source = tiny_kernel()
    start, results = threading.Barrier(8), [None] * 8

    def first_replay(k):
        start.wait()
        kernel = kernels.load_kernel(name, source)
        out = np.zeros(5, np.float32)
        kernel(np.full(5, k, np.float32), out)
        results[k] = kernel, out

    threads = [threading.Thread(target=first_replay, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(kernel) for kernel, _ in results}) == 1
    assert all((out == k + 1).all() for k, (_, out) in enumerate(results))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__pycache__", f"{name}.py"]


# Kernels that run one loop nest twice and three times (as a kernel merging two same-shaped updates
# does), loaded and called in the order of argv's names. Prints the kernels' cache hits and misses.
SHARED_LOOP_KERNELS = """
import collections, json, sys, warnings
import numpy as np
import staticgrad as sg
from staticgrad.compiler.codegen import kernel_source
from staticgrad.compiler.ir import FusedKernel, FusedLoop
from staticgrad.runtime.kernels import load_kernel, loaded_kernels

neg = FusedLoop(ndim=1, dtype="float64", dims=(0,), loads=((("in", 0), (0,)),),
                body=(("neg", (("in", 0),), ()),), stores=((0, 0, (0,)),), sums=())
repeats = {"twice": 2, "thrice": 3}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for arg in sys.argv[1:]:
        kernel = FusedKernel(loops=(neg,) * repeats[arg], n_inputs=1, n_outputs=1, n_scalars=0, n_dims=1)
        x, out = np.arange(5.0), np.empty(5)
        load_kernel(*kernel_source(kernel)[:2])(x, out)
        assert np.array_equal(out, -x)
kernels = [kernel for kernel in loaded_kernels().values() if kernel.signatures]
loops = collections.Counter(n for kernel in kernels for n in kernel.py_func.__globals__ if n.startswith("loop_"))
print(json.dumps({"staticgrad": sg.__file__, "kernels": len(kernels),
                  "hits": sum(k.stats.cache_hits.total() for k in kernels),
                  "misses": sum(k.stats.cache_misses.total() for k in kernels),
                  "shared": sorted(name for name, count in loops.items() if count > 1),
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}))
"""


def test_a_kernel_sharing_a_loop_loads_without_the_kernel_it_was_compiled_after(tmp_path):
    """A kernel whose loop nest another kernel defined first in the compiling process must load
    from the cache in a process that never loads that other kernel (or loads it later)."""
    cache = tmp_path / "kernels"
    first = run_child(tmp_path, cache, SHARED_LOOP_KERNELS, "twice", "thrice")
    assert first["misses"] == first["kernels"] == 2 and not first["warnings"], first
    for order in (["thrice"], ["thrice", "twice"]):
        report = run_child(tmp_path, cache, SHARED_LOOP_KERNELS, *order)
        assert report["misses"] == 0 and report["hits"] == report["kernels"], (order, report)
        assert report["warnings"] == [], (order, report)
    both = run_child(tmp_path, cache, SHARED_LOOP_KERNELS, "thrice", "twice")
    assert both["shared"], "the two kernels should run one shared loop nest"
