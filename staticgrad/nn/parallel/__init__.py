"""Data-parallel training over several processes (PyTorch's ``torch.nn.parallel``)."""

from staticgrad.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
