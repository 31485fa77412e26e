"""Collective ops: the MPI calls of data-parallel training, as ops of the table so that a traced
step records them and a replay runs them (``all_reduce_grads``: every gradient of a model
averaged over the ranks with one ``Allreduce`` on one contiguous buffer).

A leaf like every op module: it never imports mpi4py. ``staticgrad.distributed`` puts the
communicator and MPI's reduction ops into ``World`` when it starts the process group; the
forwards read them at call time, so a saved plan runs on whichever world is current.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from staticgrad.ops.registry import OpDef, register

NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                   "init_process_group.")
REDUCE_OPS = ("sum", "avg", "product", "max", "min")


class World:
    """The communicator collectives run on and MPI's reduction ops by name (set by
    ``staticgrad.distributed.init_process_group``), and how many ``Allreduce`` calls ran and the
    seconds spent in them (waiting for the other ranks included), for benchmarks and tests."""

    comm = None
    in_place = None            # MPI.IN_PLACE
    mpi_request = None         # MPI.Request (Testall, Waitall)
    mpi_ops: ClassVar[dict] = {}   # "sum" -> MPI.SUM ... ("avg" is a sum divided by the world size)
    allreduce_calls = 0
    allreduce_seconds = 0.0
    packing_copies = 0         # gradients copied into a flat buffer first (none when laid out in a block)


def comm():
    """The current communicator; PyTorch's error when no process group was started."""
    if World.comm is None:
        raise ValueError(NOT_INITIALIZED)
    return World.comm


def _allreduce(buffer: np.ndarray, op: str) -> None:
    """Reduce ``buffer`` over every rank in place (``avg``: the sum divided by the world size)."""
    communicator = comm()
    started = time.perf_counter()
    communicator.Allreduce(World.in_place, buffer, op=World.mpi_ops["sum" if op == "avg" else op])
    World.allreduce_seconds += time.perf_counter() - started
    World.allreduce_calls += 1
    if op == "avg":
        np.divide(buffer, communicator.Get_size(), out=buffer)


def bucket_bounds(sizes: list, itemsize: int, bucket_bytes: int | None) -> list:
    """(start, stop) element ranges over a flat buffer holding tensors of ``sizes`` in order:
    one range for all when ``bucket_bytes`` is None, else tensors grouped in order into buckets
    of at most ``bucket_bytes`` (a tensor larger than that is a bucket of its own; 0: one per tensor)."""
    total = sum(sizes)
    if bucket_bytes is None or total == 0:
        return [(0, total)]
    bounds, start, stop = [], 0, 0
    for size in sizes:
        if stop > start and (stop - start + size) * itemsize > bucket_bytes:
            bounds.append((start, stop))
            start = stop
        stop += size
    bounds.append((start, stop))
    return bounds


def _in_block(grads) -> np.ndarray | None:
    """The part of one 1-D block that ``grads`` fill one after another, with nothing between
    them (the gradient block a compiled step lays out for its all-reduce), or None."""
    base = grads[0].base
    if base is None or base.ndim != 1 or base.dtype != grads[0].dtype or not base.flags.c_contiguous:
        return None
    itemsize = base.itemsize
    origin = base.__array_interface__["data"][0]
    start = (grads[0].__array_interface__["data"][0] - origin) // itemsize
    position = start
    for g in grads:
        if g.base is not base or not g.flags.c_contiguous or g.dtype != base.dtype:
            return None
        if (g.__array_interface__["data"][0] - origin) // itemsize != position:
            return None
        position += g.size
    return base[start:position]


def _all_reduce_grads(*grads, out=None, op="avg", bucket_bytes=None, in_block=False):
    """Every gradient reduced over the ranks: packed into one flat buffer per dtype (one C call),
    reduced in place bucket by bucket (one ``Allreduce`` when ``bucket_bytes`` is None), and
    handed back as views of that buffer, so the gradients share one block as the buckets of
    PyTorch's DDP with ``gradient_as_bucket_view`` do. ``in_block``: a compiled step laid the
    gradients out in one block already, and reads none of them again: reduced there, no copy."""
    results = [None] * len(grads)
    by_dtype = {}
    for i, g in enumerate(grads):
        by_dtype.setdefault(g.dtype, []).append(i)
    for dtype, indices in by_dtype.items():
        members = [grads[i] for i in indices]
        sizes = [g.size for g in members]
        flat = _in_block(members) if in_block else None
        if flat is None:
            flat = (np.concatenate(members, axis=None, dtype=dtype) if len(members) > 1
                    else members[0].ravel().copy())
            World.packing_copies += 1
        for start, stop in bucket_bounds(sizes, dtype.itemsize, bucket_bytes):
            _allreduce(flat[start:stop], op)
        offset = 0
        for i, size in zip(indices, sizes):
            results[i] = flat[offset:offset + size].reshape(grads[i].shape)
            offset += size
    if out is not None:   # one gradient: a replay hands the planned buffer
        np.copyto(out, results[0])
        return out
    return results[0] if len(results) == 1 else tuple(results)


def _all_reduce(tensor, out=None, op="sum"):
    """One tensor reduced over every rank (``staticgrad.distributed.all_reduce``)."""
    result = np.array(tensor, copy=True, order="C") if out is None else out
    if out is not None:
        np.copyto(out, tensor)
    _allreduce(result.reshape(-1), op)
    return result


def _broadcast(tensor, out=None, src=0):
    """Rank ``src``'s tensor on every rank (``staticgrad.distributed.broadcast``)."""
    result = np.array(tensor, copy=True, order="C") if out is None else out
    if out is not None:
        np.copyto(out, tensor)
    comm().Bcast(result.reshape(-1), root=src)
    return result


register(OpDef("all_reduce_grads", _all_reduce_grads, "other"))
register(OpDef("all_reduce", _all_reduce, "other"))
register(OpDef("broadcast", _broadcast, "other"))


# ---- overlapped buckets: what a compiled step runs instead of all_reduce_grads ------------------
# The pass compiler/passes/buckets.py splits a recorded all_reduce_grads into one
# all_reduce_start per bucket, placed right after the op that produces the bucket's last gradient,
# and one all_reduce_wait where the all-reduce was: communication overlaps the rest of backward.

_PENDING: dict = {}      # ticket -> the MPI request of a started bucket
_TICKETS = iter(range(1 << 62))


def _all_reduce_start(*grads, op="avg", in_block=False):
    """Pack a bucket's gradients into a fresh flat buffer (or, ``in_block``, take their part of
    the step's gradient block) and start a non-blocking ``Iallreduce`` on it; returns (the buffer,
    a ticket naming the request)."""
    flat = _in_block(grads) if in_block else None
    if flat is None:
        flat = pack(grads)
    return flat, start_all_reduce(flat, op)


def pack(grads) -> np.ndarray:
    """The gradients one after another in a fresh flat buffer (one copy, counted)."""
    World.packing_copies += 1
    return np.concatenate(grads, axis=None) if len(grads) > 1 else grads[0].ravel().copy()


def start_all_reduce(flat: np.ndarray, op: str) -> np.ndarray:
    """Start a non-blocking ``Iallreduce`` of ``flat`` in place; a ticket naming the request for
    ``_all_reduce_wait`` (which divides for "avg"). Earlier buckets still in flight are tested,
    which lets MPI progress them while backward goes on."""
    communicator = comm()
    progress()
    started = time.perf_counter()
    ticket = next(_TICKETS)
    _PENDING[ticket] = communicator.Iallreduce(World.in_place, flat, op=World.mpi_ops["sum" if op == "avg" else op])
    World.allreduce_seconds += time.perf_counter() - started
    World.allreduce_calls += 1
    return np.array([ticket], dtype=np.int64)


def progress() -> None:
    """Let MPI move the all-reduces in flight along (it does so only inside MPI calls)."""
    if _PENDING:
        World.mpi_request.Testall(list(_PENDING.values()))


def _all_reduce_wait(*buffers_and_tickets, op="avg", layout=()):
    """Wait for every bucket's ``Iallreduce`` and hand back the gradients, in the order ``layout``
    gives them ((bucket, offset, shape) each), as views of the buckets' buffers."""
    half = len(buffers_and_tickets) // 2
    buffers, tickets = buffers_and_tickets[:half], buffers_and_tickets[half:]
    started = time.perf_counter()
    World.mpi_request.Waitall([_PENDING.pop(int(t[0])) for t in tickets])
    World.allreduce_seconds += time.perf_counter() - started
    if op == "avg":
        size = comm().Get_size()
        for flat in buffers:
            np.divide(flat, size, out=flat)
    results = []
    for bucket, offset, shape in layout:
        count = 1
        for d in shape:
            count *= d
        results.append(buffers[bucket][offset:offset + count].reshape(shape))
    return tuple(results)


register(OpDef("all_reduce_start", _all_reduce_start, "other"))
register(OpDef("all_reduce_wait", _all_reduce_wait, "other"))
