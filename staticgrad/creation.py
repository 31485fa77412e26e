"""Making tensors: from data (``tensor``, ``from_numpy``), factories (``zeros``, ``ones``,
``full``, ``arange``, ``eye``) and random draws (``randn``, ``rand``, ``randint``)."""

from __future__ import annotations

import numpy as np

from staticgrad._state import Tracing
from staticgrad.dispatch import dispatch
from staticgrad.functional import _sizes, as_scalar
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.factory import manual_seed as _manual_seed
from staticgrad.tensor import Tensor


def _np_dtype(dtype, default=None):
    if dtype is None:
        return default if default is not None else _dtypes.DEFAULT_FLOAT.np
    return _dtypes.to_numpy_dtype(dtype)


def _infer_dtype(data) -> np.dtype:
    """PyTorch's inference for Python data: floats -> float32, ints -> int64, bools -> bool."""
    flat = np.asarray(data)
    if flat.dtype.kind == "f":
        return _dtypes.DEFAULT_FLOAT.np if not isinstance(data, np.ndarray) else flat.dtype
    if flat.dtype.kind in "iu":
        return np.dtype(np.int64) if not isinstance(data, np.ndarray) else flat.dtype
    if flat.dtype.kind == "b":
        return np.dtype(np.bool_)
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def _unwrap(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def tensor(data, *, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A new tensor holding a copy of ``data`` (a number, a nested list, an array or a tensor)."""
    from_array = isinstance(data, np.ndarray) or isinstance(data, Tensor)
    raw = _unwrap(data)
    np_dtype = _np_dtype(dtype) if dtype is not None else _infer_dtype(raw)
    array = np.array(raw, dtype=np_dtype, copy=True)
    t = Tensor._make(array, False, None)
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.on_constant(t, "staticgrad.tensor(array)" if from_array else None)
    if requires_grad:
        t.requires_grad_(True)
    return t


as_tensor = tensor


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory (changes to one show in the other)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _dtypes.from_numpy_dtype(array.dtype)
    t = Tensor._make(array, False, None)
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.on_constant(t, "staticgrad.from_numpy()")
    return t


def _factory(op_name: str, requires_grad: bool, **attrs) -> Tensor:
    t = dispatch(OPS[op_name], (), attrs)
    if requires_grad:
        t.requires_grad_(True)
    return t


def full(size, fill_value, *, dtype=None, requires_grad=False, device=None) -> Tensor:
    value = as_scalar(fill_value)
    default = None if isinstance(value, float) else (np.dtype(np.bool_) if isinstance(value, bool) else np.dtype(np.int64))
    return _factory("full", requires_grad, shape=_sizes((size,)), value=value, dtype=_np_dtype(dtype, default))


def zeros(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _factory("full", requires_grad, shape=_sizes(size), value=0.0, dtype=_np_dtype(dtype))


def ones(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _factory("full", requires_grad, shape=_sizes(size), value=1.0, dtype=_np_dtype(dtype))


empty = zeros


def _like(input: Tensor, dtype):
    return input._data.shape, _np_dtype(dtype, input._data.dtype)


def zeros_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("full", requires_grad, shape=shape, value=0.0, dtype=np_dtype)


def ones_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("full", requires_grad, shape=shape, value=1.0, dtype=np_dtype)


def full_like(input, fill_value, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("full", requires_grad, shape=shape, value=as_scalar(fill_value), dtype=np_dtype)


empty_like = zeros_like


def arange(start, end=None, step=1, *, dtype=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    values = (start, end, step)
    default = np.dtype(np.int64) if all(isinstance(v, int) for v in values) else None
    return _factory("arange", requires_grad, start=start, end=end, step=step, dtype=_np_dtype(dtype, default))


def eye(n, m=None, *, dtype=None, requires_grad=False) -> Tensor:
    return _factory("eye", requires_grad, n=n, m=n if m is None else m, dtype=_np_dtype(dtype))


def randn(*size, dtype=None, requires_grad=False, generator=None) -> Tensor:
    return _factory("randn", requires_grad, shape=_sizes(size), dtype=_np_dtype(dtype))


def rand(*size, dtype=None, requires_grad=False, generator=None) -> Tensor:
    return _factory("rand", requires_grad, shape=_sizes(size), dtype=_np_dtype(dtype))


def randn_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("randn", requires_grad, shape=shape, dtype=np_dtype)


def rand_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("rand", requires_grad, shape=shape, dtype=np_dtype)


def randint(low, high=None, size=None, *, dtype=None, requires_grad=False) -> Tensor:
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    if high is None:
        low, high = 0, low
    return _factory("randint", requires_grad, shape=_sizes((size,)), low=low, high=high,
                    dtype=_np_dtype(dtype, np.dtype(np.int64)))


def manual_seed(seed: int) -> None:
    """Seed the generator every random op draws from (eager and replayed alike)."""
    _manual_seed(seed)


def seed_of() -> int:
    from staticgrad.ops.factory import _GeneratorHolder

    return _GeneratorHolder.seed
