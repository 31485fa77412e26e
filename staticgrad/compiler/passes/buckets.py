"""Overlap the gradient all-reduce with backward: split a recorded ``all_reduce_grads`` whose
model asked for buckets (``DistributedDataParallel(bucket_cap_mb=...)``) into one non-blocking
``all_reduce_start`` per bucket, scheduled right after the op that produces the bucket's last
gradient, and one ``all_reduce_wait`` where the all-reduce was.

Buckets follow the order in which the backward produces gradients (the last layer's first), so
the first bucket starts while the rest of backward still runs, as PyTorch's DDP orders its
buckets (eager DistributedDataParallel overlaps its own buckets, in reverse parameter order, from
hooks after each gradient's accumulation: ``nn/parallel/reducer.py``). Every rank runs the same
program, so every rank starts the same buckets in the same order. Reads concrete shapes (bucket
sizes are bytes): it runs before the shape-generic passes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.compiler.ir import Graph, Op, Value
from staticgrad.ops.collective import bucket_bounds


def overlap_gradient_buckets(graph: Graph) -> tuple:
    if not any(op.op == "all_reduce_grads" and _splits(op) for op in graph.ops):
        return graph, False
    producers = graph.producers()
    values = dict(graph.values)
    next_id = max(values) + 1
    after: dict = {}      # op index -> start ops to run right after it (-1: before the first op)
    replaced: dict = {}   # op index -> the wait op that takes its place
    for index, op in enumerate(graph.ops):
        if op.op != "all_reduce_grads" or not _splits(op):
            continue
        attrs = op.attr_dict
        layout = [None] * len(op.outputs)
        buffers, tickets = [], []
        by_dtype: dict = {}
        for position, v in enumerate(op.inputs):
            by_dtype.setdefault(values[v].dtype, []).append(position)
        for dtype, positions in by_dtype.items():
            positions.sort(key=lambda p: producers.get(op.inputs[p], -1))   # in the order they are ready
            sizes = [_numel(values[op.inputs[p]].shape) for p in positions]
            bounds = bucket_bounds(sizes, np.dtype(dtype).itemsize, attrs["bucket_bytes"])
            members = [[] for _ in bounds]   # each tensor in the bucket whose range ends at or after it
            offset, which = 0, 0
            for p, size in zip(positions, sizes):
                while offset + size > bounds[which][1]:
                    which += 1
                members[which].append((p, offset - bounds[which][0]))
                offset += size
            for (start, stop), bucket_members in zip(bounds, members):
                if not bucket_members:
                    continue
                flat, ticket = next_id, next_id + 1
                next_id += 2
                values[flat] = Value(flat, (stop - start,), dtype, "op", "backward")
                values[ticket] = Value(ticket, (1,), "int64", "op", "backward")
                for p, offset_in_bucket in bucket_members:
                    layout[p] = (len(buffers), offset_in_bucket, values[op.inputs[p]].shape)
                buffers.append(flat)
                tickets.append(ticket)
                ready = max(producers.get(op.inputs[p], -1) for p, _ in bucket_members)
                start_op = Op("all_reduce_start", tuple(op.inputs[p] for p, _ in bucket_members), (flat, ticket),
                              (("op", attrs["op"]),))
                after.setdefault(ready, []).append(start_op)
        replaced[index] = Op("all_reduce_wait", tuple(buffers) + tuple(tickets), op.outputs,
                             (("layout", tuple(layout)), ("op", attrs["op"])))
    ops = list(after.get(-1, ()))
    for index, op in enumerate(graph.ops):
        ops.append(replaced.get(index, op))
        ops.extend(after.get(index, ()))
    return replace(graph, ops=ops, values=values), True


def _splits(op: Op) -> bool:
    """More than one gradient, and buckets asked for (``bucket_bytes`` None is one blocking call)."""
    return len(op.outputs) > 1 and op.attr_dict.get("bucket_bytes") is not None


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
