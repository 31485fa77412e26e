"""The eager gradient averaging of DistributedDataParallel, overlapped with backward (PyTorch's
DDP reducer): the gradients are split into buckets in reverse parameter order (the order in which
backward roughly produces them); a hook after each parameter's gradient accumulation marks it
ready, and as soon as a bucket is complete its non-blocking ``Iallreduce`` starts while the rest
of backward runs. At the end of backward every bucket is waited for, divided by the world size,
and the gradients become views of the buckets' buffers (``gradient_as_bucket_view``).

Buckets start in bucket order only (a complete bucket waits for the ones before it), so every
rank makes the same collective calls in the same order even where its backward finishes the
gradients in another order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from staticgrad._eager.node import grad_accumulator
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.ops.collective import _all_reduce_wait, bucket_bounds, pack, start_all_reduce


@dataclass
class Bucket:
    """Indices of the parameters a bucket reduces, in the order they lie in its buffer."""

    members: list
    waiting: int = 0       # members not ready yet in this backward
    buffer: np.ndarray | None = None   # the flat buffer the members' .grad were last made views of
    views: tuple = ()      # those .grad, as (tensor, its array)

    def holds(self, grads: list) -> bool:
        """Every gradient is still the view of ``buffer`` it was made (accumulated there in place,
        as after ``zero_grad(set_to_none=False)``): the bucket may be reduced there, no copy."""
        return bool(self.views) and all(g is t and g._data is a for g, (t, a) in zip(grads, self.views))


def plan_buckets(params: list, bucket_bytes: int | None) -> list:
    """Buckets over ``params`` in reverse order, one dtype per bucket, split as ``bucket_bounds``
    splits (None: one bucket per dtype; 0: one per tensor), ordered by the first member backward
    reaches."""
    by_dtype: dict = {}
    for index in reversed(range(len(params))):
        by_dtype.setdefault(params[index]._data.dtype, []).append(index)
    buckets = []
    for dtype, indices in by_dtype.items():
        sizes = [params[i]._data.size for i in indices]
        bounds = bucket_bounds(sizes, dtype.itemsize, bucket_bytes)
        position, offset = 0, 0
        for number, (_, stop) in enumerate(bounds):
            members = []
            last = number == len(bounds) - 1   # takes what is left (empty tensors at the end)
            while position < len(indices) and (offset < stop or last):
                members.append(indices[position])
                offset += sizes[position]
                position += 1
            if members:
                buckets.append(Bucket(members))
    buckets.sort(key=lambda b: -b.members[0])
    return buckets


class Reducer:
    """Average the gradients of ``params`` over the ranks, bucket by bucket as backward produces
    them. ``hooks_active``, a weak method, says whether this backward's gradients are to be
    averaged as they come (False inside ``no_sync()``); ``finish`` ends a backward (started
    buckets waited for, the rest started first)."""

    def __init__(self, names: list, params: list, bucket_bytes: int | None, find_unused_parameters: bool,
                 hooks_active):
        self.names = names
        self.params = params
        self.find_unused_parameters = find_unused_parameters
        self.hooks_active = hooks_active
        self.buckets = plan_buckets(params, bucket_bytes)
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket.members}
        self.ready = [False] * len(params)
        self.started: list = []    # (flat buffer, ticket) of each bucket started in this backward
        self._reset()
        # held strongly (as PyTorch's reducer holds them), so the graph's nodes are these very ones;
        # their hooks hold this reducer weakly: a dropped model's hooks do nothing
        self.accumulators = [grad_accumulator(p) for p in params]
        me = weakref.ref(self)
        for index, node in enumerate(self.accumulators):
            node.register_hook(_ReadyHook(me, index))

    def _reset(self) -> None:
        for bucket in self.buckets:
            bucket.waiting = len(bucket.members)
        self.ready = [False] * len(self.params)
        self.started = []

    def mark_ready(self, index: int) -> None:
        """The parameter's gradient is final for this backward: start every complete bucket whose turn it is."""
        active = self.hooks_active()
        if Tracing.tracer is not None or active is None or not active():
            return   # a trace records the blocking op at the end of backward; no_sync averages nothing
        if self.ready[index]:
            self.discard()   # a backward that raised before its end left buckets in flight
        self.ready[index] = True
        bucket = self.buckets[self.bucket_of[index]]
        bucket.waiting -= 1
        if bucket.waiting == 0:
            self._start_complete_buckets()

    def _start_complete_buckets(self) -> None:
        while len(self.started) < len(self.buckets) and self.buckets[len(self.started)].waiting == 0:
            bucket = self.buckets[len(self.started)]
            grads = [self.params[i]._grad for i in bucket.members]
            if bucket.holds(grads):
                flat, fresh = bucket.buffer, False
            else:   # a fresh gradient may share memory with one the rest of backward reads: reduce a copy
                flat, fresh = pack([self._array(i, g) for i, g in zip(bucket.members, grads)]), True
            self.started.append((flat, start_all_reduce(flat, "avg"), fresh))

    def _array(self, index: int, grad) -> np.ndarray:
        return grad._data if grad is not None else np.zeros_like(self.params[index]._data)

    def finish(self) -> None:
        """End of a backward that reached the parameters: mark the ones no hook marked (their
        ``.grad`` as it is; none: an error, or zeros with ``find_unused_parameters``), start the
        rest of the buckets, wait for all, and make each ``.grad`` a view of its bucket's buffer."""
        for index, (name, p) in enumerate(zip(self.names, self.params)):
            if self.ready[index]:
                continue
            if p._grad is None and not self.find_unused_parameters:
                self.discard()
                raise no_gradient_error(name)
            self.ready[index] = True
            self.buckets[self.bucket_of[index]].waiting -= 1
        self._start_complete_buckets()
        started = self.started
        _all_reduce_wait(*[flat for flat, _, _ in started], *[ticket for _, ticket, _ in started], op="avg",
                         layout=())
        self._reset()
        for bucket, (flat, _, fresh) in zip(self.buckets, started):
            if not fresh:
                continue   # reduced where its gradients lie
            views, offset = [], 0
            for i in bucket.members:
                p = self.params[i]
                view = flat[offset:offset + p._data.size].reshape(p._data.shape)
                offset += p._data.size
                grad = Tensor._make(view, False, None)
                p._store_grad(grad)   # shape and dtype are the parameter's; no trace is running
                views.append((grad, view))
            bucket.buffer, bucket.views = flat, tuple(views)

    def discard(self) -> None:
        """Forget this backward (it raised before its end, or a compiled backward averaged its
        gradients), after waiting for the buckets already started (every rank started them; a
        bucket reduced where its gradients lie leaves them averaged)."""
        if self.started:
            _all_reduce_wait(*[f for f, _, _ in self.started], *[t for _, t, _ in self.started], op="avg",
                             layout=())
        self._reset()


def no_gradient_error(name: str) -> RuntimeError:
    return RuntimeError(
        f"DistributedDataParallel: parameter '{name}' received no gradient in this backward, so the ranks "
        "cannot average it; use every parameter in the loss, or construct "
        "DistributedDataParallel(..., find_unused_parameters=True) to average a zero gradient for it")


class _ReadyHook:
    """The post-accumulation hook of one parameter's AccumulateGrad node."""

    __slots__ = ("index", "reducer")

    def __init__(self, reducer: weakref.ref, index: int):
        self.reducer = reducer
        self.index = index

    def __call__(self, grad_inputs, grad_outputs) -> None:
        reducer = self.reducer()
        if reducer is not None:
            reducer.mark_ready(self.index)
