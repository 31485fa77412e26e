"""p-norm distances and renorm: dist (the norm of a difference), cdist (between the rows of two
batches of matrices), pdist (between the rows of one matrix, i < j), renorm (rescale sub-tensors
whose norm exceeds a bound).

Each forward is the vector norm of the differences (``vector_norm``'s NumPy code), and each backward
runs ``vector_norm``'s gradient formula on the differences, recomputed with staticgrad ops, so the
gradients differentiate again. cdist's matrix-product form for large p = 2 problems is composed in
staticgrad._eager.distances, as PyTorch composes it.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.vector_norm import _vector_norm, _vector_norm_backward


def _norm_grad(F, g, difference, result, p, dim, keepdim=False):
    """The gradient of ||difference||_p over ``dim`` with respect to the difference."""
    saved = {"self": difference, "result": result}
    return _vector_norm_backward(F, g, saved, {"ord": p, "dim": dim, "keepdim": keepdim}, (True,))[0]


# ---- dist --------------------------------------------------------------------------------------------

def _dist(a, b, out=None, p=2.0):
    return _vector_norm(np.subtract(a, b), out=out, ord=p)


def _dist_backward(F, g, s, at, need):
    grad = _norm_grad(F, g, s["self"] - s["other"], s["result"], at["p"], None)
    return (grad if need[0] else None, F.neg(grad) if need[1] else None)


register(OpDef("dist", _dist, "reduction", "DistBackward0", _dist_backward,
               (Save("self", 0), Save("other", 1), Save("p", "attr:p", freed=False), Save("result", "result")),
               "promote"))


# ---- cdist: x1 (..., P, M), x2 (..., R, M) -> (..., P, R) ----------------------------------------------

def _cdist(a, b, out=None, p=2.0):
    difference = np.subtract(a[..., :, None, :], b[..., None, :, :])
    return _vector_norm(difference, out=out, ord=p, dim=(difference.ndim - 1,))


def _cdist_backward(F, g, s, at, need):
    x1, x2 = s["x1"], s["x2"]
    difference = F.unsqueeze(x1, dim=-2) - F.unsqueeze(x2, dim=-3)
    ndim = len(difference.shape)
    grad = _norm_grad(F, g, difference, s["result"], at["p"], (ndim - 1,))
    return (F.sum(grad, dim=(ndim - 2,)) if need[0] else None,
            F.neg(F.sum(grad, dim=(ndim - 3,))) if need[1] else None)


register(OpDef("cdist", _cdist, "other", "CdistBackward0", _cdist_backward,
               (Save("x1", 0), Save("x2", 1), Save("p", "attr:p", freed=False), Save("result", "result")), "same"))


# ---- pdist: the rows of x (N, M), pairs i < j in row-major order ----------------------------------------

def _pairs(n: int):
    return np.triu_indices(n, 1)


def _pair_differences(x, out=None):
    first, second = _pairs(x.shape[0])
    result = np.subtract(x[first], x[second])
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _pair_differences_adjoint(g, out=None, n=0):
    """Each row i receives the differences it was the first of, minus those it was the second of."""
    first, second = _pairs(n)
    result = np.zeros((n,) + g.shape[1:], g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    np.add.at(result, first, g)
    np.subtract.at(result, second, g)
    return result


register(OpDef("pair_differences", _pair_differences, "other", "PdistBackwardBackward0",
               lambda F, g, s, at, need: (F.pair_differences_adjoint(g, n=s["n"][0]),),
               (Save("n", "shape:0", freed=False),), "same"))
register(OpDef("pair_differences_adjoint", _pair_differences_adjoint, "other", "PdistBackwardBackward1",
               lambda F, g, s, at, need: (F.pair_differences(g),), (), "same"))


def _pdist(x, out=None, p=2.0):
    difference = _pair_differences(x)
    return _vector_norm(difference, out=out, ord=p, dim=(1,))


def _pdist_backward(F, g, s, at, need):
    x = s["self"]
    grad = _norm_grad(F, g, F.pair_differences(x), s["result"], at["p"], (1,))
    return (F.pair_differences_adjoint(grad, n=x.shape[0]),)


register(OpDef("pdist", _pdist, "other", "PdistBackward0", _pdist_backward,
               (Save("self", 0), Save("p", "attr:p", freed=False), Save("result", "result")), "same"))


# ---- renorm: sub-tensors along dim with a p-norm above maxnorm scaled to maxnorm -------------------------

def _renorm_factor(x, p, dim, maxnorm):
    reduce = tuple(d for d in range(x.ndim) if d != dim)
    norm = _vector_norm(x, ord=p, dim=reduce, keepdim=True)
    T = x.dtype.type
    return np.where(norm > T(maxnorm), T(maxnorm) / (norm + T(1e-7)), T(1.0))


def _renorm(x, out=None, p=2.0, dim=0, maxnorm=1.0):
    return np.multiply(x, _renorm_factor(x, p, dim, maxnorm), out=out)


def _renorm_backward(F, g, s, at, need):
    """PyTorch's: where the norm exceeds maxnorm, g * maxnorm / (norm + 1e-7) minus maxnorm / (norm + 1e-7)^2
    times the norm's gradient taken with sum(x * g) over the sub-tensor; g elsewhere."""
    x, p, maxnorm = s["self"], at["p"], at["maxnorm"]
    reduce = tuple(d for d in range(len(x.shape)) if d != at["dim"])
    norm = F.vector_norm(x, ord=p, dim=reduce, keepdim=True)
    projected = F.sum(x * g, dim=reduce, keepdim=True)
    norm_grad = _norm_grad(F, projected, x, norm, p, reduce, keepdim=True)
    inverse = F.reciprocal(F.add_scalar(norm, other=1e-7))
    scaled = F.mul_scalar(inverse, other=maxnorm) * g - F.mul_scalar(inverse * inverse, other=maxnorm) * norm_grad
    return (F.where(F.gt_scalar(norm, other=maxnorm), scaled, g),)


register(OpDef("renorm", _renorm, "other", "RenormBackward0", _renorm_backward,
               (Save("self", 0), Save("p", "attr:p", freed=False), Save("dim", "attr:dim", freed=False),
                Save("maxnorm", "attr:maxnorm", freed=False)), "same"))
