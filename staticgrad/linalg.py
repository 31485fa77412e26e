"""torch.linalg: the solves and decompositions (staticgrad._eager.linalg_decomp); inv, det and cross
(staticgrad._eager.linalg_more); the vector norms: vector_norm, norm (a vector norm over one dim or all
elements, the Frobenius norm over two dims) and matrix_norm (every order, the spectral ones from svdvals)."""

from __future__ import annotations

import numpy as np

from staticgrad._eager import composites as _composites
from staticgrad._eager import functions as fn
from staticgrad._eager import movement as _movement
from staticgrad._eager.linalg_decomp import (  # noqa: F401
    cholesky,
    cholesky_ex,
    eigh,
    eigvalsh,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_solve,
    matrix_rank,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
)
from staticgrad._eager.linalg_more import linalg_cross as cross  # noqa: F401  (torch.linalg.cross)
from staticgrad._eager.linalg_more import linalg_det as det  # noqa: F401  (torch.linalg.det)
from staticgrad._eager.linalg_more import linalg_inv as inv  # noqa: F401  (torch.linalg.inv)
from staticgrad._eager.math_functions import norm as _vector_norm
from staticgrad._eager.tensor import _normalize_dim
from staticgrad.errors import LinAlgError  # noqa: F401  (torch.linalg.LinAlgError)


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """The ord-norm of x's elements over ``dim`` (all of them when None)."""
    return _vector_norm(x, ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The matrix norm over the two ``dim``, composed as PyTorch composes it (so its nodes show): 'fro' a
    vector norm; 'nuc', 2 and -2 the sum, largest or smallest singular value; 1 and inf (-1, -inf) the
    largest (smallest) column or row sum of absolute values."""
    fn.require_tensor(A, "linalg.matrix_norm")
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    if ord == "fro":
        return _vector_norm(A, 2.0, dim, keepdim, dtype=dtype)
    inf = float("inf")
    if ord not in ("nuc", 2, -2, 1, -1, inf, -inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    d0, d1 = (_normalize_dim(d, A.dim()) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord in (1, -1, inf, -inf):
        if ord in (inf, -inf):
            d0, d1 = d1, d0
        if not keepdim and d0 < d1:
            d1 -= 1
        sums = _vector_norm(A, 1.0, (d0,), keepdim, dtype=dtype)
        return (fn.amax if ord > 0 else fn.amin)(sums, d1, keepdim)
    if A._data.dtype.kind != "f":
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. Got "
                           f"{fn._scalar_type(A)}")
    if dtype is not None:
        A = A.to(dtype)
    if A._data.dtype == np.float16:
        raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got {fn._scalar_type(A)}")
    order = [d for d in range(A.dim()) if d not in (d0, d1)] + [d0, d1]
    values = svdvals(fn.permute(A, *order))
    if ord == "nuc":
        result = fn.sum(values, -1, keepdim)
    else:
        result = (fn.amax if ord == 2 else fn.amin)(values, -1, keepdim)
    if not keepdim:
        return result
    inverse = [order.index(d) for d in range(A.dim())]
    return fn.permute(fn.unsqueeze(result, -1), *inverse)


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """torch.linalg.norm: a vector norm (dim an int, or None with ord None or a 1-D input), else a
    matrix norm over two dims."""
    fn.require_tensor(A, "linalg.norm")
    if isinstance(dim, int):
        dim = (dim,)
    if (dim is not None and len(dim) == 2) or (dim is None and ord is not None and A.dim() == 2):
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and A.dim() != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.dim()}D.")
    return _vector_norm(A, 2.0 if ord is None else ord, dim, keepdim, dtype=dtype)


def matmul(input, other, *, out=None):
    """torch.linalg.matmul: torch.matmul under its linalg name."""
    if out is not None:
        raise NotImplementedError("staticgrad's linalg.matmul does not support out=; assign the result instead")
    return fn.matmul(input, other)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """torch.linalg.diagonal: torch.diagonal with the last two dims as the default matrix dims."""
    return _movement.diagonal(A, offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    """torch.linalg.vecdot: the dot product of vectors along ``dim`` (broadcast), as PyTorch composes it
    for real tensors: ``(x * y).sum(dim)``."""
    fn.require_tensor(x, "linalg.vecdot")
    fn.require_tensor(y, "linalg.vecdot", "y", 2)
    if x._data.dtype != y._data.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{fn._scalar_type(x)} and y of type {fn._scalar_type(y)} instead")
    return fn.sum(fn.mul(x, y), dim)


def multi_dot(tensors, *, out=None):
    """torch.linalg.multi_dot: the product of a chain of matrices (the first may be a row vector, the last a
    column vector), multiplied in the cheapest order as PyTorch chooses it, then viewed to the result's shape."""
    if out is not None:
        raise NotImplementedError("staticgrad's linalg.multi_dot does not support out=; assign the result instead")
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for t, which in ((tensors[0], "first"), (tensors[-1], "last")):
        if t.dim() not in (1, 2):
            raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {t.dim()}D")
    first_1d, last_1d = tensors[0].dim() == 1, tensors[-1].dim() == 1
    mats = list(tensors)
    if first_1d:
        mats[0] = fn.unsqueeze(mats[0], 0)
    if last_1d:
        mats[-1] = fn.unsqueeze(mats[-1], -1)
    for i, m in enumerate(mats):
        if m.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {tensors[i].dim()}D")
    out_shape = ([] if first_1d else [mats[0].shape[0]]) + ([] if last_1d else [mats[-1].shape[1]])
    return fn.view(_chain(mats), tuple(out_shape))


def _chain(mats):
    """The matrix chain product in the order of fewest multiplications (PyTorch's rule for three)."""
    if len(mats) == 2:
        return fn.mm(mats[0], mats[1])
    if len(mats) == 3:
        a, b = mats[0].shape
        c, d = mats[2].shape
        if (a * c) * (b + d) > (b * d) * (a + c):
            return fn.mm(mats[0], fn.mm(mats[1], mats[2]))
        return fn.mm(fn.mm(mats[0], mats[1]), mats[2])
    dims = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    n = len(mats)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return fn.mm(product(i, k), product(k + 1, j))

    return product(0, n - 1)


matrix_power = _composites.matrix_power
