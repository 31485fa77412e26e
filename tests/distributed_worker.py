"""One rank of the data-parallel tests (``tests/test_distributed.py`` launches it with
``mpiexec -n 2 python tests/distributed_worker.py <scenario>``). Every check raises on failure,
which the process group's excepthook turns into an abort of every rank and a nonzero exit."""

from __future__ import annotations

import sys

import numpy as np

import staticgrad as torch
import staticgrad.distributed as dist
from staticgrad.nn.parallel import DistributedDataParallel as DDP
from staticgrad.ops.collective import World

GLOBAL_BATCH, FEATURES, OUTPUTS, STEPS = 8, 5, 3, 3


def make_model(seed: int, hidden: int = 7):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, OUTPUTS)).double()


def batches(count: int) -> list:
    rng = np.random.default_rng(42)
    return [(torch.tensor(rng.standard_normal((GLOBAL_BATCH, FEATURES))),
             torch.tensor(rng.standard_normal((GLOBAL_BATCH, OUTPUTS)))) for _ in range(count)]


def shard(t, rank: int, size: int):
    per = t.shape[0] // size
    return t[rank * per:(rank + 1) * per].clone()


def optimizer(name: str, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.Adam(params, lr=0.05)


def training_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def same_on_every_rank(values: list, what: str) -> None:
    gathered = World.comm.allgather([v.detach().numpy().copy() for v in values])
    for rank, theirs in enumerate(gathered[1:], start=1):
        for a, b in zip(gathered[0], theirs):
            if not np.array_equal(a, b):
                raise AssertionError(f"{what}: rank {rank} differs from rank 0")


def in_block(model, copies: int, what: str) -> None:
    """A replayed step packed no gradient into a buffer of its own: they lie one after another in
    the step's gradient block, and every .grad is a view of it."""
    grads = [p.grad.numpy() for p in model.parameters()]
    block = grads[0].base
    if copies or block is None or any(g.base is not block for g in grads) or block.size != sum(g.size for g in grads):
        raise AssertionError(f"{what}: the replayed step's gradients are not one block ({copies} packing copies)")


def check_close(model, reference, what: str) -> None:
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if not np.allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12):
            raise AssertionError(f"{what}: parameter {name} differs from one process on the whole batch "
                                 f"(largest difference {np.abs(p.detach().numpy() - q.detach().numpy()).max():.3g})")


def scenario_train() -> None:
    """Two ranks on half batches end with the parameters of one process on the whole batch:
    eager steps, compiled steps and a compiled model, SGD with momentum and Adam; one Allreduce
    per step."""
    rank, size = dist.get_rank(), dist.get_world_size()
    data = batches(STEPS)
    for opt_name in ("sgd", "adam"):
        for mode in ("eager", "compiled step", "compiled model", "DDP(compiled model)"):
            what = f"{opt_name}, {mode}"
            compiled = mode == "compiled step"
            model = make_model(seed=rank)          # a different start on each rank: DDP broadcasts rank 0's
            ddp = DDP(torch.compile(model) if mode == "DDP(compiled model)" else model)
            same_on_every_rank(list(model.parameters()), f"{what}: parameters after construction")
            reference = make_model(seed=0)
            reference.load_state_dict(model.state_dict())
            # a compiled model: its backward node runs in the engine, and averages inside its program
            wrapped = torch.compile(ddp) if mode == "compiled model" else ddp
            step = training_step(wrapped, optimizer(opt_name, ddp.parameters()))
            if compiled:
                step = torch.compile(step)
            reference_step = training_step(reference, optimizer(opt_name, reference.parameters()))
            calls = World.allreduce_calls
            for x, y in data:
                copies = World.packing_copies
                step(shard(x, rank, size), shard(y, rank, size))
                reference_step(x, y)
            if mode != "eager":   # the last step replayed: its gradients lay in one block, reduced there
                in_block(model, World.packing_copies - copies, what)
            if "compiled model" in mode:   # the average is an op of the recorded backward
                plan = (wrapped if mode == "compiled model" else ddp.module).plan
                ops = [s.op for s in plan.backward.program.steps]
                if ops.count("all_reduce_grads") != 1:
                    raise AssertionError(f"{what}: the compiled backward's ops are {ops}")
            if World.allreduce_calls - calls != STEPS:
                raise AssertionError(f"{what}: {World.allreduce_calls - calls} Allreduce calls in {STEPS} steps")
            if compiled:
                ops = [s.op for s in step.plan.program.steps]
                stats = step.stats   # SGD's momentum buffers appear after the first step: a second trace
                if ops.count("all_reduce_grads") != 1 or stats.replays < 1 or stats.traces + stats.replays != STEPS:
                    raise AssertionError(f"{what}: plan ops {ops}, {stats}")
            check_close(model, reference, what)
            same_on_every_rank(list(model.parameters()), f"{what}: parameters after training")
    print(f"rank {rank}: train ok", flush=True)


def scenario_no_sync() -> None:
    """Gradients accumulated over two micro-batches, the first under no_sync(): local until the
    last backward, then averaged; eager (one bucket, and three overlapped with backward) and a
    compiled backward (no_sync guarded: it retraces)."""
    rank, size = dist.get_rank(), dist.get_world_size()
    (x, y), = batches(1)
    xs, ys = shard(x, rank, size), shard(y, rank, size)
    half = xs.shape[0] // 2
    micro = [(xs[:half], ys[:half]), (xs[half:], ys[half:])]
    reference = make_model(seed=0)
    (2 * torch.nn.functional.mse_loss(reference(x), y)).backward()   # micro-batch means: twice the full mean
    for mode, buckets in (("eager", 1), ("eager", 3), ("compiled", 1), ("compiled model", 1)):
        compiled = mode == "compiled"
        model = make_model(seed=0)
        ddp = DDP(model, bucket_cap_mb=25 * 8 / 2**20 if buckets == 3 else None)
        # a compiled model averages inside its backward only when the gradients are in sync: after
        # a backward under no_sync() the averaging is of the whole accumulated gradient, after it
        forward = torch.compile(ddp) if mode == "compiled model" else ddp

        def backward(a, b, forward=forward):
            loss = torch.nn.functional.mse_loss(forward(a), b)
            loss.backward()
            return loss

        run = torch.compile(backward) if compiled else backward
        for _ in range(2):                        # the second round replays both plans
            ddp.zero_grad()
            calls = World.allreduce_calls
            with ddp.no_sync():
                run(*micro[0])
            if World.allreduce_calls != calls:
                raise AssertionError("a backward under no_sync() ran an Allreduce")
            gathered = World.comm.allgather(model[0].weight.grad.numpy().copy())
            if np.allclose(gathered[0], gathered[1]):
                raise AssertionError("under no_sync() the ranks' gradients were averaged")
            run(*micro[1])
            if World.allreduce_calls != calls + buckets:
                raise AssertionError(f"the backward after no_sync() did not run {buckets} Allreduce calls")
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                if not np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12):
                    raise AssertionError(f"no_sync accumulation ({mode}): "
                                         f"{name}.grad differs from one process on the whole batch")
        if compiled and (run.stats.traces, run.stats.replays) != (2, 2):
            raise AssertionError(f"compiled no_sync backward: {run.stats}")
        if mode == "compiled model":   # one plan without the averaging serves both calls
            if (forward.stats.traces, forward.stats.replays) != (1, 3):
                raise AssertionError(f"compiled model under no_sync: {forward.stats}")
            ddp.zero_grad()
            calls, copies = World.allreduce_calls, World.packing_copies
            for _ in range(2):   # in sync: a plan that averages in its backward, in one block
                run(xs, ys)
            if World.allreduce_calls != calls + 2 or World.packing_copies != copies + 1:
                raise AssertionError(f"compiled model in sync: {World.allreduce_calls - calls} Allreduce calls, "
                                     f"{World.packing_copies - copies} packing copies in two backwards")
            if [s.op for s in forward.plan.backward.program.steps].count("all_reduce_grads") != 1:
                raise AssertionError("compiled model in sync: its backward program does not average")
    print(f"rank {rank}: no_sync ok", flush=True)


class _LoggedComm:
    """The world's communicator, logging each non-blocking all-reduce it starts (and its size)."""

    def __init__(self, comm, events: list):
        self._comm = comm
        self._events = events

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def Iallreduce(self, in_place, buffer, op=None):
        self._events.append(("Iallreduce", np.asarray(buffer).size))
        return self._comm.Iallreduce(in_place, buffer, op=op)


def scenario_buckets() -> None:
    """With buckets (bucket_cap_mb), eager starts each bucket's non-blocking all-reduce as soon as
    backward produced its gradients (and, for comparison, reduces them blocking after backward), and
    a compiled step starts each right after the op that produced it: the same values bit for bit,
    those of one process on the whole batch, and the first bucket starts before backward reaches
    the first layer."""
    rank, size = dist.get_rank(), dist.get_world_size()
    data = batches(STEPS + 1)
    cap = 25 * 8 / 2**20          # 25 float64 elements: 3 buckets of the 66 (35, 7, 21, 3) in either order
    finals = {}
    for mode in ("eager", "eager blocking", "eager kept in buckets", "compiled"):
        model = make_model(seed=0)
        ddp = DDP(model, bucket_cap_mb=cap)
        ddp._overlap_backward = mode != "eager blocking"
        opt = optimizer("adam", ddp.parameters())
        step = training_step(ddp, opt)
        if mode == "eager kept in buckets":   # .grad stay views of their buckets: reduced there, no copy
            def step(x, y, ddp=ddp, opt=opt):
                opt.zero_grad(set_to_none=False)
                torch.nn.functional.mse_loss(ddp(x), y).backward()
                opt.step()
        if mode == "compiled":
            step = torch.compile(step)
        calls = World.allreduce_calls
        for x, y in data:
            copies = World.packing_copies
            step(shard(x, rank, size), shard(y, rank, size))
        if mode == "compiled":
            in_block(model, World.packing_copies - copies, "buckets")
        if mode == "eager kept in buckets" and World.packing_copies != copies:
            raise AssertionError(f"{mode}: {World.packing_copies - copies} packing copies")
        if World.allreduce_calls - calls != 3 * len(data):
            raise AssertionError(f"{mode}: {World.allreduce_calls - calls} Allreduce calls for 3 buckets in "
                                 f"{len(data)} steps")
        finals[mode] = [p.detach().numpy().copy() for p in model.parameters()]
    ops = [s.op for s in step.plan.program.steps]
    starts = [i for i, op in enumerate(ops) if op == "all_reduce_start"]
    last_mm = max(i for i, op in enumerate(ops) if op == "mm")
    if len(starts) != 3 or ops.count("all_reduce_wait") != 1 or "all_reduce_grads" in ops or starts[0] > last_mm:
        raise AssertionError(f"the buckets do not start during backward: {ops}")
    for mode, final in finals.items():
        for a, b in zip(final, finals["compiled"]):
            if not np.array_equal(a, b):
                raise AssertionError(f"buckets: {mode} differs from compiled")
    reference = make_model(seed=0)
    reference_step = training_step(reference, optimizer("adam", reference.parameters()))
    for x, y in data:
        reference_step(x, y)
    check_close(model, reference, "buckets")

    # eager: the last layer's bucket (bias 3 + weight 21) starts before backward reaches the first layer
    events: list = []
    ddp = DDP(make_model(seed=0), bucket_cap_mb=cap)
    x, y = data[0]
    x = shard(x, rank, size).requires_grad_(True)
    x.register_hook(lambda g: events.append(("first layer's backward", None)))
    world, World.comm = World.comm, _LoggedComm(World.comm, events)
    try:
        torch.nn.functional.mse_loss(ddp(x), shard(y, rank, size)).backward()
    finally:
        World.comm = world
    if events[0] != ("Iallreduce", 24) or events.index(("first layer's backward", None)) == 0:
        raise AssertionError(f"eager buckets in the order {events}: the first did not start during backward")
    if sorted(size for what, size in events if what == "Iallreduce") != [7, 24, 35]:
        raise AssertionError(f"eager buckets: {events}")
    print(f"rank {rank}: buckets ok", flush=True)


def scenario_unused() -> None:
    """A parameter no backward reaches: an error on every rank (and the next backward starts
    afresh); with find_unused_parameters, its zero gradient averaged with the other rank's."""
    rank, size = dist.get_rank(), dist.get_world_size()
    (x, y), = batches(1)
    xs, ys = shard(x, rank, size), shard(y, rank, size)
    for find_unused in (False, True):
        model = make_model(seed=0)
        ddp = DDP(model, bucket_cap_mb=0, find_unused_parameters=find_unused)
        if not find_unused:
            try:
                torch.nn.functional.mse_loss(model[0](xs).sum(1, keepdim=True), ys[:, :1]).backward()
            except RuntimeError as error:
                if "parameter '2.weight' received no gradient" not in str(error):
                    raise
            else:
                raise AssertionError("a parameter without a gradient passed")
            ddp.zero_grad()
            torch.nn.functional.mse_loss(ddp(xs), ys).backward()   # every parameter: averages as usual
            same_on_every_rank([p.grad for p in model.parameters()], "after the error, gradients")
            continue
        # rank 0 leaves the last layer out: its gradient there is half of rank 1's
        out = model[1](model[0](xs)) if rank == 0 else ddp(xs)
        torch.nn.functional.mse_loss(out.sum(1, keepdim=True) if rank == 0 else out, ys[:, :1] if rank == 0 else ys
                                     ).backward()
        gathered = World.comm.allgather(model[2].weight.grad.numpy().copy())
        reference = make_model(seed=0)
        torch.nn.functional.mse_loss(reference(shard(x, 1, size)), shard(y, 1, size)).backward()
        if not np.array_equal(gathered[0], gathered[1]) or not np.allclose(
                gathered[0], reference[2].weight.grad.numpy() / 2, rtol=1e-12, atol=1e-15):
            raise AssertionError("find_unused_parameters: the unused weight's gradient is not half of rank 1's")
    print(f"rank {rank}: unused ok", flush=True)


def scenario_collectives() -> None:
    """broadcast and all_reduce (every ReduceOp) in place, eagerly and inside a compiled function."""
    rank, size = dist.get_rank(), dist.get_world_size()
    values = [np.array([1.0, -2.0, 3.0]) * (r + 1) for r in range(size)]
    expected = {dist.ReduceOp.SUM: sum(values), dist.ReduceOp.AVG: sum(values) / size,
                dist.ReduceOp.MAX: np.max(values, axis=0), dist.ReduceOp.MIN: np.min(values, axis=0),
                dist.ReduceOp.PRODUCT: np.prod(values, axis=0)}
    for op, want in expected.items():
        t = torch.tensor(values[rank])
        dist.all_reduce(t, op=op)
        if not np.allclose(t.numpy(), want):
            raise AssertionError(f"all_reduce {op}: {t.numpy()} != {want}")
    t = torch.tensor(values[rank])
    dist.broadcast(t, src=1)
    if not np.array_equal(t.numpy(), values[1]):
        raise AssertionError("broadcast from rank 1")

    @torch.compile
    def summed_twice(a):
        b = a * 2
        dist.all_reduce(b)
        return b

    for k in range(3):
        a = torch.tensor(values[rank] + k)
        got = summed_twice(a)
        if not np.allclose(got.numpy(), 2 * sum(v + k for v in values)):
            raise AssertionError(f"compiled all_reduce, call {k}: {got.numpy()}")
    if summed_twice.stats.replays != 2:
        raise AssertionError(f"compiled all_reduce did not replay: {summed_twice.stats}")
    print(f"rank {rank}: collectives ok", flush=True)


def scenario_mismatch() -> None:
    """Rank 1 builds a wider hidden layer: construction fails on every rank with the same error."""
    rank = dist.get_rank()
    DDP(make_model(seed=0, hidden=7 if rank == 0 else 9))
    print(f"rank {rank}: constructed a mismatched model", flush=True)


def scenario_raise() -> None:
    """Rank 1 raises while rank 0 waits in a collective: the excepthook aborts both."""
    rank = dist.get_rank()
    if rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    dist.barrier()
    print("rank 0 passed the barrier", flush=True)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    globals()[f"scenario_{sys.argv[1]}"]()
    dist.destroy_process_group()
