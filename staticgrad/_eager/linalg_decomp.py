"""torch.linalg's solves and decompositions over the op table (staticgrad.ops.linalg_decomp): PyTorch's
signatures, argument checks, errors and named results, and the torch.* and Tensor forms (slogdet, logdet,
svd, cholesky_solve, triangular_solve)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS

CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
LuFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LuResult = namedtuple("linalg_lu", ["P", "L", "U"])
SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
TorchSlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
QrResult = namedtuple("linalg_qr", ["Q", "R"])
TorchQrResult = namedtuple("qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SvdResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
TorchSvdResult = namedtuple("svd", ["U", "S", "V"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _no_out(out, name: str) -> None:
    if out is not None:
        raise NotImplementedError(f"staticgrad's {name} does not support out=; assign the result instead")


def _half(A) -> bool:
    return A._data.dtype == np.float16


def _matrices(A, name: str, square: bool = True, arg: str = "A", kernel: str | None = None) -> None:
    """PyTorch's checks on a linalg input: a float tensor of (batches of) matrices, square if asked;
    ``kernel``: the LAPACK kernel PyTorch names when it has no half-precision form (else its own message)."""
    fn.require_tensor(A, name)
    if A._data.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    rows, cols = A._data.shape[-2:]
    if square and rows != cols:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {rows} by {cols} matrices")
    if A._data.dtype.kind != "f":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {fn._scalar_type(A)}")
    if _half(A):
        if kernel is None:
            raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {fn._scalar_type(A)}")
        raise NotImplementedError(f'"{kernel}_cpu" not implemented for \'{fn._scalar_type(A)}\'')


def _same_dtype(A, B, name: str) -> None:
    if A._data.dtype != B._data.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of type "
                           f"{fn._scalar_type(A)} and B of type {fn._scalar_type(B)} instead")


# ---- solve ------------------------------------------------------------------------------------------

def _solve_args(A, B, left) -> bool:
    """linalg.solve's checks; whether B is a (batch of) vector(s): one dim, or one dim fewer than A with A's
    leading shape."""
    _matrices(A, "linalg.solve", kernel="lu")
    fn.require_tensor(B, "linalg.solve", "B", 2)
    _same_dtype(A, B, "linalg.solve")
    n = A._data.shape[-1]
    vector = B._data.ndim == 1 or (B._data.ndim == A._data.ndim - 1 and B.shape == A.shape[:-1])
    b_shape = (B._data.shape[-1] if vector else B._data.shape[-2], 1 if vector else B._data.shape[-1])
    _check_b_size("linalg.solve", n, *b_shape, left)
    return vector


def _check_b_size(name: str, n: int, rows: int, cols: int, left: bool) -> None:
    """PyTorch's error when B's rows (AX = B) or columns (XA = B) are not A's size n."""
    if (rows if left else cols) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and {rows}x{cols})")


def _b_matrix(B, name: str) -> None:
    if B._data.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")


def solve(A, B, *, left=True, out=None):
    """torch.linalg.solve: X with A X = B (X A = B when left=False), batched and broadcast; B is a (batch
    of) vector(s) when it has one dim, or one dim fewer than A with A's leading shape."""
    _no_out(out, "linalg.solve")
    vector = _solve_args(A, B, left)
    return dispatch(OPS["linalg_solve"], (A, B), {"left": bool(left), "vector": vector})


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """torch.linalg.solve_ex: (result, info), info the first zero pivot of each matrix's LU (0 if none). A
    singular matrix's result is NaN here (PyTorch leaves LAPACK's partial work)."""
    _no_out(out, "linalg.solve_ex")
    vector = _solve_args(A, B, left)
    return SolveExResult(*dispatch(OPS["linalg_solve_ex"], (A, B), {"left": bool(left), "vector": vector,
                                                                    "check_errors": bool(check_errors)}))


def inv_ex(A, *, check_errors=False, out=None):
    """torch.linalg.inv_ex: (inverse, info), info the first zero pivot of each matrix's LU (0 if none). A
    singular matrix's inverse is NaN here (PyTorch leaves LAPACK's partial work)."""
    _no_out(out, "linalg.inv_ex")
    _matrices(A, "linalg.inv", kernel="lu")
    return InvExResult(*dispatch(OPS["linalg_inv_ex"], (A,), {"check_errors": bool(check_errors)}))


# ---- cholesky ---------------------------------------------------------------------------------------

def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """torch.linalg.cholesky_ex: (L, info), info the order of the first leading minor that is not
    positive-definite (0 if none). Such a matrix's L is NaN here (PyTorch leaves LAPACK's partial work)."""
    _no_out(out, "linalg.cholesky_ex")
    _matrices(A, "linalg.cholesky", kernel="cholesky")
    return CholeskyExResult(*dispatch(OPS["linalg_cholesky_ex"], (A,), {"upper": bool(upper),
                                                                        "check_errors": bool(check_errors)}))


def cholesky(A, *, upper=False, out=None):
    """torch.linalg.cholesky: L with A = L L^T from A's lower triangle (U with A = U^T U from the upper one
    when upper=True); a matrix that is not positive-definite raises LinAlgError naming the minor."""
    _no_out(out, "linalg.cholesky")
    _matrices(A, "linalg.cholesky", kernel="cholesky")
    return dispatch(OPS["linalg_cholesky"], (A,), {"upper": bool(upper)})


# ---- slogdet, logdet --------------------------------------------------------------------------------

def slogdet(A, *, out=None):
    """torch.linalg.slogdet: (sign, log |det|) of each square matrix (LinalgSlogdetBackward0)."""
    _no_out(out, "linalg.slogdet")
    _matrices(A, "linalg.slogdet")
    return SlogdetResult(*dispatch(OPS["linalg_slogdet"], (A,), {}))


def torch_slogdet(input, *, out=None):
    """torch.slogdet: linalg.slogdet under its older name."""
    return TorchSlogdetResult(*slogdet(input, out=out))


def logdet(input):
    """torch.logdet: log det, NaN where the determinant is negative (a where over slogdet, as PyTorch)."""
    _matrices(input, "logdet")
    sign, logabsdet = slogdet(input)
    return fn.where(fn.eq(sign, -1), float("nan"), logabsdet)


# ---- qr ---------------------------------------------------------------------------------------------

def qr(A, mode="reduced", *, out=None):
    """torch.linalg.qr: Q and R with A = Q R; mode 'reduced' (k = min(m, n) columns of Q), 'complete' (all
    m) or 'r' (R only, Q empty)."""
    _no_out(out, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    _matrices(A, "linalg.qr", square=False, kernel="geqrf")
    return QrResult(*dispatch(OPS["linalg_qr"], (A,), {"mode": mode}))


# ---- eigh, eigvalsh ---------------------------------------------------------------------------------

def _uplo(UPLO) -> str:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO


def eigh(A, UPLO="L", *, out=None):
    """torch.linalg.eigh: eigenvalues (ascending) and orthonormal eigenvectors of each symmetric matrix,
    read from its lower (UPLO='L') or upper triangle."""
    _no_out(out, "linalg.eigh")
    _matrices(A, "linalg.eigh", kernel="linalg_eigh")
    return EighResult(*dispatch(OPS["linalg_eigh"], (A,), {"UPLO": _uplo(UPLO)}))


def eigvalsh(A, UPLO="L", *, out=None):
    """torch.linalg.eigvalsh: eigh's eigenvalues (the same LinalgEighBackward0 node)."""
    _no_out(out, "linalg.eigvalsh")
    _matrices(A, "linalg.eigh", kernel="linalg_eigh")
    return dispatch(OPS["linalg_eigh"], (A,), {"UPLO": _uplo(UPLO)})[0]


# ---- svd, svdvals, torch.svd ------------------------------------------------------------------------

def svd(A, full_matrices=True, *, driver=None, out=None):
    """torch.linalg.svd: U, S (descending), Vh with A = U diag(S) Vh; full_matrices=False keeps k = min(m, n)
    singular vectors. ``driver`` is for CUDA only, as in PyTorch."""
    _no_out(out, "linalg.svd")
    if driver is not None:
        raise RuntimeError("staticgrad.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    _matrices(A, "linalg.svd", square=False, kernel="linalg_svd")
    return SvdResult(*dispatch(OPS["linalg_svd"], (A,), {"full_matrices": bool(full_matrices)}))


def svdvals(A, *, driver=None, out=None):
    """torch.linalg.svdvals: the singular values, descending (the same LinalgSvdBackward0 node)."""
    _no_out(out, "linalg.svdvals")
    if driver is not None:
        raise RuntimeError("staticgrad.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    _matrices(A, "linalg.svd", square=False, kernel="linalg_svd")
    return dispatch(OPS["linalg_svd"], (A,), {"full_matrices": False})[1]


def torch_svd(input, some=True, compute_uv=True, *, out=None):
    """torch.svd: U, S, V (not Vh); some=False gives full U and V; compute_uv=False gives zero U and V."""
    _no_out(out, "svd")
    fn.require_tensor(input, "svd")
    if input._data.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has {input._data.ndim} "
                           "dimensions instead")
    _matrices(input, "linalg.svd", square=False, kernel="linalg_svd")
    u, s, vh = dispatch(OPS["linalg_svd"], (input,), {"full_matrices": not some})
    if not compute_uv:
        batch, (m, n) = input.shape[:-2], input.shape[-2:]
        return TorchSvdResult(zeros(*batch, m, m, dtype=input.dtype), s, zeros(*batch, n, n, dtype=input.dtype))
    return TorchSvdResult(u, s, fn.transpose(vh, -2, -1))



# ---- triangular solves ------------------------------------------------------------------------------

def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """torch.linalg.solve_triangular: X with A X = B (X A = B when left=False) for triangular A, reading only
    its upper or lower triangle (and taking its diagonal as ones when unitriangular)."""
    _no_out(out, "linalg.solve_triangular")
    fn.require_tensor(B, "linalg.solve_triangular", "B", 2)
    _float_kernel(A, "triangular_solve")
    _matrices(A, "linalg.solve_triangular", kernel="triangular_solve")
    _b_matrix(B, "linalg.solve_triangular")
    _check_b_size("linalg.solve_triangular", A._data.shape[-1], *B._data.shape[-2:], left)
    return dispatch(OPS["linalg_solve_triangular"], (A, B),
                    {"upper": bool(upper), "left": bool(left), "unitriangular": bool(unitriangular)})


def _b_and_a(b, A, name: str, factor: str = "A") -> None:
    """torch.triangular_solve / cholesky_solve's checks: matrices b and square A of matching rows, one float
    dtype. ``factor``: how PyTorch names A in its dimension error."""
    fn.require_tensor(b, name)
    fn.require_tensor(A, name, "A", 2)
    if b._data.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {b._data.ndim} dimensions instead")
    if A._data.ndim < 2:
        if factor == "u":
            raise RuntimeError(f"u should have at least 2 dimensions, but has {A._data.ndim} dimensions instead")
        raise RuntimeError(f"staticgrad.{name}: Expected A to have at least 2 dimensions, but it has {A._data.ndim} "
                           "dimensions instead")
    if b._data.dtype != A._data.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {fn._scalar_type(b)} and A "
                           f"of type {fn._scalar_type(A)} instead.")
    rows, cols = A._data.shape[-2:]
    if rows != cols:
        raise RuntimeError(f"A must be batches of square matrices, but they are {rows} by {cols} matrices")
    if b._data.shape[-2] != rows:
        b_rows, b_cols = b._data.shape[-2:]
        raise RuntimeError(f"Incompatible matrix sizes for {name}: each A matrix is {rows} by {cols} but each b "
                           f"matrix is {b_rows} by {b_cols}")
    _float_kernel(A, "cholesky_solve" if factor == "u" else "triangular_solve")


def _float_kernel(A, kernel: str) -> None:
    """PyTorch's NotImplementedError when its CPU kernel has no integer form."""
    if A._data.dtype.kind != "f" or _half(A):
        raise NotImplementedError(f'"{kernel}_cpu" not implemented for \'{fn._scalar_type(A)}\'')


def cholesky_solve(B, L, upper=False, *, out=None):
    """torch.cholesky_solve: X with A X = B given A's Cholesky factor L (A = L L^T, or U^T U when upper)."""
    _no_out(out, "cholesky_solve")
    _b_and_a(B, L, "cholesky_solve", "u")
    return dispatch(OPS["cholesky_solve"], (B, L), {"upper": bool(upper)})


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """torch.triangular_solve (deprecated there for linalg.solve_triangular): the solution of A X = b (A^T X = b
    when transpose) and a copy of A."""
    _no_out(out, "triangular_solve")
    if isinstance(b, Tensor) and b._data.ndim < 2:
        raise RuntimeError(f"staticgrad.triangular_solve: Expected b to have at least 2 dimensions, but it has "
                           f"{b._data.ndim} dimensions instead")
    _b_and_a(b, A, "triangular_solve")
    return TriangularSolveResult(*dispatch(OPS["triangular_solve"], (b, A), {
        "upper": bool(upper), "transpose": bool(transpose), "unitriangular": bool(unitriangular)}))



# ---- pinv, matrix_rank ------------------------------------------------------------------------------

def _tolerance(value, name: str):
    if value is None:
        return None
    if isinstance(value, Tensor):
        raise NotImplementedError(f"staticgrad's {name} takes atol and rtol as Python numbers, not tensors; pass "
                                  "float(t) (or t.item())")
    return float(value)


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """torch.linalg.pinv: the pseudoinverse from the SVD (eigh when hermitian), singular values at or under
    max(atol, rtol * largest) dropped; ``rcond`` is the older name of rtol."""
    _no_out(out, "linalg.pinv")
    fn.require_tensor(A, "linalg.pinv")
    if A._data.ndim < 2 or A._data.dtype.kind != "f" or _half(A):
        raise RuntimeError(f"linalg.pinv({fn._scalar_type(A)}{{{list(A._data.shape)}}}): expected a tensor with 2 or "
                           "more dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError("linalg.pinv: rcond and rtol cannot both be given (rcond is the older name of rtol)")
        rtol = rcond
    attrs = {"atol": _tolerance(atol, "linalg.pinv"), "rtol": _tolerance(rtol, "linalg.pinv"),
             "hermitian": bool(hermitian)}
    return dispatch(OPS["linalg_pinv"], (A,), attrs)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """torch.linalg.matrix_rank: how many singular values (|eigenvalues| when hermitian) exceed
    max(atol, rtol * largest); ``tol`` is the older name of atol. An int64 tensor of the batch's shape."""
    _no_out(out, "linalg.matrix_rank")
    fn.require_tensor(A, "linalg.matrix_rank")
    if A._data.ndim < 2:
        raise RuntimeError("staticgrad.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if A._data.dtype.kind != "f" or _half(A):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if tol is not None:
        atol, rtol = tol, 0.0 if rtol is None else rtol
    attrs = {"atol": _tolerance(atol, "linalg.matrix_rank"), "rtol": _tolerance(rtol, "linalg.matrix_rank"),
             "hermitian": bool(hermitian)}
    return dispatch(OPS["linalg_matrix_rank"], (A,), attrs)



# ---- lstsq ------------------------------------------------------------------------------------------

def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq: the least-squares solution of A X = B (the minimum-norm one where A is wide),
    with residuals, rank and singular values where PyTorch's CPU driver gives them. All drivers solve through
    the SVD here; on rank-deficient input 'gelsy' (column-pivoted QR) may pick its rank differently."""
    fn.require_tensor(A, "linalg.lstsq")
    fn.require_tensor(B, "linalg.lstsq", "other", 2)
    where = "staticgrad.linalg.lstsq"
    if A._data.ndim < 2:
        raise RuntimeError(f"{where}: input must have at least 2 dimensions.")
    if B._data.ndim < 1:
        raise RuntimeError(f"{where}: other must have at least 1 dimension.")
    if A._data.dtype.kind != "f" or B._data.dtype.kind != "f" or _half(A) or _half(B):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A._data.dtype != B._data.dtype:
        raise RuntimeError(f"{where}: Expected input and other to have the same dtype, but got input's dtype "
                           f"{fn._scalar_type(A)} and other's dtype {fn._scalar_type(B)}")
    if not 0 <= A._data.ndim - B._data.ndim <= 1:
        raise RuntimeError(f"{where}: input.dim() must be greater or equal to other.dim() and (input.dim() - "
                           "other.dim()) <= 1")
    vector = B._data.ndim == A._data.ndim - 1
    if A._data.shape[-2] != B._data.shape[-1 if vector else -2]:
        raise RuntimeError(f"{where}: input.size(-2) should match other.size({-1 if vector else -2})")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{where}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    batch = np.broadcast_shapes(A._data.shape[:-2], B._data.shape[:-1 if vector else -2])
    solution, residuals, rank = dispatch(OPS["linalg_lstsq"], (A, B), {
        "rcond": None if rcond is None else float(rcond), "driver": driver, "vector": vector})
    singular_values = dispatch(OPS["linalg_lstsq_singular_values"], (A,), {"driver": driver, "batch": batch})
    return LstsqResult(solution, residuals, rank, singular_values)



# ---- the older torch.* names: cholesky, qr, pinverse ------------------------------------------------

def torch_cholesky(input, upper=False, *, out=None):
    """torch.cholesky (deprecated there for linalg.cholesky): the same factor, its own CholeskyBackward0."""
    _no_out(out, "cholesky")
    fn.require_tensor(input, "cholesky")
    if input._data.ndim >= 2 and input._data.dtype.kind != "f":
        raise NotImplementedError(f'"cholesky_cpu" not implemented for \'{fn._scalar_type(input)}\'')
    _matrices(input, "cholesky", kernel="cholesky")
    return dispatch(OPS["cholesky"], (input,), {"upper": bool(upper)})


def torch_qr(input, some=True, *, out=None):
    """torch.qr (deprecated there for linalg.qr): reduced Q, R when ``some``, else complete."""
    return TorchQrResult(*qr(input, "reduced" if some else "complete", out=out))


def pinverse(input, rcond=1e-15):
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)



def cholesky_inverse(L, upper=False, *, out=None):
    """torch.cholesky_inverse: (L L^T)^-1 (or (U^T U)^-1 when upper) from a Cholesky factor."""
    _no_out(out, "cholesky_inverse")
    fn.require_tensor(L, "cholesky_inverse")
    if L._data.ndim >= 2 and (L._data.dtype.kind != "f" or _half(L)):
        raise NotImplementedError(f'"cholesky_inverse_out_cpu" not implemented for \'{fn._scalar_type(L)}\'')
    _matrices(L, "cholesky_inverse")
    return dispatch(OPS["cholesky_inverse"], (L,), {"upper": bool(upper)})



# ---- LU -----------------------------------------------------------------------------------------------

def _lu_input(A, name: str) -> None:
    fn.require_tensor(A, name)
    if A._data.ndim < 2:
        where = "staticgrad.lu_factor" if name == "linalg.lu_factor" else name
        raise RuntimeError(f"{where}: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A._data.shape)} instead")
    if A._data.dtype.kind != "f" or _half(A):
        raise NotImplementedError(f'"lu_cpu" not implemented for \'{fn._scalar_type(A)}\'')


def _pivot_only(pivot) -> None:
    if not pivot:
        raise NotImplementedError("staticgrad's LU always pivots (pivot=False is for CUDA inputs in PyTorch)")


def lu_factor(A, *, pivot=True, out=None):
    """torch.linalg.lu_factor: the packed LU of A = P L U and getrf's 1-based int32 pivots; a zero on U's
    diagonal raises, as in PyTorch."""
    _no_out(out, "linalg.lu_factor")
    _lu_input(A, "linalg.lu_factor")
    _pivot_only(pivot)
    lu, pivots = dispatch(OPS["linalg_lu_factor"], (A,), {})
    k = min(A._data.shape[-2:])
    diagonal = np.diagonal(lu._data, axis1=-2, axis2=-1).reshape(-1, k) if k else np.zeros((0, 0))
    zero = np.argwhere(diagonal == 0)
    if zero.size:
        i = int(zero[0][1]) + 1
        where = f"(Batch element {int(zero[0][0])}): " if A._data.ndim > 2 else ""
        raise RuntimeError(f"staticgrad.linalg.lu_factor: {where}U[{i},{i}] is zero and using it on lu_solve would "
                           "result in a division by zero. If you still want to perform the factorization, consider "
                           "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return LuFactorResult(lu, pivots)


def lu(A, *, pivot=True, out=None):
    """torch.linalg.lu: P, L, U with A = P L U (P without a gradient, as in PyTorch)."""
    _no_out(out, "linalg.lu")
    _lu_input(A, "linalg.lu")
    _pivot_only(pivot)
    lower, upper, pivots = dispatch(OPS["linalg_lu"], (A,), {})
    p = dispatch(OPS["lu_permutation_matrix"], (pivots,), {"m": A._data.shape[-2], "dtype": A._data.dtype})
    return LuResult(p, lower, upper)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """torch.linalg.lu_solve: X with A X = B (A^T X = B when adjoint; X A = B when left=False) from
    lu_factor's LU and pivots."""
    _no_out(out, "linalg.lu_solve")
    fn.require_tensor(LU, "linalg.lu_solve")
    fn.require_tensor(pivots, "linalg.lu_solve", "pivots", 2)
    fn.require_tensor(B, "linalg.lu_solve", "B", 3)
    if LU._data.ndim >= 2 and LU._data.shape[-1] != LU._data.shape[-2]:
        rows, cols = LU._data.shape[-2:]
        raise RuntimeError(f"staticgrad.linalg.lu_solve: A must be batches of square matrices, but they are {rows} "
                           f"by {cols} matrices")
    _matrices(LU, "linalg.lu_solve")
    _b_matrix(B, "linalg.lu_solve")
    if pivots._data.dtype != np.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type staticgrad.int32")
    _same_dtype(LU, B, "linalg.lu_solve")
    _check_b_size("linalg.lu_solve", LU._data.shape[-1], *B._data.shape[-2:], left)
    return dispatch(OPS["linalg_lu_solve"], (LU, pivots, B), {"left": bool(left), "adjoint": bool(adjoint)})


FUNCTIONS = {"slogdet": torch_slogdet, "logdet": logdet, "svd": torch_svd, "cholesky_solve": cholesky_solve,
             "triangular_solve": triangular_solve, "cholesky": torch_cholesky, "qr": torch_qr, "pinverse": pinverse,
             "cholesky_inverse": cholesky_inverse}
METHODS = dict(FUNCTIONS)
