"""More of torch.linalg on NumPy: the triangular solves (solve_triangular, triangular_solve,
cholesky_solve, cholesky_inverse), pinv, matrix_rank, lstsq and the _ex forms (cholesky_ex, inv_ex,
solve_ex), each with PyTorch's backward node; helpers shared with staticgrad.ops.linalg_decomp."""

from __future__ import annotations

import numpy as np

from staticgrad.errors import LinAlgError
from staticgrad.ops.linalg_decomp import (
    _backward_op,
    _cholesky,
    _into,
    _leading_minor,
    _needed,
    _solve,
    _t,
    _where,
    _zeros_for,
)
from staticgrad.ops.linalg_more import _first_zero_pivot
from staticgrad.ops.registry import OpDef, Save, register

# ---- triangular solves: substitution row by row (a zero on the diagonal gives inf/NaN, as LAPACK's trsm) --

def _substitute(a, b, upper, unitriangular=False):
    """X with A X = B for triangular A (only its ``upper`` or lower triangle read), batched and broadcast."""
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    b = np.broadcast_to(b, shape + b.shape[-2:])
    n = a.shape[-1]
    x = np.zeros(b.shape, np.result_type(a, b))
    rows = range(n - 1, -1, -1) if upper else range(n)
    for i in rows:
        done = slice(i + 1, n) if upper else slice(0, i)
        row = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, done], x[..., done, :])
        x[..., i, :] = row if unitriangular else row / a[..., i, i, None]
    return x


def _solve_triangular(a, b, out=None, upper=False, left=True, unitriangular=False):
    b = b.astype(a.dtype, copy=False)  # PyTorch solves in A's dtype
    if left:
        return _into(_substitute(a, b, upper, unitriangular), out)
    return _into(_t(_substitute(_t(a), _t(b), not upper, unitriangular)), out)


def _triangle(g, upper, unitriangular):
    """A gradient kept to the triangle the solve read (its strict part when the diagonal is taken as ones)."""
    k = 1 if unitriangular else 0
    return np.triu(g, k) if upper else np.tril(g, -k)


def _solve_triangular_backward(g, a, x, upper=False, left=True, unitriangular=False):
    """(grad A, grad B) of X = A^-1 B (left) or B A^-1, A's gradient on its triangle."""
    if left:
        gb = _substitute(_t(a), g, not upper, unitriangular)
        ga = np.negative(np.matmul(gb, _t(x)))
    else:
        gb = _t(_substitute(a, _t(g), upper, unitriangular))
        ga = np.negative(np.matmul(_t(x), gb))
    return _triangle(ga, upper, unitriangular), gb


_backward_op("linalg_solve_triangular_backward", _solve_triangular_backward,
             "LinalgSolveTriangularBackwardBackward0", "linalg.solve_triangular")
register(OpDef("linalg_solve_triangular", _solve_triangular, "other", "LinalgSolveTriangularBackward0",
               lambda F, g, s, at, need: _needed(F.linalg_solve_triangular_backward(
                   g, s["self"], s["result"], upper=at["upper"], left=at["left"],
                   unitriangular=at["unitriangular"]), need),
               (Save("self", 0), Save("result", "result")), "same"))


def _triangular_solve(b, a, out=None, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve's (solution, copy of A): A X = b, or A^T X = b when ``transpose``."""
    matrix = _t(a) if transpose else a
    return _substitute(matrix, b, upper != transpose, unitriangular), np.array(a)


def _triangular_solve_backward(g_x, g_copy, b, a, x, upper=True, transpose=False, unitriangular=False):
    """(grad b, grad A) of triangular_solve: the solve's adjoint, plus the copy's gradient as it is."""
    matrix = _t(a) if transpose else a
    upper_used = upper != transpose
    gb = _substitute(_t(matrix), g_x, not upper_used, unitriangular)
    gm = np.negative(np.matmul(gb, _t(x)))
    ga = _triangle(_t(gm) if transpose else gm, upper, unitriangular)
    return gb, ga + g_copy


def _triangular_solve_grad(F, g, s, at, need):
    x, a = s["solution"], s["A"]
    grads = F.triangular_solve_backward(_zeros_for(F, g[0], x), _zeros_for(F, g[1], a), s["self"], a, x,
                                        upper=at["upper"], transpose=at["transpose"],
                                        unitriangular=at["unitriangular"])
    return _needed(grads, need)


_backward_op("triangular_solve_backward", _triangular_solve_backward, "TriangularSolveBackwardBackward0",
             "triangular_solve")
register(OpDef("triangular_solve", _triangular_solve, "other", "TriangularSolveBackward0", _triangular_solve_grad,
               (Save("self", 0), Save("A", 1), Save("solution", "result:0")), "same"))


# ---- cholesky_solve: X with (L L^T) X = B, or (U^T U) X = B ---------------------------------------------

def _cholesky_solve(b, factor, out=None, upper=False):
    lower = _t(factor) if upper else factor
    y = _substitute(lower, b, False)
    return _into(_substitute(_t(lower), y, True), out)


def _cholesky_solve_backward(g, b, factor, x, upper=False):
    """(grad B, grad L): B's through the same solve; A = L L^T's gradient -gB X^T carried to L."""
    gb = _cholesky_solve(g, factor, upper=upper)
    ga = np.negative(np.matmul(gb, _t(x)))
    sym = ga + _t(ga)
    gl = np.matmul(factor, sym) if upper else np.matmul(sym, factor)
    return gb, gl


_backward_op("cholesky_solve_backward", _cholesky_solve_backward, "CholeskySolveBackwardBackward0", "cholesky_solve")
register(OpDef("cholesky_solve", _cholesky_solve, "other", "CholeskySolveBackward0",
               lambda F, g, s, at, need: _needed(F.cholesky_solve_backward(g, s["self"], s["input2"], s["result"],
                                                                           upper=at["upper"]), need),
               (Save("self", 0), Save("input2", 1), Save("result", "result")), "same"))


# ---- pinv and matrix_rank: singular values above max(atol, rtol * largest) count ------------------------

def _cutoff(s, atol, rtol, shape, dtype):
    """The threshold each matrix's singular values (or |eigenvalues|) must exceed, PyTorch's defaults:
    rtol = eps * max(m, n) unless atol > 0 is given alone."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else np.finfo(dtype).eps * max(shape[-2:])
    largest = s.max(axis=-1, initial=0.0)
    return np.maximum(0.0 if atol is None else atol, rtol * largest)[..., None]


def _spectrum(a, hermitian):
    """(U, values, Vh) with A = U diag(values) Vh; for a symmetric A from eigh (values may be negative)."""
    if hermitian:
        w, v = np.linalg.eigh(a)
        return v, w, _t(v)
    return np.linalg.svd(a, full_matrices=False)


def _pinv(a, out=None, atol=None, rtol=None, hermitian=False):
    u, s, vh = _spectrum(a, hermitian)
    keep = np.abs(s) > _cutoff(np.abs(s), atol, rtol, a.shape, a.dtype)
    with np.errstate(divide="ignore"):
        inverse = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(a.dtype)
    return _into(np.matmul(_t(vh) * inverse[..., None, :], _t(u)), out)


def _pinv_backward(g, a, x, out=None):
    """The gradient of X = A^+ at constant rank: -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)."""
    xt, gt = _t(x), _t(g)
    term = np.negative(np.matmul(xt, np.matmul(g, xt)))
    left = np.matmul(gt, np.matmul(x, xt))
    term = term + left - np.matmul(a, np.matmul(x, left))
    right = np.matmul(np.matmul(xt, x), gt)
    return _into(term + right - np.matmul(np.matmul(right, x), a), out)


_backward_op("linalg_pinv_backward", _pinv_backward, "LinalgPinvBackwardBackward0", "linalg.pinv")
register(OpDef("linalg_pinv", _pinv, "other", "LinalgPinvBackward0",
               lambda F, g, s, at, need: (F.linalg_pinv_backward(g, s["self"], s["result"]),),
               (Save("self", 0), Save("result", "result")), "same"))


def _matrix_rank(a, out=None, atol=None, rtol=None, hermitian=False):
    s = np.abs(np.linalg.eigvalsh(a) if hermitian else np.linalg.svd(a, compute_uv=False))
    return _into(np.count_nonzero(s > _cutoff(s, atol, rtol, a.shape, a.dtype), axis=-1).astype(np.int64), out)


register(OpDef("linalg_matrix_rank", _matrix_rank, "other", dtype_rule="index"))


# ---- linalg.lstsq: the least-squares (minimum-norm) solution from the SVD ---------------------------------

def _lstsq_pinv(a, rcond, driver):
    """A^+ and each matrix's rank, singular values at or under rcond * largest dropped ('gels' keeps all)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    if driver == "gels":
        keep = np.ones(s.shape, bool)
    else:
        if rcond is None:
            rcond = np.finfo(a.dtype).eps * max(a.shape[-2:])
        keep = s > rcond * s.max(axis=-1, initial=0.0)[..., None]
    with np.errstate(divide="ignore"):
        inverse = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(a.dtype)
    return np.matmul(_t(vh) * inverse[..., None, :], _t(u)), np.count_nonzero(keep, axis=-1)


def _lstsq_has_residuals(a, rank, driver) -> bool:
    """PyTorch fills residuals only for tall full-rank matrices, and not with the default 'gelsy'."""
    rows, cols = a.shape[-2:]
    return driver != "gelsy" and rows > cols and bool(np.all(rank == cols))


def _lstsq(a, b, out=None, rcond=None, driver="gelsy", vector=False):
    if vector:
        b = b[..., None]
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    b = np.broadcast_to(b, shape + b.shape[-2:])
    pinv, rank = _lstsq_pinv(a, rcond, driver)
    x = np.matmul(pinv, b)
    if _lstsq_has_residuals(a, rank, driver):
        residuals = np.square(np.matmul(a, x) - b).sum(axis=-2)
    else:
        residuals = np.zeros((0,), a.dtype)
    rank = np.zeros((0,), np.int64) if driver == "gels" else rank.astype(np.int64)
    return np.ascontiguousarray(x[..., 0] if vector else x), residuals, rank


def _lstsq_backward(g_x, g_res, a, b, x, rcond=None, driver="gelsy", vector=False):
    """(grad A, grad B): the solution's through A^+ (constant rank; as PyTorch, A^+ at the default tolerance
    whatever rcond cut), the residuals' (|A X - B|^2 at the optimum) as 2 (A X - B) g X^T and -2 (A X - B) g."""
    if vector:
        g_x, b, x = g_x[..., None], b[..., None], x[..., None]
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    b = np.broadcast_to(b, shape + b.shape[-2:])
    pinv, _ = _lstsq_pinv(a, None, "gelsd")
    ga = _pinv_backward(np.matmul(g_x, _t(b)), a, pinv)
    gb = np.matmul(_t(pinv), g_x)
    if g_res.size:
        weighted = 2 * (np.matmul(a, x) - b) * g_res[..., None, :]
        ga = ga + np.matmul(weighted, _t(x))
        gb = gb - weighted
    return ga, np.ascontiguousarray(gb[..., 0] if vector else gb)


def _lstsq_grad(F, g, s, at, need):
    x, residuals = s["solution"], s["residuals"]
    grads = F.linalg_lstsq_backward(_zeros_for(F, g[0], x), _zeros_for(F, g[1], residuals), s["self"], s["b"], x,
                                    rcond=at["rcond"], driver=at["driver"], vector=at["vector"])
    return _needed(grads, need)


def _lstsq_singular_values(a, out=None, driver="gelsy", batch=()):
    """lstsq's singular_values output: A's (over the batch it broadcasts to) for 'gelsd' and 'gelss', empty
    otherwise; no gradient."""
    if driver in ("gelsd", "gelss"):
        return _into(np.linalg.svd(np.broadcast_to(a, tuple(batch) + a.shape[-2:]), compute_uv=False), out)
    return _into(np.zeros((0,), a.dtype), out)


_backward_op("linalg_lstsq_backward", _lstsq_backward, "LinalgLstsqBackwardBackward0", "linalg.lstsq")
register(OpDef("linalg_lstsq", _lstsq, "other", "LinalgLstsqBackward0", _lstsq_grad,
               (Save("self", 0), Save("b", 1), Save("solution", "result:0"), Save("residuals", "result:1")),
               "same"))
register(OpDef("linalg_lstsq_singular_values", _lstsq_singular_values, "other", dtype_rule="same"))


# ---- cholesky_ex, inv_ex, solve_ex: the result and LAPACK's info (0, or the failing minor / zero pivot) --
# Where a matrix fails (and check_errors is off) PyTorch's result holds LAPACK's partial work, which no
# LAPACK build promises; staticgrad fills that matrix's result with NaN instead. info is PyTorch's.

def _each(batch, solve_one, failure, shape, dtype):
    """(result, info) matrix by matrix over ``batch``: NaNs and ``failure(index)`` where one fails."""
    result = np.empty(tuple(batch) + tuple(shape), dtype)
    info = np.zeros(batch, np.int32)
    for index in np.ndindex(*batch):
        try:
            result[index] = solve_one(index)
        except (LinAlgError, np.linalg.LinAlgError):
            result[index] = np.nan
            info[index] = failure(index)
    return result, info


def _cholesky_ex(a, out=None, upper=False, check_errors=False):
    try:
        return _cholesky(a, upper=upper, prefix="linalg.cholesky_ex"), np.zeros(a.shape[:-2], np.int32)
    except LinAlgError:
        if check_errors:
            raise
    return _each(a.shape[:-2], lambda i: _cholesky(a[i], upper=upper),
                 lambda i: _leading_minor(_t(a[i]) if upper else a[i]), a.shape[-2:], a.dtype)


def _inv_ex(a, out=None, check_errors=False):
    try:
        return np.ascontiguousarray(np.linalg.inv(a)), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        pass
    result, info = _each(a.shape[:-2], lambda i: np.linalg.inv(a[i]), lambda i: _first_zero_pivot(a[i]),
                         a.shape[-2:], a.dtype)
    if check_errors:
        batch = int(np.flatnonzero(info)[0])
        raise LinAlgError(f"linalg.inv_ex: {_where(batch if a.ndim > 2 else None)}The diagonal element "
                          f"{int(info.reshape(-1)[batch])} is zero, the inversion could not be completed because "
                          "the input matrix is singular.")
    return result, info


def _solve_ex(a, b, out=None, left=True, vector=False, check_errors=False):
    prefix = "staticgrad.linalg.solve_ex"
    try:
        x = _solve(a, b, left=left, vector=vector, prefix=prefix)
        return x, np.zeros(a.shape[:-2], np.int32)  # info follows A's batch, not the broadcast one
    except LinAlgError:
        if check_errors:
            raise
    info = np.array([_first_zero_pivot(m) for m in a.reshape((-1,) + a.shape[-2:])], np.int32)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-1 if vector else -2])
    wide_a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[len(b.shape) - (1 if vector else 2):])
    result, _ = _each(batch, lambda i: _solve(wide_a[i], b[i], left=left, vector=vector), lambda i: 0,
                      b.shape[len(batch):], a.dtype)
    return result, info.reshape(a.shape[:-2])


def _first_output(backward):
    """An _ex op's backward: the plain op's, on the result's gradient (info has none)."""
    return lambda F, g, s, at, need: backward(F, g[0], s, at, need)


register(OpDef("linalg_cholesky_ex", _cholesky_ex, "other", "LinalgCholeskyExBackward0",
               _first_output(lambda F, g, s, at, need: (F.linalg_cholesky_backward(g, s["L"], upper=at["upper"]),)),
               (Save("L", "result:0"),), "same"))
register(OpDef("linalg_inv_ex", _inv_ex, "other", "LinalgInvExBackward0",
               _first_output(lambda F, g, s, at, need: (F.linalg_inv_backward(g, s["inverse"]),)),
               (Save("inverse", "result:0"),), "same"))
register(OpDef("linalg_solve_ex", _solve_ex, "other", "LinalgSolveExBackward0",
               _first_output(lambda F, g, s, at, need: _needed(F.linalg_solve_backward(
                   g, s["A"], s["result"], left=at["left"], vector=at["vector"]), need)),
               (Save("A", 0), Save("result", "result:0")), "same"))


# ---- cholesky_inverse: (L L^T)^-1 (or (U^T U)^-1) from the factor -----------------------------------------

def _cholesky_inverse(factor, out=None, upper=False):
    lower = _t(factor) if upper else factor
    diagonal = np.einsum("...ii->...i", lower)
    if not np.all(diagonal):
        batch = int(np.flatnonzero(~np.all(diagonal.reshape(-1, diagonal.shape[-1]), axis=-1))[0])
        k = int(np.flatnonzero(diagonal.reshape(-1, diagonal.shape[-1])[batch] == 0)[0]) + 1
        raise LinAlgError(f"cholesky_inverse: {_where(batch if factor.ndim > 2 else None)}The diagonal element {k} "
                          "is zero, the inversion could not be completed because the input matrix is singular.")
    eye = np.broadcast_to(np.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    return _into(_cholesky_solve(eye, factor, upper=upper), out)


def _cholesky_inverse_backward(g, factor, x, out=None, upper=False):
    """X = (L L^T)^-1: A's gradient -X G X (X symmetric), carried to the factor as for cholesky_solve."""
    ga = np.negative(np.matmul(_t(x), np.matmul(g, _t(x))))
    sym = ga + _t(ga)
    return _into(np.matmul(factor, sym) if upper else np.matmul(sym, factor), out)


_backward_op("cholesky_inverse_backward", _cholesky_inverse_backward, "CholeskyInverseBackwardBackward0",
             "cholesky_inverse")
register(OpDef("cholesky_inverse", _cholesky_inverse, "other", "CholeskyInverseBackward0",
               lambda F, g, s, at, need: (F.cholesky_inverse_backward(g, s["self"], s["result"], upper=at["upper"]),),
               (Save("self", 0), Save("result", "result")), "same"))
