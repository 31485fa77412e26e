"""Losses with PyTorch's fused nodes: MseLossBackward0, NllLossBackward0, NllLoss2DBackward0."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.elementwise import broadcast_error
from staticgrad.ops.reductions import mean_of_all, mean_values
from staticgrad.ops.registry import OpDef, Save, as_array, jit_loops, lit, register, with_emit

# PyTorch's reduction enum, which its nodes save as ``_saved_reduction``.
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def reduction_code(reduction: str) -> int:
    """A loss's ``reduction`` argument ("none", "mean", "sum") as the op attribute's code."""
    try:
        return REDUCTIONS[reduction]
    except KeyError:
        raise ValueError(f"{reduction} is not a valid value for reduction") from None


def _reduce(values, reduction, out):
    if reduction == 0:
        if out is None:
            return values
        np.copyto(out, values)
        return out
    if reduction == 1:
        return _mean(values, out)
    return np.sum(values, out=out)


def _mean(values, out):
    """np.mean; the mean of no values is nan, as in PyTorch, without NumPy's 'Mean of empty slice' warning."""
    if values.size:
        if out is None and values.dtype.char in "fd":
            return mean_of_all(values)
        if values.dtype.kind == "f" and values.dtype.itemsize >= 4:
            # np.mean's own steps without its Python wrapper: the sum, then a division by the count
            # (an intp, as np.mean's), so eager and a replay's emitted mean give the same numbers
            count = np.intp(values.size)
            if out is None:
                total = np.add.reduce(values, axis=None)
                return total.dtype.type(total / count)
            np.add.reduce(values, axis=None, out=out)
            return np.true_divide(out, count, out=out, casting="unsafe")
        return mean_values(values, out)
    if out is None:
        return np.full((), np.nan, values.dtype)
    out.fill(np.nan)
    return out


def _mse_scale(reduction: int, count: int) -> float:
    """d loss / d diff per unit diff: 2 / count for the mean (0 when there are no values, which
    leaves nothing to scale and no division by zero), 2 otherwise."""
    if reduction != 1:
        return 2.0
    return 2.0 / count if count else 0.0


def _mse_loss(a, t, out=None, reduction=1):
    diff = as_array(np.subtract(a, t))
    np.multiply(diff, diff, out=diff)
    return _reduce(diff, reduction, out)


def _mse_loss_backward_formula(F, g, s, at, need):
    grad = F.mse_loss_backward(g, s["self"], s["target"], reduction=at["reduction"])
    return (grad if need[0] else None, F.neg(grad) if need[1] else None)


register(OpDef("mse_loss", _mse_loss, "other", "MseLossBackward0", _mse_loss_backward_formula,
               (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False)),
               "promote", explain=broadcast_error))


def _mse_loss_emit(ins, out, at, shapes):
    """The mean reduction as np.mean computes it (pairwise add.reduce, then divide by the count),
    without np.mean's Python wrapper; other reductions call the forward."""
    if at.get("reduction") != 1 or not shapes or shapes[0] is None or tuple(shapes[0]) != tuple(shapes[1]):
        return None
    count = 1
    for d in shapes[0]:
        count *= d
    if not shapes[0] or count == 0:  # 0-dim operands make NumPy scalars (no out=); empty ones divide by 0
        return None
    # (float16: np.mean itself, as eager's mean_values, which sums in float32 and rounds once)
    return (f"_d = np.subtract({ins[0]}, {ins[1]}); np.multiply(_d, _d, out=_d); "
            f"(np.add.reduce(_d, axis=None, dtype=_d.dtype, out={out}), "
            f"np.true_divide({out}, {count}, out={out}, casting='unsafe')) if _d.dtype.itemsize >= 4 "
            f"else np.copyto({out}, np.mean(_d))")


with_emit("mse_loss", _mse_loss_emit)


def _mse_loss_backward(g, a, t, out=None, reduction=1):
    diff = as_array(np.subtract(a, t))
    scale = _mse_scale(reduction, diff.size)
    np.multiply(diff, np.asarray(scale, dtype=diff.dtype), out=diff)
    return np.multiply(diff, g, out=out)


def _mse_loss_backward_backward(F, gg, s, at, need):
    scale = _mse_scale(at["reduction"], gg.numel())  # gg has the (broadcast) output's size
    grad_g = F.mul_scalar(gg * (s["self"] - s["target"]), other=scale) if need[0] else None
    grad_at = F.mul_scalar(gg * s["grad_output"], other=scale) if need[1] or need[2] else None
    return grad_g, grad_at if need[1] else None, F.neg(grad_at) if need[2] else None


def _mse_loss_backward_expr(x, at):
    # the element count is a kernel argument (a Python float): 2.0 / it in double, then cast to
    # the loop dtype, as the NumPy forward's scale is; 0 with no elements, as _mse_scale gives
    n = at["_numel"]
    scale = f"T(2.0 / {n!r} if {n!r} else 0.0)" if at["reduction"] == 1 else lit(2.0)
    return f"((({x[1]} - {x[2]}) * {scale}) * {x[0]})"


register(OpDef("mse_loss_backward", _mse_loss_backward, "elementwise", "MseLossBackwardBackward0",
               _mse_loss_backward_backward,
               (Save("grad_output", 0, when=(1, 2)), Save("self", 1, when=(0,)), Save("target", 2, when=(0,))),
               "promote", _mse_loss_backward_expr))


# ---- negative log likelihood over class scores (input N x C [x d...], target N [x d...]) -----

def _picked(logp, target):
    """log-probabilities of the target classes, shaped like target."""
    if logp.ndim == 1:
        return logp[target]
    if logp.ndim == 2:   # (N, C): one fancy index, a fifth of take_along_axis's cost
        return logp[np.arange(logp.shape[0]), target]
    return np.take_along_axis(logp, np.expand_dims(target, 1), axis=1).squeeze(1)


def _check_targets(target, valid, n_classes):
    if target.size and target.min() >= 0 and target.max() < n_classes:
        return   # the common case, in two reductions: every target a class
    bad = target[valid & ((target < 0) | (target >= n_classes))]
    if bad.size:
        raise IndexError(f"Target {int(bad.flat[0])} is out of bounds.")


def _rows_loop_applies(logp, target) -> bool:
    """Whether the one-pass loops take these (N, C) log-probabilities and int64 targets."""
    return (logp.ndim == 2 and logp.dtype.char in "fd" and target.dtype == np.int64 and logp.flags.c_contiguous
            and target.flags.c_contiguous)


def _picked_losses(logp, target, ignore_index):
    """(-logp at each row's target, +0.0 on ignored rows; the number of rows counted)."""
    if _rows_loop_applies(logp, target):
        losses = np.empty(target.shape[0], dtype=logp.dtype)
        count = jit_loops().nll_picked(logp, target, ignore_index, losses)
        if count < 0:
            raise IndexError(f"Target {int(target[-1 - count])} is out of bounds.")
        return losses, count
    valid = target != ignore_index
    _check_targets(target, valid, logp.shape[0] if logp.ndim == 1 else logp.shape[1])
    safe_target = np.where(valid, target, 0)
    return np.where(valid, np.negative(_picked(logp, safe_target)), 0).astype(logp.dtype, copy=False), \
        np.count_nonzero(valid)


def _nll_loss(logp, target, out=None, reduction=1, ignore_index=-100):
    losses, count = _picked_losses(logp, target, ignore_index)
    if reduction == 1:
        total = np.sum(losses)
        result = np.asarray(total / count if count else np.nan, dtype=logp.dtype)
        if out is None:
            return result
        out[...] = result
        return out
    return _reduce(losses.astype(logp.dtype, copy=False), reduction, out)


def _nll_error(shapes, attrs, exc):
    logp, target = shapes
    if isinstance(exc, IndexError):
        return exc
    if len(logp) >= 2 and len(target) >= 1 and logp[0] != target[0]:
        return ValueError(f"Expected input batch_size ({logp[0]}) to match target batch_size ({target[0]}).")
    return None


def _nll_loss_backward(g, logp, target, out=None, sizes=(), reduction=1, ignore_index=-100):
    """The gradient of nll_loss: -g (scaled by the reduction) scattered at the targets. ``logp``, the
    loss's input, is not read: it is an input, as in PyTorch, so that under ``create_graph`` the
    gradient is a node of the graph (NllLossBackwardBackward0) whose gradient to it is zero."""
    if (len(sizes) == 2 and g.dtype.char in "fd" and target.dtype == np.int64 and target.flags.c_contiguous
            and (out is None or out.flags.c_contiguous)):
        # -g for each counted row (over the count, for a mean), written in one pass; nothing (+0.0)
        # on ignored rows, as PyTorch
        count = np.count_nonzero(target != ignore_index) if reduction == 1 else 1
        values = np.negative(g / count if count else g, dtype=g.dtype).reshape(-1)
        if out is None:
            out = np.empty(sizes, dtype=g.dtype)
        bad = jit_loops().nll_scatter(target, ignore_index, values, 1 if reduction == 0 else 0, out)
        if bad >= 0:
            raise IndexError(f"Target {int(target[bad])} is out of bounds.")
        return out
    valid = target != ignore_index
    safe_target = np.where(valid, target, 0)
    count = np.count_nonzero(valid) if reduction == 1 else 0
    # the same values as the loop's: +0.0 at an ignored row's (stand-in) target
    values = np.where(valid, np.negative(g / count if count else g), 0).astype(g.dtype, copy=False)
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    if len(sizes) == 1:
        out[safe_target] = values
    elif len(sizes) == 2:
        out[np.arange(sizes[0]), safe_target] = values
    else:
        np.put_along_axis(out, np.expand_dims(safe_target, 1), np.expand_dims(values, 1), axis=1)
    return out


def _nll_family(name: str, node_name: str) -> None:
    """Register ``name`` and ``name_backward``: the same kernels under one of PyTorch's node names
    (NllLossBackward0 for inputs (C,) and (N, C), NllLoss2DBackward0 for (N, C, H, W))."""
    backward_name = name + "_backward"

    def formula(F, g, s, at, need):
        grad = getattr(F, backward_name)(g, s["self"], s["target"], sizes=tuple(s["self_sym_sizes"]),
                                         reduction=at["reduction"], ignore_index=at["ignore_index"])
        return grad, None

    def double_formula(F, gg, s, at, need):
        # d/d(g) of the scatter is the gather of gg at the targets (same reduction): the loss of gg;
        # the gradient does not depend on the loss's input (PyTorch sends it zeros).
        return (getattr(F, name)(gg, s["target"], reduction=at["reduction"], ignore_index=at["ignore_index"])
                if need[0] else None, F.zeros_like(gg) if need[1] else None, None)

    register(OpDef(name, _nll_loss, "other", node_name, formula,
                   (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False),
                    Save("ignore_index", "attr:ignore_index", freed=False),
                    Save("self_sym_sizes", "shape:0", freed=False)),
                   "same", explain=_nll_error, grad_inputs=(0,)))
    register(OpDef(backward_name, _nll_loss_backward, "other", node_name.replace("Backward0", "BackwardBackward0"),
                   double_formula, (Save("target", 2),), "same", grad_inputs=(0, 1)))


_nll_family("nll_loss", "NllLossBackward0")
_nll_family("nll_loss2d", "NllLoss2DBackward0")
