"""``staticgrad.set_default_dtype`` / ``get_default_dtype``: the float dtype that tensors made
without a dtype take (``tensor([1.5])``, ``zeros(3)``, layers' parameters) and that integer
inputs promote to (``arange(3) / 2``, ``sqrt`` of an int tensor), as in PyTorch.

The value lives in ``staticgrad.ops.dtypes`` (``default_float``), where every reader finds it.
Compiled functions guard it: a plan traced under one default dtype retraces under another.
"""

from __future__ import annotations

from staticgrad._state import Tracing, bump_epoch
from staticgrad.ops import dtypes as _dtypes

_ONLY_FLOATS = "only floating-point types are supported as the default type"


def set_default_dtype(d) -> None:
    """Make the float dtype ``d`` (float16, float32 or float64) the default float dtype."""
    if not isinstance(d, _dtypes.DType):
        raise TypeError(f"invalid dtype object: {_ONLY_FLOATS}")
    if not d.is_floating_point:
        raise TypeError(_ONLY_FLOATS)
    tracer = Tracing.tracer
    if tracer is not None:
        # a replay runs no Python: it could not change the default dtype as the traced call did
        tracer.fail("set_default_dtype() inside a compiled function (a replay would not change the default "
                    "dtype); set it before calling the compiled function")
    _dtypes.set_default_float(d)
    bump_epoch()  # plans re-check their guards, the default dtype among them


def get_default_dtype():
    """The current default float dtype (float32 unless ``set_default_dtype`` changed it)."""
    return _dtypes.default_float()
