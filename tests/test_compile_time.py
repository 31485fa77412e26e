"""What keeps a compile short: fused groups that do the same work on other arrays (an optimizer's
update of each parameter) run one kernel, and a kernel's loop nests that do so share one function,
each compiled once, with replays still equal to eager bit for bit; a 0-d input goes in as a float,
not an array; the ops' Numba loops compile once per dtype, whether an input is a replay's read-only
constant or an eager array; and a process that finds everything in the cache loads it without
Numba's registries of implementations."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

import staticgrad as sg
from staticgrad.bench.models import training_step


def _twin_steps(make_model, make_opt):
    """(eager model, eager step), (compiled model, compiled step), from the same weights."""
    pairs = []
    for _ in range(2):
        sg.manual_seed(0)
        model = make_model()
        pairs.append((model, training_step(sg, model, make_opt(model.parameters()))))
    (eager_model, eager), (compiled_model, step) = pairs
    return eager_model, eager, compiled_model, sg.compile(step)


def _bits(tensor) -> bytes:
    return tensor.detach().numpy().tobytes()


def test_every_weights_update_runs_one_kernel_and_replays_bit_for_bit():
    """Adam's updates of three weights (and of three biases) are three calls of one kernel, compiled
    once, not parts of kernels merged from different updates; replays equal eager bit for bit."""
    def make_model():
        return sg.nn.Sequential(sg.nn.Linear(8, 16), sg.nn.Tanh(), sg.nn.Linear(16, 16), sg.nn.Tanh(),
                                sg.nn.Linear(16, 3))

    eager_model, eager, compiled_model, compiled = _twin_steps(
        make_model, lambda params: sg.optim.Adam(params, lr=0.01, weight_decay=0.1))
    sg.manual_seed(1)
    for _ in range(5):   # traces, then replays on new inputs
        x, y = sg.randn(4, 8), sg.randn(4, 3)
        assert _bits(eager(x, y)) == _bits(compiled(x, y))
    assert compiled.stats.replays >= 3
    for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
        assert _bits(pe) == _bits(pc)
    program = compiled.plan.program
    assert any(re.search(r"^def k_\w+\(.*\bv\d+\b", s, re.M) for s in program.kernels.values()), \
        "Adam's 0-d values go by value"
    calls = Counter(program.kernel_calls)
    assert sorted(calls.values())[-2:] == [3, 3], calls   # the weights' kernel, the biases' kernel


def test_a_kernel_takes_a_0d_input_as_a_float_unless_it_writes_it():
    """A 0-d array of the loops' dtype (an optimizer's bias correction) is passed as a float, which
    Numba compiles in a fraction of an array argument's time; one an output is written into stays
    an array."""
    from staticgrad.compiler.codegen import kernel_source
    from staticgrad.compiler.ir import FusedKernel, FusedLoop

    scaled = FusedLoop(ndim=1, dtype="float32", dims=(0,), loads=((("in", 0), (0,)), (("in", 1), ())),
                       body=(("mul", (("in", 0), ("in", 1)), ()),), stores=((0, 0, (0,)),), sums=())
    kernel = FusedKernel(loops=(scaled,), n_inputs=2, n_outputs=1, n_scalars=0, n_dims=1, value_inputs=(1,))
    _, source, _ = kernel_source(kernel)
    assert re.search(r"^def k_\w+\(a0, v1, o0\):$", source, re.M) and "w1 = T(v1)" in source
    assert "a1" not in source and "v1[" not in source
    _, source, _ = kernel_source(kernel, same_as=(1,))
    assert re.search(r"^def k_\w+\(a0, a1\):$", source, re.M) and "a1[()]" in source


def test_a_kernel_with_distinct_loops_keeps_them_inline():
    from staticgrad.compiler.codegen import kernel_source
    from staticgrad.compiler.ir import FusedKernel, FusedLoop

    def loop(op: str) -> FusedLoop:
        return FusedLoop(ndim=1, dtype="float32", dims=(0,), loads=((("in", 0), (0,)),),
                         body=((op, (("in", 0),), ()),), stores=((0, 0, (0,)),), sums=())

    neg, same = loop("neg"), loop("neg")
    distinct = FusedKernel(loops=(neg, loop("abs")), n_inputs=1, n_outputs=1, n_scalars=0, n_dims=1)
    assert "def loop_" not in kernel_source(distinct)[1]
    repeated = FusedKernel(loops=(neg, same), n_inputs=1, n_outputs=1, n_scalars=0, n_dims=1)
    _, source, _ = kernel_source(repeated)
    assert source.count("def loop_") == 1 and len(re.findall(r"^    loop_\w+\(a0, o0\)$", source, re.M)) == 2


def test_lstm_loops_compile_once_for_eager_and_replay():
    from staticgrad.ops import rnn_loops

    def make_model():
        return sg.nn.LSTM(5, 6)

    class Last(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = make_model()

        def forward(self, x):
            return self.lstm(x)[0][-1, :, :3]

    eager_model, eager, compiled_model, compiled = _twin_steps(Last, lambda p: sg.optim.SGD(p, lr=0.1))
    sg.manual_seed(2)
    for _ in range(4):   # no initial state given: a replay reads zeros as a read-only constant
        x, y = sg.randn(3, 2, 5), sg.randn(2, 3)
        assert _bits(eager(x, y)) == _bits(compiled(x, y))
    assert compiled.stats.replays >= 2
    for loop in (rnn_loops.gates_forward, rnn_loops.gates_backward):
        kinds = [tuple(a.dtype for a in signature if hasattr(a, "dtype")) for signature in loop.signatures]
        assert len(kinds) == len(set(kinds)), f"{loop.py_func.__name__} compiled twice for one dtype: {loop.signatures}"
    assert np.array_equal(eager_model.lstm.weight_hh_l0.detach().numpy(),
                          compiled_model.lstm.weight_hh_l0.detach().numpy())


def test_the_embedding_gradients_loop_compiles_once_for_eager_and_replay():
    """Positions made inside the step are a replay's read-only constant, a token batch a writable
    array: the loop adding an embedding's gradient rows gets both as read-only views, so it
    compiles once per dtype, not once per mix of read-only and writable arguments."""
    from staticgrad.ops import scatter_loops

    class Model(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = sg.nn.Embedding(10, 4), sg.nn.Embedding(6, 4)

        def forward(self, x):
            return self.tokens(x) + self.positions(sg.arange(x.shape[1]))

    class Last(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Model()

        def forward(self, x):
            return self.model(x)[:, -1, :3]

    eager_model, eager, compiled_model, compiled = _twin_steps(Last, lambda p: sg.optim.SGD(p, lr=0.1))
    sg.manual_seed(3)
    for _ in range(4):
        x, y = sg.randint(0, 10, (2, 5)), sg.randn(2, 3)
        assert _bits(eager(x, y)) == _bits(compiled(x, y))
    assert compiled.stats.replays >= 2
    kinds = [tuple(a.dtype for a in signature) for signature in scatter_loops.add_rows.signatures]
    assert len(kinds) == len(set(kinds)), f"add_rows compiled twice for one dtype: {scatter_loops.add_rows.signatures}"
    for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
        assert _bits(pe) == _bits(pc)


def test_kernels_running_one_loop_nest_share_its_compiled_function():
    from staticgrad.compiler.codegen import kernel_source
    from staticgrad.compiler.ir import FusedKernel, FusedLoop
    from staticgrad.runtime.kernels import load_kernel

    def loop(op: str, source: tuple = ("in", 0)) -> FusedLoop:
        return FusedLoop(ndim=1, dtype="float64", dims=(0,), loads=((source, (0,)),),
                         body=((op, (("in", 0),), ()),), stores=((0, 0, (0,)),), sums=())

    twice = FusedKernel(loops=(loop("neg"), loop("neg")), n_inputs=1, n_outputs=1, n_scalars=0, n_dims=1)
    thrice = FusedKernel(loops=(loop("neg"),) * 3, n_inputs=1, n_outputs=1, n_scalars=0, n_dims=1)
    first, second = (load_kernel(*kernel_source(k)[:2]) for k in (twice, thrice))
    assert first is not second
    shared = [name for name in first.py_func.__globals__ if name.startswith("loop_")]
    assert len(shared) == 1
    assert first.py_func.__globals__[shared[0]] is second.py_func.__globals__[shared[0]]
    x = np.arange(4.0)
    out = np.empty(4)
    first(x, out)
    assert np.array_equal(out, -x)
    second(x, out)
    assert np.array_equal(out, -x)


def test_a_numba_cache_load_is_a_cache_hit_seen_as_a_load_event(tmp_path):
    """A function's machine code loaded from the disk cache goes through ``load_cached`` (no
    refresh of Numba's target context), inside the load event listeners can count."""
    import importlib.util

    from numba.core import event

    from staticgrad.ops.numba_cache import LOAD_EVENT, njit_cached

    path = tmp_path / "cached_twice.py"
    path.write_text("def twice(x):\n    return 2 * x\n")
    spec = importlib.util.spec_from_file_location("cached_twice", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert njit_cached(module.twice)(np.arange(3.0))[2] == 4.0   # compiled and saved
    loading = njit_cached(module.twice)                            # a new dispatcher: loads at its first call
    seen = []

    class Listener(event.Listener):
        def on_start(self, _event):
            seen.append("load")

        def on_end(self, _event):
            pass

    listener = Listener()
    event.register(LOAD_EVENT, listener)
    try:
        assert loading(np.arange(3.0))[1] == 2.0
    finally:
        event.unregister(LOAD_EVENT, listener)
    assert seen == ["load"]
    assert loading.stats.cache_hits and not loading.stats.cache_misses


def test_eager_peak_is_the_most_bytes_of_tensors_the_call_made_alive_at_once():
    """Counted per array, as eager holds them: a temporary dies when Python drops it, a
    rebinding frees the old tensor, a view adds nothing, and what backward saves and makes counts."""
    x = sg.randn(16, 8)                       # float32: 512 bytes, made before the call (not counted)

    @sg.compile
    def temporaries(x):
        a = x * 2                             # 512, alive to the end
        b = (a + 1).sum()                     # a + 1 (512) dies once summed (4)
        c = a * 3                             # 512
        return b + c.sum()                    # 4, 4

    @sg.compile
    def rebinding(x):
        a = x * 2
        a = (a + 1).reshape(8, 16)            # both alive while the second is made; the view is free
        return a.sum()

    for f, peak in ((temporaries, 512 + 512 + 4 + 512 + 4 + 4 - 512), (rebinding, 1024)):
        f(x)
        assert f.plans[0].record.eager_peak_bytes == peak
        assert "eager peak 1.0 KiB" in f.plans[0].describe()


def test_eager_peak_leaves_the_callers_tracemalloc_alone():
    import tracemalloc

    tracemalloc.start()
    try:
        f = sg.compile(lambda x: (x * 2).sum())
        f(sg.randn(4, 4))
        f(sg.randn(4, 4))
        assert tracemalloc.is_tracing() and f.stats.replays == 1
        assert f.plans[0].record.eager_peak_bytes == 64 + 4
    finally:
        tracemalloc.stop()


def test_a_trace_that_compiles_nothing_measures_eager_peak_memory():
    _, eager, _, compiled = _twin_steps(lambda: sg.nn.Linear(6, 2), lambda p: sg.optim.SGD(p, lr=0.1))
    x, y = sg.randn(3, 6), sg.randn(3, 2)
    eager(x, y)
    for _ in range(3):
        compiled(x, y)
    assert compiled.stats.replays and compiled.plan.record.eager_peak_bytes > 0


# A classifier's training step (ReLU, log-softmax: the ops' Numba loops; a bias gradient: a fused
# sum; Adam, eager and compiled) run in a fresh process, eager and compiled side by side. Prints
# how often Numba compiled and refreshed its target context, which of its modules loaded, and the
# replayed plan's eager peak.
LOADING_CHILD = """
import json, os, sys
os.environ["NUMBA_CACHE_DIR"] = sys.argv[1]   # the ops' loops, as the kernels, in this test's cache
import numba
from numba.core import base, event
refreshes = []
refresh = base.BaseContext.refresh
base.BaseContext.refresh = lambda self: refreshes.append(1) or refresh(self)
compiles = []
class Count(event.Listener):
    def on_start(self, _event):
        compiles.append(1)
    def on_end(self, _event):
        pass
event.register("numba:compile", Count())
import staticgrad as sg
F = sg.nn.functional

def build():
    sg.manual_seed(0)
    model = sg.nn.Sequential(sg.nn.Linear(6, 8), sg.nn.ReLU(), sg.nn.Linear(8, 3))
    opt = sg.optim.Adam(model.parameters(), lr=0.01)
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step

eager, compiled = build(), sg.compile(build())
sg.manual_seed(1)
for _ in range(4):
    x, y = sg.randn(5, 6), sg.randint(0, 3, (5,))
    assert eager(x, y).detach().numpy().tobytes() == compiled(x, y).detach().numpy().tobytes()
print(json.dumps({"replays": compiled.stats.replays, "compiles": len(compiles), "refreshes": len(refreshes),
                  "eager peak": compiled.plan.record.eager_peak_bytes,
                  "numba modules": sorted(m for m in sys.modules if m.startswith("numba."))}))
"""


def test_a_process_loading_everything_from_the_cache_skips_numbas_registries(tmp_path):
    """Loading cached machine code needs Numba's code generator and runtime, not the
    implementations it compiles with: a warm process never refreshes Numba's target context
    (about half of Numba's start), and no kernel names a function of Numba's own (array.fill),
    whose module a cache load would import."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, STATICGRAD_CACHE_DIR=str(tmp_path / "kernels"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", LOADING_CHILD, str(tmp_path / "numba")], env=env, cwd=root,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = run(), run()
    assert cold["compiles"] > 0 and cold["refreshes"] > 0 and cold["replays"] >= 2
    assert warm["compiles"] == 0 and warm["refreshes"] == 0 and warm["replays"] >= 2, warm
    assert "numba.np.arrayobj" not in warm["numba modules"]
    # the first trace loads the ops' loops (no measurement); the second, once Adam's state exists, measures
    assert cold["eager peak"] > 0 and warm["eager peak"] > 0


def test_a_trace_whose_tensors_escape_is_compiled_only_when_inspected():
    """A training step's first call makes Adam's state, which outlives the call: that trace never
    replays (the second call traces again), so its passes, buffer plan, code and kernels are not
    built, unless something reads them."""
    _, eager, _, compiled = _twin_steps(lambda: sg.nn.Linear(6, 2), lambda p: sg.optim.Adam(p, lr=0.1))
    x, y = sg.randn(3, 6), sg.randn(3, 2)
    assert _bits(eager(x, y)) == _bits(compiled(x, y))
    first = compiled.plan
    assert first.escaped and not first.replayable
    assert "graph" not in vars(first) and compiled._passes.symbolic_runs == 0
    for _ in range(3):
        assert _bits(eager(x, y)) == _bits(compiled(x, y))
    assert compiled.stats.traces == 2 and compiled.stats.replays == 2
    assert compiled._passes.symbolic_runs == 1          # the replayed plan's passes only
    assert first.graph is not None and "arena" in first.describe() and not first.replayable


def test_every_numba_function_cached_on_disk_loads_through_numba_cache():
    """A Numba function made with numba.njit(cache=True) directly would load with Numba's own cache
    load, which starts by importing and registering everything Numba can compile (about half of
    Numba's start): the ops' and optimizers' loops go through ops.numba_cache.njit_cached, and the
    fused kernels (codegen's decorator) through runtime.kernels' checked cache, which loads likewise."""
    package = Path(sg.__file__).parent
    allowed = {package / "ops" / "numba_cache.py", package / "compiler" / "codegen.py"}
    direct = [f"{path.relative_to(package)}:{number}" for path in sorted(package.rglob("*.py")) if path not in allowed
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"njit\([^)]*cache\s*=\s*True", line)]
    assert not direct, f"use ops.numba_cache.njit_cached: {direct}"


def test_eager_peak_counts_an_ops_declared_working_memory():
    """A convolution's columns (its scratch, which a replay's arena holds too) count while it runs."""
    from staticgrad.ops import OPS

    x, w = sg.randn(2, 3, 8, 8), sg.randn(4, 3, 3, 3)
    f = sg.compile(lambda x: sg.nn.functional.conv2d(x, w, padding=1))
    f(x)
    scratch = OPS["conv2d"].scratch([(2, 3, 8, 8), (4, 3, 3, 3)], [np.dtype(np.float32)] * 2,
                                    {"stride": (1, 1), "padding": (1, 1)})
    assert scratch >= 2 * 3 * 9 * 8 * 8 * 4    # the columns, at least
    assert f.plans[0].record.eager_peak_bytes == 2 * 4 * 8 * 8 * 4 + scratch
