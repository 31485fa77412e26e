"""More elementwise math: nan_to_num (NaN, +inf and -inf replaced; NanToNumBackward0, whose gradient
is zero where the input was not finite)."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OpDef, Save, register


def _nan_to_num(x, out=None, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind != "f":
        return into(x.copy(), out)
    return into(np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf), out)


register(OpDef("nan_to_num", _nan_to_num, "elementwise", "NanToNumBackward0",
               lambda F, g, s, at, need: (F.where(F.isfinite(s["self"]), g, F.zeros_like(g)),),
               (Save("self", 0),), "same"))
