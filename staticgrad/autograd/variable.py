"""torch.autograd.Variable, kept as PyTorch keeps it: every tensor is a Variable
(``isinstance(t, Variable)``), and ``Variable(t, requires_grad=...)`` gives a new tensor sharing
``t``'s data, with no history, requiring grad as asked."""

from __future__ import annotations

from staticgrad._eager.tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)

    def __call__(cls, data, requires_grad: bool = False, volatile: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        alias = data.detach()
        return alias.requires_grad_(True) if requires_grad else alias


class Variable(metaclass=_VariableMeta):
    """The old name of Tensor (see the module docstring)."""
