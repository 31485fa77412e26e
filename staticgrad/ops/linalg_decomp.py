"""Matrix solves and decompositions on NumPy's LAPACK: linalg.solve, cholesky, slogdet, qr, eigh, svd,
pinv, solve_triangular and cholesky_solve, each with PyTorch's backward node.

Each backward is one op here that computes the input gradients in NumPy from the saved factors; its own
backward (a second derivative) is not built and raises. Missing output gradients come in as zeros.
"""

from __future__ import annotations

import numpy as np

from staticgrad.errors import LinAlgError
from staticgrad.ops.linalg_more import _first_zero_pivot
from staticgrad.ops.registry import OpDef, Save, register


def _into(result, out):
    if out is None:
        result = np.asarray(result)
        return result if result.flags.c_contiguous else np.ascontiguousarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def _t(a):
    return np.swapaxes(a, -1, -2)


def _where(a) -> str:
    """PyTorch's "(Batch element b): " prefix for the first failing matrix of a batch."""
    return "" if a is None else f"(Batch element {a}): "


def _failing_batch(a, check) -> int | None:
    """The index of the first matrix of a batch ``a`` for which ``check`` raises LinAlgError."""
    if a.ndim == 2:
        return None
    for b, matrix in enumerate(a.reshape((-1,) + a.shape[-2:])):
        try:
            check(matrix)
        except np.linalg.LinAlgError:
            return b
    return None


def _no_double_backward(name: str):
    def backward(F, g, s, at, need):
        raise NotImplementedError(f"staticgrad does not differentiate the gradient of {name} (double backward); "
                                  f"keep {name} out of graphs that need second derivatives")
    return backward


def _zeros_for(F, g, like):
    """An output's gradient, zeros when the loss did not use that output."""
    return F.zeros_like(like) if g is None else g


def _needed(grads, need):
    return tuple(g if n else None for g, n in zip(grads, need))


def _backward_op(name: str, forward, node_name: str, public: str) -> None:
    register(OpDef(name, forward, "other", node_name, _no_double_backward(public), dtype_rule="same"))


# ---- linalg.solve: X with A X = B (left) or X A = B; B's last dim is the columns ------------------------

def _solve(a, b, out=None, left=True, vector=False, prefix="staticgrad.linalg.solve"):
    """``vector``: b holds (a batch of) vectors, solved as columns."""
    if vector:
        return _into(_solve(a, b[..., None], left=left, prefix=prefix)[..., 0], out)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    if left:
        b = np.broadcast_to(b, shape + b.shape[-2:])
    else:
        a, b = _t(a), _t(np.broadcast_to(b, shape + b.shape[-2:]))
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        batch = _failing_batch(a, np.linalg.inv)
        raise LinAlgError(f"{prefix}: {_where(batch)}The solver failed because the input matrix is "
                          "singular.") from None
    return _into(x if left else _t(x), out)


def _solve_backward(g, a, x, left=True, vector=False):
    """(grad A, grad B) of X = A^-1 B (left) or X = B A^-1."""
    if vector:
        ga, gb = _solve_backward(g[..., None], a, x[..., None], left)
        return ga, np.ascontiguousarray(gb[..., 0])
    if left:
        gb = np.linalg.solve(_t(a), g)
        return np.negative(np.matmul(gb, _t(x))), gb
    gb = _t(np.linalg.solve(a, _t(g)))
    return np.negative(np.matmul(_t(x), gb)), gb


_backward_op("linalg_solve_backward", _solve_backward, "LinalgSolveExBackwardBackward0", "linalg.solve")
register(OpDef("linalg_solve", _solve, "other", "LinalgSolveExBackward0",
               lambda F, g, s, at, need: _needed(F.linalg_solve_backward(g, s["A"], s["result"], left=at["left"],
                                                                          vector=at["vector"]),
                                                 need),
               (Save("A", 0), Save("result", "result")), "same"))


# ---- linalg.cholesky: L with A = L L^T (or U^T U), read from A's lower (upper) triangle ------------------

def _leading_minor(matrix) -> int:
    """The order of the first leading minor that is not positive-definite (Cholesky's failing pivot): once
    one fails every larger one does, so a binary search needs log2(n) factorizations."""
    lower = np.tril(matrix.astype(np.float64))

    def factors(k):
        try:
            np.linalg.cholesky(lower[:k, :k])
            return True
        except np.linalg.LinAlgError:
            return False

    good, bad = 0, matrix.shape[0]  # minor ``good`` factors (0: trivially), minor ``bad`` does not
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if factors(middle) else (good, middle)
    return bad


def _cholesky(a, out=None, upper=False, prefix="linalg.cholesky"):
    lower = _t(a) if upper else a
    try:
        factor = np.linalg.cholesky(lower)
    except np.linalg.LinAlgError:
        stack = lower.reshape((-1,) + lower.shape[-2:])
        batch = _failing_batch(lower, np.linalg.cholesky)
        order = _leading_minor(stack[batch or 0])
        raise LinAlgError(f"{prefix}: {_where(batch)}The factorization could not be completed because the "
                          f"input is not positive-definite (the leading minor of order {order} is not "
                          "positive-definite).") from None
    return _into(_t(factor) if upper else factor, out)


def _cholesky_backward(g, factor, out=None, upper=False):
    """A's gradient from L's: L^-T sym(tril-with-half-diagonal(L^T gL)) L^-1, made symmetric."""
    if upper:
        factor, g = _t(factor), _t(g)
    phi = np.tril(np.matmul(_t(factor), g))
    diag = np.einsum("...ii->...i", phi)
    diag *= 0.5
    eye = np.broadcast_to(np.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    inv = np.linalg.solve(factor, eye)
    grad = np.matmul(_t(inv), np.matmul(phi, inv))
    return _into(0.5 * (grad + _t(grad)), out)


_backward_op("linalg_cholesky_backward", _cholesky_backward, "LinalgCholeskyExBackwardBackward0", "linalg.cholesky")
register(OpDef("linalg_cholesky", _cholesky, "other", "LinalgCholeskyExBackward0",
               lambda F, g, s, at, need: (F.linalg_cholesky_backward(g, s["L"], upper=at["upper"]),),
               (Save("L", "result"),), "same"))
register(OpDef("cholesky", lambda a, out=None, upper=False: _cholesky(a, out, upper, "cholesky"), "other",
               "CholeskyBackward0", lambda F, g, s, at, need: (F.linalg_cholesky_backward(g, s["result"],
                                                                                           upper=at["upper"]),),
               (Save("result", "result"),), "same"))


# ---- linalg.slogdet: (sign, log |det|); only logabsdet has a gradient ------------------------------------

def _slogdet(a, out=None):
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)


def _slogdet_backward(g_logabs, a, out=None):
    """g * A^-T, the gradient of log |det A|."""
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise RuntimeError("staticgrad cannot differentiate linalg.slogdet at a singular matrix (log |det| is -inf "
                         "there; PyTorch returns inf and NaN gradients): keep the matrix away from singular") from None
    return _into(g_logabs[..., None, None] * _t(inverse), out)


_backward_op("linalg_slogdet_backward", _slogdet_backward, "LinalgSlogdetBackwardBackward0", "linalg.slogdet")
register(OpDef("linalg_slogdet", _slogdet, "other", "LinalgSlogdetBackward0",
               lambda F, g, s, at, need: (None if g[1] is None else F.linalg_slogdet_backward(g[1], s["A"]),),
               (Save("A", 0),), "same"))


# ---- linalg.qr: Householder QR (LAPACK geqrf/orgqr, as PyTorch) ------------------------------------------

def _qr(a, out=None, mode="reduced"):
    if mode == "r":
        return np.zeros((0,), a.dtype), np.ascontiguousarray(np.linalg.qr(a, mode="r"))
    q, r = np.linalg.qr(a, mode=mode)
    return np.ascontiguousarray(q), np.ascontiguousarray(r)


def _qr_square_backward(gq, gr, q, r):
    """A = Q R with R square (rows >= cols): (gQ + Q copyu(gR R^T - Q^T gQ)) R^-T, where copyu makes the
    symmetric matrix of a matrix's upper triangle."""
    m = np.matmul(gr, _t(r)) - np.matmul(_t(q), gq)
    upper = np.triu(m)
    sym = upper + _t(np.triu(m, 1))
    b = gq + np.matmul(q, sym)
    return _t(np.linalg.solve(r, _t(b)))  # b R^-T


def _qr_backward(gq, gr, q, r, out=None, mode="reduced"):
    rows, cols = q.shape[-2], r.shape[-1]
    if rows >= cols:
        return _into(_qr_square_backward(gq[..., :cols], gr[..., :cols, :], q[..., :cols], r[..., :cols, :]), out)
    # rows < cols: A = [X | Y] with X = Q R1 square; R2 = Q^T Y adds Y gR2^T to Q's gradient
    r1, r2, gr1, gr2 = r[..., :rows], r[..., rows:], gr[..., :rows], gr[..., rows:]
    y = np.matmul(q, r2)
    gx = _qr_square_backward(gq + np.matmul(y, _t(gr2)), gr1, q, r1)
    return _into(np.concatenate([gx, np.matmul(q, gr2)], axis=-1), out)


def _qr_grad(F, g, s, at, need):
    mode = at["mode"]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    q, r = s["Q"], s["R"]
    if mode == "complete" and q.shape[-2] > r.shape[-1]:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    return (F.linalg_qr_backward(_zeros_for(F, g[0], q), _zeros_for(F, g[1], r), q, r, mode=mode),)


_backward_op("linalg_qr_backward", _qr_backward, "LinalgQrBackwardBackward0", "linalg.qr")
register(OpDef("linalg_qr", _qr, "other", "LinalgQrBackward0", _qr_grad,
               (Save("Q", "result:0"), Save("R", "result:1"), Save("mode", "attr:mode", freed=False)), "same"))


# ---- linalg.eigh: eigenvalues (ascending) and eigenvectors of a symmetric matrix -------------------------

def _eigh(a, out=None, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return np.ascontiguousarray(w), np.ascontiguousarray(v)


def _eigh_backward(gw, gv, w, v, out=None):
    """V (diag(gw) + (V^T gV) / (w_j - w_i) off the diagonal) V^T, made symmetric (A is taken as symmetric,
    whichever triangle was read)."""
    gap = w[..., None, :] - w[..., :, None]
    n = w.shape[-1]
    off = ~np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = np.where(off, np.matmul(_t(v), gv) / np.where(off, gap, 1), 0)
    inner = inner + np.einsum("...i,ij->...ij", gw, np.eye(n, dtype=w.dtype))
    grad = np.matmul(v, np.matmul(inner, _t(v)))
    return _into((0.5 * (grad + _t(grad))).astype(w.dtype, copy=False), out)


_backward_op("linalg_eigh_backward", _eigh_backward, "LinalgEighBackwardBackward0", "linalg.eigh")
register(OpDef("linalg_eigh", _eigh, "other", "LinalgEighBackward0",
               lambda F, g, s, at, need: (F.linalg_eigh_backward(_zeros_for(F, g[0], s["eigenvalues"]),
                                                                 _zeros_for(F, g[1], s["eigenvectors"]),
                                                                 s["eigenvalues"], s["eigenvectors"]),),
               (Save("eigenvalues", "result:0"), Save("eigenvectors", "result:1")), "same"))


# ---- linalg.svd: A = U diag(S) Vh -----------------------------------------------------------------------

def _svd(a, out=None, full_matrices=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return np.ascontiguousarray(u), np.ascontiguousarray(s), np.ascontiguousarray(vh)


def _svd_backward(gu, gs, gvh, u, s, vh, out=None):
    """The gradient of the thin SVD (full factors are cut to their first min(m, n) vectors, whose gradient
    alone reaches A)."""
    k = s.shape[-1]
    u, gu, vh, gvh = u[..., :k], gu[..., :k], vh[..., :k, :], gvh[..., :k, :]
    v, gv = _t(vh), _t(gvh)
    eye = np.eye(k, dtype=s.dtype)
    off = ~np.eye(k, dtype=bool)
    s2 = s * s
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(off, 1 / np.where(off, s2[..., None, :] - s2[..., :, None], 1), 0)
    utgu = np.matmul(_t(u), gu)
    vtgv = np.matmul(_t(v), gv)
    inner = (f * (utgu - _t(utgu))) * s[..., None, :] + s[..., :, None] * (f * (vtgv - _t(vtgv)))
    inner = inner + gs[..., :, None] * eye
    grad = np.matmul(u, np.matmul(inner, vh))
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_s = 1 / s
    m, n = u.shape[-2], v.shape[-2]
    if m > k:
        grad = grad + np.matmul(gu - np.matmul(u, utgu), inv_s[..., :, None] * vh)
    if n > k:
        grad = grad + np.matmul(u * inv_s[..., None, :], _t(gv - np.matmul(v, vtgv)))
    return _into(grad.astype(s.dtype, copy=False), out)


_backward_op("linalg_svd_backward", _svd_backward, "LinalgSvdBackwardBackward0", "linalg.svd")
def _svd_grad(F, g, s, at, need):
    u, sv, vh = s["U"], s["S"], s["Vh"]
    return (F.linalg_svd_backward(_zeros_for(F, g[0], u), _zeros_for(F, g[1], sv), _zeros_for(F, g[2], vh), u, sv,
                                  vh),)


register(OpDef("linalg_svd", _svd, "other", "LinalgSvdBackward0", _svd_grad,
               (Save("U", "result:0"), Save("S", "result:1"), Save("Vh", "result:2")), "same"))


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
