"""nn.Parameter: a leaf tensor that a Module registers as one of its parameters."""

from __future__ import annotations

import numpy as np

from staticgrad._eager.tensor import Tensor, _init
from staticgrad.ops.dtypes import default_float


class Parameter(Tensor):
    """A tensor that requires grad by default and that Modules list in ``parameters()``.

    Like PyTorch's, it shares storage with the tensor it wraps."""

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            array = np.zeros((0,), dtype=default_float().np)
        elif isinstance(data, Tensor):
            array = data._data
        else:
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        t = object.__new__(cls)
        _init(t, array, False, None)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, data=None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        t = Parameter(Tensor._make(self._data.copy(), False, None), self._requires_grad)
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data.copy(), self._requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(Tensor._make(data, False, None), requires_grad)
