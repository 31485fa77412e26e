"""More Tensor methods PyTorch code calls: storage_offset, the method forms of where and addmm, absolute, and the
in-place forms of sign, rsqrt, reciprocal, square, fmod, remainder, true_divide, tril, triu, cumsum,
cumprod and addmm. Each in-place form writes into the tensor as its op's other in-place forms do
(``dispatch_inplace``: the version bump, the leaf and overlap refusals, PyTorch's node)."""

from __future__ import annotations

import numpy as np

from staticgrad._eager import casts
from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch_inplace
from staticgrad._eager.functions import require_tensor
from staticgrad._eager.tensor import _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _scan_inplace(name: str):
    """``self.name_(dim)``: the scan written into self (cumsum_, cumprod_)."""
    op = OPS[name]

    def inplace(self, dim, *, dtype=None):
        require_tensor(self, name + "_")
        wanted = self._data.dtype if dtype is None else np.dtype(_dtypes.to_numpy_dtype(dtype))
        if wanted != self._data.dtype:
            names = [_dtypes.CPP_TYPE_NAMES.get(d.name, d.name) for d in (self._data.dtype, wanted)]
            raise RuntimeError(f"Bad in-place call: input tensor dtype {names[0]} and output tensor dtype "
                               f"{names[1]} should match")
        if self._data.dtype == np.bool_:
            raise NotImplementedError(f'"{name}_out_cpu" not implemented for \'Bool\'')
        return dispatch_inplace(op, self, (), {"dim": _normalize_dim(dim, self._data.ndim)})

    inplace.__name__ = inplace.__qualname__ = name + "_"
    return inplace


def where(self, condition, y):
    """Tensor.where(condition, y): self where condition, else y."""
    return fn.where(condition, self, y)


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    return fn.addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """self = beta * self + alpha * (mat1 @ mat2), in place (AddmmBackward0), with addmm's checks."""
    require_tensor(mat1, "addmm_", "mat1", 1)
    require_tensor(mat2, "addmm_", "mat2", 2)
    if self._data.shape != (mat1._data.shape[0], mat2._data.shape[-1]) or mat1._data.ndim != 2:
        product = fn.addmm(self, mat1, mat2, beta=beta, alpha=alpha)   # raises PyTorch's error for the operands
        raise RuntimeError(f"Bad in-place call: input tensor size {list(self._data.shape)} and output tensor size "
                           f"{list(product._data.shape)} should match")
    return dispatch_inplace(OPS["addmm"], self, (mat1, mat2), {"beta": beta, "alpha": alpha})


def storage_offset(self) -> int:
    """Elements from the start of the storage to the tensor's first: 0 for a tensor that is not a
    view (it has its own storage), the offset into its base's memory for a view."""
    if self._base is None:
        return 0
    start = self._base._data.__array_interface__["data"][0]
    return (self._data.__array_interface__["data"][0] - start) // self._data.dtype.itemsize


METHODS = {
    "storage_offset": storage_offset,
    "where": where, "addmm": addmm, "addmm_": addmm_, "absolute": fn.abs, "absolute_": fn.abs_,
    "sign_": fn.sign_, "rsqrt_": fn.rsqrt_, "reciprocal_": fn.reciprocal_,
    "square_": lambda self: fn.pow_(self, 2), "true_divide_": fn.div_,
    "fmod_": lambda self, other: casts.binary_inplace("fmod", self, other),
    "remainder_": lambda self, other: casts.binary_inplace("remainder", self, other),
    "tril_": fn.tril_, "triu_": fn.triu_,
    "cumsum_": _scan_inplace("cumsum"), "cumprod_": _scan_inplace("cumprod"),
}
