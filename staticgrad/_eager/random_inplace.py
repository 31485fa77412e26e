"""``Tensor.uniform_`` and ``Tensor.normal_``: refill a floating tensor in place from the default
generator or a ``generator=``, e.g. ``layer.weight.data.uniform_(-0.1, 0.1)``. The draws are the
recorded random ops ``uniform_fill`` / ``normal_fill``, so a compiled function re-draws them on
every replay."""

from __future__ import annotations

import numpy as np

from staticgrad._eager.creation import _source
from staticgrad._eager.dispatch import dispatch_inplace
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _require_floating(tensor, kernel: str) -> None:
    if not np.issubdtype(tensor._data.dtype, np.floating):
        name = _dtypes.from_numpy_dtype(tensor._data.dtype).tensor_type[:-6]
        raise NotImplementedError(f'"{kernel}" not implemented for \'{name}\'')


def _uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None):
    _require_floating(self, "check_uniform_bounds")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    attrs = {"low": float(a), "high": float(b), **_source(generator)}
    return dispatch_inplace(OPS["uniform_fill"], self, (), attrs)


def _normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None):
    _require_floating(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    attrs = {"mean": float(mean), "std": float(std), **_source(generator)}
    return dispatch_inplace(OPS["normal_fill"], self, (), attrs)


METHODS = {"uniform_": _uniform_, "normal_": _normal_}
