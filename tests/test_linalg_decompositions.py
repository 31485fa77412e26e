"""torch.linalg's solves and decompositions against PyTorch: values in float32 and float64, node names,
gradients (against torch and against finite differences), errors, refused second derivatives, and
record-and-replay equal to eager. Eigen- and singular vectors are compared through quantities that do
not depend on their signs (reconstructions, absolute values), as PyTorch's documentation advises."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:torch.(triangular_solve|cholesky|qr) is deprecated")

rng = np.random.default_rng(11)
SQUARE = rng.standard_normal((2, 3, 3)) + 2 * np.eye(3)
TALL = rng.standard_normal((2, 5, 3))
WIDE = rng.standard_normal((3, 5))
RHS = rng.standard_normal((2, 3, 2))
TOL = {np.float32: dict(atol=2e-4, rtol=2e-4), np.float64: dict(atol=1e-9, rtol=1e-8)}
DTYPES = [np.float32, np.float64]


def _check(call, arrays, dtype):
    compare(call, [a.astype(dtype) for a in arrays], **TOL[dtype])


def _spd(lib, a):
    """A symmetric positive-definite matrix made from ``a`` (a differentiable function of it)."""
    return a @ a.mT + lib.eye(a.shape[-1], dtype=a.dtype)


def _raised_in_both(make) -> list:
    """[torch's exception, staticgrad's] from ``make(lib)``, which must raise in both."""
    errors = []
    for lib in (torch, sg):
        with pytest.raises(Exception) as info:
            make(lib)
        errors.append(info.value)
    return errors


# ---- solve ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call, arrays", [
    (lambda lib, a, b: lib.linalg.solve(a, b), [SQUARE, RHS]),
    (lambda lib, a, b: lib.linalg.solve(a, b), [SQUARE[0], RHS]),                  # A broadcast over B's batch
    (lambda lib, a, b: lib.linalg.solve(a, b), [SQUARE, RHS[0, :, 0]]),           # a vector B
    (lambda lib, a, b: lib.linalg.solve(a, b), [SQUARE, RHS[:, :, 0]]),           # a batch of vectors
    (lambda lib, a, b: lib.linalg.solve(a, b, left=False), [SQUARE, RHS.transpose(0, 2, 1)]),
])
def test_solve_matches_pytorch(call, arrays, dtype):
    _check(call, arrays, dtype)


def test_solve_gradient_matches_finite_differences():
    finite_difference_check(lambda a, b: sg.linalg.solve(a, b), [SQUARE, RHS])
    finite_difference_check(lambda a, b: sg.linalg.solve(a, b, left=False), [SQUARE[0], RHS[0].T])


# ---- cholesky ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call, arrays", [
    (lambda lib, a: lib.linalg.cholesky(_spd(lib, a)), [SQUARE]),
    (lambda lib, a: lib.linalg.cholesky(_spd(lib, a), upper=True), [SQUARE]),
    (lambda lib, a: lib.linalg.cholesky(a), [SQUARE[0] @ SQUARE[0].T + np.triu(SQUARE[1])]),  # reads one triangle
    (lambda lib, a: lib.linalg.cholesky(a, upper=True), [SQUARE[0] @ SQUARE[0].T + np.tril(SQUARE[1])]),
])
def test_cholesky_matches_pytorch(call, arrays, dtype):
    _check(call, arrays, dtype)


def test_cholesky_gradient_matches_finite_differences():
    finite_difference_check(lambda a: sg.linalg.cholesky(_spd(sg, a)), [SQUARE])
    finite_difference_check(lambda a: sg.linalg.cholesky(_spd(sg, a), upper=True), [SQUARE[0]])


# ---- slogdet, logdet --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a: tuple(lib.linalg.slogdet(a)),
    lambda lib, a: tuple(lib.slogdet(a)),
    lambda lib, a: tuple(a.slogdet()),
    lambda lib, a: lib.logdet(a),                   # one determinant negative: NaN
    lambda lib, a: lib.logdet(_spd(lib, a)),
    lambda lib, a: a.logdet(),
])
def test_slogdet_and_logdet_match_pytorch(call, dtype):
    a = SQUARE.copy()
    a[1, 0] *= -1  # a negative determinant
    _check(call, [a], dtype)


def test_slogdet_result_names_and_gradient():
    result = sg.linalg.slogdet(sg.tensor(SQUARE))
    assert type(result).__name__ == "linalg_slogdet" and result.sign.shape == (2,)
    assert type(sg.slogdet(sg.tensor(SQUARE))).__name__ == "slogdet"
    finite_difference_check(lambda a: sg.linalg.slogdet(a).logabsdet, [SQUARE])


def test_slogdet_gradient_at_a_singular_matrix_is_refused():
    """PyTorch returns inf and NaN there; staticgrad says what went wrong instead."""
    a = sg.zeros(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="singular matrix"):
        sg.linalg.slogdet(a).logabsdet.backward()


def test_a_large_not_positive_definite_matrix_names_its_minor_quickly():
    a = np.eye(400)
    a[249, 249] = -1
    expected = torch.linalg.cholesky_ex(torch.tensor(a)).info
    assert sg.linalg.cholesky_ex(sg.tensor(a)).info.item() == expected.item() == 250
    messages = []
    for lib in (torch, sg):
        with pytest.raises(RuntimeError) as info:
            lib.linalg.cholesky(lib.tensor(a))
        messages.append(str(info.value))
    assert messages[1] == messages[0]


def test_slogdet_and_logdet_of_a_singular_matrix():
    compare(lambda lib, a: tuple(lib.linalg.slogdet(a)), [np.zeros((3, 3))], grad=False)
    compare(lambda lib, a: lib.logdet(a), [np.zeros((3, 3))], grad=False)


# ---- qr ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("a", [SQUARE, TALL, WIDE], ids=["square", "tall", "wide"])
def test_qr_matches_pytorch(a, mode, dtype):
    differentiable = mode == "reduced" or (mode == "complete" and a.shape[-2] <= a.shape[-1])
    compare(lambda lib, x: tuple(lib.linalg.qr(x, mode=mode)), [a.astype(dtype)], grad=differentiable,
            **TOL[dtype])


def test_qr_gradient_matches_finite_differences():
    for a in (SQUARE, TALL, WIDE):
        finite_difference_check(lambda x: sg.linalg.qr(x).Q * 2 + sg.linalg.qr(x).R.sum(), [a[..., :3, :]])
        finite_difference_check(lambda x: sg.linalg.qr(x).R, [a])


@pytest.mark.parametrize("make", [
    lambda lib, a: lib.linalg.qr(a, mode="r").R.sum().backward(),
    lambda lib, a: lib.linalg.qr(a, mode="complete").Q.sum().backward(),
])
def test_qr_refuses_the_gradients_pytorch_refuses(make):
    same_error(lambda lib: make(lib, lib.tensor(TALL[0], requires_grad=True)))


# ---- eigh, eigvalsh ---------------------------------------------------------------------------------

def _eigh_invariants(lib, a, UPLO="L"):
    """Eigenvalues, V f(w) V^T and |V|: what does not depend on the eigenvectors' signs."""
    w, v = lib.linalg.eigh(a, UPLO=UPLO)
    return w, (v * w.sin().unsqueeze(-2)) @ v.mT, v.abs()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a: _eigh_invariants(lib, a + a.mT),
    lambda lib, a: _eigh_invariants(lib, a, "U"),           # a non-symmetric input: one triangle is read
    lambda lib, a: _eigh_invariants(lib, a, "L"),
    lambda lib, a: lib.linalg.eigvalsh(a),
    lambda lib, a: lib.linalg.eigvalsh(a, UPLO="U"),
])
def test_eigh_matches_pytorch(call, dtype):
    _check(call, [SQUARE], dtype)


def test_eigh_gradient_matches_finite_differences():
    finite_difference_check(lambda a: _eigh_invariants(sg, a + a.mT)[1], [SQUARE])
    finite_difference_check(lambda a: sg.linalg.eigvalsh(a + a.mT).abs(), [SQUARE])


def test_eigh_gradient_of_a_non_symmetric_input_is_pytorchs_symmetric_one():
    """Only one triangle is read, yet the gradient is spread over both, as PyTorch's (A is taken as symmetric)."""
    a = sg.tensor(SQUARE[0], requires_grad=True)
    _eigh_invariants(sg, a, "U")[1].sum().backward()
    assert np.allclose(a.grad.numpy(), a.grad.numpy().T)


# ---- svd, svdvals, torch.svd ------------------------------------------------------------------------

def _svd_invariants(lib, a, full_matrices):
    """Singular values, U f(S) Vh and U Vh over the first k vectors: independent of the vectors' signs."""
    u, s, vh = lib.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    return s, (u * s.sin().unsqueeze(-2)) @ vh, u @ vh


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("a", [SQUARE, TALL, WIDE], ids=["square", "tall", "wide"])
def test_svd_matches_pytorch(a, full_matrices, dtype):
    _check(lambda lib, x: _svd_invariants(lib, x, full_matrices), [a], dtype)
    shapes = [tuple(t.shape) for t in sg.linalg.svd(sg.tensor(a), full_matrices=full_matrices)]
    assert shapes == [tuple(t.shape) for t in torch.linalg.svd(torch.tensor(a), full_matrices=full_matrices)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a: lib.linalg.svdvals(a),
    lambda lib, a: (lambda r: (r.S, r.U @ r.V.mT))(lib.svd(a)),
    lambda lib, a: (lambda r: (r.S, r.U[..., :3] @ r.V.mT))(lib.svd(a, some=False)),
    lambda lib, a: (lambda r: (r.S, r.U @ r.V.mT))(a.svd()),
    lambda lib, a: tuple(lib.svd(a, compute_uv=False)),
])
def test_svdvals_and_torch_svd_match_pytorch(call, dtype):
    _check(call, [TALL], dtype)


def test_svd_gradient_matches_finite_differences():
    for a in (SQUARE, TALL, WIDE):
        finite_difference_check(lambda x: _svd_invariants(sg, x, False)[1], [a])
        finite_difference_check(lambda x: _svd_invariants(sg, x, True)[2], [a])
    finite_difference_check(lambda x: sg.linalg.svdvals(x), [TALL])


# ---- solve_triangular, cholesky_solve, triangular_solve ---------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=False),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b.mT, upper=True, left=False),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b.mT, upper=False, left=False, unitriangular=True),
    lambda lib, a, b: lib.linalg.solve_triangular(a[0], b, upper=True),            # A broadcast over B's batch
    lambda lib, a, b: lib.cholesky_solve(b, a),                                     # one triangle of a is read
    lambda lib, a, b: lib.cholesky_solve(b, a, upper=True),
    lambda lib, a, b: b.cholesky_solve(lib.linalg.cholesky(_spd(lib, a))),
    lambda lib, a, b: tuple(lib.triangular_solve(b, a)),
    lambda lib, a, b: tuple(lib.triangular_solve(b, a, upper=False, transpose=True)),
    lambda lib, a, b: tuple(lib.triangular_solve(b, a, transpose=True, unitriangular=True)),
    lambda lib, a, b: tuple(b.triangular_solve(a, False)),
])
def test_triangular_solves_match_pytorch(call, dtype):
    _check(call, [SQUARE + np.eye(3), RHS], dtype)


def test_triangular_solves_gradients_match_finite_differences():
    a, b = SQUARE + np.eye(3), RHS
    finite_difference_check(lambda x, y: sg.linalg.solve_triangular(x, y, upper=True), [a, b])
    finite_difference_check(lambda x, y: sg.linalg.solve_triangular(x, y.mT, upper=False, left=False,
                                                                     unitriangular=True), [a, b])
    # cholesky_solve reads one triangle of L yet, as PyTorch, gives a gradient off it too: compare on a triangle
    finite_difference_check(lambda x, y: sg.cholesky_solve(y, sg.triu(x), upper=True), [a, b])
    finite_difference_check(lambda x, y: sg.cholesky_solve(y, sg.linalg.cholesky(_spd(sg, x))), [a, b])
    finite_difference_check(lambda x, y: sg.triangular_solve(y, x, transpose=True).solution, [a, b])


def test_solve_triangular_solves_in_As_dtype_as_pytorch():
    compare(lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True),
            [(SQUARE[0] + np.eye(3)).astype(np.float32), RHS[0]])


def test_a_zero_on_the_diagonal_gives_pytorchs_inf_and_nan():
    compare(lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=True), [np.zeros((3, 3)), np.ones((3, 1))],
            grad=False)
    compare(lambda lib, a, b: tuple(lib.triangular_solve(b, a)), [np.zeros((3, 3)), np.ones((3, 2))], grad=False)


# ---- pinv, matrix_rank ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call, a", [
    (lambda lib, a: lib.linalg.pinv(a), SQUARE),
    (lambda lib, a: lib.linalg.pinv(a), TALL),
    (lambda lib, a: lib.linalg.pinv(a), WIDE),
    (lambda lib, a: lib.linalg.pinv(a + a.mT, hermitian=True), SQUARE),
    (lambda lib, a: lib.linalg.pinv(a, 0.01), TALL),
    (lambda lib, a: lib.linalg.pinv(a, atol=0.01, rtol=0.001), TALL),
])
def test_pinv_matches_pytorch(call, a, dtype):
    _check(call, [a], dtype)


def test_pinv_gradient_matches_finite_differences():
    for a in (SQUARE, TALL, WIDE):
        finite_difference_check(lambda x: sg.linalg.pinv(x), [a])


RANKS = np.stack([np.ones((4, 3)), rng.standard_normal((4, 3)),
                  np.vstack([np.diag([1, 1e-3, 1e-9]), np.zeros((1, 3))])])  # ranks 1, 3 and 2 or 3 by dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"atol": 0.01}, {"rtol": 0.01}, {"atol": 0.5, "rtol": 1e-4}, {"tol": 0.01},
                                    {"hermitian": True}])
def test_matrix_rank_matches_pytorch(kwargs, dtype):
    a = RANKS[..., :3, :] + np.swapaxes(RANKS[..., :3, :], -1, -2) if kwargs.get("hermitian") else RANKS
    compare(lambda lib, x: lib.linalg.matrix_rank(x, **kwargs), [a.astype(dtype)])


# ---- lstsq ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
@pytest.mark.parametrize("call, arrays", [
    (lambda lib, a, b, d: tuple(lib.linalg.lstsq(a, b, driver=d))[:2], [TALL, TALL[..., :2] + 1]),
    (lambda lib, a, b, d: tuple(lib.linalg.lstsq(a, b[..., 0], driver=d))[:2], [TALL, TALL[..., :2] + 1]),  # vectors
    (lambda lib, a, b, d: tuple(lib.linalg.lstsq(a, b[:1], driver=d))[:2], [TALL, TALL[..., :2] + 1]),  # broadcast
    (lambda lib, a, b, d: tuple(lib.linalg.lstsq(a, b, driver=d))[:2], [WIDE, WIDE[:, :2]]),  # minimum norm
])
def test_lstsq_matches_pytorch(call, arrays, driver, dtype):
    compare(lambda lib, a, b: call(lib, a, b, driver), [x.astype(dtype) for x in arrays],
            **(dict(atol=1e-3, rtol=1e-3) if dtype == np.float32 else TOL[dtype]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", ["gelsd", "gelss", "gels"])
def test_lstsq_with_rcond_cutting_a_singular_value_matches_pytorch(driver, dtype):
    """rcond=0.1 drops the second matrix's smallest singular value (0.25 of 2.5); the gradient is PyTorch's,
    through A's pseudoinverse at the default tolerance. ('gelsy' truncates through a pivoted QR instead of
    the SVD: its rank-deficient solutions differ and are left out.)"""
    compare(lambda lib, a, b: tuple(lib.linalg.lstsq(a, b, 0.1, driver=driver))[:2],
            [TALL.astype(dtype), (TALL[..., :2] + 1).astype(dtype)],
            **(dict(atol=1e-3, rtol=1e-3) if dtype == np.float32 else TOL[dtype]))


@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_rank_and_singular_values_match_pytorch(driver):
    """Which outputs each driver fills (empty tensors otherwise), their shapes, dtypes and values."""
    cases = [(TALL, TALL[..., :2] + 1), (TALL, TALL[:1, :, :2]), (WIDE, WIDE[:, :2]), (TALL, TALL[..., 0])]
    if driver != "gels":
        cases.append((np.ones((5, 3)), TALL[0]))  # rank 1
    for a, b in cases:
        expected = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        got = sg.linalg.lstsq(sg.tensor(a), sg.tensor(b), driver=driver)
        assert type(got).__name__ == "linalg_lstsq"
        for e, g in zip(expected, got):
            assert tuple(g.shape) == tuple(e.shape) and str(g.dtype)[11:] == str(e.dtype)[6:]
            np.testing.assert_allclose(g.numpy(), e.numpy(), atol=1e-9, rtol=1e-8)
            assert (g.grad_fn is None) == (e.grad_fn is None)


def test_lstsq_gradient_matches_finite_differences():
    finite_difference_check(lambda a, b: sg.linalg.lstsq(a, b).solution, [TALL, TALL[..., :2] + 1])
    finite_difference_check(lambda a, b: sg.linalg.lstsq(a, b).solution, [WIDE, WIDE[:, :2]])
    finite_difference_check(lambda a, b: sg.linalg.lstsq(a, b, driver="gelsd").residuals, [TALL, TALL[..., :2] + 1])


# ---- matrix norms from the singular values ----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 0), (1, 0)])
@pytest.mark.parametrize("ord", [2, -2, "nuc", 1, -1, float("inf"), -float("inf")])
def test_matrix_norm_orders_match_pytorch(ord, dim, keepdim, dtype):
    """Values, gradients and the last node of PyTorch's composition (AmaxBackward0 over LinalgSvdBackward0...)."""
    _check(lambda lib, a: lib.linalg.matrix_norm(a, ord=ord, dim=dim, keepdim=keepdim), [TALL.transpose(1, 0, 2)],
           dtype)


@pytest.mark.parametrize("ord", [2, "nuc", -2, 1, float("inf")])
def test_norm_and_matrix_norm_dtype_take_the_spectral_orders(ord):
    compare(lambda lib, a: lib.linalg.norm(a, ord=ord), [WIDE])
    compare(lambda lib, a: lib.linalg.norm(a, ord=ord, dim=(0, 2)), [TALL])
    compare(lambda lib, a: lib.linalg.matrix_norm(a, ord=ord, dtype=lib.float64), [TALL.astype(np.float32)])


@pytest.mark.parametrize("make", [
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4), ord=3),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4), ord="x"),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4), ord=2, dim=(0, 0)),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4, dtype=lib.int64), ord=2),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4), ord=1, dim=(0,)),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4), ord=1, dim=(0, 5)),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3, 4, dtype=lib.float16), ord=2),
])
def test_matrix_norm_errors_match_pytorch(make):
    same_error(lambda lib: make(lib))


# ---- the older torch.* names ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a: lib.cholesky(_spd(lib, a)),
    lambda lib, a: _spd(lib, a).cholesky(upper=True),
    lambda lib, a: tuple(lib.qr(a)),
    lambda lib, a: tuple(a[..., :2, :].qr(some=False)),
    lambda lib, a: lib.pinverse(a),
    lambda lib, a: a.pinverse(rcond=0.3),
])
def test_older_names_match_pytorch(call, dtype):
    _check(call, [SQUARE], dtype)


@pytest.mark.parametrize("make", [
    lambda lib: lib.cholesky(-lib.eye(3)),
    lambda lib: lib.cholesky(lib.stack([lib.eye(3), -lib.eye(3)])),
    lambda lib: lib.cholesky(lib.ones(2, 3)),
    lambda lib: lib.cholesky(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.cholesky(lib.eye(3, dtype=lib.float16)),
    lambda lib: lib.qr(lib.tensor(1.0)),
    lambda lib: lib.pinverse(lib.tensor(1.0)),
])
def test_older_names_raise_pytorchs_errors(make):
    errors = _raised_in_both(make)
    assert str(errors[1]) == str(errors[0])
    assert isinstance(errors[1], sg.linalg.LinAlgError) == isinstance(errors[0], torch.linalg.LinAlgError)


# ---- cholesky_ex, inv_ex, solve_ex -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call, arrays", [
    (lambda lib, a: tuple(lib.linalg.cholesky_ex(_spd(lib, a))), [SQUARE]),
    (lambda lib, a: tuple(lib.linalg.cholesky_ex(_spd(lib, a), upper=True)), [SQUARE]),
    (lambda lib, a: tuple(lib.linalg.inv_ex(a)), [SQUARE]),
    (lambda lib, a, b: tuple(lib.linalg.solve_ex(a, b)), [SQUARE, RHS]),
    (lambda lib, a, b: tuple(lib.linalg.solve_ex(a, b[..., 0])), [SQUARE, RHS]),
    (lambda lib, a, b: tuple(lib.linalg.solve_ex(a[0], b, left=False)), [SQUARE, RHS.transpose(0, 2, 1)]),
])
def test_ex_forms_match_pytorch(call, arrays, dtype):
    """The result, its node (LinalgCholeskyExBackward0...) and gradient, and info's shape and int32 dtype."""
    _check(call, arrays, dtype)


NOT_PD = np.stack([np.eye(3), -np.eye(3), [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
SINGULAR_BATCH = np.stack([np.eye(3), np.zeros((3, 3)), [[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]]])


@pytest.mark.parametrize("call, a", [
    (lambda lib, a: lib.linalg.cholesky_ex(a), NOT_PD),
    (lambda lib, a: lib.linalg.cholesky_ex(a, upper=True), NOT_PD),
    (lambda lib, a: lib.linalg.inv_ex(a), SINGULAR_BATCH),
    (lambda lib, a: lib.linalg.inv_ex(a), SINGULAR_BATCH[2]),
    (lambda lib, a: lib.linalg.solve_ex(a, lib.ones(3, dtype=a.dtype)), SINGULAR_BATCH),
])
def test_ex_forms_report_pytorchs_info_and_nan_for_a_failing_matrix(call, a):
    """info is PyTorch's (the failing minor, the zero pivot); a failing matrix's result is NaN here, where
    PyTorch leaves LAPACK's partial work; the others are PyTorch's."""
    expected, got = call(torch, torch.tensor(a)), call(sg, sg.tensor(a))
    assert np.array_equal(got.info.numpy(), expected.info.numpy()) and str(got.info.dtype) == "staticgrad.int32"
    failed = got.info.numpy().reshape(-1) != 0
    results = got[0].numpy().reshape((failed.size, -1))
    assert np.isnan(results[failed]).all()
    np.testing.assert_allclose(results[~failed], expected[0].numpy().reshape((failed.size, -1))[~failed])


@pytest.mark.parametrize("make", [
    lambda lib, a, b: lib.linalg.cholesky_ex(a, check_errors=True),
    lambda lib, a, b: lib.linalg.inv_ex(b, check_errors=True),
    lambda lib, a, b: lib.linalg.inv_ex(b[2], check_errors=True),
    lambda lib, a, b: lib.linalg.solve_ex(b, lib.ones(3, dtype=b.dtype), check_errors=True),
    lambda lib, a, b: lib.linalg.cholesky_ex(lib.ones(2, 3)),
    lambda lib, a, b: lib.linalg.inv_ex(lib.ones(2, 3)),
    lambda lib, a, b: lib.linalg.solve_ex(lib.ones(2, 3), lib.ones(2)),
])
def test_ex_forms_with_check_errors_raise_pytorchs_errors(make):
    errors = _raised_in_both(lambda lib: make(lib, lib.tensor(NOT_PD), lib.tensor(SINGULAR_BATCH)))
    assert str(errors[1]).replace("staticgrad.", "torch.") == str(errors[0])
    assert isinstance(errors[1], sg.linalg.LinAlgError) == isinstance(errors[0], torch.linalg.LinAlgError)


# ---- cholesky_inverse --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", [
    lambda lib, a: lib.cholesky_inverse(a),                       # one triangle of a is read
    lambda lib, a: a.cholesky_inverse(upper=True),
    lambda lib, a: lib.cholesky_inverse(lib.linalg.cholesky(_spd(lib, a))),
])
def test_cholesky_inverse_matches_pytorch(call, dtype):
    _check(call, [SQUARE], dtype)


def test_cholesky_inverse_gradient_matches_finite_differences():
    finite_difference_check(lambda a: sg.cholesky_inverse(sg.tril(a)), [SQUARE])
    finite_difference_check(lambda a: sg.cholesky_inverse(sg.triu(a), upper=True), [SQUARE[0]])


@pytest.mark.parametrize("make", [
    lambda lib: lib.cholesky_inverse(lib.ones(2, 3)),
    lambda lib: lib.cholesky_inverse(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.cholesky_inverse(lib.eye(3, dtype=lib.float16)),
    lambda lib: lib.cholesky_inverse(lib.zeros(3, 3)),
    lambda lib: lib.cholesky_inverse(lib.stack([lib.eye(3), lib.zeros(3, 3)])),
])
def test_cholesky_inverse_errors_match_pytorch(make):
    errors = _raised_in_both(make)
    assert str(errors[1]) == str(errors[0])
    assert isinstance(errors[1], sg.linalg.LinAlgError) == isinstance(errors[0], torch.linalg.LinAlgError)


# ---- LU: lu_factor, lu, lu_solve ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a", [SQUARE, TALL, WIDE], ids=["square", "tall", "wide"])
def test_lu_factor_and_lu_match_pytorch(a, dtype):
    """Packed factors, pivots, P, L, U (LAPACK's pivot rule) and, for square matrices, gradients."""
    square = a.shape[-1] == a.shape[-2]
    compare(lambda lib, x: tuple(lib.linalg.lu_factor(x)), [a.astype(dtype)], grad=square, **TOL[dtype])
    compare(lambda lib, x: tuple(lib.linalg.lu(x)), [a.astype(dtype)], grad=square, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"adjoint": True}, {"left": False}, {"left": False, "adjoint": True}])
def test_lu_solve_matches_pytorch(kwargs, dtype):
    b = RHS if kwargs.get("left", True) else RHS.transpose(0, 2, 1)
    _check(lambda lib, x, y: lib.linalg.lu_solve(*lib.linalg.lu_factor(x), y, **kwargs), [SQUARE, b], dtype)
    _check(lambda lib, x, y: lib.linalg.lu_solve(*lib.linalg.lu_factor(x[0]), y, **kwargs), [SQUARE, b], dtype)


def test_lu_gradients_match_finite_differences():
    finite_difference_check(lambda x: sg.linalg.lu_factor(x).LU, [SQUARE])
    finite_difference_check(lambda x: sg.linalg.lu(x).L * 2 + sg.linalg.lu(x).U, [SQUARE])
    finite_difference_check(lambda x, b: sg.linalg.lu_solve(*sg.linalg.lu_factor(x), b, adjoint=True), [SQUARE, RHS])
    finite_difference_check(lambda x, b: sg.linalg.lu_solve(*sg.linalg.lu_factor(x), b, left=False),
                            [SQUARE, RHS.transpose(0, 2, 1)])


def test_lu_of_a_non_square_matrix_refuses_its_gradient():
    a = sg.tensor(TALL, requires_grad=True)
    with pytest.raises(NotImplementedError, match="square matrices only"):
        sg.linalg.lu(a).U.sum().backward()


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (2, 0, 3), (0, 3, 3)])
def test_lu_of_empty_matrices_matches_pytorch(shape):
    compare(lambda lib, x: tuple(lib.linalg.lu(x)), [np.zeros(shape)], grad=False)
    compare(lambda lib, x: tuple(lib.linalg.lu_factor(x)), [np.zeros(shape)], grad=False)


@pytest.mark.parametrize("make", [
    lambda lib: lib.linalg.lu_factor(lib.zeros(3, 3)),
    lambda lib: lib.linalg.lu_factor(lib.stack([lib.eye(3), lib.zeros(3, 3)])),
    lambda lib: lib.linalg.lu_factor(lib.tensor(1.0)),
    lambda lib: lib.linalg.lu(lib.tensor(1.0)),
    lambda lib: lib.linalg.lu_factor(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.lu_factor(lib.eye(3, dtype=lib.float16)),
    lambda lib: lib.linalg.lu_solve(lib.eye(3), lib.tensor([1, 2, 3], dtype=lib.int32), lib.ones(3)),
    lambda lib: lib.linalg.lu_solve(lib.eye(3), lib.tensor([1, 2, 3]), lib.ones(3, 1)),
    lambda lib: lib.linalg.lu_solve(lib.eye(3), lib.tensor([1, 2, 3], dtype=lib.int32), lib.ones(2, 1)),
    lambda lib: lib.linalg.lu_solve(lib.ones(2, 3), lib.tensor([1, 2], dtype=lib.int32), lib.ones(2, 1)),
])
def test_lu_errors_match_pytorch(make):
    errors = _raised_in_both(make)
    assert str(errors[1]).replace("staticgrad.", "torch.") == str(errors[0])
    assert type(errors[1]).__name__ == type(errors[0]).__name__


# ---- errors -----------------------------------------------------------------------------------------

SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)


@pytest.mark.parametrize("make", [
    lambda lib: lib.linalg.solve(lib.zeros(3, 3), lib.ones(3)),
    lambda lib: lib.linalg.solve(lib.tensor(SINGULAR), lib.ones(2, 1)),
    lambda lib: lib.linalg.solve(lib.stack([lib.eye(3), lib.zeros(3, 3)]), lib.ones(2, 3)),
    lambda lib: lib.linalg.solve(lib.ones(2, 3), lib.ones(2)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4, 2)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(2, 4), left=False),
    lambda lib: lib.linalg.solve(lib.tensor(1.0), lib.tensor(1.0)),
    lambda lib: lib.linalg.solve(lib.eye(3, dtype=lib.int64), lib.ones(3)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.linalg.cholesky(-lib.eye(3)),
    lambda lib: lib.linalg.cholesky(lib.tensor([[1.0, 2.0], [2.0, 1.0]])),
    lambda lib: lib.linalg.cholesky(lib.stack([lib.eye(3), -lib.eye(3)])),
    lambda lib: lib.linalg.cholesky(lib.ones(2, 3)),
    lambda lib: lib.linalg.cholesky(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.slogdet(lib.ones(2, 3)),
    lambda lib: lib.linalg.slogdet(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.logdet(lib.tensor([1.0])),
    lambda lib: lib.linalg.qr(lib.ones(3, 3), mode="x"),
    lambda lib: lib.linalg.qr(lib.ones(3)),
    lambda lib: lib.linalg.qr(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.eigh(lib.ones(2, 3)),
    lambda lib: lib.linalg.eigh(lib.eye(3), UPLO="X"),
    lambda lib: lib.linalg.eigvalsh(lib.ones(3)),
    lambda lib: lib.linalg.svd(lib.ones(3)),
    lambda lib: lib.linalg.svd(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.svdvals(lib.ones(3)),
    lambda lib: lib.svd(lib.ones(3)),
    lambda lib: lib.linalg.solve_triangular(lib.eye(3), lib.ones(3), upper=True),
    lambda lib: lib.linalg.solve_triangular(lib.ones(2, 3), lib.ones(2, 2), upper=True),
    lambda lib: lib.linalg.solve_triangular(lib.eye(3), lib.ones(2, 3), upper=True),
    lambda lib: lib.linalg.solve_triangular(lib.eye(3), lib.ones(3, 2), upper=True, left=False),
    lambda lib: lib.linalg.solve_triangular(lib.eye(3, dtype=lib.int64), lib.ones(3, 2, dtype=lib.int64), upper=True),
    lambda lib: lib.cholesky_solve(lib.ones(3), lib.eye(3)),
    lambda lib: lib.cholesky_solve(lib.ones(2, 2), lib.eye(3)),
    lambda lib: lib.cholesky_solve(lib.ones(3, 2), lib.ones(2, 3)),
    lambda lib: lib.cholesky_solve(lib.ones(3, 2), lib.ones(3)),
    lambda lib: lib.cholesky_solve(lib.ones(3, 2), lib.eye(3, dtype=lib.float64)),
    lambda lib: lib.cholesky_solve(lib.ones(3, 2, dtype=lib.int64), lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.triangular_solve(lib.ones(3), lib.eye(3)),
    lambda lib: lib.triangular_solve(lib.ones(2, 2), lib.eye(3)),
    lambda lib: lib.triangular_solve(lib.ones(3, 2), lib.ones(2, 3)),
    lambda lib: lib.triangular_solve(lib.ones(3, 2), lib.ones(3)),
    lambda lib: lib.triangular_solve(lib.ones(3, 2), lib.eye(3, dtype=lib.float64)),
    lambda lib: lib.linalg.pinv(lib.ones(3)),
    lambda lib: lib.linalg.pinv(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.matrix_rank(lib.ones(3)),
    lambda lib: lib.linalg.matrix_rank(lib.eye(3, dtype=lib.int64)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.tensor(1.0)),
    lambda lib: lib.linalg.lstsq(lib.tensor(1.0), lib.tensor(1.0)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3, dtype=lib.int64), lib.ones(4, 1, dtype=lib.int64)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.ones(4, 1), driver="x"),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.ones(5, 1)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.ones(5)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.ones(4, 1, dtype=lib.float64)),
    lambda lib: lib.linalg.lstsq(lib.ones(4, 3), lib.ones(2, 4, 1)),
])
def test_errors_match_pytorch(make):
    """Same message and type: LinAlgError (a RuntimeError) where PyTorch raises torch.linalg.LinAlgError."""
    errors = _raised_in_both(make)
    expected, got = errors
    assert str(got).replace("staticgrad.", "torch.") == str(expected)
    if isinstance(expected, torch.linalg.LinAlgError):
        assert isinstance(got, sg.linalg.LinAlgError) and isinstance(got, RuntimeError)
    else:
        assert type(got) is type(expected) and not isinstance(got, sg.linalg.LinAlgError)


# ---- empty matrices and half precision --------------------------------------------------------------

CALLS = {
    "solve": lambda lib, a: lib.linalg.solve(a, a),
    "cholesky": lambda lib, a: lib.linalg.cholesky(a),
    "slogdet": lambda lib, a: tuple(lib.linalg.slogdet(a)),
    "logdet": lambda lib, a: lib.logdet(a),
    "qr": lambda lib, a: tuple(lib.linalg.qr(a)),
    "qr_complete": lambda lib, a: tuple(lib.linalg.qr(a, mode="complete")),
    "qr_r": lambda lib, a: tuple(lib.linalg.qr(a, mode="r")),
    "eigh": lambda lib, a: tuple(lib.linalg.eigh(a)),
    "eigvalsh": lambda lib, a: lib.linalg.eigvalsh(a),
    "svd": lambda lib, a: tuple(lib.linalg.svd(a)),
    "svdvals": lambda lib, a: lib.linalg.svdvals(a),
    "torch_svd": lambda lib, a: tuple(lib.svd(a)),
    "pinv": lambda lib, a: lib.linalg.pinv(a),
    "matrix_rank": lambda lib, a: lib.linalg.matrix_rank(a),
    "lstsq": lambda lib, a: tuple(lib.linalg.lstsq(a, a)),
    "lstsq_gelsd": lambda lib, a: tuple(lib.linalg.lstsq(a, a, driver="gelsd")),
    "solve_triangular": lambda lib, a: lib.linalg.solve_triangular(a, a, upper=True),
    "cholesky_solve": lambda lib, a: lib.cholesky_solve(a, a),
    "triangular_solve": lambda lib, a: tuple(lib.triangular_solve(a, a)),
}
SQUARE_ONLY = {"solve", "cholesky", "slogdet", "logdet", "eigh", "eigvalsh", "solve_triangular", "cholesky_solve",
               "triangular_solve"}


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3), (3, 0), (0, 3)])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_empty_matrices_match_pytorch(name, shape):
    if name in SQUARE_ONLY and shape[-1] != shape[-2]:
        pytest.skip("needs square matrices")
    a = np.zeros(shape) + (np.eye(shape[-1]) if shape[-1] == shape[-2] else 0)
    refused = name == "qr_complete" and shape[-2] > shape[-1]  # as PyTorch: not differentiable
    compare(CALLS[name], [a], grad=name not in ("qr_r", "matrix_rank") and not refused)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_half_precision_raises_pytorchs_error(name):
    errors = _raised_in_both(lambda lib: CALLS[name](lib, lib.eye(3, dtype=lib.float16)))
    assert type(errors[1]) is type(errors[0]) and str(errors[1]) == str(errors[0])


# ---- second derivatives are refused -----------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda a: sg.linalg.solve(a, a.sum(-1)),
    lambda a: sg.linalg.cholesky(_spd(sg, a)),
    lambda a: sg.linalg.slogdet(a).logabsdet,
    lambda a: sg.linalg.qr(a).R,
    lambda a: sg.linalg.eigvalsh(a),
    lambda a: sg.linalg.svdvals(a),
    lambda a: sg.linalg.solve_triangular(a, a, upper=True),
    lambda a: sg.cholesky_solve(a, a),
    lambda a: sg.triangular_solve(a, a).solution,
    lambda a: sg.linalg.pinv(a),
    lambda a: sg.linalg.lstsq(a, a).solution,
    lambda a: sg.cholesky_inverse(a),
    lambda a: sg.linalg.lu_factor(a).LU,
    lambda a: sg.linalg.lu_solve(*sg.linalg.lu_factor(a.detach()), a),
])
def test_second_derivatives_are_refused(call):
    a = sg.tensor(SQUARE[0], requires_grad=True)
    g = sg.autograd.grad(call(a).sum(), [a], create_graph=True)[0]
    assert g.requires_grad
    with pytest.raises(NotImplementedError, match="double backward"):
        sg.autograd.grad(g.sum(), [a])


# ---- record and replay ------------------------------------------------------------------------------

def _decompositions(m):
    """A loss that runs every decomposition of this file on ``m``."""
    spd = m @ m.mT + sg.eye(3)
    w = sg.linalg.eigh(spd)
    s = sg.linalg.svd(m, full_matrices=False)
    q = sg.linalg.qr(m)
    return (sg.linalg.solve(m, m.sum(-1)).sum() + sg.linalg.cholesky(spd).sum() + sg.linalg.slogdet(m).logabsdet.sum()
            + (q.Q * q.R).sum() + w.eigenvalues.sum() + ((w.eigenvectors * w.eigenvalues.unsqueeze(-2))
                                                         @ w.eigenvectors.mT).sum()
            + s.S.sum() + (s.U @ s.Vh).sum() + sg.linalg.solve_triangular(m, spd, upper=True).sum()
            + sg.cholesky_solve(m, sg.linalg.cholesky(spd)).sum() + sg.triangular_solve(m, spd).solution.sum()
            + sg.linalg.pinv(m).sum() * sg.linalg.matrix_rank(m).sum()
            + sg.linalg.lstsq(m, spd).solution.sum() + sg.linalg.lstsq(m, spd, driver="gelsd").residuals.sum()
            + sg.linalg.cholesky_ex(spd).L.sum() + sg.linalg.inv_ex(m).inverse.sum()
            + sg.linalg.solve_ex(m, spd).result.sum() + sg.cholesky_inverse(sg.linalg.cholesky(spd)).sum()
            + sg.linalg.lu_solve(*sg.linalg.lu_factor(m), spd).sum() + sg.linalg.lu(m).U.sum())


@pytest.mark.parametrize("dtype", DTYPES)
def test_replay_is_bit_for_bit_eager(dtype):
    w = sg.tensor(rng.standard_normal((2, 3, 3)).astype(dtype), requires_grad=True)

    def step(x):
        y = _decompositions(w + x)
        y.backward()
        return y

    compiled = sg.compile(step)
    for call in range(3):
        x = sg.tensor((3 * np.eye(3) + np.random.default_rng(30 + call).random((2, 3, 3))).astype(dtype))
        w.grad = None
        y_eager, g_eager = step(x), w.grad.numpy().copy()
        w.grad = None
        y_comp = compiled(x)
        assert y_comp.detach().numpy().tobytes() == y_eager.detach().numpy().tobytes()
        assert w.grad.numpy().tobytes() == g_eager.tobytes()
    assert compiled.stats.replays >= 1
