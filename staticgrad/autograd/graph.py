"""torch.autograd.graph: hooks on the tensors nodes save for backward (``saved_tensors_hooks``,
``disable_saved_tensors_hooks``), the mechanism non-reentrant activation checkpointing uses."""

from staticgrad._eager.node import Node
from staticgrad._eager.saved_hooks import disable_saved_tensors_hooks, saved_tensors_hooks

__all__ = ["Node", "disable_saved_tensors_hooks", "saved_tensors_hooks"]
