"""Numba functions cached on disk, loaded without Numba's full start.

Numba's own cache load (``FunctionCache.load_overload``) first refreshes its target context:
it imports and registers every implementation Numba can compile (NumPy, math, typed containers,
random...), about half of what starting Numba costs, though loading machine code from disk uses
none of them: it needs the code generator and the NRT runtime's symbols. ``load_cached`` does
only that. A compile, when one happens, still refreshes first (Numba's compiler does), so
nothing compiled ever misses an implementation.

Imports Numba when called, never at import: staticgrad's import does not load Numba.
"""

from __future__ import annotations

import contextlib

# The Numba event (numba.core.event) a cache load runs inside: listeners see loads as they see
# compiles ("numba:compile"), e.g. to count or time them.
LOAD_EVENT = "staticgrad:cache_load"


def load_cached(cache, sig, target_context):
    """``cache.load_overload(sig, target_context)`` (the entry, or None) without the refresh.
    Runs under Numba's compiler lock, as Numba's own load does (the dispatcher holds it)."""
    load = getattr(cache, "_load_overload", None)
    if load is None:   # a Numba whose cache has another shape: its own load, refresh and all
        return cache.load_overload(sig, target_context)
    from numba.core import event  # numba is loaded already: a cache is Numba's object
    from numba.core.runtime import nrt  # likewise

    with event.trigger_event(LOAD_EVENT):
        nrt.rtsys.initialize(target_context)   # what cached code links against; once per process
        guard = getattr(cache, "_guard_against_spurious_io_errors", contextlib.nullcontext)
        with guard():
            return load(sig, target_context)
    return None   # the guard swallowed an error (Windows): a miss, as in Numba's own load


class LightCache:
    """A Numba function's disk cache whose loads go through ``load_cached``; everything else
    (saving, the cache path, enable/disable) is the wrapped cache's."""

    def __init__(self, cache):
        self._cache = cache

    def load_overload(self, sig, target_context):
        return load_cached(self._cache, sig, target_context)

    def __getattr__(self, name):
        return getattr(self._cache, name)


def njit_cached(function, **options):
    """``numba.njit(cache=True, **options)(function)`` with a ``LightCache``; compiled in memory
    (no cache) where Numba finds no writable cache directory."""
    import numba  # the ops' loops modules call this at their import, which loads numba

    try:
        dispatcher = numba.njit(cache=True, **options)(function)
    except RuntimeError:  # "no locator available": no writable cache directory
        return numba.njit(**options)(function)
    dispatcher._cache = LightCache(dispatcher._cache)
    return dispatcher
