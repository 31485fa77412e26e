"""The connectionist temporal classification loss: each sequence's negative log likelihood of its target
under per-step log-probabilities (T, N, C), summed over every alignment by the forward (alpha) recursion
in log space; the backward op runs the beta recursion and returns PyTorch's gradient, exp(lp) minus the
alignment posterior of each class (the gradient with respect to the logits of a log_softmax, as PyTorch's
kernel gives it).

The recursions loop over time steps, each step vectorised over the batch and the extended target
(blanks between labels); nothing loops over elements.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register


def _into(result, out):
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def _padded_targets(targets, target_lengths):
    """Targets as (N, S): as given when 2-D, cut from the concatenation by their lengths when 1-D."""
    if targets.ndim == 2:
        return targets
    width = max(int(target_lengths.max()) if target_lengths.size else 0, 1)
    starts = np.cumsum(target_lengths) - target_lengths
    positions = starts[:, None] + np.arange(width)[None, :]
    return targets[np.minimum(positions, max(targets.size - 1, 0))] if targets.size else np.zeros(
        (len(target_lengths), width), np.int64)


def _extended(targets, target_lengths, blank):
    """The labels with blanks around each (N, 2S + 1), which positions exist, and where a skip over a
    blank is allowed (a label that differs from the one two positions back)."""
    padded = _padded_targets(targets, target_lengths)
    batch, width = padded.shape
    extended = np.full((batch, 2 * width + 1), blank, np.int64)
    extended[:, 1::2] = padded
    exists = np.arange(2 * width + 1)[None, :] < (2 * target_lengths[:, None] + 1)
    skip = np.zeros_like(exists)
    skip[:, 2:] = (extended[:, 2:] != blank) & (extended[:, 2:] != extended[:, :-2])
    return extended, exists, skip


def _logsumexp(*terms):
    top = np.maximum.reduce(terms)
    safe = np.where(np.isneginf(top), 0, top)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(term - safe) for term in terms))


def _shifted(values, by):
    result = np.full_like(values, -np.inf)
    result[:, by:] = values[:, :-by]
    return result


def _alphas(lp, extended, exists, skip, input_lengths):
    steps = lp.shape[0]
    emit = np.take_along_axis(lp, np.broadcast_to(extended[None], (steps,) + extended.shape), axis=2)  # (T, N, L)
    alpha = np.full((steps,) + extended.shape, -np.inf, lp.dtype)
    alpha[0, :, :2] = emit[0, :, :2]
    alpha[0] = np.where(exists, alpha[0], -np.inf)
    for t in range(1, steps):
        previous = alpha[t - 1]
        two_back = np.where(skip, _shifted(previous, 2), -np.inf)
        alpha[t] = np.where(exists, _logsumexp(previous, _shifted(previous, 1), two_back) + emit[t], -np.inf)
    return alpha, emit


def _nll(alpha, input_lengths, target_lengths):
    last = alpha[np.maximum(input_lengths - 1, 0), np.arange(alpha.shape[1])]  # (N, L)
    end = 2 * target_lengths
    final = np.take_along_axis(last, end[:, None], axis=1)[:, 0]
    before = np.where(end > 0, np.take_along_axis(last, np.maximum(end - 1, 0)[:, None], axis=1)[:, 0], -np.inf)
    return -_logsumexp(final, before)


def _check_lengths(lp, input_lengths):
    """PyTorch's check, made here so that a replay makes it too (the lengths may be a compiled input)."""
    if input_lengths.size and input_lengths.max() > lp.shape[0]:
        raise RuntimeError(f"Expected input_lengths to have value at most {lp.shape[0]}, but got value "
                           f"{int(input_lengths.max())} (while checking arguments for ctc_loss_allocate_outputs)")


def _ctc_loss(lp, targets, input_lengths, target_lengths, out=None, blank=0, zero_infinity=False):
    _check_lengths(lp, input_lengths)
    extended, exists, skip = _extended(targets, target_lengths, blank)
    alpha, _ = _alphas(lp, extended, exists, skip, input_lengths)
    nll = _nll(alpha, input_lengths, target_lengths)
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0, nll)
    return _into(nll.astype(lp.dtype), out)


def _ctc_loss_backward(g, lp, targets, input_lengths, target_lengths, out=None, blank=0, zero_infinity=False):
    """(exp(lp) - exp(log sum of alpha beta over the positions of each class + nll - lp)) * g, zero past
    each sequence's length (and, with zero_infinity, for sequences with no alignment)."""
    steps, batch, classes = lp.shape
    extended, exists, skip = _extended(targets, target_lengths, blank)
    alpha, emit = _alphas(lp, extended, exists, skip, input_lengths)
    nll = _nll(alpha, input_lengths, target_lengths)
    beta = np.full_like(alpha, -np.inf)
    ends = 2 * target_lengths
    width = extended.shape[1]
    at_end = (np.arange(width)[None, :] == ends[:, None]) | ((np.arange(width)[None, :] == ends[:, None] - 1)
                                                              & (ends[:, None] > 0))
    skip_ahead = np.zeros_like(skip)
    skip_ahead[:, :-2] = skip[:, 2:]
    for t in reversed(range(steps)):
        start = (t == input_lengths - 1)[:, None]
        if t + 1 < steps:
            following = beta[t + 1]
            ahead1 = np.full_like(following, -np.inf)
            ahead1[:, :-1] = following[:, 1:]
            ahead2 = np.full_like(following, -np.inf)
            ahead2[:, :-2] = following[:, 2:]
            recursed = _logsumexp(following, ahead1, np.where(skip_ahead, ahead2, -np.inf)) + emit[t]
        else:
            recursed = np.full_like(emit[t], -np.inf)
        value = np.where(start, np.where(at_end, emit[t], -np.inf), recursed)
        beta[t] = np.where(exists & (t < input_lengths)[:, None], value, -np.inf)
    product = alpha + beta
    posterior = np.full((steps, batch, classes), -np.inf, lp.dtype)
    t_index, n_index = np.meshgrid(np.arange(steps), np.arange(batch), indexing="ij")
    np.logaddexp.at(posterior, (t_index[:, :, None], n_index[:, :, None], extended[None]), product)
    with np.errstate(over="ignore", invalid="ignore"):
        grad = (np.exp(lp) - np.exp(posterior + nll[None, :, None] - lp)) * g[None, :, None]
    inside = np.arange(steps)[:, None] < input_lengths[None, :]
    keep = inside if not zero_infinity else inside & ~np.isinf(nll)[None, :]
    return _into(np.where(keep[:, :, None], grad, 0).astype(lp.dtype), out)


def _no_double_backward(F, gg, s, at, need):
    raise NotImplementedError("the derivative for '_ctc_loss_backward' is not implemented.")


_CTC_ATTRS = (Save("blank", "attr:blank", freed=False), Save("zero_infinity", "attr:zero_infinity", freed=False))
register(OpDef("ctc_loss", _ctc_loss, "other", "CtcLossBackward0",
               lambda F, g, s, at, need: (F.ctc_loss_backward(g, s["log_probs"], s["targets"], s["input_lengths"],
                                                              s["target_lengths"], blank=at["blank"],
                                                              zero_infinity=at["zero_infinity"]), None, None, None),
               (Save("log_probs", 0), Save("targets", 1), Save("input_lengths", 2), Save("target_lengths", 3))
               + _CTC_ATTRS, "same", grad_inputs=(0,)))
register(OpDef("ctc_loss_backward", _ctc_loss_backward, "other", "CtcLossBackwardBackward0", _no_double_backward,
               (), "same", grad_inputs=(0, 1)))
