"""The Numba loops behind the ops NumPy has no fast loop for (staticgrad.ops.loops): erf against
libm, each op against PyTorch at the edges (large |x|, infinities, NaN, ties), float16 to
float64, and a compiled step using each op against its eager run, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step
from staticgrad.ops import OPS, jit_loops
from staticgrad.ops.reductions import sum_to_axes
from tests.oracle import compare, finite_difference_check, torch

rng = np.random.default_rng(7)


def ulps(a, b):
    """Distance in units in the last place between two float32 arrays of finite values."""
    ia, ib = (np.asarray(v, np.float32).view(np.int32).astype(np.int64) for v in (a, b))
    ia = np.where(ia < 0, np.int64(-(2 ** 31)) - ia, ia)   # order negative floats below positive ones
    ib = np.where(ib < 0, np.int64(-(2 ** 31)) - ib, ib)
    return np.abs(ia - ib)


# ---- erf --------------------------------------------------------------------------------------------

def test_float32_erf_is_within_one_ulp_of_libm():
    """A strided sweep of the float32 bit patterns in [0, 4.5) and their negatives (one in 1999;
    the full sweep of 1.08e9 values finds 1.1% one ulp off, none further), plus wide values."""
    bits = np.arange(0, np.float32(4.5).view(np.int32), 1999, dtype=np.int32)
    x = np.concatenate([bits.view(np.float32), rng.uniform(-40, 40, 1000).astype(np.float32)])
    x = np.concatenate([x, -x])
    out = np.empty_like(x)
    jit_loops().erf_array(x, out)
    expected = np.array([math.erf(v) for v in x.tolist()], dtype=np.float32)
    assert ulps(out, expected).max() <= 1
    assert (out != expected).mean() < 0.02


def test_float32_erf_evaluates_its_polynomials_with_fused_multiply_adds():
    """One instruction a term instead of a multiply and an add (the loop takes two thirds of the
    time); the full float32 sweep gives the same values as separate operations did."""
    import numba

    loops = jit_loops()
    fresh = numba.njit(error_model="numpy")(loops.erf_array.py_func)   # cached code cannot be inspected
    x = np.linspace(-5, 5, 37, dtype=np.float32)
    out = np.empty_like(x)
    fresh(x, out)
    (llvm_ir,) = fresh.inspect_llvm().values()
    assert llvm_ir.count("@llvm.fma.") >= 12   # 6 terms of P and 6 of Q
    expected = np.array([math.erf(v) for v in x.tolist()], np.float32)
    assert ulps(out, expected).max() <= 1


def test_float64_erf_is_libm():
    x = np.concatenate([rng.standard_normal(2000) * 3, [0.0, -0.0, 1e-300, 6.0, -27.0]])
    out = np.empty_like(x)
    jit_loops().erf_array(x, out)
    assert out.tobytes() == np.array([math.erf(v) for v in x.tolist()]).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_special_values(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 4.0, 100.0], dtype)
    out = np.empty_like(x)
    jit_loops().erf_array(x, out)
    assert np.isnan(out[0]) and list(out[1:3]) == [1.0, -1.0]
    assert out[3] == 0 and not np.signbit(out[3]) and out[4] == 0 and np.signbit(out[4])
    np.testing.assert_allclose(out[5:7], [2 / math.sqrt(math.pi) * 1e-30, -2 / math.sqrt(math.pi) * 1e-30], rtol=1e-6)
    assert out[7] == dtype(math.erf(4.0)) and out[8] == 1.0


# ---- GELU -------------------------------------------------------------------------------------------

WIDE = np.concatenate([np.linspace(-12, 12, 49), [-40.0, -6.5, -3.3, -1e-3, 1e-3, 5.5, 30.0]]).reshape(7, 8)
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -50.0, 50.0])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_gelu_wide_range_matches_torch(approximate, dtype, tol):
    compare(lambda lib, x: lib.nn.functional.gelu(x, approximate=approximate), [WIDE.astype(dtype)],
            atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_special_values_match_torch(approximate, dtype):
    x, g = SPECIAL.astype(dtype), np.linspace(-2, 2, SPECIAL.size).astype(dtype)
    tx, tg = torch.tensor(x), torch.tensor(g)
    forward = OPS["gelu"].forward(x, approximate=approximate)
    backward = OPS["gelu_backward"].forward(g, x, approximate=approximate)
    expected = torch.nn.functional.gelu(tx, approximate=approximate).numpy()
    if dtype == np.float32 and approximate == "none":
        # PyTorch's float32 erf (a vectorised approximation) gives gelu(inf) = NaN; its float64 one,
        # libm's, gives inf, as does staticgrad in both
        assert np.isnan(expected[0]) and forward[0] == np.inf
        expected[0] = np.inf
    np.testing.assert_allclose(forward, expected, rtol=1e-6)
    np.testing.assert_allclose(backward, torch.ops.aten.gelu_backward(tg, tx, approximate=approximate).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_half_precision_rounds_once_like_torch(approximate):
    x = rng.uniform(-5, 5, (4, 33)).astype(np.float16)
    out = sg.nn.functional.gelu(sg.tensor(x), approximate=approximate)
    expected = torch.nn.functional.gelu(torch.tensor(x), approximate=approximate)
    assert out.dtype == sg.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected.numpy().astype(np.float32),
                               rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_forwards_take_any_layout_and_out(approximate):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    g = rng.standard_normal((5, 6)).astype(np.float32)
    for name, args in (("gelu", [x.T]), ("gelu_backward", [g, x.T])):
        expected = OPS[name].forward(*[np.ascontiguousarray(a) for a in args], approximate=approximate)
        assert OPS[name].forward(*args, approximate=approximate).tobytes() == expected.tobytes()
        out = np.full((5, 6), 7.0, np.float32)
        assert OPS[name].forward(*args, out=out, approximate=approximate) is out
        assert out.tobytes() == expected.tobytes()
        strided = np.full((5, 12), 7.0, np.float32)[:, ::2]   # an out the loop cannot write directly
        assert OPS[name].forward(*args, out=strided, approximate=approximate) is strided
        assert np.ascontiguousarray(strided).tobytes() == expected.tobytes()
        first = np.array(args[0])                           # out is an input: still exact
        OPS[name].forward(first, *args[1:], out=first, approximate=approximate)
        assert first.tobytes() == expected.tobytes()


def test_gelu_backward_promotes_and_broadcasts():
    x, g = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4)
    got = OPS["gelu_backward"].forward(g, x, approximate="none")
    assert got.dtype == np.float64 and got.shape == (3, 4)
    np.testing.assert_allclose(got, torch.ops.aten.gelu_backward(torch.tensor(g).expand(3, 4),
                                                                 torch.tensor(x).double()).numpy(), rtol=1e-12)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_wide_range_against_finite_differences(approximate):
    finite_difference_check(lambda x: sg.nn.functional.gelu(x, approximate=approximate), [WIDE])


def test_gelu_double_backward_on_a_wide_range():
    def grads(lib, x):
        y = lib.nn.functional.gelu(x)
        (gx,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        return gx
    compare(grads, [WIDE[:, :6].copy()], atol=1e-10, rtol=1e-9)


# ---- compiled steps replay eager bit for bit -----------------------------------------------------------

def _twin_steps(build, dtype, lr=0.05):
    """(eager model, eager step, compiled model, compiled step) from one seed."""
    pairs = []
    for _ in range(2):
        sg.manual_seed(3)
        model = build().to(getattr(sg, np.dtype(dtype).name))
        pairs.append((model, training_step(sg, model, sg.optim.SGD(model.parameters(), lr=lr, momentum=0.9))))
    (m_eager, eager), (m_comp, step) = pairs
    return m_eager, eager, m_comp, sg.compile(step)


def _assert_replays_eager(build, batches, dtype):
    m_eager, eager, m_comp, compiled = _twin_steps(build, dtype)
    for x, y in batches:
        le, lc = eager(sg.tensor(x), sg.tensor(y)), compiled(sg.tensor(x), sg.tensor(y))
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
    assert compiled.stats.replays >= 3
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        assert pc.detach().numpy().tobytes() == pe.detach().numpy().tobytes()
        assert pc.grad.numpy().tobytes() == pe.grad.numpy().tobytes()
    return compiled


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_mlp_step_replays_eager(dtype):
    def build():
        nn = sg.nn
        return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU("tanh"), nn.Linear(32, 3))

    data = np.random.default_rng(1)
    batches = [(data.standard_normal((16, 12)).astype(dtype) * 4, data.standard_normal((16, 3)).astype(dtype))
               for _ in range(5)]
    _assert_replays_eager(build, batches, dtype)


# ---- max_pool2d ---------------------------------------------------------------------------------------

GEOMETRIES = [((2, 2), (2, 2), (0, 0)), ((2, 2), (1, 1), (0, 0)), ((2, 2), (2, 1), (0, 0)), ((2, 2), (2, 2), (1, 1)),
              ((3, 3), (2, 2), (1, 1)), ((3, 3), (1, 1), (1, 1)), ((2, 3), (1, 2), (1, 1)), ((3, 2), (3, 2), (0, 1)),
              ((1, 1), (1, 1), (0, 0)), ((5, 5), (2, 2), (2, 2))]


def _torch_pool(x, kernel, stride, padding):
    values, indices = torch.ops.aten.max_pool2d_with_indices(torch.tensor(x), list(kernel), list(stride),
                                                             list(padding))
    return values.numpy(), indices.numpy()


def _pool(x, kernel, stride, padding):
    return OPS["max_pool2d"].forward(x, kernel_size=kernel, stride=stride, padding=padding)


@pytest.mark.parametrize("kernel,stride,padding", GEOMETRIES)
def test_max_pool2d_ties_nan_and_infinities_match_torch(kernel, stride, padding):
    """Ties everywhere (first maximum in window order wins), NaN (the last NaN wins), windows of
    -inf beside padding (the first real cell): values and indices equal PyTorch's exactly."""
    x = np.random.default_rng(5).integers(0, 3, (2, 3, 9, 8)).astype(np.float32)
    x[0, 0, :3, :3] = -np.inf
    x[0, 1, 4, 4] = x[0, 1, 4, 5] = x[0, 1, 5, 4] = np.nan
    x[1, 2] = -np.inf
    x[1, 1, ::3, 1::2] = np.nan
    values, indices = _pool(x, kernel, stride, padding)
    t_values, t_indices = _torch_pool(x, kernel, stride, padding)
    np.testing.assert_array_equal(values, t_values)
    np.testing.assert_array_equal(indices, t_indices)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32])
@pytest.mark.parametrize("kernel,stride,padding", [GEOMETRIES[0], GEOMETRIES[4]])
def test_max_pool2d_dtypes_match_torch(dtype, kernel, stride, padding):
    x = np.random.default_rng(6).integers(-4, 4, (2, 2, 7, 6)).astype(dtype)
    values, indices = _pool(x, kernel, stride, padding)
    t_values, t_indices = _torch_pool(x, kernel, stride, padding)
    assert values.dtype == dtype and indices.dtype == np.int64
    np.testing.assert_array_equal(values, t_values)
    np.testing.assert_array_equal(indices, t_indices)


def test_max_pool2d_any_layout_and_unbatched():
    x = np.random.default_rng(8).standard_normal((3, 8, 6)).astype(np.float32)
    for geometry in (GEOMETRIES[0], GEOMETRIES[4]):
        expected = _torch_pool(x, *geometry)
        for layout in (x, np.asfortranarray(x), np.repeat(x, 2, axis=2)[:, :, ::2]):
            values, indices = _pool(layout, *geometry)
            np.testing.assert_array_equal(values, expected[0])
            np.testing.assert_array_equal(indices, expected[1])


@pytest.mark.parametrize("kernel,stride,padding", GEOMETRIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_backward_adds_like_torch(kernel, stride, padding, dtype):
    """Overlapping windows share cells (ties make more of them): the gradient adds there in
    output order and in the gradient's precision, as PyTorch, so the sums are bit-equal."""
    x = np.random.default_rng(9).integers(0, 2, (2, 3, 9, 8)).astype(dtype)
    values, indices = _pool(x, kernel, stride, padding)
    g = np.random.default_rng(10).standard_normal(values.shape).astype(dtype)
    got = OPS["max_pool2d_backward"].forward(g, indices, input_size=(9, 8))
    expected = torch.ops.aten.max_pool2d_with_indices_backward(
        torch.tensor(g), torch.tensor(x), list(kernel), list(stride), list(padding), [1, 1], False,
        torch.tensor(indices)).numpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected)


def test_max_pool2d_backward_out_and_bad_indices():
    x = np.random.default_rng(11).standard_normal((2, 2, 6, 6)).astype(np.float32)
    values, indices = _pool(x, (3, 3), (1, 1), (1, 1))
    g = np.random.default_rng(12).standard_normal(values.shape).astype(np.float32)
    forward = OPS["max_pool2d_backward"].forward
    expected = forward(g, indices, input_size=(6, 6))
    outs = (np.full((2, 2, 6, 6), 3.0, np.float32), np.full((2, 2, 6, 6), 3.0), np.full((2, 2, 6, 12), 3.0)[..., ::2])
    for out in outs:
        assert forward(g, indices, out=out, input_size=(6, 6)) is out
        np.testing.assert_array_equal(out, expected)
    first = g.copy()   # g and the result have one shape here: out may be g itself
    assert forward(first, indices, out=first, input_size=(6, 6)) is first
    np.testing.assert_array_equal(first, expected)
    bad = indices.copy()
    bad[1, 1, 2, 3] = 36
    with pytest.raises(IndexError, match="outside its input plane"):
        forward(g, bad, input_size=(6, 6))


def test_overlapping_pool_cnn_step_replays_eager():
    def build():
        nn = sg.nn
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 1, 1),
                             nn.Conv2d(4, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.MaxPool2d(2, 1),
                             nn.Flatten(), nn.Linear(16, 3))

    data = np.random.default_rng(2)
    batches = [(np.round(data.standard_normal((6, 2, 8, 8)), 1).astype(np.float32),   # rounded: ties in windows
                data.standard_normal((6, 3)).astype(np.float32)) for _ in range(5)]
    _assert_replays_eager(build, batches, np.float32)


# ---- threshold_backward (ReLU's backward) --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("threshold", [0, 0.5, -1.0])
def test_threshold_backward_matches_torch(dtype, threshold):
    x = np.concatenate([rng.standard_normal(40), [0.0, -0.0, 0.5, -1.0, np.nan, np.inf, -np.inf, 1e-30]]).astype(dtype)
    g = np.concatenate([rng.standard_normal(42), [np.nan, np.inf, -np.inf, -0.0, 2.0, 3.0]]).astype(dtype)
    x, g = x.reshape(6, 8), g.reshape(6, 8)
    got = OPS["threshold_backward"].forward(g, x, threshold=threshold)
    expected = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(x), threshold).numpy()
    assert got.dtype == dtype
    assert got.tobytes() == expected.tobytes()


def test_threshold_backward_layouts_and_out():
    x = rng.standard_normal((7, 5)).astype(np.float32)
    g = rng.standard_normal((5, 7)).astype(np.float32)
    forward = OPS["threshold_backward"].forward
    expected = np.where(x.T <= 0, np.float32(0), g)
    assert forward(g, x.T, threshold=0).tobytes() == expected.tobytes()
    for out in (np.empty((5, 7), np.float32), np.empty((5, 14), np.float32)[:, ::2], np.empty((5, 7))):
        assert forward(g, x.T, out=out, threshold=0) is out
        np.testing.assert_array_equal(out, expected)
    first = g.copy()   # out is the gradient itself
    assert forward(first, x.T, out=first, threshold=0) is first
    assert first.tobytes() == expected.tobytes()
    assert forward(g.astype(np.int64), (x.T > 0).astype(np.int64), threshold=0).dtype == np.int64


def test_relu_gradient_at_nan_is_torch_s():
    x = np.array([[np.nan, -1.0, 2.0], [0.0, -0.0, np.inf]])
    compare(lambda lib, x: lib.relu(x), [x])
    compare(lambda lib, x: lib.relu(x), [x.astype(np.float32)])


def test_relu_backward_fuses_with_elementwise_neighbours_and_replays_eager():
    """Where ReLU's backward meets elementwise ops it joins their fused kernel (its scalar
    expression is the loop's select); where it meets none (a CNN) it runs the loop itself."""
    class Net(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = sg.nn.Linear(12, 32), sg.nn.Linear(32, 3)

        def forward(self, x):
            h = self.a(x)
            return self.b((h.relu() * 2.0 + h.tanh()) * h)

    data = np.random.default_rng(4)
    batches = [(data.standard_normal((16, 12)).astype(np.float32), data.standard_normal((16, 3)).astype(np.float32))
               for _ in range(5)]
    compiled = _assert_replays_eager(Net, batches, np.float32)
    ops = next(p for p in compiled.plans if p.replayable).graph.ops
    assert not any(op.op == "threshold_backward" for op in ops)
    fused = [[name for name, _, _ in loop.body]
             for op in ops if op.op == "fused" for loop in op.attr_dict["kernel"].loops]
    assert any("threshold_backward" in names and len(names) > 1 for names in fused)


# ---- column sums (a sum over leading axes: bias gradients) -----------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leading_axis_sums_take_the_column_loop_with_numpy_s_bits(dtype, monkeypatch):
    """sum_to_size and sum over leading axes of a C-contiguous float array run the column-sum loop;
    each gives np.sum's bits (signed zeros, wide magnitudes, one row, many rows, long rows)."""
    loops, calls = jit_loops(), []
    original = loops.column_sums
    monkeypatch.setattr(loops, "column_sums", lambda a, out: (calls.append(a.shape), original(a, out))[1])
    cases = [((256, 64), (64,)), ((8, 32, 64), (64,)), ((8, 32, 64), (32, 64)), ((1, 5), (5,)),
             ((70000, 3), (3,)), ((2, 9001), (9001,)), ((6, 4, 2), (1, 4, 2)), ((3, 7), (1, 7))]
    for shape, target in cases:
        a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 8, shape)).astype(dtype)
        a[rng.random(shape) < 0.2] = -0.0
        axes = sum_to_axes(shape, target)
        expected = np.sum(a, axis=axes, keepdims=True).reshape(target)
        got = OPS["sum_to_size"].forward(a, shape=target)
        out = np.full(target, np.nan, dtype)
        assert OPS["sum_to_size"].forward(a, out=out, shape=target) is out
        for result in (got, out):
            assert result.shape == target, (shape, target)
            assert np.array_equal(result.view(np.uint8), expected.view(np.uint8)), (shape, target)
        by_sum = OPS["sum"].forward(a, dim=axes, keepdim=False)
        assert np.array_equal(by_sum.view(np.uint8), np.sum(a, axis=axes).view(np.uint8))
    assert len(calls) == 3 * len(cases)
    # not C-contiguous, an inner axis, a single kept element: NumPy's own sum
    calls.clear()
    a = rng.standard_normal((6, 4)).astype(dtype)
    assert np.array_equal(OPS["sum_to_size"].forward(a.T, shape=(6,)), np.sum(a.T, axis=0))
    assert np.array_equal(OPS["sum"].forward(a, dim=(1,)), np.sum(a, axis=1))
    assert np.array_equal(OPS["sum_to_size"].forward(a[:, :1], shape=(1,)), np.sum(a[:, :1], axis=0))
    assert calls == []


def test_bias_gradient_sums_replay_eager_bit_for_bit():
    """A compiled step whose bias gradients are column sums (3-D activations, float64 too) replays
    with eager's bits."""
    for dtype in (sg.float32, sg.float64):
        sg.manual_seed(3)
        model = sg.nn.Sequential(sg.nn.Linear(16, 24), sg.nn.Tanh(), sg.nn.Linear(24, 8)).to(dtype)
        twin = sg.nn.Sequential(sg.nn.Linear(16, 24), sg.nn.Tanh(), sg.nn.Linear(24, 8)).to(dtype)
        twin.load_state_dict(model.state_dict())

        def make(m):
            opt = sg.optim.SGD(m.parameters(), lr=0.1)

            def step(inputs):
                opt.zero_grad()
                loss = (m(inputs) ** 2).mean()
                loss.backward()
                opt.step()
                return loss.detach()
            return step

        eager, compiled = make(twin), sg.compile(make(model))
        for _ in range(4):
            x = sg.tensor(rng.standard_normal((4, 5, 16)), dtype=dtype)
            assert np.array_equal(eager(x).numpy(), compiled(x).numpy())
        for p, q in zip(model.parameters(), twin.parameters()):
            assert np.array_equal(p.detach().numpy(), q.detach().numpy())
        assert compiled.stats.replays >= 2
        assert "_column_sums(" in compiled.plans[-1].compiled_replay.source


def test_column_sum_helper_of_replays_falls_back_to_numpy_s_sum():
    """The replay's column-sum call, on arrays the loop does not take (a transposed input, float16,
    another dtype out), gives the forward's numbers."""
    from staticgrad.ops.reductions import column_sums_into

    a = rng.standard_normal((6, 5))
    for x, out in ((a.T, np.empty(6)), (a.astype(np.float16), np.empty(5, np.float16)),
                   (a.astype(np.float32), np.empty((1, 5), np.float64)), (a, np.empty((1, 5)))):
        column_sums_into(x, out, (0,), out.size)
        expected = OPS["sum_to_size"].forward(x.astype(out.dtype) if x.dtype != np.float16 else x, shape=out.shape)
        assert np.array_equal(out, expected), (x.dtype, out.dtype, x.shape)


# ---- nll_loss over (N, C): one pass for the pick and one for the gradient's scatter --------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_loops_give_pytorch_s_gradient_bits_and_the_numpy_form_s_loss(reduction):
    """The loops (C-contiguous input, int64 targets) and the NumPy form (a strided target) give the
    same bits; the gradient equals PyTorch's bit for bit, +0.0 on ignored rows (whose stand-in class
    got -0.0 before), an all-ignored mean batch included (zeros, where NaN was written)."""
    code = {"none": 0, "mean": 1, "sum": 2}[reduction]
    forward, backward = OPS["nll_loss"].forward, OPS["nll_loss_backward"].forward
    for trial in range(40):
        n, c = int(rng.integers(1, 70)), int(rng.integers(1, 12))
        logp = (rng.standard_normal((n, c)) * 3).astype(np.float32)
        target = rng.integers(0, c, n)
        target[rng.random(n) < (1.0 if trial == 0 else 0.4)] = -100
        strided = np.repeat(target, 2)[::2]
        g = rng.standard_normal(n if code == 0 else ()).astype(np.float32)
        loss, loss_numpy = np.asarray(forward(logp, target, reduction=code)), np.asarray(forward(logp, strided,
                                                                                                reduction=code))
        grad = backward(np.asarray(g), logp, target, sizes=(n, c), reduction=code)
        grad_numpy = backward(np.asarray(g), logp, strided, sizes=(n, c), reduction=code)
        assert np.array_equal(loss.view(np.int32), loss_numpy.view(np.int32))
        assert np.array_equal(grad.view(np.int32), grad_numpy.view(np.int32))
        x = torch.tensor(logp, requires_grad=True)
        expected = torch.nn.functional.nll_loss(x, torch.tensor(target), reduction=reduction)
        expected.backward(torch.tensor(g))
        assert np.array_equal(grad.view(np.int32), x.grad.numpy().view(np.int32))
        # (float32 sums in another order: the error scales with the terms' magnitudes, not the sum's)
        np.testing.assert_allclose(loss, expected.detach().numpy(), rtol=1e-5, atol=1e-6 * (1 + np.abs(logp).sum()))


def test_nll_loss_loops_refuse_a_target_out_of_range_as_pytorch():
    for target in ([0, 5, 1], [0, -3, 1]):
        with pytest.raises(IndexError, match=f"Target {target[1]} is out of bounds."):
            sg.nn.functional.nll_loss(sg.zeros(3, 4), sg.tensor(target))
        with pytest.raises(IndexError, match=f"Target {target[1]} is out of bounds."):
            OPS["nll_loss_backward"].forward(np.asarray(np.float32(1)), np.zeros((3, 4), np.float32),
                                             np.array(target), sizes=(3, 4))


def test_embedding_gathers_rows_in_one_pass_with_pytorch_s_range_error():
    """The one-pass lookup (C-contiguous float rows, int64 indices, read-only ones too) gives
    np.take's rows, into ``out`` when given, and PyTorch's IndexError for an index out of range."""
    forward = OPS["embedding"].forward
    for dtype in (np.float32, np.float64):
        weight = rng.standard_normal((11, 5)).astype(dtype)
        indices = rng.integers(0, 11, (3, 4))
        frozen = indices.copy()
        frozen.flags.writeable = False
        for idx in (indices, frozen, indices[:, ::2]):
            np.testing.assert_array_equal(forward(weight, idx), np.take(weight, idx, axis=0))
        out = np.full((3, 4, 5), np.nan, dtype)
        assert forward(weight, indices, out=out) is out
        np.testing.assert_array_equal(out, np.take(weight, indices, axis=0))
        for bad in (11, -1):
            indices[1, 2] = bad
            with pytest.raises(IndexError, match="index out of range in self"):
                forward(weight, indices)
            with pytest.raises(IndexError, match="index out of range in self"):
                torch.nn.functional.embedding(torch.tensor(indices), torch.tensor(weight))
