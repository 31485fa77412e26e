"""More random draws: Bernoulli (``torch.bernoulli``, ``Tensor.bernoulli_``), the in-place refills
``exponential_``, ``geometric_``, ``log_normal_``, ``cauchy_``, and ``torch.multinomial``. Kind
"random": a compiled function draws them afresh on every replay, from the default generator or the
``generator=`` its attribute ``source`` names. The drawn values carry no gradient: the gradient to
a refilled tensor (and to Bernoulli's probabilities) is zero, under PyTorch's node names.

The checks that read the probabilities' values (``p`` in [0, 1], a valid multinomial distribution)
run inside the forward, so a replay on bad values raises PyTorch's error as eager does."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.factory import generator
from staticgrad.ops.random_fill import _into_like, _zero_grad
from staticgrad.ops.registry import OpDef, register

BERNOULLI_P_ERROR = "Expected p_in >= 0 && p_in <= 1 to be true, but got false."


def _check_probabilities(p) -> None:
    with np.errstate(invalid="ignore"):
        valid = bool(np.all((p >= 0) & (p <= 1)))
    if not valid:
        raise RuntimeError(BERNOULLI_P_ERROR)


def _bernoulli(p, out=None, source=None):
    """``torch.bernoulli(p)``: 1 with probability ``p`` elementwise, in ``p``'s dtype."""
    _check_probabilities(p)
    return _into_like(p, generator(source).random(p.shape) < p, out)


def _bernoulli_scalar(a, out=None, p=0.5, source=None):
    """``a`` refilled with 1 with probability ``p`` (a number), else 0."""
    return _into_like(a, generator(source).random(a.shape) < p, out)


def _bernoulli_tensor(a, p, out=None, source=None):
    """``a`` refilled with 1 with probability ``p`` (a tensor of ``a``'s shape), else 0."""
    _check_probabilities(p)
    return _into_like(a, generator(source).random(a.shape) < np.broadcast_to(p, a.shape), out)


def _not_differentiable(F, g, s, at, need):
    raise RuntimeError("derivative for aten::bernoulli is not implemented")


def _zero_grads(F, g, s, at, need):
    return (F.zeros_like(g), F.zeros_like(g))


register(OpDef("bernoulli", _bernoulli, "random", "BernoulliBackward0", _zero_grad, (), "same"))
register(OpDef("bernoulli_fill", _bernoulli_scalar, "random", "BernoulliBackward2", _zero_grad, (), "same"))
register(OpDef("bernoulli_tensor_fill", _bernoulli_tensor, "random", "BernoulliBackward1", _zero_grads, (),
               "same"))
# torch.bernoulli(input, p): PyTorch's node for it has no derivative (its backward raises).
register(OpDef("bernoulli_like", _bernoulli_scalar, "random", "torch::autograd::NotImplemented",
               _not_differentiable, (), "same"))


def _exponential_fill(a, out=None, lambd=1.0, source=None):
    return _into_like(a, generator(source).standard_exponential(a.shape) / lambd, out)


def _geometric_fill(a, out=None, p=0.5, source=None):
    return _into_like(a, generator(source).geometric(p, a.shape), out)


def _log_normal_fill(a, out=None, mean=1.0, std=2.0, source=None):
    return _into_like(a, np.exp(mean + std * generator(source).standard_normal(a.shape)), out)


def _cauchy_fill(a, out=None, median=0.0, sigma=1.0, source=None):
    return _into_like(a, median + sigma * generator(source).standard_cauchy(a.shape), out)


register(OpDef("exponential_fill", _exponential_fill, "random", "ExponentialBackward0", _zero_grad, (), "same"))
register(OpDef("geometric_fill", _geometric_fill, "random", "GeometricBackward0", _zero_grad, (), "same"))
register(OpDef("log_normal_fill", _log_normal_fill, "random", "LogNormalBackward0", _zero_grad, (), "same"))
register(OpDef("cauchy_fill", _cauchy_fill, "random", "CauchyBackward0", _zero_grad, (), "same"))


# ---- multinomial ---------------------------------------------------------------------------------

SUM_ERROR = "invalid multinomial distribution (sum of probabilities <= 0)"


def _sample_without_replacement(rows, num_samples, rng):
    """PyTorch's sampler for draws without replacement (and single draws): the ``num_samples``
    largest of ``p / q`` with ``q ~ Exp(1)``, a form of the Gumbel-max trick."""
    if rows.shape[1] == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation "
                           "has no identity.")
    with np.errstate(invalid="ignore"):
        valid = bool(np.max(rows) < np.inf) and bool(np.min(rows) >= 0)
    if not valid:
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(rows.sum(axis=1) == 0):
        raise RuntimeError(SUM_ERROR)
    with np.errstate(divide="ignore"):
        score = rows / rng.standard_exponential(rows.shape)
    return np.argsort(-score, axis=1, kind="stable")[:, :num_samples]


def _sample_with_replacement(rows, num_samples, rng):
    """Inverse-CDF draws from each row's distribution (each row normalised to sum 1)."""
    result = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, row in enumerate(rows):
        with np.errstate(invalid="ignore"):
            if not np.all(row >= 0):
                raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
        if not np.all(np.isfinite(row)):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
        total = row.sum()
        if not total > 0:
            raise RuntimeError(SUM_ERROR)
        cumulative = np.cumsum(row) / total
        cumulative[-1] = 1.0
        draws = np.searchsorted(cumulative, rng.random(num_samples), side="right")
        result[i] = np.minimum(draws, row.size - 1)
    return result


def _multinomial(p, out=None, num_samples=1, replacement=False, source=None):
    """``num_samples`` category indices per row of ``p`` (1-D or 2-D, unnormalised probabilities)."""
    rows = p if p.ndim == 2 else p.reshape(1, p.shape[-1])
    rows = rows.astype(np.float64)
    if rows.shape[0] == 0:
        result = np.empty((0, num_samples), dtype=np.int64)
    elif not replacement or num_samples == 1:
        result = _sample_without_replacement(rows, num_samples, generator(source))
    else:
        result = _sample_with_replacement(rows, num_samples, generator(source))
    result = result.reshape(p.shape[:-1] + (num_samples,))
    if out is None:
        return result
    np.copyto(out, result)
    return out


register(OpDef("multinomial", _multinomial, "random", dtype_rule="index"))
