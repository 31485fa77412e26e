"""Matrix solves and decompositions on NumPy's LAPACK: linalg.solve, cholesky, slogdet, qr, eigh and svd,
each with PyTorch's backward node (the triangular solves, pinv, lstsq and the _ex forms: linalg_solvers).

Each backward is one op here that computes the input gradients in NumPy from the saved factors; its own
backward (a second derivative) is not built and raises. Missing output gradients come in as zeros.
"""

from __future__ import annotations

import numpy as np

from staticgrad.errors import LinAlgError
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
