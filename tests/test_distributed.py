"""Data-parallel training on MPI: two ranks launched with ``mpiexec -n 2`` (each scenario in
``distributed_worker.py``, under a time limit so a hang fails fast), plus the single-process
parts (errors before a process group exists, the bucket layout, the op in the table)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import staticgrad
import staticgrad.distributed as dist
from staticgrad.compiler.ir import Graph, Op, Value, verify
from staticgrad.compiler.passes.buckets import overlap_gradient_buckets
from staticgrad.nn.parallel import DistributedDataParallel
from staticgrad.ops import OPS
from staticgrad.ops.collective import bucket_bounds

HERE = Path(__file__).parent
TIMEOUT = 120


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                               reason='mpi4py or mpiexec is not installed (pip install "staticgrad[distributed]")')


def launch(scenario: str, ranks: int = 2) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(staticgrad.__file__).parent.parent), env.get("PYTHONPATH", "")])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        return subprocess.run([_mpiexec(), "-n", str(ranks), sys.executable, str(HERE / "distributed_worker.py"),
                               scenario], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"mpiexec -n {ranks} {scenario} hung for {TIMEOUT} s:\n{error.stdout}\n{error.stderr}")


@needs_mpi
@pytest.mark.parametrize("scenario", ["train", "no_sync", "buckets", "unused", "collectives"])
def test_two_ranks(scenario):
    """train: two ranks on half batches = one process on the whole batch (eager, compiled step and model, SGD
    and Adam, one Allreduce per step); no_sync: accumulation; buckets: overlapped with backward in eager and in
    a compiled step, blocking in eager, all equal, the first bucket started before backward ends; unused:
    find_unused_parameters; collectives: broadcast, all_reduce."""
    done = launch(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}: {scenario} ok" in done.stdout


@needs_mpi
def test_a_model_that_differs_on_one_rank_fails_on_every_rank():
    done = launch("mismatch")
    assert done.returncode != 0
    message = ("DistributedDataParallel expects the same model on every rank, but rank 1 has parameter '0.weight' "
               "of shape [9, 5]")
    assert done.stderr.count(message) == 2, done.stderr   # each rank prints it
    assert "constructed a mismatched model" not in done.stdout


@needs_mpi
def test_a_rank_that_raises_stops_every_rank():
    done = launch("raise")
    assert done.returncode != 0
    assert "rank 1 fails on purpose" in done.stderr
    assert "MPI_Abort" in done.stderr
    assert "rank 0 passed the barrier" not in done.stdout


@needs_mpi
@pytest.mark.slow
def test_the_benchmark_runs_one_and_two_ranks():
    env = dict(os.environ, PYTHONPATH=str(Path(staticgrad.__file__).parent.parent), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "distributed.py"), "--sizes", "tiny",
                           "--steps", "25"], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OpenBLAS core" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.lstrip().startswith("tiny")]
    # model, mode, bucket (two words), then per rank count: ms, blocking ms, overlap saves, Allreduce calls per
    # step, packing copies, us
    calls = {(row[1], row[2]): (row[7], row[13]) for row in rows}
    assert calls == {("eager", "one"): ("1", "1"), ("eager", "per"): ("10", "10"), ("eager", "quarter"): ("5", "5"),
                     ("compiled", "one"): ("1", "1"), ("compiled", "per"): ("10", "10"),
                     ("compiled", "quarter"): ("5", "5"), ("compiled-model", "one"): ("1", "1"),
                     ("compiled-model", "per"): ("10", "10"), ("compiled-model", "quarter"): ("5", "5")}
    # (10 tensors: a quarter of the bytes holds 2 or 3); eager packs each bucket's fresh gradients
    # (zero_grad sets them to None); a compiled step and a compiled model's backward lay them in one block
    copies = {(row[1], row[2]): (row[8], row[14]) for row in rows}
    assert copies == {**{key: ("0", "0") for key in calls if key[0] != "eager"},
                      **{key: calls[key] for key in calls if key[0] == "eager"}}, copies
    blocking = {(row[1], row[2]): (row[5], row[11]) for row in rows}
    assert all((value == ("-", "-")) == (key[0] != "eager") for key, value in blocking.items()), blocking


def test_before_init_errors_are_pytorchs():
    message = "Default process group has not been initialized, please make sure to call init_process_group."
    for call in (dist.get_rank, dist.get_world_size, dist.barrier,
                 lambda: dist.all_reduce(staticgrad.ones(2)), lambda: dist.broadcast(staticgrad.ones(2), 0),
                 lambda: DistributedDataParallel(staticgrad.nn.Linear(2, 2))):
        with pytest.raises(ValueError, match=message):
            call()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="backend None, 'mpi' or 'gloo'"):
        dist.init_process_group("nccl")


def test_options_not_built_raise():
    t = staticgrad.ones(2)
    for call in (lambda: dist.get_rank(group=object()), lambda: dist.all_reduce(t, group=object()),
                 lambda: dist.broadcast(t, 0, group=object()), lambda: dist.barrier(group=object())):
        with pytest.raises(NotImplementedError, match="one process group, the whole MPI world"):
            call()
    for call in (lambda: dist.all_reduce(t, async_op=True), lambda: dist.barrier(async_op=True)):
        with pytest.raises(NotImplementedError, match="async_op=True"):
            call()


def test_without_mpi4py_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert not dist.is_available()
    with pytest.raises(ImportError, match=r'pip install "staticgrad\[distributed\]"'):
        dist.init_process_group()


@pytest.mark.parametrize(("sizes", "itemsize", "cap", "expected"), [
    ([3, 4, 5], 8, None, [(0, 12)]),                   # one bucket: one Allreduce
    ([3, 4, 5], 8, 0, [(0, 3), (3, 7), (7, 12)]),      # one per tensor
    ([3, 4, 5], 8, 56, [(0, 7), (7, 12)]),             # 7 elements of 8 bytes fit in 56
    ([10, 1], 4, 8, [(0, 10), (10, 11)]),              # a tensor larger than the cap is a bucket alone
])
def test_bucket_bounds(sizes, itemsize, cap, expected):
    assert bucket_bounds(sizes, itemsize, cap) == expected


def test_the_bucket_pass_starts_each_bucket_after_its_last_gradient():
    """A hand-built program: gradients %1 and %2 (4 float64 each, 32 bytes), produced by ops 0 and
    1; buckets of 32 bytes: each starts right after its gradient, one wait where the all-reduce was."""
    graph = Graph()
    graph.values[0] = Value(0, (4,), "float64", "input")
    graph.inputs = [0]
    for vid in (1, 2, 3, 4):
        graph.values[vid] = Value(vid, (4,), "float64", "op", "backward")
    graph.ops = [Op("neg", (0,), (1,)), Op("exp", (0,), (2,)),
                 Op("all_reduce_grads", (1, 2), (3, 4), (("bucket_bytes", 32), ("op", "avg")))]
    graph.results = [3, 4]
    split, changed = overlap_gradient_buckets(graph)
    verify(split)
    assert changed
    assert [(op.op, op.inputs) for op in split.ops[:4]] == [("neg", (0,)), ("all_reduce_start", (1,)),
                                                            ("exp", (0,)), ("all_reduce_start", (2,))]
    wait = split.ops[4]
    assert wait.op == "all_reduce_wait" and wait.outputs == (3, 4)
    assert wait.attr_dict["layout"] == ((0, 0, (4,)), (1, 0, (4,)))
    one_bucket = replace(graph, ops=graph.ops[:2] + [Op("all_reduce_grads", (1, 2), (3, 4),
                                                        (("bucket_bytes", None), ("op", "avg")))])
    assert overlap_gradient_buckets(one_bucket) == (one_bucket, False)


def test_all_reduce_grads_is_an_op_of_the_table():
    assert OPS["all_reduce_grads"].kind == "other"
    assert OPS["all_reduce_grads"].backward is None


class _OneRank:
    """A world of one rank for single-process tests of the collective ops: a sum over one rank
    leaves a buffer as it is."""

    def Allreduce(self, in_place, buffer, op=None):
        self.reduced.append(np.asarray(buffer))

    def Get_size(self):
        return 1

    def __init__(self):
        self.reduced = []


def _gradients_graph(bucket_bytes=None, read_after=False) -> Graph:
    """%2 = neg(%0) and %3 = exp(%1), float64 gradients of 4 and 3 elements, all-reduced into %4
    and %5; ``read_after``: an op reads %2 again after the all-reduce."""
    graph = Graph()
    shapes = {0: (2, 2), 1: (3,), 2: (2, 2), 3: (3,), 4: (2, 2), 5: (3,), 6: (2, 2)}
    for vid, shape in shapes.items():
        graph.values[vid] = Value(vid, shape, "float64", "input" if vid < 2 else "op", "backward")
    graph.inputs = [0, 1]
    graph.ops = [Op("neg", (0,), (2,)), Op("exp", (1,), (3,)),
                 Op("all_reduce_grads", (2, 3), (4, 5), (("bucket_bytes", bucket_bytes), ("op", "avg")))]
    graph.results = [4, 5]
    if read_after:
        graph.ops.append(Op("neg", (2,), (6,)))
        graph.results = [4, 5, 6]
    else:
        del graph.values[6]
    return graph


@pytest.mark.parametrize("bucket_bytes", [None, 8])
def test_a_compiled_step_lays_its_gradients_out_in_one_block_and_reduces_them_there(monkeypatch, bucket_bytes):
    """The planner puts the gradients an all-reduce reads one after another in one block per call:
    the op reduces that block in place (no packing copy) and the gradients it hands back are views
    of it; with buckets, each bucket's non-blocking all-reduce takes its part of the block."""
    from staticgrad.compiler.codegen import generate
    from staticgrad.compiler.planner import plan_program
    from staticgrad.ops.collective import World
    from staticgrad.runtime.replay import CompiledReplay

    world = _OneRank()
    monkeypatch.setattr(World, "comm", world)
    monkeypatch.setattr(World, "in_place", None)
    monkeypatch.setattr(World, "mpi_ops", {"sum": None})

    class _Request:
        @staticmethod
        def Waitall(requests):
            pass

        Testall = Waitall

    monkeypatch.setattr(World, "mpi_request", _Request)
    world.Iallreduce = lambda in_place, buffer, op=None: world.reduced.append(np.asarray(buffer))
    graph = _gradients_graph(bucket_bytes)
    verify(graph)
    if bucket_bytes is not None:
        graph, changed = overlap_gradient_buckets(graph)
        assert changed
    program = plan_program(graph)
    blocked = {spec.slot: spec.block for spec in program.buffers if spec.block is not None}
    assert blocked == {2: 0, 3: 4}
    replay = CompiledReplay(program, generate(program))
    assert "_block = np.empty(7," in replay.source
    x0, x1 = np.linspace(-1.0, 1.0, 4).reshape(2, 2), np.array([0.5, 1.5, -2.0])
    copies = World.packing_copies
    first, second = replay.run([x0, x1], [], [])
    assert World.packing_copies == copies
    np.testing.assert_array_equal(first, -x0)
    np.testing.assert_array_equal(second, np.exp(x1))
    block = first.base
    assert block.shape == (7,) and second.base is block
    assert all(np.shares_memory(reduced, block) for reduced in world.reduced)
    assert sum(r.size for r in world.reduced) == 7


def test_a_gradient_read_after_its_all_reduce_keeps_a_buffer_of_its_own(monkeypatch):
    """Reducing in place would change what the later reader sees: no block, the op packs a copy."""
    from staticgrad.compiler.planner import plan_program

    program = plan_program(_gradients_graph(read_after=True))
    assert all(spec.block is None for spec in program.buffers)
    step = next(s for s in program.steps if s.op == "all_reduce_grads")
    assert "in_block" not in dict(step.attrs)


def test_the_in_block_check_refuses_gradients_that_do_not_fill_one_block_in_order():
    from staticgrad.ops.collective import _in_block

    block = np.arange(7.0)
    a, b = block[:4].reshape(2, 2), block[4:]
    assert np.shares_memory(_in_block([a, b]), block) and _in_block([a, b]).shape == (7,)
    assert _in_block([b, a]) is None                       # out of order
    assert _in_block([block[:3], block[4:]]) is None       # a gap between them
    assert _in_block([np.zeros(4), b]) is None             # not views of one block
