"""How tensors print: PyTorch's layout (``tensor([1., 2.], requires_grad=True)``)."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.dtypes import default_float, from_numpy_dtype

_HIDDEN_DTYPES = (np.dtype(np.int64), np.dtype(np.bool_))  # and the default float dtype


def _float_formatter(array: np.ndarray):
    finite = array[np.isfinite(array)]
    if finite.size == 0:
        return lambda v: f"{v}"
    magnitude = np.abs(finite.astype(np.float64))  # float16 cannot hold the thresholds (1e8)
    if np.all(finite == np.round(finite)) and magnitude.max() < 1e8:
        width = max(len(f"{v:.0f}.") for v in finite.flat)
        return lambda v: f"{v:.0f}.".rjust(width) if np.isfinite(v) else str(v).rjust(width)
    nonzero = magnitude[magnitude > 0]
    if magnitude.max() >= 1e8 or (nonzero.size and nonzero.min() < 1e-4) or (
            nonzero.size and magnitude.max() / nonzero.min() > 1e3 and magnitude.max() > 1e3):
        width = max(len(f"{v:.4e}") for v in finite.flat)
        return lambda v: f"{v:.4e}".rjust(width)
    width = max(len(f"{v:.4f}") for v in finite.flat)
    return lambda v: f"{v:.4f}".rjust(width)


def format_array(array: np.ndarray, prefix: str) -> str:
    if array.dtype.kind == "f":
        formatter = {"float_kind": _float_formatter(array)}
    elif array.dtype.kind == "b":   # right-aligned to the widest shown, as PyTorch: [ True, False]
        width = 5 if array.size and not array.all() else 4
        formatter = {"bool": lambda v: ("True" if v else "False").rjust(width)}
    else:
        formatter = None
    if array.ndim == 0:
        return formatter["float_kind"](array.item()) if array.dtype.kind == "f" else str(array.item())
    return np.array2string(array, separator=", ", prefix=prefix, formatter=formatter, max_line_width=80,
                           threshold=1000, edgeitems=3)


def tensor_repr(t) -> str:
    array = t._data
    body = format_array(array, "tensor(")
    suffix = []
    if array.dtype not in _HIDDEN_DTYPES and array.dtype != default_float().np:
        suffix.append(f"dtype={from_numpy_dtype(array.dtype)!r}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    if array.size == 0 and array.ndim != 1:
        suffix.insert(0, f"size={tuple(array.shape)}")
    return "tensor(" + body + _suffixes(body, suffix) + ")"


def _suffixes(body: str, suffix: list) -> str:
    """``, dtype=..., grad_fn=...`` after the values; a suffix that would take the last line past 80
    columns starts a new line under the values (widths counted as PyTorch's text, "torch." for
    "staticgrad.", so that lines break where PyTorch's do)."""
    text, line = "", len("tensor(") + len(body) if "\n" not in body else len(body.rsplit("\n", 1)[1])
    for s in suffix:
        width = len(s) - s.count("staticgrad.") * (len("staticgrad.") - len("torch."))
        if line + width + 2 > 80:
            text += ",\n" + " " * len("tensor(") + s
            line = len("tensor(") + width
        else:
            text += ", " + s
            line += width + 2
    return text
