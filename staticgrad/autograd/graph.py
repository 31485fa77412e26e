"""torch.autograd.graph: the abstract ``Node`` every backward node is an instance of, and hooks on
the tensors nodes save for backward (``saved_tensors_hooks``, ``disable_saved_tensors_hooks``), the
mechanism non-reentrant activation checkpointing uses."""

import abc

from staticgrad._eager.node import AccumulateGrad
from staticgrad._eager.node import Node as _FunctionNode
from staticgrad._eager.saved_hooks import disable_saved_tensors_hooks, saved_tensors_hooks

__all__ = ["Node", "disable_saved_tensors_hooks", "saved_tensors_hooks"]


class Node(abc.ABC):
    """What ``isinstance(fn, torch.autograd.graph.Node)`` asks of: every node of a backward graph,
    the functions (``MulBackward0``, a custom Function's node) and ``AccumulateGrad`` alike, as
    PyTorch's abstract class answers it. The nodes themselves are ``staticgrad._eager.node``'s."""

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is Node and issubclass(subclass, (_FunctionNode, AccumulateGrad)):
            return True
        return NotImplemented

    # the methods PyTorch's abstract Node declares: ``Node()`` is refused naming them, as there
    @abc.abstractmethod
    def name(self): ...

    @property
    @abc.abstractmethod
    def next_functions(self): ...

    @property
    @abc.abstractmethod
    def metadata(self): ...

    @property
    @abc.abstractmethod
    def _sequence_nr(self): ...

    @property
    @abc.abstractmethod
    def _input_metadata(self): ...

    @abc.abstractmethod
    def register_hook(self, fn): ...

    @abc.abstractmethod
    def register_prehook(self, fn): ...

    @abc.abstractmethod
    def _register_hook_dict(self, tensor): ...

