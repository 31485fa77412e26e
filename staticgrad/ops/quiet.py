"""Floating-point errors stay silent while ops run, as in PyTorch: log(-1) is nan and 1/0 is inf with
no RuntimeWarning. NumPy warns by default, so dispatch and the replay executors run their NumPy calls
with its error state set to ignore, and set it back after.

``silence()`` returns a token for ``restore(token)``. They swap the error state through the context
variable NumPy keeps it in (about 0.25 us a pair, where ``with np.errstate(all="ignore")`` costs
about 2 us, a third of an eager op); a NumPy without that variable gets ``np.errstate`` itself. The
state is per thread and per context, as NumPy's own is, so a user's ``np.seterr`` outside staticgrad's
ops is never changed."""

from __future__ import annotations

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar  # NumPy 2: the state ufuncs read
except ImportError:
    _extobj_contextvar = None

if _extobj_contextvar is not None:
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _extobj_contextvar.get()

    def silence():
        """Ignore floating-point errors in this context until ``restore``."""
        return _extobj_contextvar.set(_IGNORE_ALL)

    def restore(token) -> None:
        _extobj_contextvar.reset(token)

else:

    def silence():
        """Ignore floating-point errors in this context until ``restore``."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(token) -> None:
        token.__exit__(None, None, None)
