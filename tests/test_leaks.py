"""20,000 replays leak nothing: after a warm-up, memory and live objects stay flat.

A compiled step is meant to run forever with no per-call garbage: a replay makes no graph, and
what it returns (a loss, a fresh ``.grad``) is freed as soon as nobody refers to it. These tests
replay a tiny training step and a ``no_grad`` forward 20,000 times and compare the state after
2,000 replays (warm: arena, kernel cache and recycled gradients are in place) with the state after
20,000. Any per-call leak, however small, grows 18,000-fold in between; the slack allowed is far
below that. A failure names the allocation sites that grew (tracemalloc) and the object types whose
counts grew.
"""

from __future__ import annotations

import collections
import gc
import os
import resource
import tracemalloc
from dataclasses import dataclass

import pytest

import staticgrad
from staticgrad.bench import models

WARM_UP, TOTAL = 2_000, 20_000
SIZE = models.MLPSize("leak", batch=8, features=16, hidden=16, layers=2, outputs=4)

# Slack between the sample after WARM_UP replays and the one after TOTAL: a leak of one object or
# 16 bytes per replay would exceed each of these 18,000 replays later.
OBJECT_SLACK = 200
TRACED_SLACK = 64 * 1024
RSS_SLACK = 4 * 1024 * 1024   # RSS moves with the allocator's own caching; the two above are exact


@dataclass
class Sample:
    objects: int                  # gc-tracked objects
    types: collections.Counter    # of those, by type name
    tensors: int                  # staticgrad Tensors among them
    traced: int                   # bytes tracemalloc sees allocated
    rss: int                      # resident set size, bytes
    own: int = 0                  # bytes this sample itself keeps (its Counter), left out of later samples


def resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:   # not Linux: the peak is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sample() -> Sample:
    gc.collect()
    traced, rss = tracemalloc.get_traced_memory()[0], resident_bytes()
    objects = gc.get_objects()
    result = Sample(len(objects), collections.Counter(type(o).__name__ for o in objects),
                    sum(issubclass(type(o), staticgrad.Tensor) for o in objects), traced, rss)
    del objects
    result.own = tracemalloc.get_traced_memory()[0] - traced
    return result


def growing_allocation_sites(call, calls: int = 2_000, top: int = 5) -> str:
    """Where memory grows over ``calls`` more calls: tracemalloc's top sites, with tracebacks
    (tracing restarts with 10 frames a site)."""
    tracemalloc.stop()
    tracemalloc.start(10)
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before = tracemalloc.take_snapshot().filter_traces(ignore)
    for _ in range(calls):
        call()
    gc.collect()
    after = tracemalloc.take_snapshot().filter_traces(ignore)
    grown = [stat for stat in after.compare_to(before, "traceback") if stat.size_diff > 0][:top]
    return "\n".join(f"{stat.size_diff:+} B in {stat.count_diff:+} blocks at\n    " +
                     "\n    ".join(stat.traceback.format(most_recent_first=True)) for stat in grown)


def assert_replays_flat(call) -> None:
    """Call ``call`` TOTAL times under tracemalloc; what is live after WARM_UP calls and after TOTAL
    calls must match within the slack. On a failure, name what grew and where it was allocated."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)   # one frame a trace: cheap enough for 20,000 calls
    try:
        for _ in range(WARM_UP):
            call()
        warm = sample()
        half = (TOTAL - WARM_UP) // 2
        for _ in range(half):
            call()
        middle = sample()
        for _ in range(TOTAL - WARM_UP - half):
            call()
        late = sample()
        # RSS also jumps once when the allocator takes a new arena; a leak grows it in both halves.
        rss_grew = min(middle.rss - warm.rss, late.rss - middle.rss) > RSS_SLACK / 2
        grew = [late.tensors > warm.tensors, late.objects - warm.objects > OBJECT_SLACK,
                late.traced - warm.traced - warm.own - middle.own > TRACED_SLACK, rss_grew]
        if any(grew):
            pytest.fail(f"after {WARM_UP} replays -> after {TOTAL}: objects {warm.objects} -> {late.objects}, "
                        f"Tensors {warm.tensors} -> {late.tensors}, "
                        f"traced {warm.traced + warm.own} -> {late.traced} B, "
                        f"RSS {warm.rss} -> {middle.rss} -> {late.rss} B\n"
                        f"object types that grew: {(late.types - warm.types).most_common(8)}\n"
                        f"allocation sites that grow:\n{growing_allocation_sites(call)}")
    finally:
        if started:
            tracemalloc.stop()


def test_twenty_thousand_replayed_training_steps_leak_nothing():
    """A compiled step (Linear/Tanh MLP, MSE loss, SGD with momentum) replayed 20,000 times:
    memory, live objects and live Tensors after 20,000 replays equal those after 2,000."""
    _model, _opt, step = models.build(staticgrad, SIZE, models.initial_weights(SIZE))
    x, y = (staticgrad.tensor(a) for a in models.batches(SIZE, 1)[0])
    compiled = staticgrad.compile(step)
    assert_replays_flat(lambda: compiled(x, y))
    assert compiled.stats.replays >= TOTAL - 2 and compiled.stats.traces <= 2, compiled.stats


def test_twenty_thousand_replayed_no_grad_forwards_leak_nothing():
    """A compiled forward under no_grad, whose outputs the caller drops, replayed 20,000 times:
    memory, live objects and live Tensors stay flat."""
    model, _, _ = models.build(staticgrad, SIZE, models.initial_weights(SIZE))
    x = staticgrad.tensor(models.batches(SIZE, 1)[0][0])

    @staticgrad.compile
    def predict(x):
        with staticgrad.no_grad():
            return model(x).softmax(-1)

    assert_replays_flat(lambda: predict(x))
    assert predict.stats.replays == TOTAL - 1 and predict.stats.traces == 1, predict.stats


@pytest.mark.slow
def test_replays_with_new_inputs_each_call_leak_nothing():
    """New input tensors every call (as a data loader gives them) and kept losses released later:
    nothing a replay makes outlives its last user."""
    _model, _opt, step = models.build(staticgrad, SIZE, models.initial_weights(SIZE))
    batches = [tuple(staticgrad.tensor(a) for a in batch) for batch in models.batches(SIZE, 16)]
    compiled = staticgrad.compile(step)
    recent = collections.deque(maxlen=16)     # a training loop that keeps the last few losses
    calls = iter(range(10 * TOTAL))   # enough for a failure's extra diagnostic calls too

    def call():
        x, y = batches[next(calls) % len(batches)]
        recent.append(compiled(x.clone(), y.clone()))

    assert_replays_flat(call)
    assert compiled.stats.replays >= TOTAL - 2, compiled.stats

