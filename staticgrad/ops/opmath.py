"""The dtype a norm computes in: float16 inputs are widened to float32 and the results rounded
back, as PyTorch's CPU kernels accumulate reduced-precision floats in float32 ("opmath").

NumPy side (forwards) and table-op side (backward formulas, so a create_graph backward stays
differentiable through the casts)."""

from __future__ import annotations

import numpy as np

HALF = np.dtype(np.float16)
WIDE = np.dtype(np.float32)


def is_half(dtype) -> bool:
    return np.dtype(dtype) == HALF


def widen_array(a: np.ndarray) -> np.ndarray:
    """``a`` in float32 when it is float16, else ``a`` itself."""
    return a.astype(WIDE) if a.dtype == HALF else a


def widen(F, t):
    """Tensor ``t`` (or None) in float32 when it is float16, through the differentiable to_dtype op."""
    if t is None or t._data.dtype != HALF:
        return t
    return F.to_dtype(t, dtype=WIDE, self_dtype=HALF)


def narrow(F, t, dtype):
    """Tensor ``t`` (or None) cast back to ``dtype`` when that is float16."""
    if t is None or np.dtype(dtype) != HALF or t._data.dtype == HALF:
        return t
    return F.to_dtype(t, dtype=HALF, self_dtype=t._data.dtype)


def widen_formula(formula, tensor_slots: tuple):
    """A backward formula that, for a float16 input, runs ``formula`` in float32: the incoming
    gradients and the saved tensors named in ``tensor_slots`` widened, the gradients it returns
    rounded back to float16. Other dtypes run ``formula`` unchanged."""
    def backward(F, grads, s, at, need):
        dtype = s["input"]._data.dtype
        if dtype != HALF:
            return formula(F, grads, s, at, need)
        wide_saved = dict(s)
        for name in tensor_slots:
            if name in s:
                wide_saved[name] = widen(F, s[name])
        wide_grads = tuple(widen(F, g) for g in grads) if isinstance(grads, (tuple, list)) else widen(F, grads)
        results = formula(F, wide_grads, wide_saved, at, need)
        return tuple(narrow(F, r, dtype) for r in results)
    backward.__doc__ = formula.__doc__
    return backward
