"""Op-level cases as other libraries' test suites write them in PyTorch, each against torch: NumPy's
keyword names (``axis=``, ``keepdims=``) on the natively bound functions and methods."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)


def _replays_as_eager(step, w, calls) -> None:
    """``step`` (which backpropagates into ``w``) compiled gives eager's result and ``w.grad`` bit for
    bit on every argument tuple of ``calls``."""
    compiled = sg.compile(step)
    for args in calls:
        w.grad = None
        eager, grad = step(*args), w.grad.numpy().copy()
        w.grad = None
        assert compiled(*args).detach().numpy().tobytes() == eager.detach().numpy().tobytes()
        assert w.grad.numpy().tobytes() == grad.tobytes()
    assert compiled.stats.replays >= 1


# ---- axis= for dim=, keepdims= for keepdim= -----------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "amin", "logsumexp", "nansum", "nanmean",
                                  "std", "var", "softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp"])


def test_reductions_take_axis_as_method_and_function(name):
    compare(lambda lib, x: getattr(x, name)(axis=1), [X])
    compare(lambda lib, x: getattr(lib, name)(x, axis=-1), [X])


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "amin", "logsumexp", "std", "var", "all", "any",
                                  "argmax", "argmin", "median", "nansum", "nanmean"])
def test_reductions_take_keepdims_with_dim_or_axis(name):
    compare(lambda lib, x: getattr(x, name)(dim=1, keepdims=True), [X])
    compare(lambda lib, x: getattr(x, name)(axis=(1) if name in ("argmax", "argmin", "median", "all", "any",
                                                                    "prod") else (0, 2), keepdims=True), [X])


def test_max_min_with_keepdims_return_values_and_indices():
    compare(lambda lib, x: list(x.max(axis=2, keepdims=True)), [X])
    compare(lambda lib, x: list(lib.min(x, 0, keepdims=True)), [X])


@pytest.mark.parametrize("call", [
    lambda lib, x: x.squeeze(axis=0),
    lambda lib, x: x.unsqueeze(axis=-1),
    lambda lib, x: list(x.sort(axis=1)),
    lambda lib, x: x.argsort(axis=0),
    lambda lib, x: list(x.topk(2, axis=1)),
    lambda lib, x: list(x.chunk(2, axis=2)),
    lambda lib, x: list(x.unbind(axis=1)),
    lambda lib, x: lib.cat([x, x], axis=1),
    lambda lib, x: lib.stack([x, x], axis=-1),
    lambda lib, x: x.diff(axis=1),
    lambda lib, x: list(x.kthvalue(2, axis=1)),
])
def test_shape_and_order_ops_take_axis(call):
    compare(call, [X[:1]])


def test_python_level_functions_do_not_take_axis():
    """PyTorch's Python-level functions (split, norm, unflatten, F.softmax) keep their own names only."""
    for lib in (torch, sg):
        x = lib.tensor(X)
        with pytest.raises(TypeError):
            x.split(1, axis=0)
        with pytest.raises(TypeError):
            lib.nn.functional.softmax(x, axis=0)


def test_dim_and_axis_together_is_a_type_error():
    for lib in (torch, sg):
        with pytest.raises(TypeError):
            lib.tensor(X).sum(dim=0, axis=0)


@pytest.mark.parametrize("name", ["sum", "cat", "median", "cumsum"])
def test_functions_with_numpy_names_still_pickle_by_name(name):
    import pickle
    for lib in (torch, sg):
        f = getattr(lib, name)
        assert pickle.loads(pickle.dumps(f)) is f
    assert pickle.loads(pickle.dumps(sg.Tensor.sum)) is sg.Tensor.sum


# ---- gather with an index smaller than the input ------------------------------------------------------

IDX = np.random.default_rng(1).integers(0, 3, size=(3, 4, 5))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_gather_reads_the_leading_block_where_the_index_is_smaller(dim):
    data = np.random.default_rng(2).standard_normal((4, 5, 6)).astype(np.float32)
    compare(lambda lib, x, i: x.gather(dim, i), [data, IDX], requires_grad=[True, False])


@pytest.mark.parametrize("shape,index", [
    ((4, 5, 6), [1]),                                 # fewer dims
    ((2, 1, 1), IDX),                                 # larger than the input outside dim
    ((4, 5, 6), np.full((2, 2, 2), 7)),               # out of range
    ((4, 5, 6), np.full((2, 2, 2), -1)),              # negative
    ((4, 5, 6), np.zeros((2, 2, 2), np.float32)),     # not an integer index
])
def test_gather_refuses_what_pytorch_refuses(shape, index):
    from tests.oracle import same_error
    same_error(lambda lib, i: lib.zeros(shape).gather(0, lib.tensor(i)), np.asarray(index))


def test_gather_with_a_smaller_index_replays_bit_for_bit():
    index = sg.tensor(IDX[:, :2, :3])
    w = sg.tensor(np.random.default_rng(3).standard_normal((4, 5, 6)).astype(np.float32), requires_grad=True)

    def step(x):
        y = (x * w).gather(1, index)
        (y * y).sum().backward()
        return y

    calls = []
    for call in range(3):
        x = sg.tensor(np.random.default_rng(10 + call).standard_normal((4, 5, 6)).astype(np.float32))
        calls.append((x,))
    _replays_as_eager(step, w, calls)


# ---- torch.where with two Python numbers ----------------------------------------------------------

@pytest.mark.parametrize("a,b", [(4, 2), (4.0, 2), (1, 2.5), (True, False), (True, 2), (-3, 0.5)])
def test_where_with_two_numbers_takes_their_tensor_dtype(a, b):
    cond = np.array([[True, False, True], [False, False, True]])
    compare(lambda lib, c: lib.where(c, a, b), [cond], requires_grad=[False])
    compare(lambda lib, c: lib.where(c > 0.5, a, b).permute(1, 0), [cond.astype(np.float32)], requires_grad=[False])


def test_where_with_two_numbers_follows_the_default_dtype_and_replays():
    previous = sg.get_default_dtype()
    try:
        sg.set_default_dtype(sg.float64)
        assert sg.where(sg.tensor([True, False]), 1.5, 0).dtype == sg.float64
    finally:
        sg.set_default_dtype(previous)
    w = sg.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True)

    def step(x):
        y = w * sg.where(x > 0, 2.0, -1)
        y.sum().backward()
        return y

    calls = []
    for call in range(3):
        x = sg.tensor(np.random.default_rng(call).standard_normal(6).astype(np.float32))
        calls.append((x,))
    _replays_as_eager(step, w, calls)


# ---- pow's gradients at a zero base ---------------------------------------------------------------

EXPONENTS = np.array([-2.0, -1.0, 0.0, -0.0, 0.3, 1.0, 2.0, 3.0, np.nan], np.float32)


@pytest.mark.parametrize("base", [0, 0.0, 0.7, -2])
def test_number_to_a_tensor_power_has_pytorchs_gradient_at_zero(base):
    compare(lambda lib, x: base ** x, [EXPONENTS], atol=0, rtol=0)


@pytest.mark.parametrize("exponent", [0.0, -0.0, 0.3, -0.3, 2.0])
def test_tensor_to_a_tensor_power_has_pytorchs_gradients_at_zero(exponent):
    base = np.array([0.0, 0.0, -0.0, 1.5], np.float32)
    powers = np.array([exponent, 0.0, exponent, exponent], np.float32)
    compare(lambda lib, x, y: x ** y, [base, powers])


def test_pow_gradients_at_zero_replay_bit_for_bit():
    w = sg.tensor(np.array([0.0, 1.0, 2.0, 0.5], np.float32), requires_grad=True)

    def step(x, y):
        z = (w * x) ** (y * w) + 0 ** (y * w)
        z.sum().backward()
        return z

    calls = []
    for call in range(3):
        rng = np.random.default_rng(call)
        x = sg.tensor(np.where(rng.random(4) < 0.5, 0, rng.random(4)).astype(np.float32))
        y = sg.tensor(np.where(rng.random(4) < 0.5, 0, rng.random(4)).astype(np.float32))
        calls.append((x, y,))
    _replays_as_eager(step, w, calls)


# ---- more than four index tensors -----------------------------------------------------------------

def _five_indices():
    rng = np.random.default_rng(4)
    return [rng.integers(-1, 1, (2, 1, 1, 1, 1)), rng.integers(0, 3, (1, 3, 1, 1, 1)),
            rng.integers(-5, 5, (1, 1, 4, 1, 1)), rng.integers(0, 4, (2, 1, 1, 5, 1)),
            rng.integers(0, 2, (1, 1, 1, 1, 6))]


SIX_D = np.random.default_rng(5).standard_normal((2, 5, 6, 5, 3, 4)).astype(np.float32)


def test_five_index_tensors_read_and_differentiate_as_pytorch():
    compare(lambda lib, x, *idx: x[idx], [SIX_D, *_five_indices()], requires_grad=[True] + [False] * 5)
    compare(lambda lib, x, *idx: x[idx[0], :, idx[2], idx[3], None, idx[4]], [SIX_D, *_five_indices()],
            requires_grad=[True] + [False] * 5)


def test_five_index_tensors_write_as_pytorch():
    def write(lib, x, v, *idx):
        y = x * 1
        y[idx] = v
        return y
    compare(write, [SIX_D, np.float32(3.0) * np.ones((2, 3, 4, 5, 6, 4), np.float32), *_five_indices()],
            requires_grad=[True, True] + [False] * 5)


def test_nine_index_tensors_are_refused_with_a_clear_error():
    x = sg.zeros((1,) * 9)
    with pytest.raises(IndexError, match="at most 8 index tensors"):
        x[(sg.tensor([0]),) * 9]


def test_five_index_tensors_replay_bit_for_bit():
    idx = tuple(sg.tensor(i) for i in _five_indices())
    w = sg.tensor(SIX_D, requires_grad=True)

    def step(x):
        y = (w * x)[idx]
        (y * y).sum().backward()
        return y

    calls = []
    for call in range(3):
        x = sg.tensor(np.random.default_rng(20 + call).standard_normal(SIX_D.shape).astype(np.float32))
        calls.append((x,))
    _replays_as_eager(step, w, calls)


# ---- range factories refuse bool ------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda lib: lib.linspace(5, 10, 3, dtype=lib.bool),
    lambda lib: lib.linspace(5, 10, -1, dtype=lib.bool),    # the steps are checked first
    lambda lib: lib.linspace(0, 1, 3, out=lib.zeros(3, dtype=lib.bool)),
    lambda lib: lib.logspace(0, 1, 3, dtype=lib.bool),
    lambda lib: lib.arange(2, dtype=lib.bool),
    lambda lib: lib.arange(0, 3, -1, dtype=lib.bool),       # the dtype is checked first
])
def test_range_factories_refuse_bool_as_pytorch_does(make):
    from tests.oracle import same_error
    same_error(make)


# ---- nearest interpolation of uint8 images --------------------------------------------------------

BYTES = np.random.default_rng(6).integers(0, 256, (2, 3, 13, 10)).astype(np.uint8)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape,size", [((2, 3, 13), (9,)), ((2, 3, 9), (20,)), ((2, 3, 13, 10), (9, 11)),
                                        ((2, 3, 13, 10), (26, 20)), ((1, 2, 5, 2, 8), (3, 6, 4))])
def test_uint8_interpolates_by_nearest_as_pytorch(mode, shape, size):
    data = BYTES.reshape(-1)[:int(np.prod(shape))].reshape(shape)
    compare(lambda lib, x: lib.nn.functional.interpolate(x, size=size, mode=mode), [data], requires_grad=[False],
            atol=0, rtol=0)


@pytest.mark.parametrize("dtype,mode", [("uint8", "area"), ("int32", "nearest"),
                                        ("int64", "nearest-exact")])
def test_other_integer_interpolations_stay_refused(dtype, mode):
    for lib in (torch, sg):
        with pytest.raises(NotImplementedError):
            lib.nn.functional.interpolate(lib.ones((1, 1, 4, 4), dtype=getattr(lib, dtype)), size=(3, 3),
                                          mode=mode)


def test_uint8_nearest_interpolation_replays_bit_for_bit():
    compiled = sg.compile(lambda x: sg.nn.functional.interpolate(x, size=(9, 11), mode="nearest"))
    for call in range(3):
        x = sg.tensor(np.roll(BYTES, call))
        eager = sg.nn.functional.interpolate(x, size=(9, 11), mode="nearest")
        assert compiled(x).numpy().tobytes() == eager.numpy().tobytes()
    assert compiled.stats.replays >= 1


# ---- linalg.inv and linalg.det ----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (2, 2, 5, 5), (1, 1), (0, 0)])
@pytest.mark.parametrize("call", [lambda lib, a: lib.linalg.inv(a), lambda lib, a: lib.inverse(a),
                                  lambda lib, a: a.inverse(), lambda lib, a: lib.linalg.det(a),
                                  lambda lib, a: lib.det(a), lambda lib, a: a.det()])
def test_inverse_and_determinant_match_pytorch(shape, call):
    a = np.random.default_rng(7).standard_normal(shape).astype(np.float32) + 2 * np.eye(shape[-1], dtype=np.float32)
    compare(call, [a], atol=1e-5, rtol=1e-4)
    compare(call, [a.astype(np.float64)], atol=1e-10, rtol=1e-9)


def test_determinant_gradient_of_a_singular_matrix_is_pytorchs_zero():
    compare(lambda lib, a: lib.linalg.det(a), [np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)])


@pytest.mark.parametrize("make", [
    lambda lib: lib.linalg.inv(lib.tensor(1.0)),
    lambda lib: lib.linalg.inv(lib.ones(3, 4)),
    lambda lib: lib.linalg.inv(lib.zeros(3, 3)),
    lambda lib: lib.linalg.inv(lib.tensor([[1.0, 2.0], [2.0, 4.0]])),
    lambda lib: lib.linalg.inv(lib.zeros(2, 3, 3)),
    lambda lib: lib.linalg.inv(lib.ones(3, 3, dtype=lib.long)),
    lambda lib: lib.det(lib.tensor(1.0)),
    lambda lib: lib.linalg.det(lib.ones(3, 4)),
    lambda lib: lib.linalg.det(lib.ones(3, 3, dtype=lib.int32)),
])
def test_inverse_and_determinant_refuse_what_pytorch_refuses(make):
    """Same type (torch.linalg.LinAlgError for a singular matrix, else RuntimeError) and message."""
    errors = []
    for lib in (torch, sg):
        with pytest.raises(RuntimeError) as info:
            make(lib)
        errors.append(info.value)
    assert str(errors[1]) == str(errors[0])
    assert isinstance(errors[1], sg.linalg.LinAlgError) == isinstance(errors[0], torch.linalg.LinAlgError)


def test_inverse_and_determinant_replay_bit_for_bit():
    w = sg.tensor(np.random.default_rng(8).standard_normal((2, 3, 3)).astype(np.float32), requires_grad=True)

    def step(x):
        m = w + x
        y = sg.linalg.inv(m).sum() + sg.linalg.det(m).sum()
        y.backward()
        return y

    calls = []
    for call in range(3):
        x = sg.tensor((3 * np.eye(3) + np.random.default_rng(30 + call).random((2, 3, 3))).astype(np.float32))
        calls.append((x,))
    _replays_as_eager(step, w, calls)


@pytest.mark.parametrize("name", ["inv", "det"])
def test_second_derivatives_through_inverse_and_determinant_are_refused(name):
    a = sg.tensor(np.eye(3, dtype=np.float32) * 2 + 0.1, requires_grad=True)
    g = sg.autograd.grad(getattr(sg.linalg, name)(a).sum(), [a], create_graph=True)[0]
    assert g.requires_grad
    with pytest.raises(NotImplementedError, match="double backward"):
        sg.autograd.grad(g.sum(), [a])


# ---- diag_embed -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [{}, {"offset": 1}, {"offset": -2, "dim1": 0, "dim2": 2}, {"dim1": 3, "dim2": 1},
                                    {"dim1": -1, "dim2": 0, "offset": 1}])
def test_diag_embed_matches_pytorch(kwargs):
    data = np.random.default_rng(9).standard_normal((2, 3, 4)).astype(np.float32)
    compare(lambda lib, x: lib.diag_embed(x, **kwargs), [data])
    compare(lambda lib, x: x.diag_embed(**kwargs), [data[:1]])


@pytest.mark.parametrize("make", [lambda lib: lib.diag_embed(lib.tensor(1.0)),
                                  lambda lib: lib.diag_embed(lib.ones(3), dim1=0, dim2=0),
                                  lambda lib: lib.diag_embed(lib.ones(2, 3), dim1=5)])
def test_diag_embed_refuses_what_pytorch_refuses(make):
    from tests.oracle import same_error
    same_error(make)


def test_diag_embed_replays_bit_for_bit():
    w = sg.tensor(np.random.default_rng(10).standard_normal((2, 3)).astype(np.float32), requires_grad=True)

    def step(x):
        y = sg.diag_embed(w * x, offset=1, dim1=0, dim2=2)
        (y * y).sum().backward()
        return y

    calls = []
    for call in range(3):
        x = sg.tensor(np.random.default_rng(40 + call).standard_normal((2, 3)).astype(np.float32))
        calls.append((x,))
    _replays_as_eager(step, w, calls)


# ---- torch.linalg's matmul, diagonal, vecdot, multi_dot, matrix_power ---------------------------------

_R = np.random.default_rng(11)
MATS = {s: _R.standard_normal(s).astype(np.float32) for s in [(3, 4), (4, 5), (5,), (4,), (2, 3, 3), (3, 40), (40, 2),
                                                               (2, 30), (30, 4), (4, 50), (50, 3), (3, 20)]}


@pytest.mark.parametrize("call,shapes", [
    (lambda lib, a, b: lib.linalg.matmul(a, b), [(3, 4), (4, 5)]),
    (lambda lib, a: lib.linalg.diagonal(a), [(2, 3, 3)]),
    (lambda lib, a: lib.linalg.diagonal(a, offset=1, dim1=0, dim2=2), [(2, 3, 3)]),
    (lambda lib, a, v: lib.linalg.vecdot(a, v), [(3, 4), (4,)]),
    (lambda lib, a, b: lib.linalg.vecdot(a, b, dim=1), [(2, 3, 3), (2, 3, 3)]),
    (lambda lib, a: lib.linalg.matrix_power(a, 3), [(2, 3, 3)]),
    (lambda lib, *m: lib.linalg.multi_dot(m), [(3, 4), (4, 5)]),
    (lambda lib, *m: lib.linalg.multi_dot(m), [(3, 4), (4, 5), (5,)]),
    (lambda lib, *m: lib.linalg.multi_dot(m), [(4,), (4, 5), (5,)]),
    (lambda lib, *m: lib.linalg.multi_dot(m), [(3, 40), (40, 2), (2, 30)]),
    (lambda lib, *m: lib.linalg.multi_dot(m), [(30, 4), (4, 50), (50, 3), (3, 20)]),
])
def test_linalg_composites_match_pytorch(call, shapes):
    compare(call, [MATS[s] for s in shapes], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("make", [
    lambda lib: lib.linalg.multi_dot([lib.ones(3, 3)]),
    lambda lib: lib.linalg.multi_dot([lib.ones(3, 3), lib.ones(2, 3, 3)]),
    lambda lib: lib.linalg.multi_dot([lib.ones(2, 3, 3), lib.ones(3, 3)]),
    lambda lib: lib.linalg.multi_dot([lib.ones(3, 3), lib.ones(3), lib.ones(3, 3)]),
    lambda lib: lib.linalg.vecdot(lib.ones(3), lib.ones(3, dtype=lib.float64)),
])
def test_linalg_composites_refuse_what_pytorch_refuses(make):
    from tests.oracle import same_error
    same_error(make)


def test_linalg_composites_replay_bit_for_bit():
    w = sg.tensor(MATS[(4, 5)], requires_grad=True)

    def step(x, v):
        y = sg.linalg.multi_dot([x, w, v]) + sg.linalg.vecdot(x, sg.linalg.matmul(w, v).sum() * x, dim=1)
        (y * y).sum().backward()
        return y

    calls = []
    for call in range(3):
        rng = np.random.default_rng(50 + call)
        x, v = (sg.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(3, 4), (5,)])
        calls.append((x, v,))
    _replays_as_eager(step, w, calls)
