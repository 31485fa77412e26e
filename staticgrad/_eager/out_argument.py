"""PyTorch's ``out=`` argument: a function's result written into a given tensor, which it returns.
The tensor is resized to the result's shape as PyTorch resizes it, where NumPy storage can follow
PyTorch's storage rules exactly; other resizes are refused with what to pass instead."""

from __future__ import annotations

import sys
import warnings

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
    not a view), or one too small that shares its memory with nothing, gets new storage; a contiguous
    one with enough elements keeps its memory and uses its first elements (its views see the writes,
    as in PyTorch)."""
    old = out._data
    size = int(np.prod(shape, dtype=np.int64))
    # Nothing but ``out`` reaches its memory when it is not a view, owns its array and nothing else
    # refers to that array (CPython's count: ``out._data``, ``old``, getrefcount's argument): no view
    # of it, no array a caller took from ``numpy()``. PyTorch grows such a tensor's storage in place;
    # a new array is then the same thing.
    unshared = out._base is None and old.base is None and sys.getrefcount(old) <= 3
    if (old.size == 0 and out._base is None) or (old.size < size and unshared):
        data = np.empty(shape, dtype=old.dtype)
    elif old.size >= size and old.flags.c_contiguous and old.size > 0:
        data = old.reshape(-1)[:size].reshape(shape)
    else:
        reason = ("is a view of another tensor" if out._base is not None and old.size == 0
                  else "is not contiguous" if not old.flags.c_contiguous
                  else "has too few elements and shares its memory (a view of it, or an array from numpy())")
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


_RESIZE_WARNING = ("An output with one or more elements was resized since it had shape {old}, which does not match "
                   "the required output shape {new}. This behavior is deprecated, and in a future PyTorch release "
                   "outputs will not be resized unless they have zero elements. You can explicitly reuse an out "
                   "tensor t by resizing it, inplace, to zero elements with t.resize_(0).")


def write_out(name: str, result: Tensor, out: Tensor, warn_on_resize: bool = False) -> Tensor:
    """Copy ``result`` into ``out`` (resized to ``result``'s shape first if it differs, cast to
    ``out``'s dtype) and return ``out``. ``warn_on_resize``: PyTorch's resize_output, which warns
    when an out with elements has to change shape (most ops; others resize silently)."""
    shape = tuple(result._data.shape)
    if tuple(out._data.shape) != shape:
        if warn_on_resize and out._data.size:
            warnings.warn(_RESIZE_WARNING.format(old=list(out._data.shape), new=list(shape)), UserWarning,
                          stacklevel=3)
        _resize(name, out, shape)
    return dispatch_inplace(OPS["copy"], out, (result,), {})
