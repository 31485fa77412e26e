"""Making tensors: from data (``tensor``, ``from_numpy``), factories (``zeros``, ``ones``,
``full``, ``arange``, ``eye``) and random draws (``randn``, ``rand``, ``randint``). Sizes are read by
staticgrad/_eager/sizes.py, with PyTorch's errors."""

from __future__ import annotations

import math
import operator

import numpy as np

from staticgrad._eager.arguments import as_scalar
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.generator import default_generator, draw_source
from staticgrad._eager.sizes import check_size, factory_size, given, invalid_arguments, sequence_size
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.factory import _GeneratorHolder
from staticgrad.ops.factory import manual_seed as _manual_seed


def _np_dtype(dtype, default=None):
    if dtype is None:
        return default if default is not None else _dtypes.default_float().np
    return _dtypes.to_numpy_dtype(dtype)


def _infer_dtype(data) -> np.dtype:
    """PyTorch's inference for ``torch.tensor(data)``: an array or a NumPy scalar keeps its dtype
    (np.float64(0.1) is float64), a Python float gives the default float type, an int int64, a
    bool bool; a sequence promotes its elements' types with promote_types ([np.float64(0.1), 0.2]
    is float64, [np.int64(1), 2.5] the default float type), and an empty one gives the default float type."""
    found = set()
    _collect_dtypes(data, found)
    if len(found) <= 1:
        return found.pop() if found else _dtypes.default_float().np
    # promote_types over all of them: result_type of tensors of one rank, with bool < int < float
    return _dtypes.result_type(list(found))


def _collect_dtypes(data, found: set) -> None:
    """Add the dtype of each leaf of ``data`` to ``found``; a list's Python numbers and NumPy
    scalars are read once per distinct type, not once per element."""
    if isinstance(data, (np.ndarray, np.generic)):  # before float: np.float64 is a float
        found.add(_dtypes.from_numpy_dtype(data.dtype).np)
    elif isinstance(data, bool):  # before int: a bool is an int
        found.add(np.dtype(np.bool_))
    elif isinstance(data, int):
        found.add(np.dtype(np.int64))
    elif isinstance(data, float):
        found.add(_dtypes.default_float().np)
    elif isinstance(data, (list, tuple)):
        deeper = False
        for kind in set(map(type, data)):
            if kind in _PYTHON_NUMBERS:
                _collect_dtypes(kind(), found)
            elif issubclass(kind, np.generic):
                found.add(_dtypes.from_numpy_dtype(np.dtype(kind)).np)
            else:
                deeper = True
        if deeper:  # nested sequences, arrays, tensors, subclasses of Python numbers
            for item in data:
                if type(item) not in _PYTHON_NUMBERS and not isinstance(item, np.generic):
                    _collect_dtypes(item, found)
    else:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")


_PYTHON_NUMBERS = frozenset((float, int, bool))


def _unwrap(data, inside: bool = False):
    """``data`` with its tensors as arrays; a tensor inside a list must hold one element (PyTorch
    reads it as a number)."""
    if isinstance(data, Tensor):
        if inside:
            if data._data.size != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            return data._data.reshape(())[()]
        return data._data
    if isinstance(data, (list, tuple)):
        return [_unwrap(d, True) for d in data]
    return data


def tensor(data, *, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A new tensor holding a copy of ``data`` (a number, a nested list, an array or a tensor)."""
    from_array = isinstance(data, (np.ndarray, Tensor))
    raw = _unwrap(data)
    np_dtype = _np_dtype(dtype) if dtype is not None else _infer_dtype(raw)
    array = np.array(raw, dtype=np_dtype, copy=True)
    t = Tensor._make(array, False, None)
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.on_constant(t, "staticgrad.tensor(array)" if from_array else None)
    if requires_grad:
        _require_grad(t)
    return t


def _require_grad(t: Tensor) -> None:
    """``requires_grad=True`` given to a constructor, with PyTorch's constructor wording."""
    if t._data.dtype.kind != "f":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    t.requires_grad_(True)


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
        _require_grad(t)
    return t


def full(size, fill_value, *, dtype=None, requires_grad=False, device=None) -> Tensor:
    value = as_scalar(fill_value)
    if isinstance(value, float):
        default = None
    else:
        default = np.dtype(np.bool_) if isinstance(value, bool) else np.dtype(np.int64)
    return _factory("full", requires_grad, shape=sequence_size("full", size), value=value,
                    dtype=_np_dtype(dtype, default))


def zeros(*args, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _factory("full", requires_grad, shape=factory_size("zeros", args, size), value=0.0,
                    dtype=_np_dtype(dtype))


def ones(*args, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _factory("full", requires_grad, shape=factory_size("ones", args, size), value=1.0,
                    dtype=_np_dtype(dtype))


def empty(*args, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A new tensor of ``size`` (filled with zeros: staticgrad never hands out uninitialised memory)."""
    return _factory("full", requires_grad, shape=factory_size("empty", args, size), value=0.0,
                    dtype=_np_dtype(dtype))


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


def _bound_text(x) -> str:
    """A range bound as PyTorch's message prints it (2, 0.5, nan, inf)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else str(x)


def arange(start, end=None, step=1, *, dtype=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    values = (start, end, step)
    default = np.dtype(np.int64) if all(isinstance(v, int) for v in values) else None
    np_dtype = _np_dtype(dtype, default)
    if np_dtype == np.bool_:   # (PyTorch checks the dtype before the range)
        raise NotImplementedError("\"arange_cpu\" not implemented for 'Bool'")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {_bound_text(start)} -> {_bound_text(end)}")
    if not ((step > 0 and end >= start) or (step < 0 and end <= start)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _factory("arange", requires_grad, start=start, end=end, step=step, dtype=np_dtype)


def eye(n, m=None, *, dtype=None, requires_grad=False) -> Tensor:
    return _factory("eye", requires_grad, n=n, m=n if m is None else m, dtype=_np_dtype(dtype))


def _source(generator) -> dict:
    """The attribute a random op draws from for ``generator=`` (none for the default generator)."""
    source = draw_source(generator)
    return {} if source is None else {"source": source}


def randn(*args, size=None, dtype=None, requires_grad=False, generator=None) -> Tensor:
    keywords = {"generator": generator, "dtype": dtype, "requires_grad": requires_grad}
    return _factory("randn", requires_grad, shape=factory_size("randn", args, size, keywords), dtype=_np_dtype(dtype),
                    **_source(generator))


def rand(*args, size=None, dtype=None, requires_grad=False, generator=None) -> Tensor:
    keywords = {"generator": generator, "dtype": dtype, "requires_grad": requires_grad}
    return _factory("rand", requires_grad, shape=factory_size("rand", args, size, keywords), dtype=_np_dtype(dtype),
                    **_source(generator))


def randn_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("randn", requires_grad, shape=shape, dtype=np_dtype)


def rand_like(input, *, dtype=None, requires_grad=False) -> Tensor:
    shape, np_dtype = _like(input, dtype)
    return _factory("rand", requires_grad, shape=shape, dtype=np_dtype)


def randint_like(input, *bounds, low=None, high=None, dtype=None, requires_grad=False, device=None,
                 generator=None) -> Tensor:
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``: ``randint`` of input's
    shape and (unless ``dtype``) dtype."""
    shape, np_dtype = _like(input, dtype)
    given_bounds = list(bounds) + [b for b in (low, high) if b is not None]
    if len(given_bounds) not in (1, 2) or (low is not None and high is None):
        raise invalid_arguments("randint_like", given((input, *bounds), low=low, high=high, dtype=dtype),
                                ("Tensor input, int high, ", "Tensor input, int low, int high, "))
    low, high = (0, given_bounds[0]) if len(given_bounds) == 1 else given_bounds
    return _factory("randint", requires_grad, shape=shape, low=low, high=high, dtype=np_dtype, **_source(generator))


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, requires_grad=False,
            device=None) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)`` (each also by keyword): integers drawn
    uniformly from ``[low, high)`` (int64 unless ``dtype``)."""
    keywords = {"low": low, "high": high, "size": size, "generator": generator, "dtype": dtype,
                "requires_grad": requires_grad}

    def no_form_matches() -> TypeError:
        return invalid_arguments("randint", given(args, **keywords), ("int high, ", "int low, int high, "))

    if size is None and high is None and len(args) in (2, 3):
        *bounds, size = args
    else:
        bounds = list(args) + [b for b in (low, high) if b is not None]
    if (len(bounds) not in (1, 2) or (low is not None and high is None) or size is None
            or not isinstance(size, (tuple, list))):
        raise no_form_matches()
    try:
        dims = [int(operator.index(d)) for d in size]
    except TypeError:
        raise no_form_matches() from None
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return _factory("randint", requires_grad, shape=check_size("randint", dims), low=low, high=high,
                    dtype=_np_dtype(dtype, np.dtype(np.int64)), **_source(generator))


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A random permutation of ``0..n-1`` (int64 unless ``dtype``)."""
    n = int(n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _factory("randperm", requires_grad, n=n, dtype=_np_dtype(dtype, np.dtype(np.int64)), **_source(generator))


def manual_seed(seed: int):
    """Seed the generator every random op draws from (eager and replayed alike); returns it, as
    PyTorch returns its default generator."""
    _manual_seed(seed)
    return default_generator


def seed_of() -> int:
    return _GeneratorHolder.seed
