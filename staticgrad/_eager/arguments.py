"""Reading PyTorch-style arguments, shared by the functions and the factories."""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np


def as_scalar(x):
    """A Python number (NumPy scalars would not be weak in NumPy's promotion)."""
    return x.item() if isinstance(x, (np.number, np.bool_)) else x


def shape_argument(args) -> tuple:
    """A shape given as ``f(2, 3)`` or ``f((2, 3))``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(d) for d in args[0])
    return tuple(int(d) for d in args)


# PyTorch's native functions and Tensor methods also answer to NumPy's keyword names: ``axis`` for
# ``dim`` and ``keepdims`` for ``keepdim`` (``x.sum(axis=1, keepdims=True)``). Its Python-level functions
# (``split``, ``norm``, ``unflatten``, torch.nn.functional) do not, so the names are listed, not guessed.
NUMPY_KEYWORD_NAMES = frozenset((
    "all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "argsort", "cat", "chunk", "concat",
    "count_nonzero", "cross", "cummax", "cummin", "cumprod", "cumsum", "diff", "gather", "index_add", "index_add_",
    "index_copy", "index_copy_", "index_fill", "index_fill_", "index_select", "kthvalue", "log_softmax",
    "logcumsumexp", "logsumexp", "max", "mean", "median", "min", "mode", "nanmean", "nanmedian", "nanquantile",
    "nansum", "narrow", "prod", "quantile", "renorm", "renorm_", "repeat_interleave", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_", "select", "softmax", "sort", "squeeze",
    "stack", "std", "std_mean", "sum", "take_along_dim", "tensor_split", "topk", "unbind", "unsqueeze", "var",
    "var_mean",
))
_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


_WITH_NUMPY_NAMES: dict = {}  # function -> its wrapper, so a function shared by names gets one wrapper


def numpy_keyword_names(fn):
    """``fn`` that also takes ``axis=`` for ``dim=`` and ``keepdims=`` for ``keepdim=``, where it has that
    parameter and not the alias already; ``fn`` itself when there is nothing to rename. The wrapper
    replaces ``fn`` in its own module too, so pickling it by name finds it."""
    if fn in _WITH_NUMPY_NAMES or getattr(fn, "_numpy_keyword_names", False):
        return _WITH_NUMPY_NAMES.get(fn, fn)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    renames = tuple((alias, name) for alias, name in _ALIASES if name in params and alias not in params)
    if not renames:
        return fn

    @functools.wraps(fn)
    def with_numpy_names(*args, **kwargs):
        if kwargs:
            for alias, name in renames:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got both '{name}' and its alias '{alias}'; pass one of them")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    with_numpy_names._numpy_keyword_names = True
    _WITH_NUMPY_NAMES[fn] = with_numpy_names
    home = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", "")
    if home is not None and "." not in qualname and getattr(home, qualname, None) is fn:
        setattr(home, qualname, with_numpy_names)
    return with_numpy_names


def install_numpy_keyword_names(namespace: dict) -> None:
    """Wrap, in place, the listed callables of ``namespace`` (a module's globals)."""
    for name in NUMPY_KEYWORD_NAMES:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type):
            namespace[name] = numpy_keyword_names(fn)
