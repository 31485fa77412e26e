"""PyTorch's ``out=`` keyword on the public functions that take it (``staticgrad.add(a, b, out=c)``):
the result is computed as without it, then written into ``out`` (cast to its dtype, resized if it
is empty) and ``out`` returned, its version bumped.

As in PyTorch, a function given ``out`` builds no autograd graph, so it refuses, with PyTorch's
message, when grad mode is on and an input or ``out`` requires grad. Memory shared by ``out`` and
an input is judged per family as PyTorch judges it: elementwise ops refuse a partial overlap (the
same elements in the same layout are fine), the gathering ops (cat, stack, gather...) any overlap,
matrix products none (their result does not depend on it). Where PyTorch writes while it still
reads, so that its result depends on the order of its loops (reductions, tril, kron...),
staticgrad refuses the overlap rather than compute a different number. An ``out`` whose elements
overlap each other (an expanded tensor) is refused everywhere.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from staticgrad._eager.dispatch import partial_overlap
from staticgrad._eager.functions import copy_
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.ops import dtypes as _dtypes

ELEMENTWISE, GATHERING, PRODUCT, ORDER_DEPENDENT = "elementwise", "gathering", "product", "order-dependent"


def _each(names: str) -> list:
    return names.split()


# public name -> how an out sharing memory with an input is judged (see the module's docstring)
FAMILIES = {
    **dict.fromkeys(_each(
        "abs acos acosh asin asinh atan atanh ceil cos cosh deg2rad exp floor lgamma log log10 log1p log2 "
        "logical_not neg rad2deg reciprocal round rsqrt sgn sign sin sinh sqrt square tan tanh trunc sigmoid "
        "exp2 expm1 erf erfc erfinv frac digamma nan_to_num add sub mul div atan2 copysign eq ge gt le lt ne "
        "fmax fmin fmod hypot logaddexp logaddexp2 logical_and logical_or logical_xor maximum minimum "
        "nextafter pow remainder floor_divide heaviside xlogy clamp where lerp addcmul addcdiv addmm cumsum "
        "cumprod logcumsumexp"), ELEMENTWISE),
    **dict.fromkeys(_each("gather take_along_dim index_select cat stack vstack outer"), GATHERING),
    **dict.fromkeys(_each("matmul mm"), PRODUCT),
    **dict.fromkeys(_each("sum mean prod amax amin logsumexp nansum nanmean std var all any tril triu cross hstack "
                          "kron bmm mv dot diff"), ORDER_DEPENDENT),
}

_PARTIAL = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
            "single memory location. Please clone() the tensor before performing the operation.")
_INTERNAL = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.")


def _tensors(args, kwargs) -> list:
    """The tensors among the arguments, those inside a list or tuple (cat's) included."""
    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(t for t in a if isinstance(t, Tensor))
    return found


def _check_internal_overlap(out: np.ndarray) -> None:
    if any(s == 0 and n > 1 for s, n in zip(out.strides, out.shape)):
        raise RuntimeError(_INTERNAL)


def _check_overlap(public: str, family: str, out: np.ndarray, inputs: list) -> None:
    for t in inputs:
        a = t._data
        if out.size == 0 or a.size == 0 or not np.may_share_memory(out, a):
            continue
        if family == ELEMENTWISE and partial_overlap(out, a):
            raise RuntimeError(_PARTIAL)
        if family == GATHERING:
            raise RuntimeError(_PARTIAL)
        if family == ORDER_DEPENDENT:
            raise RuntimeError(f"staticgrad's {public}(out=...) does not take an out that shares memory with an "
                               "input: PyTorch writes it while still reading the input, so its result depends on "
                               "the order of its loops. Pass a separate out tensor (or use the result).")


def _fit(public: str, out: Tensor, shape: tuple) -> None:
    """Resize ``out`` to ``shape`` as PyTorch does: silently if it is empty, with PyTorch's warning otherwise."""
    if tuple(out._data.shape) == tuple(shape):
        return
    if out._base is not None:
        raise RuntimeError(f"staticgrad's {public}(out=...) cannot resize a view: the result has shape "
                           f"{list(shape)} and out {list(out._data.shape)}. Pass an out of the result's shape.")
    if Tracing.tracer is not None:
        Tracing.tracer.fail(f"{public}(out=...) resizes its out tensor, which a replay cannot do; pass an out of "
                            "the result's shape")
    if out._data.size:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out._data.shape)}, "
                      f"which does not match the required output shape {list(shape)}. This behavior is deprecated, "
                      "and in a future PyTorch release outputs will not be resized unless they have zero elements. "
                      "You can explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                      "t.resize_(0).", UserWarning, stacklevel=4)
    out._data = np.empty(shape, out._data.dtype)


def write_out(public: str, function, args: tuple, kwargs: dict, out) -> Tensor:
    """``function(*args, **kwargs)`` written into ``out``, as PyTorch's ``out=`` does."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{public}(): argument 'out' must be Tensor, not {type(out).__name__}")
    inputs = _tensors(args, kwargs)
    if GradMode.enabled and (out._requires_grad or any(t._requires_grad for t in inputs)):
        raise RuntimeError(f"{public}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    result = function(*args, **kwargs)
    if not isinstance(result, Tensor):
        raise TypeError(f"staticgrad's {public}(out=...) takes one out tensor; this call returns "
                        f"{type(result).__name__}")
    r, o = result._data.dtype, out._data.dtype
    if r != o and _dtypes.category_of(r) > _dtypes.category_of(o):
        raise RuntimeError(f"result type {_dtypes.from_numpy_dtype(r).tensor_type[:-6]} can't be cast to the "
                           f"desired output type {_dtypes.from_numpy_dtype(o).tensor_type[:-6]}")
    _check_internal_overlap(out._data)
    _fit(public, out, result._data.shape)
    _check_overlap(public, FAMILIES[public], out._data, inputs)
    return copy_(out, result)


def with_out(function, public: str):
    """``function`` taking PyTorch's ``out=`` keyword (without it, the call is ``function``'s own);
    named as ``function`` (``__wrapped__`` is it)."""
    @functools.wraps(function)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return function(*args, **kwargs)
        return write_out(public, function, args, kwargs, out)

    return wrapper


def install(namespace: dict) -> None:
    """Give each public function of FAMILIES in ``namespace`` (staticgrad's) the ``out=`` keyword; an
    alias of one (``arctan2`` of ``atan2``) becomes the same wrapper, as it was the same function."""
    wrapped = {}
    for public in FAMILIES:
        function = namespace.get(public)
        if function is None:
            raise AssertionError(f"staticgrad has no public {public} to give out=")
        wrapper = with_out(function, public)
        wrapper.__module__, wrapper.__qualname__ = namespace["__name__"], public   # pickled as staticgrad.<public>
        wrapped[id(function)] = namespace[public] = wrapper
    for name, value in list(namespace.items()):
        if callable(value) and id(value) in wrapped and not name.startswith("_"):
            namespace[name] = wrapped[id(value)]
