"""torch.linalg: cross (staticgrad._eager.linalg_more) and the vector norms: vector_norm, norm (a vector
norm over one dim or all elements, the Frobenius norm over two dims) and matrix_norm("fro"); every norm
is LinalgVectorNormBackward0. Norms that need a matrix decomposition (ord 2, "nuc", ...) are not built
and say so."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.linalg_more import linalg_cross as cross  # noqa: F401  (torch.linalg.cross)
from staticgrad._eager.linalg_more import linalg_det as det  # noqa: F401  (torch.linalg.det)
from staticgrad._eager.linalg_more import linalg_inv as inv  # noqa: F401  (torch.linalg.inv)
from staticgrad._eager.math_functions import norm as _vector_norm
from staticgrad.errors import LinAlgError  # noqa: F401  (torch.linalg.LinAlgError)


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """The ord-norm of x's elements over ``dim`` (all of them when None)."""
    return _vector_norm(x, ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The Frobenius norm over the two ``dim`` (other matrix norms need decompositions: not built)."""
    if ord != "fro":
        raise NotImplementedError(f"staticgrad's linalg.matrix_norm supports ord='fro' only (got ord={ord!r}): "
                                  "the other matrix norms need an SVD or eigenvalues, which staticgrad does not have")
    fn.require_tensor(A, "linalg.matrix_norm")
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    return _vector_norm(A, 2.0, tuple(dim), keepdim, dtype=dtype)


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
