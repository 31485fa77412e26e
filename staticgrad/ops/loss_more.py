"""More losses with PyTorch's fused nodes: binary cross entropy (on probabilities and on logits),
smooth L1 and Huber, class-weighted negative log likelihood, and the 2-norm cosine similarity
divides by (LinalgVectorNormBackward0).

Backward formulas are written with staticgrad ops, so double backward and tracing need nothing
more. ``weight`` and ``pos_weight`` are optional tensors: each combination is its own op under
the same node name (an op's inputs are fixed), as ``_variants`` builds them.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.elementwise import broadcast_error
from staticgrad.ops.loss import _check_targets, _picked, _reduce
from staticgrad.ops.registry import OpDef, Save, as_array, lit, register

MEAN = 1


def _reduced_grad(F, grad, g, weight, reduction, numel):
    """``grad * g`` times the weight, divided by the element count for the mean: PyTorch's order."""
    grad = F.mul(grad, g)
    if weight is not None:
        grad = F.mul(grad, weight)
    if reduction == MEAN:
        grad = F.div_scalar(grad, other=numel)
    return grad


def _finish(loss, weight, reduction, out):
    if weight is not None:
        loss = as_array(np.multiply(loss, weight))
    return _reduce(loss, reduction, out)


def _variant_inputs(name: str, optional: tuple[str, ...]):
    """Every subset of the optional tensor inputs, in order: (op name suffix, names present)."""
    subsets = [()]
    for extra in optional:
        subsets += [s + (extra,) for s in subsets]
    return [(name + "".join("_" + e for e in present), present) for present in subsets]


# ---- binary cross entropy on probabilities ------------------------------------------------------

def _bce_forward(present):
    def forward(x, t, *extra, out=None, reduction=MEAN):
        if np.any((x < 0) | (x > 1)):
            raise RuntimeError("all elements of input should be between 0 and 1")
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = as_array((t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100))
        return _finish(loss, extra[0] if present else None, reduction, out)
    return forward


def _bce_backward(F, g, s, at, need):
    x, t, weight = s["self"], s["target"], s.get("weight")
    reduction, numel = at["reduction"], x.numel()
    grad_x = grad_t = None
    if need[0]:
        denominator = F.clamp(F.mul(F.rsub_scalar(x, other=1), x), min=1e-12)
        grad_x = _reduced_grad(F, F.div(F.sub(x, t), denominator), g, weight, reduction, numel)
    if need[1]:
        neg_logit = F.sub(F.log(F.rsub_scalar(x, other=1)), F.log(x))
        grad_t = _reduced_grad(F, neg_logit, g, weight, reduction, numel)
    return (grad_x, grad_t) + (None,) * (len(need) - 2)


for _name, _present in _variant_inputs("binary_cross_entropy", ("weight",)):
    register(OpDef(_name, _bce_forward(_present), "other", "BinaryCrossEntropyBackward0", _bce_backward,
                   (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False))
                   + tuple(Save(e, 2 + i) for i, e in enumerate(_present)),
                   "promote", explain=broadcast_error, grad_inputs=(0, 1),
                   nondifferentiable=tuple((2 + k, "binary_cross_entropy", e) for k, e in enumerate(_present))))


# ---- binary cross entropy on logits -------------------------------------------------------------

def _log_sigmoid(x):
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _bce_logits_forward(present):
    def forward(x, t, *extra, out=None, reduction=MEAN):
        given = dict(zip(present, extra))
        log_sigmoid = _log_sigmoid(x)
        if "pos_weight" in given:
            log_sigmoid = log_sigmoid * ((given["pos_weight"] - 1) * t + 1)
        loss = as_array((1 - t) * x - log_sigmoid)
        return _finish(loss, given.get("weight"), reduction, out)
    return forward


def _log_sigmoid_of(F, x):
    """log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), with staticgrad ops."""
    return F.sub(F.clamp(x, max=0.0), F.log(F.add_scalar(F.exp(F.neg(F.abs(x))), other=1)))


def _bce_logits_backward(F, g, s, at, need):
    x, t, weight, pos_weight = s["self"], s["target"], s.get("weight"), s.get("pos_weight")
    reduction, numel = at["reduction"], x.numel()
    grad_x = grad_t = None
    if need[0]:
        if pos_weight is None:
            local = F.sub(F.sigmoid(x), t)
        else:
            scaled = F.mul(pos_weight, t)
            local = F.sub(F.mul(F.sub(F.add_scalar(scaled, other=1), t), F.sigmoid(x)), scaled)
        grad_x = _reduced_grad(F, local, g, weight, reduction, numel)
    if need[1]:
        if pos_weight is None:
            local = F.neg(x)
        else:
            local = F.sub(_log_sigmoid_of(F, F.neg(x)), F.mul(_log_sigmoid_of(F, x), pos_weight))
        grad_t = _reduced_grad(F, local, g, weight, reduction, numel)
    return (grad_x, grad_t) + (None,) * (len(need) - 2)


for _name, _present in _variant_inputs("binary_cross_entropy_with_logits", ("weight", "pos_weight")):
    register(OpDef(_name, _bce_logits_forward(_present), "other", "BinaryCrossEntropyWithLogitsBackward0",
                   _bce_logits_backward,
                   (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False))
                   + tuple(Save(e, 2 + i) for i, e in enumerate(_present)),
                   "promote", explain=broadcast_error, grad_inputs=(0, 1),
                   nondifferentiable=tuple((2 + k, "binary_cross_entropy_with_logits", e)
                                           for k, e in enumerate(_present))))


# ---- smooth L1 and Huber -------------------------------------------------------------------------

def _smooth_l1(x, t, out=None, reduction=MEAN, beta=1.0):
    z = np.abs(x - t)
    loss = as_array(np.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta).astype(z.dtype, copy=False))
    return _reduce(loss, reduction, out)


def _huber(x, t, out=None, reduction=MEAN, delta=1.0):
    z = np.abs(x - t)
    loss = as_array(np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)).astype(z.dtype, copy=False))
    return _reduce(loss, reduction, out)


def _clamped_diff_backward(scale_by: str | None, bound: str):
    """d loss / d input = clamp(diff [/ beta], -bound, bound) * grad; the target gets its negative."""
    def backward(F, g, s, at, need):
        x, t = s["self"], s["target"]
        diff = F.sub(x, t)
        limit = at[bound]
        local = F.clamp(F.div_scalar(diff, other=at[scale_by]), min=-1.0, max=1.0) if scale_by else \
            F.clamp(diff, min=-limit, max=limit)
        grad = _reduced_grad(F, local, g, None, at["reduction"], x.numel())
        return (grad if need[0] else None, F.neg(grad) if need[1] else None)
    return backward


register(OpDef("smooth_l1_loss", _smooth_l1, "other", "SmoothL1LossBackward0", _clamped_diff_backward("beta", "beta"),
               (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False),
                Save("beta", "attr:beta", freed=False)), "promote", explain=broadcast_error))
register(OpDef("huber_loss", _huber, "other", "HuberLossBackward0", _clamped_diff_backward(None, "delta"),
               (Save("self", 0), Save("target", 1), Save("reduction", "attr:reduction", freed=False),
                Save("delta", "attr:delta", freed=False)), "promote", explain=broadcast_error))


# ---- negative log likelihood with class weights ---------------------------------------------------

def _target_weights(target, weight, ignore_index):
    """The weight of each target's class, 0 where the target is ignored; and the valid mask."""
    valid = target != ignore_index
    return weight[np.where(valid, target, 0)] * valid, valid


def _nll_loss_weighted(logp, target, weight, out=None, reduction=MEAN, ignore_index=-100):
    n_classes = logp.shape[0] if logp.ndim == 1 else logp.shape[1]
    _check_targets(target, target != ignore_index, n_classes)
    weights, valid = _target_weights(target, weight, ignore_index)
    losses = as_array(-_picked(logp, np.where(valid, target, 0)) * weights)
    if reduction == MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):
            result = np.asarray(np.sum(losses) / np.sum(weights), dtype=logp.dtype)
        if out is None:
            return result
        out[...] = result
        return out
    return _reduce(losses.astype(logp.dtype, copy=False), reduction, out)


def _nll_loss_weighted_backward(g, logp, target, weight, out=None, sizes=(), reduction=MEAN, ignore_index=-100):
    """As the unweighted one: ``logp`` is an input for the graph (create_graph), never read."""
    weights, valid = _target_weights(target, weight, ignore_index)
    if reduction == MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):
            scaled = weights * (g / np.sum(weights))
    else:
        scaled = weights * g
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    safe_target = np.where(valid, target, 0)
    if len(sizes) == 1:
        out[safe_target] = -scaled
    else:
        np.put_along_axis(out, np.expand_dims(safe_target, 1), np.expand_dims(-scaled, 1).astype(g.dtype), axis=1)
    return out


def _weighted_nll_family(name: str, node_name: str) -> None:
    """``name`` and ``name_backward`` with a class-weight input: the mean divides by the summed
    weights of the (non-ignored) targets, as PyTorch's does."""
    backward_name = name + "_backward"

    def formula(F, g, s, at, need):
        grad = getattr(F, backward_name)(g, s["self"], s["target"], s["weight"], sizes=tuple(s["self_sym_sizes"]),
                                         reduction=at["reduction"], ignore_index=at["ignore_index"])
        return grad, None, None

    def double_formula(F, gg, s, at, need):
        loss = getattr(F, name)(gg, s["target"], s["weight"], reduction=at["reduction"],
                                ignore_index=at["ignore_index"]) if need[0] else None
        return loss, F.zeros_like(gg) if need[1] else None, None, None

    register(OpDef(name, _nll_loss_weighted, "other", node_name, formula,
                   (Save("self", 0), Save("target", 1), Save("weight", 2),
                    Save("reduction", "attr:reduction", freed=False),
                    Save("ignore_index", "attr:ignore_index", freed=False),
                    Save("self_sym_sizes", "shape:0", freed=False)),
                   "same", grad_inputs=(0,), nondifferentiable=((2, name.replace("_weighted", "_forward"), "weight"),)))
    register(OpDef(backward_name, _nll_loss_weighted_backward, "other",
                   node_name.replace("Backward0", "BackwardBackward0"), double_formula,
                   (Save("target", 2), Save("weight", 3)), "same", grad_inputs=(0, 1)))


_weighted_nll_family("nll_loss_weighted", "NllLossBackward0")
_weighted_nll_family("nll_loss2d_weighted", "NllLoss2DBackward0")


# ---- the 2-norm over dims -----------------------------------------------------------------------

def _vector_norm2(x, out=None, dim=(), keepdim=False):
    return np.sqrt(np.sum(x * x, axis=dim, keepdims=keepdim), out=out)


def _vector_norm2_backward(F, g, s, at, need):
    """x / norm * grad, zero where the norm is zero (as PyTorch's 2-norm backward masks it)."""
    x, norm = s["self"], s["result"]
    if not at["keepdim"]:
        for d in sorted(at["dim"]):
            g, norm = F.unsqueeze(g, dim=d), F.unsqueeze(norm, dim=d)
    safe = F.where(F.eq_scalar(norm, other=0), F.add_scalar(norm, other=1), norm)
    scaled = F.div(x, safe)
    return (F.mul(scaled, g),)


register(OpDef("vector_norm2", _vector_norm2, "reduction", "LinalgVectorNormBackward0", _vector_norm2_backward,
               (Save("self", 0), Save("result", "result")), "float"))


# ---- division by a count (PyTorch's Scalar overload, DivBackward1) -------------------------------

register(OpDef("div_count", lambda a, out=None, other=1: np.true_divide(a, other, out=out), "elementwise",
               "DivBackward1", lambda F, g, s, at, need: (F.div_count(g, other=s["other"]),),
               (Save("other", "attr:other", freed=False),), "float",
               lambda x, at: f"({x[0]} / {lit(at['other'])})", explain=broadcast_error))
