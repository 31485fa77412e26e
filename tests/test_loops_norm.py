"""The row loops behind softmax, log-softmax and layer norm (staticgrad.ops.loops): values and
gradients against PyTorch over shapes, dims and dtypes (masked rows, NaN, empty tensors), against
finite differences, twice differentiated, independent of layout, and a compiled step using them
against its eager run, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.ops import OPS, jit_loops
from tests.oracle import compare, finite_difference_check, torch
from tests.test_loops import _assert_replays_eager

rng = np.random.default_rng(17)

# (shape, dim): the last dim (the loops), a dim before it (NumPy), rows of one element, long rows
SOFTMAX_CASES = [((8, 4, 32, 32), -1), ((6, 13), 1), ((6, 13), 0), ((3, 5, 7), 1), ((9, 1), -1), ((2, 1000), -1),
                 ((37,), 0), ((), 0)]
TOL = {np.float64: 1e-12, np.float32: 1e-6}


def _scores(shape, dtype, masked=True):
    """Normal values times 4 with -inf above the diagonal of the last two dims (a causal mask),
    the first row of the first matrix fully masked."""
    x = np.asarray(rng.standard_normal(shape) * 4).astype(dtype)
    if masked and len(shape) >= 2:
        x[..., np.triu(np.ones(shape[-2:], bool), 1)] = -np.inf
        x[(0,) * (len(shape) - 2) + (0,)] = -np.inf
    return x


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_values_and_gradients_match_torch(name, shape, dim, dtype):
    """Masked entries give 0 (softmax) or -inf (log_softmax), a fully masked row NaN, as PyTorch."""
    tol = TOL[dtype]
    compare(lambda lib, x: getattr(lib, name)(x, dim), [_scores(shape, dtype)], atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_special_rows_match_torch(name):
    x = np.array([[np.inf, 1.0, 2.0], [np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, -np.inf],
                  [1e30, -1e30, 0.0], [88.0, 89.0, 90.0]])
    for dtype in (np.float64, np.float32):
        got = getattr(sg, name)(sg.tensor(x.astype(dtype)), -1).numpy()
        expected = getattr(torch, name)(torch.tensor(x.astype(dtype)), -1).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_is_the_maximum_whatever_the_order(dtype):
    """The softmax loops' row maximum (an integer maximum of the floats' ordered bits): NumPy's
    maximum on every row length, infinities included, and +0.0 above -0.0 in either order."""
    loops, data = jit_loops(), np.random.default_rng(11)
    for n in (1, 2, 7, 8, 9, 16, 31, 32, 33, 64, 100):
        x = (data.standard_normal((6, n)) * 10.0 ** data.integers(-30, 30, (6, 1))).astype(dtype)
        x[1, n // 2], x[2], x[3] = np.inf, -np.inf, -np.abs(x[3]) - 1
        out, peaks = np.empty_like(x), np.empty(6, dtype)
        loops.shift_by_row_max(x, out, peaks)
        assert peaks.tobytes() == x.max(axis=1).tobytes()
        with np.errstate(invalid="ignore"):   # the row of -inf: -inf - -inf
            assert out.tobytes() == (x - peaks[:, None]).tobytes()
    zeros = np.array([[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]], dtype)
    out, peaks = np.empty_like(zeros), np.empty(3, dtype)
    loops.shift_by_row_max(zeros, out, peaks)
    assert list(np.signbit(peaks)) == [False, False, True]
    assert list(np.signbit(out[:2]).ravel()) == [True, False, False, True]


@pytest.mark.parametrize("shape,dim", [((0, 5), -1), ((5, 0), -1), ((5, 0), 0), ((2, 0, 3), 1)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_empty_tensors_is_empty(name, shape, dim):
    compare(lambda lib, x: getattr(lib, name)(x, dim), [np.zeros(shape, np.float32)])


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES[:6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_backward_ops_match_torch(shape, dim, dtype):
    x, g = _scores(shape, dtype, masked=False), rng.standard_normal(shape).astype(dtype)
    tx, tg = torch.tensor(x), torch.tensor(g)
    tol = TOL[dtype] * 10
    y, ty = OPS["softmax"].forward(x, dim=dim), torch._softmax(tx, dim, False)
    np.testing.assert_allclose(OPS["softmax_backward"].forward(g, y, dim=dim),
                               torch._softmax_backward_data(tg, ty, dim, ty.dtype).numpy(), rtol=tol, atol=tol)
    y, ty = OPS["log_softmax"].forward(x, dim=dim), torch._log_softmax(tx, dim, False)
    np.testing.assert_allclose(OPS["log_softmax_backward"].forward(g, y, dim=dim),
                               torch._log_softmax_backward_data(tg, ty, dim, ty.dtype).numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_against_finite_differences(name, dim):
    finite_difference_check(lambda x: getattr(sg, name)(x, dim), [rng.standard_normal((5, 11))])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_double_backward(name, dtype):
    tol = 1e-10 if dtype == np.float64 else 1e-5
    compare(lambda lib, x: getattr(lib, name)(x, -1), [rng.standard_normal((4, 19)).astype(dtype)],
            atol=tol, rtol=tol, double=True)


# ---- layer norm --------------------------------------------------------------------------------------

LAYER_NORM_CASES = [((8, 32, 64), (64,)), ((5, 3, 4), (3, 4)), ((7, 13), (13,)), ((2, 3, 1000), (1000,)),
                    ((6,), (6,)), ((4, 2), (2,))]


@pytest.mark.parametrize("shape,normalized", LAYER_NORM_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm_values_and_gradients_match_torch(shape, normalized, dtype, affine):
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    params = [rng.standard_normal(normalized).astype(dtype) for _ in range(2)]
    tol = 1e-11 if dtype == np.float64 else 2e-5

    def layer_norm(lib, x, w, b):
        return lib.nn.functional.layer_norm(x, normalized, w if affine in ("weight", "both") else None,
                                            b if affine in ("bias", "both") else None)
    compare(layer_norm, [x] + params, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layer_norm_ops_match_native_layer_norm(dtype):
    """The op table's forwards and backwards, mean and rstd included, against aten's."""
    shape, normalized = (8, 32, 64), (64,)
    x, g = (rng.standard_normal(shape) * 2).astype(dtype), rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(normalized).astype(dtype), rng.standard_normal(normalized).astype(dtype)
    tx, tg, tw, tb = (torch.tensor(a) for a in (x, g, w, b))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    y, mean, rstd = OPS["layer_norm_affine"].forward(x, w, b, normalized_shape=normalized, eps=1e-5)
    expected = torch.native_layer_norm(tx, list(normalized), tw, tb, 1e-5)
    for got, want in zip((y, mean, rstd), expected):
        assert got.shape == tuple(want.shape) and got.dtype == dtype
        np.testing.assert_allclose(got, want.numpy(), rtol=tol, atol=tol)
    t_mean, t_rstd = expected[1], expected[2]
    grads = OPS["layer_norm_backward_affine"].forward(g, x, mean, rstd, w, normalized_shape=normalized)
    want = torch.ops.aten.native_layer_norm_backward(tg, tx, list(normalized), t_mean, t_rstd, tw, tb, [True] * 3)
    for got, t in zip(grads, want):
        assert got.shape == tuple(t.shape) and got.dtype == dtype
        np.testing.assert_allclose(got, t.numpy(), rtol=tol * 10, atol=tol * 10)
    got = OPS["layer_norm_backward"].forward(g, x, mean, rstd, normalized_shape=normalized)
    want = torch.ops.aten.native_layer_norm_backward(tg, tx, list(normalized), t_mean, t_rstd, None, None,
                                                     [True, False, False])[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=tol * 10, atol=tol * 10)


def test_layer_norm_of_empty_and_special_inputs():
    compare(lambda lib, x: lib.nn.functional.layer_norm(x, (5,)), [np.zeros((0, 5), np.float32)])
    x = np.array([[1.0, 1.0, 1.0], [np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0], [1e30, -1e30, 0.0]], np.float32)
    got = sg.nn.functional.layer_norm(sg.tensor(x), (3,)).numpy()
    expected = torch.nn.functional.layer_norm(torch.tensor(x), (3,)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_against_finite_differences(affine):
    shape = (4, 3, 9)
    arrays = [rng.standard_normal(shape)] + ([rng.standard_normal(9), rng.standard_normal(9)] if affine else [])
    finite_difference_check(lambda x, *p: sg.nn.functional.layer_norm(x, (9,), *p), arrays)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layer_norm_double_backward(dtype):
    tol = 1e-9 if dtype == np.float64 else 1e-4
    arrays = [rng.standard_normal((3, 4, 10)).astype(dtype), rng.standard_normal(10).astype(dtype),
              rng.standard_normal(10).astype(dtype)]
    compare(lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (10,), w, b), arrays, atol=tol, rtol=tol,
            double=True)


# ---- layouts, out and mixed dtypes take the same numbers ---------------------------------------------

def _forwards(x, g):
    """(name, call(x, g, out)) for each op with a row loop, on arrays of x's shape (rows of 16)."""
    y = OPS["softmax"].forward(np.ascontiguousarray(x), dim=-1)
    ly = OPS["log_softmax"].forward(np.ascontiguousarray(x), dim=-1)
    _, mean, rstd = OPS["layer_norm"].forward(np.ascontiguousarray(x), normalized_shape=(16,))
    return [
        ("softmax", lambda x, g, out: OPS["softmax"].forward(x, out=out, dim=-1)),
        ("log_softmax", lambda x, g, out: OPS["log_softmax"].forward(x, out=out, dim=1)),
        ("softmax_backward", lambda x, g, out: OPS["softmax_backward"].forward(g, y, out=out, dim=-1)),
        ("log_softmax_backward", lambda x, g, out: OPS["log_softmax_backward"].forward(g, ly, out=out, dim=-1)),
        ("layer_norm_backward", lambda x, g, out: OPS["layer_norm_backward"].forward(
            g, x, mean, rstd, out=out, normalized_shape=(16,))),
    ]


def test_row_loops_take_any_layout_and_out():
    base = rng.standard_normal((16, 12)).astype(np.float32)
    x, g = base.T, rng.standard_normal((12, 16)).astype(np.float32)   # x: a transposed view
    for name, call in _forwards(x, g):
        expected = call(np.ascontiguousarray(x), g, None)
        assert call(x, g, None).tobytes() == expected.tobytes(), name
        for out in (np.full((12, 16), 7.0, np.float32), np.full((12, 32), 7.0, np.float32)[:, ::2]):
            assert call(x, g, out) is out
            assert np.ascontiguousarray(out).tobytes() == expected.tobytes(), name
        first = np.array(g if "backward" in name else x)   # out is the first input: still exact
        if "backward" in name:
            call(x, first, first)
        else:
            call(first, g, first)
        assert first.tobytes() == expected.tobytes(), name
    w, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    expected = OPS["layer_norm_affine"].forward(np.ascontiguousarray(x), w, b, normalized_shape=(16,), eps=1e-5)
    got = OPS["layer_norm_affine"].forward(x, w[::-1].copy()[::-1], b, normalized_shape=(16,), eps=1e-5)
    for a, e in zip(got, expected):
        assert a.tobytes() == e.tobytes()


def test_mixed_dtypes_and_half_precision_keep_numpy_s_path():
    x = rng.standard_normal((5, 8))
    g = rng.standard_normal((5, 8)).astype(np.float32)
    y = OPS["softmax"].forward(x, dim=-1)
    got = OPS["softmax_backward"].forward(g, y, dim=-1)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, y * (g - np.sum(g * y, axis=-1, keepdims=True)), rtol=1e-12)
    half = sg.softmax(sg.tensor(x.astype(np.float16)), -1)
    assert half.dtype == sg.float16
    np.testing.assert_allclose(half.numpy().astype(np.float32), torch.softmax(torch.tensor(x), -1).numpy(), atol=1e-3)


# ---- a compiled step replays eager bit for bit -----------------------------------------------------------

class _Attention(sg.nn.Module):
    """Pre-norm causal self-attention and a layer-normed head: layer_norm (affine, and without
    weight), softmax over masked scores and (through cross-entropy-like log_softmax) the loss."""

    def __init__(self, width=16, heads=2, steps=8):
        super().__init__()
        nn = sg.nn
        self.heads, self.width = heads, width
        self.ln = nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, 3)
        self.register_buffer("mask", sg.ones(steps, steps, dtype=sg.bool).triu(1))

    def forward(self, x):
        batch, steps, width = x.shape
        q, k, v = (t.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                   for t in self.qkv(self.ln(x)).split(width, dim=2))
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask, float("-inf"))
        h = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, steps, width)
        h = sg.nn.functional.layer_norm(h + x, (width,))
        return self.proj(h).log_softmax(-1).mean(1)


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_step_replays_eager(dtype):
    data = np.random.default_rng(3)
    batches = [(data.standard_normal((4, 8, 16)).astype(dtype) * 2, data.standard_normal((4, 3)).astype(dtype))
               for _ in range(5)]
    _assert_replays_eager(_Attention, batches, dtype)


@pytest.mark.bitexact
def test_cross_entropy_step_replays_eager():
    def build():
        nn = sg.nn
        return nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.Linear(32, 40))

    m_eager, m_comp = build(), build()
    m_comp.load_state_dict(m_eager.state_dict())
    steps = []
    for model in (m_eager, m_comp):
        opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = sg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        steps.append(step)
    eager, compiled = steps[0], sg.compile(steps[1])
    data = np.random.default_rng(5)
    for _ in range(5):
        x, y = sg.tensor(data.standard_normal((24, 12)).astype(np.float32)), sg.tensor(data.integers(0, 40, 24))
        assert compiled(x, y).detach().numpy().tobytes() == eager(x, y).detach().numpy().tobytes()
    assert compiled.stats.replays >= 3
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        assert pc.detach().numpy().tobytes() == pe.detach().numpy().tobytes()


def test_row_loop_ops_check_their_outs_without_numpy_dispatch(monkeypatch):
    """The out checks (does out overlap an input? did the loop write into out?) call NumPy's C
    function, not np.may_share_memory's __array_function__ wrapper (a third of each check, made
    several times a call); an out overlapping an input still gets a correct result."""
    def dispatched(*args, **kwargs):
        raise AssertionError("np.may_share_memory called")

    rng = np.random.default_rng(3)
    g, y = rng.standard_normal((2, 3, 8, 8)).astype(np.float32), rng.random((2, 3, 8, 8)).astype(np.float32)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6, 16), (16,), (16,)))
    expected_bw = OPS["softmax_backward"].forward(g, y, dim=-1)
    expected_ln = OPS["layer_norm_affine"].forward(x, w, b, normalized_shape=(16,))
    monkeypatch.setattr(np, "may_share_memory", dispatched)
    out = np.empty_like(g)
    assert OPS["softmax_backward"].forward(g, y, out=out, dim=-1) is out
    assert out.tobytes() == expected_bw.tobytes()
    aliased = g.copy()   # out is the gradient itself
    OPS["softmax_backward"].forward(aliased, y, out=aliased, dim=-1)
    assert aliased.tobytes() == expected_bw.tobytes()
    outs = (np.empty_like(x), np.empty((4, 6, 1), np.float32), np.empty((4, 6, 1), np.float32))
    results = OPS["layer_norm_affine"].forward(x, w, b, out=outs, normalized_shape=(16,))
    assert all(r is o for r, o in zip(results, outs))
    assert all(r.tobytes() == e.tobytes() for r, e in zip(results, expected_ln))
