"""Floating-point errors stay silent while ops run, as in PyTorch: log(-1) is nan and 1/0 is inf with
no RuntimeWarning. NumPy warns by default, so dispatch and the replay executors run their NumPy calls
with each "warn" of NumPy's error state made "ignore", and set the state back after. A user's own
choice to trap errors (``np.errstate(all="raise")``, "call", "print", "log") is kept: the op raises
FloatingPointError as it would without staticgrad.

``silence()`` returns a token for ``restore(token)``. They swap the error state through the context
variable NumPy keeps it in (about 0.25 us a pair, where ``with np.errstate(...)`` costs about 2 us,
a third of an eager op); a NumPy without that variable gets ``np.errstate`` itself. The state is per
thread and per context, as NumPy's own is, and a user's state outside staticgrad's ops is unchanged."""

from __future__ import annotations

import contextvars

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar  # NumPy 2: the state ufuncs read
except ImportError:  # another NumPy layout
    _extobj_contextvar = None


# np.geterr without its wrapper's copying, where this NumPy has it (a dict holding the four error
# kinds and two more entries): compiled calls ask it on every call
error_state = getattr(getattr(getattr(np, "_core", None), "_multiarray_umath", None), "_get_extobj_dict", np.geterr)
ERROR_KINDS = ("divide", "over", "under", "invalid")


def _without_warnings() -> dict:
    """The current error state's settings with "warn" made "ignore"."""
    state = error_state()
    return {kind: "ignore" if state[kind] == "warn" else state[kind] for kind in ERROR_KINDS}


if _extobj_contextvar is not None:
    _DEFAULT = contextvars.Context().run(_extobj_contextvar.get)  # NumPy's state when nobody set one
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _extobj_contextvar.get()
    _last = (_DEFAULT, _IGNORE_ALL)  # a state a user set, and the one ops run under then
    _get, _set = _extobj_contextvar.get, _extobj_contextvar.set

    def silence():
        """Run this context's ops with floating-point warnings off, until ``restore``."""
        global _last
        current = _get()
        if current is _DEFAULT:
            return _set(_IGNORE_ALL)
        seen, quiet = _last
        if seen is not current:
            with np.errstate(**_without_warnings()):
                quiet = _get()
            _last = (current, quiet)
        return _set(quiet)

    restore = _extobj_contextvar.reset

else:  # another NumPy layout

    def silence():
        """Run this context's ops with floating-point warnings off, until ``restore``."""
        state = np.errstate(**_without_warnings())
        state.__enter__()
        return state

    def restore(token) -> None:
        token.__exit__(None, None, None)


_QUIET_ERRORS = frozenset(("ignore", "warn"))


def _trapped_in(state: dict) -> bool:
    return not all(state[kind] in _QUIET_ERRORS for kind in ERROR_KINDS)


if _extobj_contextvar is not None:
    _checked = [_DEFAULT, False]   # the error state last asked about, and the answer (states are immutable)

    def errors_trapped() -> bool:
        """A user asked floating-point errors to raise or call a function (``np.errstate``/``np.seterr``):
        compiled code never signals them, so such calls run eagerly, where the error comes from the
        same op, with the same state, as without compile."""
        current = _get()
        state, answer = _checked
        if current is not state:
            answer = _trapped_in(error_state())
            _checked[:] = current, answer
        return answer

else:  # another NumPy layout

    def errors_trapped() -> bool:
        """As above, asking NumPy's error state every time."""
        return _trapped_in(error_state())
