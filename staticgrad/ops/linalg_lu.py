"""LU with partial pivoting on NumPy (LAPACK getrf's pivot rule, written out): linalg.lu_factor, lu and
lu_solve with PyTorch's nodes. Gradients are built for square matrices."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.linalg_decomp import _backward_op, _into, _needed, _t, _zeros_for
from staticgrad.ops.linalg_solvers import _substitute
from staticgrad.ops.registry import OpDef, Save, register


def _lu_packed(a):
    """getrf's packed LU (unit L below the diagonal, U on and above) and 1-based int32 pivots: each column's
    pivot is its first largest |entry| at or below the diagonal; a zero pivot leaves its column unscaled."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu = np.array(a, dtype=a.dtype, order="C")
    pivots = np.zeros(a.shape[:-2] + (k,), np.int32)
    count = int(np.prod(a.shape[:-2]))
    flat, piv = lu.reshape((count, m, n)), pivots.reshape((count, k))
    rows = np.arange(flat.shape[0])
    for j in range(k):
        p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        swapped = flat[rows, p].copy()
        flat[rows, p] = flat[:, j]
        flat[:, j] = swapped
        pivot = flat[:, j, j]
        safe = np.where(pivot == 0, np.ones((), a.dtype), pivot)
        flat[:, j + 1:, j] /= safe[:, None]
        flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j, None] * flat[:, j, None, j + 1:]
    return lu, pivots


def _permutation(pivots, m):
    """perm with (L U) = A[perm]: the row swaps of ``pivots`` applied in order to 0..m-1."""
    perm = np.broadcast_to(np.arange(m), pivots.shape[:-1] + (m,)).copy()
    count = int(np.prod(pivots.shape[:-1]))
    flat, piv = perm.reshape((count, m)), pivots.reshape((count, pivots.shape[-1]))
    rows = np.arange(flat.shape[0])
    for j in range(piv.shape[-1]):
        p = piv[:, j] - 1
        swapped = flat[rows, p].copy()
        flat[rows, p] = flat[:, j]
        flat[:, j] = swapped
    return perm


def _unpack(lu):
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    return lower, np.triu(lu[..., :k, :])


def _gather_rows(b, perm):
    return np.take_along_axis(b, perm[..., None], axis=-2)


def _scatter_rows(b, perm):
    out = np.empty_like(b)
    np.put_along_axis(out, perm[..., None], b, axis=-2)
    return out


def _square_only(name: str, shape) -> None:
    if shape[-1] != shape[-2]:
        raise NotImplementedError(f"staticgrad differentiates {name} of square matrices only (got "
                                  f"{shape[-2]}x{shape[-1]})")


def _lu_grad_a(gl, gu, lower, upper, perm):
    """A = P L U: A's gradient P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T."""
    m = np.tril(np.matmul(_t(lower), gl), -1) + np.triu(np.matmul(gu, _t(upper)))
    right = _t(_substitute(upper, _t(m), True))           # M U^-T
    left = _substitute(_t(lower), right, True, True)      # L^-T M U^-T
    return _scatter_rows(left, perm)


# ---- lu_factor --------------------------------------------------------------------------------------

def _lu_factor(a, out=None):
    return _lu_packed(a)


def _lu_factor_backward(g, lu, pivots, out=None):
    lower, upper = _unpack(lu)
    perm = _permutation(pivots, lu.shape[-2])
    return _into(_lu_grad_a(np.tril(g, -1), np.triu(g), lower, upper, perm), out)


def _lu_factor_grad(F, g, s, at, need):
    _square_only("linalg.lu_factor", s["LU"].shape)
    return (F.linalg_lu_factor_backward(g[0], s["LU"], s["pivots"]),)


_backward_op("linalg_lu_factor_backward", _lu_factor_backward, "LinalgLuFactorExBackwardBackward0", "linalg.lu_factor")
register(OpDef("linalg_lu_factor", _lu_factor, "other", "LinalgLuFactorExBackward0", _lu_factor_grad,
               (Save("LU", "result:0"), Save("pivots", "result:1")), "same"))


# ---- lu: P, L, U (P carries no gradient: a separate op) ----------------------------------------------

def _lu(a, out=None):
    lu, pivots = _lu_packed(a)
    lower, upper = _unpack(lu)
    return np.ascontiguousarray(lower), np.ascontiguousarray(upper), pivots


def _lu_backward(gl, gu, lower, upper, pivots, out=None):
    return _into(_lu_grad_a(gl, gu, lower, upper, _permutation(pivots, lower.shape[-2])), out)


def _lu_grad(F, g, s, at, need):
    lower, upper = s["L"], s["U"]
    _square_only("linalg.lu", (lower.shape[-2], upper.shape[-1]))
    return (F.linalg_lu_backward(_zeros_for(F, g[0], lower), _zeros_for(F, g[1], upper), lower, upper,
                                 s["pivots"]),)


def _permutation_matrix(pivots, out=None, m=0, dtype=None):
    """The P of A = P L U from getrf's pivots."""
    perm = _permutation(pivots, m)
    p = np.zeros(perm.shape + (m,), dtype)
    np.put_along_axis(p, perm[..., None], 1, axis=-1)
    return _into(_t(p), out)


_backward_op("linalg_lu_backward", _lu_backward, "LinalgLuBackwardBackward0", "linalg.lu")
register(OpDef("linalg_lu", _lu, "other", "LinalgLuBackward0", _lu_grad,
               (Save("L", "result:0"), Save("U", "result:1"), Save("pivots", "result:2")), "same"))
register(OpDef("lu_permutation_matrix", _permutation_matrix, "other", dtype_rule="attr"))


# ---- lu_solve ---------------------------------------------------------------------------------------

def _solve_with(lu, pivots, b, transposed):
    """A^-1 b, or A^-T b when ``transposed``, from the packed factors (b batched like LU)."""
    lower, upper = _unpack(lu)
    perm = _permutation(pivots, lu.shape[-2])
    if not transposed:
        y = _substitute(lower, _gather_rows(b, perm), False, True)
        return _substitute(upper, y, True)
    y = _substitute(_t(upper), b, False)
    return _scatter_rows(_substitute(_t(lower), y, True, True), perm)


def _broadcast(lu, pivots, b):
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    return (np.broadcast_to(lu, batch + lu.shape[-2:]), np.broadcast_to(pivots, batch + pivots.shape[-1:]),
            np.broadcast_to(b, batch + b.shape[-2:]))


def _lu_solve(lu, pivots, b, out=None, left=True, adjoint=False):
    lu, pivots, b = _broadcast(lu, pivots, b)
    if left:
        return _into(_solve_with(lu, pivots, b, adjoint), out)
    return _into(_t(_solve_with(lu, pivots, _t(b), not adjoint)), out)


def _lu_solve_backward(g, lu, pivots, b, x, left=True, adjoint=False):
    """(grad LU, None, grad B): B's through the adjoint solve; A's (-gB X^T for A X = B, and its
    transposes / right-hand forms) carried to L and U of A = P L U."""
    lu, pivots, b = _broadcast(lu, pivots, b)
    if left:
        gb = _solve_with(lu, pivots, g, not adjoint)
        ga = -np.matmul(x, _t(gb)) if adjoint else -np.matmul(gb, _t(x))
    else:
        gb = _t(_solve_with(lu, pivots, _t(g), adjoint))
        ga = -np.matmul(_t(gb), x) if adjoint else -np.matmul(_t(x), gb)
    lower, upper = _unpack(lu)
    pa = _gather_rows(ga, _permutation(pivots, lu.shape[-2]))   # P^T gA
    glu = np.tril(np.matmul(pa, _t(upper)), -1) + np.triu(np.matmul(_t(lower), pa))
    return glu, gb


def _lu_solve_grad(F, g, s, at, need):
    _square_only("linalg.lu_solve", s["LU"].shape)
    glu, gb = F.linalg_lu_solve_backward(g, s["LU"], s["pivots"], s["B"], s["result"], left=at["left"],
                                         adjoint=at["adjoint"])
    return _needed((glu, None, gb), need)


_backward_op("linalg_lu_solve_backward", _lu_solve_backward, "LinalgLuSolveBackwardBackward0", "linalg.lu_solve")
register(OpDef("linalg_lu_solve", _lu_solve, "other", "LinalgLuSolveBackward0", _lu_solve_grad,
               (Save("LU", 0), Save("pivots", 1), Save("B", 2), Save("result", "result")), "same",
               grad_inputs=(0, 2)))
