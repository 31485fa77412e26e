"""The process group: every process of an ``mpiexec`` launch (MPI's world), with PyTorch's
``torch.distributed`` names for starting it, asking who is who, and the collectives.

Collectives on tensors (``broadcast``, ``all_reduce``) are ops of the table, so a compiled
function records them and its replays run them. Under ``init_process_group`` an uncaught
exception on one rank aborts every rank (``MPI_Abort``) instead of leaving the others waiting.
"""

from __future__ import annotations

import enum
import sys
import time

from staticgrad._eager.dispatch import F
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.ops.collective import NOT_INITIALIZED, World, comm

INSTALL = 'pip install "staticgrad[distributed]" (mpi4py and the mpich wheel, which brings mpiexec)'
# How long a rank that raised waits, after printing its traceback, before it aborts every rank.
ABORT_GRACE_SECONDS = 0.5
BACKENDS = (None, "mpi", "gloo")   # gloo, PyTorch's CPU backend, is what CPU scripts name: MPI serves it


class ReduceOp(enum.Enum):
    """How ``all_reduce`` combines the ranks' tensors (PyTorch's ``ReduceOp`` names)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"


class RankMismatchError(RuntimeError):
    """An error raised on every rank at once (the ranks disagree on something they all checked):
    each rank exits with it, and none needs to abort the others."""

    raised_on_every_rank = True


def mpi():
    """mpi4py's MPI module, or an ImportError saying how to install it."""
    try:
        from mpi4py import MPI  # here: mpi4py is an optional extra, needed only by a process group
    except ImportError as error:
        raise ImportError(f"staticgrad.distributed runs on MPI through mpi4py, which is not installed: {INSTALL}, "
                          "then launch with mpiexec -n N python script.py") from error
    return MPI


def is_available() -> bool:
    """mpi4py can be imported (PyTorch's ``torch.distributed.is_available``)."""
    try:
        mpi()
    except ImportError:
        return False
    return True


class _State:
    previous_excepthook = None


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None, world_size: int = -1,
                       rank: int = -1, store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join every process of the launch (MPI's world: ``mpiexec -n N python script.py``). ``backend``
    may be None, "mpi" or "gloo" (all run on MPI); ``world_size`` and ``rank``, when given, must be
    what the launch gives this process. Installs an excepthook that aborts every rank when this one
    dies of an uncaught exception, so the others do not wait forever in a collective."""
    if backend not in BACKENDS:
        raise ValueError(f"staticgrad.distributed runs on MPI (backend None, 'mpi' or 'gloo'), got backend={backend!r}")
    if World.comm is not None:
        raise ValueError("trying to initialize the default process group twice!")
    MPI = mpi()
    world = MPI.COMM_WORLD
    for name, given, actual in (("world_size", world_size, world.Get_size()), ("rank", rank, world.Get_rank())):
        if given not in (-1, None) and given != actual:
            raise ValueError(f"init_process_group({name}={given}) but the MPI launch gives this process "
                             f"{name} {actual}; leave {name} out (mpiexec -n N sets it)")
    World.comm = world
    World.in_place = MPI.IN_PLACE
    World.mpi_request = MPI.Request
    World.mpi_ops = {"sum": MPI.SUM, "product": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
    _State.previous_excepthook = sys.excepthook
    sys.excepthook = _abort_on_uncaught_exception


def _abort_on_uncaught_exception(kind, value, traceback) -> None:
    """Print the exception as Python would, then abort every rank (unless every rank raised it)."""
    previous = _State.previous_excepthook or sys.__excepthook__
    previous(kind, value, traceback)
    if World.comm is not None and not getattr(value, "raised_on_every_rank", False):
        # said here, before the abort: MPI's own message can be lost when the launcher kills the ranks
        print(f"staticgrad.distributed: rank {World.comm.Get_rank()} raised; stopping every rank (MPI_Abort)",
              file=sys.stderr)
        sys.stderr.flush()
        # The launcher forwards each rank's output on its own schedule and drops what it holds when
        # the abort kills the job: on a loaded machine the traceback was lost. A moment lets it pass.
        time.sleep(ABORT_GRACE_SECONDS)
        World.comm.Abort(1)
    sys.stderr.flush()


def is_initialized() -> bool:
    return World.comm is not None


def destroy_process_group(group=None) -> None:
    """Leave the process group (MPI itself stays up until the process exits: it cannot restart)."""
    comm()
    World.comm = None
    if sys.excepthook is _abort_on_uncaught_exception:
        sys.excepthook = _State.previous_excepthook or sys.__excepthook__


def get_rank(group=None) -> int:
    _world_only(group, "get_rank")
    return comm().Get_rank()


def get_world_size(group=None) -> int:
    _world_only(group, "get_world_size")
    return comm().Get_size()


def barrier(group=None, async_op: bool = False, device_ids=None) -> None:
    """Wait until every rank gets here."""
    _synchronous(async_op, "barrier")
    _world_only(group, "barrier")
    if Tracing.tracer is not None:
        Tracing.tracer.fail("distributed.barrier() inside a compiled function is not recorded, so a replay would "
                            "not wait; call it outside the compiled function")
    comm().Barrier()


def broadcast(tensor: Tensor, src: int | None = None, group=None, async_op: bool = False, group_src=None) -> None:
    """Overwrite ``tensor`` on every rank with rank ``src``'s (in place)."""
    _synchronous(async_op, "broadcast")
    _world_only(group, "broadcast")
    if group_src is not None:
        raise NotImplementedError("distributed.broadcast(group_src=...) is not supported: give src")
    src = 0 if src is None else src
    size = get_world_size()
    if not 0 <= src < size:
        raise ValueError(f"broadcast: src {src} is not a rank of this group of {size}")
    with no_grad():
        tensor.copy_(F.broadcast(tensor, src=src))


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False) -> None:
    """Combine ``tensor`` over every rank with ``op`` and leave the result in it on every rank."""
    _synchronous(async_op, "all_reduce")
    _world_only(group, "all_reduce")
    if not isinstance(op, ReduceOp):
        raise TypeError(f"all_reduce: op must be a staticgrad.distributed.ReduceOp, got {op!r}")
    if op is ReduceOp.AVG and tensor._data.dtype.kind != "f":
        raise ValueError("all_reduce with ReduceOp.AVG needs a floating-point tensor")
    comm()
    with no_grad():
        tensor.copy_(F.all_reduce(tensor, op=op.value))


def _world_only(group, what: str) -> None:
    if group is not None:
        raise NotImplementedError(f"distributed.{what}(group=...) is not supported: staticgrad has one process "
                                  "group, the whole MPI world; leave group unset")


def _synchronous(async_op: bool, what: str) -> None:
    if async_op:
        raise NotImplementedError(f"distributed.{what}(async_op=True) is not supported: staticgrad's collectives "
                                  "are blocking; call it with async_op=False")


__all__ = ["NOT_INITIALIZED", "RankMismatchError", "ReduceOp", "all_reduce", "barrier", "broadcast",
           "destroy_process_group", "get_rank", "get_world_size", "init_process_group", "is_available",
           "is_initialized", "mpi"]
