"""Several processes training one model, on MPI through mpi4py (``pip install
"staticgrad[distributed]"``, launch with ``mpiexec -n N python train.py``): PyTorch's
``torch.distributed`` names. ``staticgrad.nn.parallel.DistributedDataParallel`` builds on it."""

from staticgrad.distributed.process_group import (
    RankMismatchError,
    ReduceOp,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)

__all__ = ["RankMismatchError", "ReduceOp", "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_rank",
           "get_world_size", "init_process_group", "is_available", "is_initialized"]
