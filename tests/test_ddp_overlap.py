"""The eager DistributedDataParallel's overlap of gradient averaging with backward, in one process
on a stand-in world of one rank that logs every MPI call (two real ranks: ``test_distributed.py``):
buckets in reverse parameter order, each bucket's non-blocking all-reduce started as soon as
backward produced its gradients, the wait at the end of backward; plus the engine's
post-accumulation hook of AccumulateGrad nodes that marks a gradient ready."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad
from staticgrad.nn.parallel import DistributedDataParallel
from staticgrad.nn.parallel.reducer import plan_buckets
from staticgrad.ops.collective import World

torch = pytest.importorskip("torch")

FLOAT64 = 8


class _LoggedWorld:
    """A world of one rank: a sum over one rank leaves a buffer as it is. Each call is logged."""

    def __init__(self, events: list):
        self.events = events

    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0

    def allgather(self, value):
        return [value]

    def Bcast(self, buffer, root=0):
        pass

    def Allreduce(self, in_place, buffer, op=None):
        self.events.append(("Allreduce", np.asarray(buffer).size))

    def Iallreduce(self, in_place, buffer, op=None):
        self.events.append(("Iallreduce", np.asarray(buffer).size))
        return object()


@pytest.fixture
def events(monkeypatch) -> list:
    log: list = []

    class _Requests:
        @staticmethod
        def Waitall(requests):
            log.append(("Waitall", len(requests)))

        @staticmethod
        def Testall(requests):
            pass

    monkeypatch.setattr(World, "comm", _LoggedWorld(log))
    monkeypatch.setattr(World, "in_place", None)
    monkeypatch.setattr(World, "mpi_ops", {"sum": None})
    monkeypatch.setattr(World, "mpi_request", _Requests)
    return log


def _mlp(seed: int = 0):
    """Linear(5, 7) -> Tanh -> Linear(7, 3): parameters of 35, 7, 21 and 3 float64 elements."""
    staticgrad.manual_seed(seed)
    return staticgrad.nn.Sequential(staticgrad.nn.Linear(5, 7), staticgrad.nn.Tanh(),
                                    staticgrad.nn.Linear(7, 3)).double()


def _data():
    rng = np.random.default_rng(0)
    return staticgrad.tensor(rng.standard_normal((8, 5))), staticgrad.tensor(rng.standard_normal((8, 3)))


def _backward(model, x, y, events=None):
    """mse backward; ``events``: log when backward reaches the first layer (its input's gradient)."""
    x = x.detach().requires_grad_(True)
    if events is not None:
        x.register_hook(lambda g: events.append(("first layer's backward", None)))
    staticgrad.nn.functional.mse_loss(model(x), y).backward()


@pytest.mark.parametrize(("cap_elements", "expected"), [
    (None, [[3, 2, 1, 0]]),                 # one bucket, members in reverse parameter order
    (0, [[3], [2], [1], [0]]),              # one per tensor
    (25, [[3, 2], [1], [0]]),               # 3 + 21 fit in 25 elements; 7 does not fit after them
])
def test_buckets_follow_reverse_parameter_order(cap_elements, expected):
    params = list(_mlp().parameters())
    cap = None if cap_elements is None else cap_elements * FLOAT64
    assert [b.members for b in plan_buckets(params, cap)] == expected


def test_buckets_hold_one_dtype_each():
    params = [staticgrad.zeros(4, dtype=staticgrad.float64), staticgrad.zeros(2), staticgrad.zeros(3)]
    assert [b.members for b in plan_buckets(params, None)] == [[2, 1], [0]]


def test_the_first_bucket_starts_before_backward_ends(events):
    """With three buckets, the last layer's starts before backward reaches the first layer; all
    three are waited for once, at the end; the gradients are those of the model alone."""
    model, reference = _mlp(), _mlp()
    ddp = DistributedDataParallel(model, bucket_cap_mb=25 * FLOAT64 / 2**20)
    x, y = _data()
    events.clear()
    _backward(ddp, x, y, events)
    # the first layer's AddmmBackward hands out its bias, input and weight gradients in that order
    assert events == [("Iallreduce", 24), ("Iallreduce", 7), ("first layer's backward", None),
                      ("Iallreduce", 35), ("Waitall", 3)]
    _backward(reference, x, y)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    # .grad are views of their bucket's buffer: the last layer's two share one
    assert model[2].bias.grad.numpy().base is model[2].weight.grad.numpy().base


def test_gradients_kept_in_their_buckets_are_reduced_there(events):
    """zero_grad(set_to_none=False) keeps each .grad in its bucket: the next backward accumulates
    there and reduces there, with no packing copy; the values stay those of the model alone."""
    model, reference = _mlp(), _mlp()
    ddp = DistributedDataParallel(model, bucket_cap_mb=25 * FLOAT64 / 2**20)
    x, y = _data()
    _backward(ddp, x, y)
    views = [p.grad for p in model.parameters()]
    copies = World.packing_copies
    for _ in range(2):
        ddp.zero_grad(set_to_none=False)
        _backward(ddp, x, y)
    assert World.packing_copies == copies
    assert all(p.grad is view for p, view in zip(model.parameters(), views))
    _backward(reference, x, y)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_no_sync_starts_nothing_and_the_next_backward_reduces_the_sum(events):
    model, reference = _mlp(), _mlp()
    ddp = DistributedDataParallel(model, bucket_cap_mb=25 * FLOAT64 / 2**20)
    x, y = _data()
    events.clear()
    with ddp.no_sync():
        _backward(ddp, x, y)
    assert events == []
    _backward(ddp, x, y)
    assert [e for e, _ in events] == ["Iallreduce", "Iallreduce", "Iallreduce", "Waitall"]
    for _ in range(2):
        _backward(reference, x, y)
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_blocking_buckets_when_overlap_is_off(events):
    """What the benchmark compares with: every bucket reduced after backward, blocking."""
    model = _mlp()
    ddp = DistributedDataParallel(model, bucket_cap_mb=25 * FLOAT64 / 2**20)
    ddp._overlap_backward = False
    x, y = _data()
    events.clear()
    _backward(ddp, x, y, events)
    assert [e for e, _ in events] == ["first layer's backward", "Allreduce", "Allreduce", "Allreduce"]


class _TwoHeads(staticgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = staticgrad.nn.Linear(5, 3).double()
        self.unused = staticgrad.nn.Linear(5, 3).double()

    def forward(self, x):
        return self.used(x)


def test_an_unused_parameter_is_an_error_unless_asked_for(events):
    x, y = _data()
    ddp = DistributedDataParallel(_TwoHeads(), bucket_cap_mb=0)
    with pytest.raises(RuntimeError, match=r"parameter 'unused\.weight' received no gradient in this backward"):
        _backward(ddp, x, y)
    model = _TwoHeads()
    ddp = DistributedDataParallel(model, find_unused_parameters=True, bucket_cap_mb=0)
    for _ in range(2):   # a backward after the error starts afresh
        ddp.zero_grad()
        events.clear()
        _backward(ddp, x, y)
        assert [e for e, _ in events] == ["Iallreduce"] * 4 + ["Waitall"]
        np.testing.assert_array_equal(model.unused.weight.grad.numpy(), np.zeros((3, 5)))
        assert model.used.weight.grad.numpy().any()


def test_a_dropped_wrapper_no_longer_reduces(events):
    model = _mlp()
    DistributedDataParallel(model)   # dropped at once: its hooks hold it weakly
    ddp = DistributedDataParallel(model)
    x, y = _data()
    events.clear()
    _backward(ddp, x, y)
    assert [e for e, _ in events] == ["Iallreduce", "Waitall"]


def test_an_accumulate_grad_post_hook_runs_after_accumulation_as_in_pytorch():
    """A hook on a leaf's AccumulateGrad node sees .grad already accumulated, with PyTorch's
    arguments: no gradient inputs, the incoming gradient as the one output."""
    seen = {}
    for lib in (torch, staticgrad):
        p = lib.ones(2, dtype=lib.float64, requires_grad=True)
        node = p.view_as(p).grad_fn.next_functions[0][0]
        calls = []
        node.register_hook(lambda gi, go, p=p, calls=calls: calls.append(
            (len(gi), [g.detach().numpy().copy() for g in go], p.grad.detach().numpy().copy())))
        (p * 3).sum().backward()
        (p * 2).sum().backward()
        seen[lib.__name__] = calls
    assert len(seen["staticgrad"]) == 2
    for (n, go, grad), (tn, tgo, tgrad) in zip(seen["staticgrad"], seen["torch"]):
        assert n == tn == 0
        np.testing.assert_array_equal(go[0], tgo[0])
        np.testing.assert_array_equal(grad, tgrad)
