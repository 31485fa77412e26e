"""``Tensor.new_zeros/new_ones/new_full/new_empty/new_tensor``: factories that default to the
dtype of the tensor they are called on (as PyTorch's do), e.g. ``weight.new_zeros(layers, batch, hidden)``."""

from __future__ import annotations

import warnings

from staticgrad._eager import creation
from staticgrad._eager.sizes import sequence_size, varargs_size
from staticgrad._eager.tensor import Tensor


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return creation.zeros(varargs_size("new_zeros", size), dtype=dtype or self.dtype, requires_grad=requires_grad,
                          device=device)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return creation.ones(varargs_size("new_ones", size), dtype=dtype or self.dtype, requires_grad=requires_grad,
                         device=device)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    return creation.empty(varargs_size("new_empty", size), dtype=dtype or self.dtype, requires_grad=requires_grad,
                          device=device)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return creation.full(sequence_size("new_full", size), fill_value, dtype=dtype or self.dtype,
                         requires_grad=requires_grad, device=device)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
                      "or sourceTensor.detach().clone().requires_grad_(True), rather than "
                      "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        data = data.detach()
    return creation.tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad, device=device)


METHODS = {
    "new_zeros": _new_zeros,
    "new_ones": _new_ones,
    "new_empty": _new_empty,
    "new_full": _new_full,
    "new_tensor": _new_tensor,
}
