"""``torch.set_float32_matmul_precision`` / ``get_float32_matmul_precision``: the setting PyTorch
scripts make before training ("highest", "high" or "medium"). staticgrad keeps and reports it, and
it changes nothing numerically: float32 matrix products always run in full float32 on the CPU's
BLAS (PyTorch's CPU kernels ignore the lower settings too, outside of oneDNN's bfloat16 paths)."""

from __future__ import annotations

import warnings

PRECISIONS = ("highest", "high", "medium")
_setting = {"precision": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """Record ``precision``; an unknown name warns and leaves the setting as it was, as PyTorch does."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _setting["precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision last set ("highest" until a script sets another)."""
    return _setting["precision"]
