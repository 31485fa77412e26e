"""``Tensor.uniform_`` and ``Tensor.normal_``: refill a tensor in place from the default generator or
a ``generator=``, e.g. ``layer.weight.data.uniform_(-0.1, 0.1)``. The draw is a recorded random op,
so a compiled function re-samples it on every replay."""

from __future__ import annotations

from staticgrad._eager.creation import _factory, _source


def _uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None):
    drawn = _factory("uniform", False, shape=tuple(self.shape), low=float(a), high=float(b),
                     dtype=self._data.dtype, **_source(generator))
    return self.copy_(drawn)


def _normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None):
    drawn = _factory("normal", False, shape=tuple(self.shape), mean=float(mean), std=float(std),
                     dtype=self._data.dtype, **_source(generator))
    return self.copy_(drawn)


METHODS = {"uniform_": _uniform_, "normal_": _normal_}
