"""Value checks PyTorch makes on a tensor's contents, made inside an op so that a compiled function's
replay makes them too (reading the values in Python instead would have to refuse tracing).

``checked_clone`` copies its input, raising the given error when a value falls outside [low, high];
PyTorch's composites clone there anyway (gaussian_nll_loss's var), so the graph shows its CloneBackward0.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, register

_ERRORS = {"RuntimeError": RuntimeError, "ValueError": ValueError}


def _checked_clone(x, out=None, low=-np.inf, high=np.inf, nan_ok=True, error="RuntimeError", message=""):
    inside = (x >= low) & (x <= high)
    if nan_ok and x.dtype.kind == "f":
        inside |= np.isnan(x)
    if not np.all(inside):
        raise _ERRORS[error](message)
    if out is None:
        return x.copy()
    np.copyto(out, x)
    return out


register(OpDef("checked_clone", _checked_clone, "other", "CloneBackward0", lambda F, g, s, at, need: (g,), (),
               "same"))
