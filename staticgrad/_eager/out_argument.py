"""PyTorch's ``out=`` argument: a function's result written into a given tensor, which it returns.
The tensor is resized to the result's shape as PyTorch resizes it, where NumPy storage can follow
PyTorch's storage rules exactly; other resizes are refused with what to pass instead."""

from __future__ import annotations

import numpy as np

from staticgrad._eager.dispatch import dispatch_inplace
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing, bump_epoch
from staticgrad.errors import TraceError
from staticgrad.ops import OPS


def refuse_autograd(name: str, *tensors) -> None:
    """PyTorch's error for an ``out=`` call while grad mode is on and a tensor involved requires grad."""
    if GradMode.enabled and any(t._requires_grad for t in tensors):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")


def _resize(name: str, out: Tensor, shape: tuple) -> None:
    """Give ``out`` the shape ``shape`` as PyTorch's ``resize_`` would: a tensor with no elements (and
    not a view) gets new storage; a contiguous one with enough elements keeps its memory and uses its
    first elements (its views see the writes, as in PyTorch)."""
    old = out._data
    size = int(np.prod(shape, dtype=np.int64))
    if old.size == 0 and out._base is None:
        data = np.empty(shape, dtype=old.dtype)
    elif old.size >= size and old.flags.c_contiguous and old.size > 0:
        data = old.reshape(-1)[:size].reshape(shape)
    else:
        reason = ("is a view of another tensor" if out._base is not None and old.size == 0
                  else "is not contiguous" if not old.flags.c_contiguous else "has too few elements")
        raise NotImplementedError(
            f"staticgrad's {name}(out=...) cannot resize an out tensor of shape {list(old.shape)} to "
            f"{list(shape)}: it {reason}, and NumPy storage cannot follow PyTorch's resize there. Pass an out "
            f"tensor of shape {list(shape)}, or a new empty one (staticgrad.empty(0)).")
    if Tracing.tracer is not None:
        raise TraceError(f"{name}(out=...) resizing its out tensor from {list(old.shape)} to {list(shape)} inside a "
                         f"compiled function cannot be replayed; pass an out tensor of shape {list(shape)}.")
    if out._captured:
        bump_epoch()
    out._data = data


def write_out(name: str, result: Tensor, out: Tensor) -> Tensor:
    """Copy ``result`` into ``out`` (resized to ``result``'s shape first if it differs, cast to
    ``out``'s dtype) and return ``out``."""
    shape = tuple(result._data.shape)
    if tuple(out._data.shape) != shape:
        _resize(name, out, shape)
    return dispatch_inplace(OPS["copy"], out, (result,), {})
