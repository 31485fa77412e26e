"""DistributedDataParallel: one replica of a module per rank, kept in step by averaging the
gradients over every rank during each backward (PyTorch's DDP, on MPI).

Eagerly, the reducer (``reducer.py``) starts each bucket's non-blocking ``Iallreduce`` as soon as
backward has produced the bucket's gradients and waits for all at the end of backward. A traced
step records the averaging as one op, ``all_reduce_grads`` (every gradient packed into one
contiguous buffer, reduced bucket by bucket), which the compiler splits into overlapped buckets
and a replay runs without Python per tensor.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass

from staticgrad._eager.dispatch import F
from staticgrad._eager.engine import add_backward_end_callback, add_compiled_gradient_reducer
from staticgrad._eager.grad_mode import no_grad
from staticgrad._state import Tracing, bump_epoch, guard
from staticgrad.distributed.process_group import RankMismatchError, broadcast
from staticgrad.nn.module import Module
from staticgrad.nn.parallel.reducer import Reducer, no_gradient_error
from staticgrad.ops.collective import comm

MEGABYTE = 1024 * 1024


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training: at construction, check that every rank holds the
    same parameters and buffers (names, shapes, dtypes; a clear error on every rank otherwise) and
    copy rank 0's values to all; after each backward that reaches its parameters, average their
    gradients over the ranks (skipped inside ``no_sync()``). ``bucket_cap_mb``: None reduces every
    gradient in one ``Allreduce``; a size splits them, in reverse parameter order, into buckets of
    at most that many MB (0: one call per tensor, for comparison), each reduced while the rest of
    backward runs. Gradients become views of their bucket's buffer, as with PyTorch's
    ``gradient_as_bucket_view=True`` (kept there, as by ``zero_grad(set_to_none=False)``, they are
    reduced in place, with no packing copy). ``_overlap_backward = False`` reduces the buckets
    after backward instead, blocking one after the other (what benchmarks compare with)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, init_sync: bool = True, process_group=None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False, **unsupported):
        if unsupported:
            raise TypeError(f"DistributedDataParallel: options {sorted(unsupported)} are not supported by staticgrad")
        if process_group is not None:
            raise NotImplementedError("DistributedDataParallel(process_group=...) is not supported: staticgrad has "
                                      "one process group, the whole MPI world; leave it unset")
        if device_ids not in (None, []) or output_device is not None:
            raise ValueError("DistributedDataParallel: staticgrad runs on the CPU; leave device_ids and "
                             "output_device unset")
        if bucket_cap_mb is not None and bucket_cap_mb < 0:
            raise ValueError(f"bucket_cap_mb must be None or >= 0, got {bucket_cap_mb}")
        comm()
        super().__init__()
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_bytes = None if bucket_cap_mb is None else int(bucket_cap_mb * MEGABYTE)
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        self._grad_names = [name for name, _ in named]
        self._grad_params = [p for _, p in named]
        _check_same_model(module)
        if init_sync:
            with no_grad():
                for t in list(module.parameters()) + list(module.buffers()):
                    broadcast(t, 0)
        self._overlap_backward = True
        self._reducer = Reducer(self._grad_names, self._grad_params, self.bucket_bytes, find_unused_parameters,
                                weakref.WeakMethod(self._averages_during_backward))
        self._accumulators = frozenset(self._reducer.accumulators)
        self._callback = add_backward_end_callback(self._after_backward)
        self._compiled_reducer = add_compiled_gradient_reducer(self._average_in_compiled_backward)
        self._compiled_averaged = False   # a compiled backward averaged some gradients since the last backward ended
        self._local_grads = False         # a backward under no_sync() left each rank's own gradients

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self.training:
            buffers = list(self.module.buffers())
            if buffers:
                with no_grad():
                    for b in buffers:
                        broadcast(b, 0)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backwards inside this block leave each rank's gradients its own (to accumulate over
        several batches); the first backward after it averages what was accumulated."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        bump_epoch()   # compiled plans guard it: they re-check
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
            bump_epoch()

    def _average_in_compiled_backward(self, wrt: list, grads: list) -> tuple | None:
        """While a compiled model's backward is recorded (``DDP(compile(model))`` or
        ``compile(DDP(model))``): ask for this model's parameters' gradients to be averaged inside
        the recorded backward program, by one all-reduce op on one gradient block, as a compiled
        step does. Outside ``no_sync()`` only (a guard of the plan: a call under it traces a plan
        without it), decided at the forward, as PyTorch's DDP decides. Returns (the gradients'
        positions in ``grads``, the op, its attributes, what marks each run), or None."""
        position = {id(t): k for k, t in enumerate(wrt)}
        mine = [position[id(p)] for p in self._grad_params if id(p) in position and grads[position[id(p)]] is not None]
        if not mine or not guard(self._averages_after_backward, "DistributedDataParallel.no_sync()"):
            return None
        return (mine, "all_reduce_grads", {"op": "avg", "bucket_bytes": self.bucket_bytes},
                _CompiledAveraging(weakref.ref(self), frozenset(id(wrt[k]) for k in mine)))

    def _averages_after_backward(self) -> bool:
        """A compiled backward may average what it adds: gradients are in sync (outside no_sync(),
        and no backward under it left each rank's own sums, which must be averaged whole)."""
        return self.require_backward_grad_sync and not self._local_grads

    def _set_local_grads(self, local: bool) -> None:
        if local != self._local_grads:
            self._local_grads = local
            bump_epoch()   # compiled plans guard it: they re-check

    def _averages_during_backward(self) -> bool:
        """Whether the reducer's hooks start buckets in this backward (not inside ``no_sync()``, nor
        after a compiled backward averaged gradients in it: what is left is averaged at its end)."""
        return self.require_backward_grad_sync and self._overlap_backward and not self._compiled_averaged

    def _after_backward(self, reached) -> None:
        """At the end of a backward: average the gradients if it reached this model's parameters
        (those that only compiled backwards averaged already are left as they are)."""
        if not any(node in reached for node in self._accumulators):
            return
        compiled_averaged, self._compiled_averaged = self._compiled_averaged, False
        if not guard(lambda: self.require_backward_grad_sync, "DistributedDataParallel.no_sync()"):
            self._set_local_grads(True)
            return
        # after backwards under no_sync() the gradients hold each rank's own sums, averaged whole
        # here (a compiled backward traced then does not average: see _averages_after_backward)
        averaged_already = (self._averaged_by_compiled(reached) if compiled_averaged and not self._local_grads
                            else frozenset())
        self._set_local_grads(False)
        if Tracing.tracer is None and self._overlap_backward:
            if not averaged_already or self._reducer.started:
                # (buckets an eager part started before a compiled backward averaged: all of them are
                # averaged here, the compiled part again, which leaves it as it is)
                self._reducer.finish()
                return
            self._reducer.discard()   # the hooks started nothing: the rest is averaged below
        grads, params = [], []
        for name, p in zip(self._grad_names, self._grad_params):
            if id(p) in averaged_already:
                continue
            params.append(p)
            g = p.grad
            if g is None:
                if not self.find_unused_parameters:
                    raise no_gradient_error(name)
                g = F.zeros_like(p)
            grads.append(g)
        if not grads:
            return
        with no_grad():
            averaged = F.all_reduce_grads(*grads, op="avg", bucket_bytes=self.bucket_bytes)
        if len(grads) == 1:
            averaged = (averaged,)
        for p, g in zip(params, averaged):
            p.grad = g

    def _averaged_by_compiled(self, reached) -> frozenset:
        """Ids of this model's parameters whose every gradient in this backward came from a compiled
        backward that averaged it (a parameter also fed by another node is averaged again here,
        as a whole: the compiled part is the same on every rank, so that averages the rest)."""
        only_averaged, fed_otherwise = set(), set()
        accumulators = self._accumulators
        for node in reached:
            attrs = getattr(node, "attrs", None)   # (an AccumulateGrad has none)
            reductions = attrs.get("reductions", ()) if type(attrs) is dict else ()
            mine = [r.params for r in reductions if type(r) is _CompiledAveraging and r.owner() is self]
            for nxt, _ in node.next_functions:
                if nxt in accumulators:
                    pid = id(nxt.variable)
                    (only_averaged if any(pid in params for params in mine) else fed_otherwise).add(pid)
        return frozenset(only_averaged - fed_otherwise)


@dataclass(frozen=True)
class _CompiledAveraging:
    """What a compiled backward that averages gradients for a DistributedDataParallel carries: its
    nodes list it (``attrs["reductions"]``), and each run of its program marks the owner."""

    owner: weakref.ref
    params: frozenset   # ids of the parameters it averages

    def __call__(self) -> None:
        owner = self.owner()
        if owner is not None:
            owner._compiled_averaged = True


def _describe(module: Module) -> list:
    return ([("parameter", name, tuple(p.shape), str(p.dtype)) for name, p in module.named_parameters()]
            + [("buffer", name, tuple(b.shape), str(b.dtype)) for name, b in module.named_buffers()])


def _check_same_model(module: Module) -> None:
    """Every rank holds the same parameters and buffers: one allgather of their descriptions, and
    the same error on every rank when they differ (each rank sees all descriptions)."""
    described = comm().allgather(_describe(module))
    reference = described[0]
    for rank, mine in enumerate(described[1:], start=1):
        if mine == reference:
            continue
        if len(mine) != len(reference):
            raise RankMismatchError(
                f"DistributedDataParallel expects the same model on every rank, but rank {rank} has "
                f"{len(mine)} parameters and buffers while rank 0 has {len(reference)}")
        for (kind, name, shape, dtype), theirs in zip(mine, reference):
            if (kind, name, shape, dtype) != theirs:
                raise RankMismatchError(
                    f"DistributedDataParallel expects the same model on every rank, but rank {rank} has {kind} "
                    f"'{name}' of shape {list(shape)} ({dtype}) where rank 0 has {theirs[0]} '{theirs[1]}' of shape "
                    f"{list(theirs[2])} ({theirs[3]})")
