"""Known gaps against PyTorch, each pinned by a test: BLAS threads, clamp's dtype promotion,
double backward through nll_loss, CopySlices' node name, and NumPy's RuntimeWarnings."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def _blas_thread_counts() -> list[int]:
    import threadpoolctl
    return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]


def test_set_num_threads_limits_the_blas_threads():
    import threadpoolctl
    before = sg.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):  # restores the BLAS limits on exit
        assert _blas_thread_counts() and set(_blas_thread_counts()) == {2}
        try:
            sg.set_num_threads(1)
            assert sg.get_num_threads() == 1
            assert set(_blas_thread_counts()) == {1}
        finally:
            sg.set_num_threads(before)


# ---- clamp / clip: PyTorch's type promotion of the tensor with its bounds ---------------------------

_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
_SCALAR_BOUNDS = (None, 0, 2, -1, 0.5, 1.5, True)


def _outcome(call, *args, **kwargs):
    """(dtype name, values) of ``call(*args, **kwargs)``, or (error type, message)."""
    try:
        out = call(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return str(out.dtype).split(".")[-1], out.numpy().astype(np.float64).tolist()


@pytest.mark.parametrize("name", ["clamp", "clip"])
@pytest.mark.parametrize("dtype", _DTYPES)
def test_clamp_with_number_bounds_promotes_as_torch(name, dtype):
    values = np.array([-2, 0, 1, 3]).astype(dtype)
    for lo in _SCALAR_BOUNDS:
        for hi in _SCALAR_BOUNDS:
            if lo is None and hi is None:
                continue
            want = _outcome(getattr(torch, name), torch.tensor(values), min=lo, max=hi)
            got = _outcome(getattr(sg, name), sg.tensor(values), min=lo, max=hi)
            assert got == want, (dtype, lo, hi)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("bounds", [("int64", None), (None, "float32"), ("float64", "float64"), ("bool", "bool"),
                                    ("int32", "float32"), ("0d-float64", None), ("0d-int64", "0d-int64")])
def test_clamp_with_tensor_bounds_promotes_as_torch(dtype, bounds):
    values = np.array([-2, 0, 1, 3]).astype(dtype)

    def bound(lib, spec, value):
        if spec is None:
            return None
        zero_dim = spec.startswith("0d-")
        kind = spec.removeprefix("0d-")
        value = value if kind.startswith("float") else int(value)
        return lib.tensor(np.array(value if zero_dim else [value] * 4).astype(kind))

    want = _outcome(lambda: torch.clamp(torch.tensor(values), min=bound(torch, bounds[0], 0.5),
                                        max=bound(torch, bounds[1], 1.5)))
    got = _outcome(lambda: sg.clamp(sg.tensor(values), min=bound(sg, bounds[0], 0.5), max=bound(sg, bounds[1], 1.5)))
    assert got == want


@pytest.mark.parametrize("bound", [300, 2**40, -300, 2**63])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_clamp_bound_out_of_the_integer_range_raises_as_torch(dtype, bound):
    values = np.array([1, 2]).astype(dtype)
    assert _outcome(lambda: sg.clamp(sg.tensor(values), min=bound)) == \
        _outcome(lambda: torch.clamp(torch.tensor(values), min=bound))


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("bounds", [(0.5, None), (None, 2), (True, 1), (0, 1.5), (True, None)])
def test_clamp_in_place_casts_or_refuses_as_torch(dtype, bounds):
    values = np.array([-2, 0, 1, 3]).astype(dtype)
    want = _outcome(lambda: torch.tensor(values).clamp_(*bounds))
    got = _outcome(lambda: sg.tensor(values).clamp_(*bounds))
    assert got == want


def test_clamp_of_an_integer_input_replays_in_the_promoted_dtype():
    @sg.compile
    def scaled(x, y):
        return sg.clamp(x, min=0.5, max=2) * y

    for shift in range(4):
        x = sg.tensor(np.arange(-3, 3) + shift)
        y = sg.tensor(np.full(6, shift + 0.25, np.float32))
        out, eager = scaled(x, y), sg.clamp(x, min=0.5, max=2) * y
        assert out.dtype == sg.float32 and np.array_equal(out.numpy(), eager.numpy())
    assert scaled.stats.replays >= 2


# ---- double backward through nll_loss and cross_entropy ---------------------------------------------

def _class_losses(lib, case):
    """(loss function of x, x's shape) for one nll_loss / cross_entropy case."""
    F = lib.nn.functional
    weight = lib.tensor([0.5, 2.0, 1.0, 3.0], dtype=lib.float64)
    target2 = lib.tensor([0, 2, 3])
    target4 = lib.tensor(np.array([[[0, 1], [3, -100]], [[2, 2], [1, 0]]]))
    return {
        "nll": (lambda x: F.nll_loss(x, target2), (3, 4)),
        "nll-weighted-sum": (lambda x: F.nll_loss(x, target2, weight=weight, reduction="sum"), (3, 4)),
        "nll-none": (lambda x: F.nll_loss(x, target2, reduction="none"), (3, 4)),
        "nll-1d": (lambda x: F.nll_loss(x, lib.tensor(1)), (4,)),
        "nll2d-ignore": (lambda x: F.nll_loss(x, target4), (2, 4, 2, 2)),
        "nll2d-weighted": (lambda x: F.nll_loss(x, target4, weight=weight), (2, 4, 2, 2)),
        "cross_entropy": (lambda x: F.cross_entropy(x, target2), (3, 4)),
        "cross_entropy-weighted": (lambda x: F.cross_entropy(x, target2, weight=weight), (3, 4)),
        "cross_entropy-smoothing": (lambda x: F.cross_entropy(x, target2, label_smoothing=0.2), (3, 4)),
    }[case]


@pytest.mark.parametrize("scale_requires_grad", [False, True], ids=["plain-grad-output", "grad-output-requires-grad"])
@pytest.mark.parametrize("square", [False, True], ids=["x", "x*x"])
@pytest.mark.parametrize("case", ["nll", "nll-weighted-sum", "nll-none", "nll-1d", "nll2d-ignore", "nll2d-weighted",
                                  "cross_entropy", "cross_entropy-weighted", "cross_entropy-smoothing"])
def test_double_backward_through_class_losses(case, square, scale_requires_grad):
    """The gradient made with create_graph is a node of the graph (NllLossBackwardBackward0 where
    nothing else follows the loss's input), and second derivatives equal PyTorch's."""
    results = {}
    for lib in (torch, sg):
        loss_of, shape = _class_losses(lib, case)
        x = lib.tensor(np.random.default_rng(3).standard_normal(shape), requires_grad=True)
        loss = loss_of(x * x if square else x)
        scale = lib.tensor(np.full(tuple(loss.shape), 1.7), requires_grad=scale_requires_grad)
        g, = lib.autograd.grad(loss, x, grad_outputs=scale, create_graph=True)
        node = g.grad_fn.name() if g.grad_fn is not None else None
        results[lib] = [g.requires_grad, node, g.detach().numpy()]
        if g.requires_grad:
            wrt = (x, scale) if scale_requires_grad else (x,)
            results[lib] += [d.numpy() for d in lib.autograd.grad((g * g).sum() + (g * x).sum(), wrt)]
    want, got = results[torch], results[sg]
    assert got[:2] == want[:2] and len(got) == len(want)
    for w, s in zip(want[2:], got[2:]):
        np.testing.assert_allclose(s, w, rtol=1e-10, atol=1e-12)


# ---- the node of an indexed write: CopySlices, IndexPutBackward0, or copy_/fill_ of the whole tensor --

_WRITES = {  # name: (shape, index, value shape or None for a Python number)
    "slice": ((5,), slice(1, 3), (2,)),
    "slice-number": ((5,), slice(1, 3), None),
    "int": ((5,), 2, None),
    "step": ((5,), slice(None, None, 2), (1,)),
    "negative-start": ((5,), slice(-5, None), (5,)),
    "none": ((5,), (slice(None), None), (5, 1)),
    "row": ((2, 3), 0, (1, 3)),
    "ellipsis-int": ((2, 3), (Ellipsis, 1), (2,)),
    "index-tensor": ((5,), [0, 2], (2,)),
    "mask": ((5,), [True, False, True, False, True], None),
    "whole-colon-number": ((5,), slice(None), None),
    "whole-stop-past-end": ((5,), slice(0, 100), (5,)),
    "whole-ellipsis-0d": ((5,), Ellipsis, ()),
    "whole-ellipsis-row": ((2, 3), Ellipsis, (3,)),
    "whole-empty-tuple": ((5,), (), (1,)),
    "whole-0d-target": ((), Ellipsis, None),
    "whole-0d-target-1": ((), (), (1,)),
}


@pytest.mark.parametrize("value_requires_grad", [False, True])
@pytest.mark.parametrize("case", list(_WRITES))
def test_indexed_write_node_names_values_and_gradients_match_torch(case, value_requires_grad):
    shape, index, value_shape = _WRITES[case]
    rng = np.random.default_rng(1)
    base0 = rng.standard_normal(shape)
    value0 = 7.5 if value_shape is None else rng.standard_normal(value_shape)
    seen = {}
    for lib in (torch, sg):
        base = lib.tensor(base0, requires_grad=True)
        value = value0 if value_shape is None else lib.tensor(value0, requires_grad=value_requires_grad)
        idx = lib.tensor(index) if isinstance(index, list) else index
        x = base * 1
        x[idx] = value
        leaves = [base] + ([value] if value_shape is not None and value_requires_grad else [])
        weights = lib.tensor(np.linspace(-1, 2, x.numel()).reshape(shape))
        grads = lib.autograd.grad((x * weights).sum(), leaves)
        seen[lib] = (x.grad_fn.name(), x.detach().numpy(), [g.numpy() for g in grads])
    assert seen[sg][0] == seen[torch][0]
    np.testing.assert_array_equal(seen[sg][1], seen[torch][1])
    for s, t in zip(seen[sg][2], seen[torch][2]):
        np.testing.assert_array_equal(s, t)


@pytest.mark.parametrize(("shape", "index", "value_shape"), [
    ((5,), slice(1, 3), (5,)), ((5,), (slice(None), None), (5,)), ((5,), 2, (2,)), ((5,), slice(1, 3), (2, 1, 2)),
    ((5,), [0, 1], (3,))])
def test_indexed_write_of_a_value_that_does_not_broadcast_raises_as_torch(shape, index, value_shape):
    errors = []
    for lib in (torch, sg):
        x = lib.zeros(shape, requires_grad=True) * 1
        with pytest.raises(RuntimeError) as info:
            x[lib.tensor(index) if isinstance(index, list) else index] = lib.ones(value_shape)
        errors.append(str(info.value))
    assert errors[1] == errors[0]


def test_indexed_write_replays_as_eager():
    def step(x, v):
        y = x * 2
        y[1:3] = v
        y[sg.tensor([0, 4])] = v * 3
        y[...] = y * 0.5
        return y

    w_eager = sg.tensor(np.ones(5, np.float32), requires_grad=True)
    w_comp = sg.tensor(np.ones(5, np.float32), requires_grad=True)
    compiled = sg.compile(lambda x, v: step(x * w_comp, v))
    for call in range(4):
        x = sg.tensor(np.arange(5, dtype=np.float32) + call)
        v = sg.tensor(np.full(2, -call, np.float32))
        y_eager, y_comp = step(x * w_eager, v), compiled(x, v)
        assert np.array_equal(y_comp.detach().numpy(), y_eager.detach().numpy())
        y_eager.sum().backward()
        y_comp.sum().backward()
        assert np.array_equal(w_comp.grad.numpy(), w_eager.grad.numpy())
    assert compiled.stats.replays >= 2


# ---- floating-point errors give nan/inf silently, as in PyTorch (no NumPy RuntimeWarning) -----------

_INF, _NAN = float("inf"), float("nan")
_DOMAIN_ERRORS = {  # name: (function of (lib, x), x)
    "log-negative": (lambda lib, x: lib.log(x), [-1.0, 0.0]),
    "log2": (lambda lib, x: lib.log2(x), [-1.0, 0.0]),
    "log10": (lambda lib, x: lib.log10(x), [-1.0, 0.0]),
    "log1p": (lambda lib, x: lib.log1p(x), [-2.0, -1.0]),
    "sqrt": (lambda lib, x: lib.sqrt(x), [-1.0, 4.0]),
    "rsqrt": (lambda lib, x: lib.rsqrt(x), [-1.0, 0.0]),
    "div-0-by-0": (lambda lib, x: x / x, [0.0, 1.0]),
    "div-by-0": (lambda lib, x: 1.0 / x, [0.0, -0.0]),
    "int-div-by-0": (lambda lib, x: x.long() / 0, [1.0, 0.0]),
    "reciprocal": (lambda lib, x: lib.reciprocal(x), [0.0, 2.0]),
    "acos": (lambda lib, x: lib.acos(x), [2.0, 0.5]),
    "asin": (lambda lib, x: lib.asin(x), [-2.0, 0.5]),
    "acosh": (lambda lib, x: lib.acosh(x), [0.5, 2.0]),
    "atanh": (lambda lib, x: lib.atanh(x), [1.0, 2.0]),
    "pow-negative-half": (lambda lib, x: x ** 0.5, [-1.0, 4.0]),
    "pow-zero-negative": (lambda lib, x: x ** -1.0, [0.0, 2.0]),
    "exp-overflow": (lambda lib, x: lib.exp(x), [1000.0, 1.0]),
    "mul-overflow": (lambda lib, x: x * 1e38 * 1e38, [1.0, -1.0]),
    "inf-minus-inf": (lambda lib, x: x - x, [_INF, 1.0]),
    "zero-times-inf": (lambda lib, x: x * lib.tensor([0.0, _INF], dtype=x.dtype), [_INF, 0.0]),
    "fmod-0": (lambda lib, x: lib.fmod(x, 0.0), [1.0, 2.0]),
    "remainder-0": (lambda lib, x: lib.remainder(x, 0.0), [1.0, 2.0]),
    "sin-inf": (lambda lib, x: lib.sin(x), [_INF, 1.0]),
    "cosh-overflow": (lambda lib, x: lib.cosh(x), [1000.0, 1.0]),
    "sigmoid-overflow": (lambda lib, x: lib.sigmoid(x), [-1000.0, 1.0]),
    "sum-overflow": (lambda lib, x: (x * 3e38).float().sum(), [1.0, 1.0]),
    "cast-overflow": (lambda lib, x: (x * 1e300).float(), [1.0, 1.0]),
    "mean-of-nothing": (lambda lib, x: x[:0].mean(), [1.0, 2.0]),
    "lerp-infinities": (lambda lib, x: lib.lerp(x, -x, 0.5), [_INF, 1.0]),
    "softmax-inf": (lambda lib, x: lib.softmax(x, 0), [_INF, 1.0]),
    "log-in-place": (lambda lib, x: x.clone().log_(), [-1.0, 0.0]),
    "div-in-place": (lambda lib, x: x.clone().div_(0.0), [0.0, 1.0]),
    "nan-passes": (lambda lib, x: lib.tanh(x) + x, [_NAN, 1.0]),
}


@pytest.mark.parametrize("case", list(_DOMAIN_ERRORS))
def test_domain_errors_give_torch_values_without_warnings(case):
    fn, values = _DOMAIN_ERRORS[case]
    want = fn(torch, torch.tensor(values, dtype=torch.float64)).numpy()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fn(sg, sg.tensor(values, dtype=sg.float64)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15)  # nan and inf where PyTorch has them


@pytest.mark.parametrize(("name", "fn", "at"), [
    ("sqrt", lambda lib, x: lib.sqrt(x), 0.0), ("log", lambda lib, x: lib.log(x), 0.0),
    ("acos", lambda lib, x: lib.acos(x), 1.0), ("div", lambda lib, x: 1.0 / x, 0.0),
    ("pow", lambda lib, x: x ** 0.5, 0.0)])
def test_gradients_at_singular_points_give_torch_values_without_warnings(name, fn, at):
    import warnings
    x = torch.tensor([at, 0.25], dtype=torch.float64, requires_grad=True)
    want, = torch.autograd.grad(fn(torch, x).sum(), x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sg.tensor([at, 0.25], dtype=sg.float64, requires_grad=True)
        got, = sg.autograd.grad(fn(sg, s).sum(), s)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_replay_and_the_interpreter_give_nan_and_inf_without_warnings():
    """A compiled training step over ops that hit domain errors on some inputs: the generated
    replay (NumPy calls and fused kernels) and the plain interpreter stay silent."""
    import warnings

    from staticgrad.compiler.planner import plan_program
    from staticgrad.runtime.interpreter import Interpreter

    w = sg.tensor(np.ones(4, np.float32), requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        y = x * w
        out = sg.log(y) + sg.sqrt(y) + sg.acos(y) + 1.0 / y + sg.exp(y * 100.0) + y / (y - y)
        out.sum().backward()
        opt.step()
        return out

    def forward(x):
        return sg.log(x) * 2.0 + sg.sqrt(x) + sg.acos(x) + 1.0 / x + sg.exp(x * 100.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for compiled in (sg.compile(step), sg.compile(forward)):
            for call in range(4):
                out = compiled(sg.tensor(np.array([-1.0, 0.0, 2.0, 0.5 + call], np.float32))).detach()
                assert not np.isfinite(out.numpy()[:2]).any()
            assert compiled.stats.replays >= 2
            plan = next(p for p in compiled.plans if p.replayable)
            inputs, captured, scalars = plan.bind([sg.tensor(np.array([-1.0, 0.0, 3.0, 1.0], np.float32))])
            Interpreter(plan_program(plan.unfused_graph)).run(inputs, captured, scalars)


# ---- double backward through activations: PyTorch's *BackwardBackward0 nodes and values ---------------

def _activation(lib, name):
    F = lib.nn.functional
    return {
        "softplus": F.softplus,
        "softplus-beta-threshold": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        "elu": F.elu,
        "elu-alpha": lambda x: F.elu(x, alpha=0.5),
        "selu": F.selu,
        "celu": lambda x: F.celu(x, alpha=0.7),
        "elu-in-place": lambda x: F.elu_(x * 1.0, alpha=0.5),
        "celu-in-place": lambda x: F.celu_(x * 1.0, alpha=1.5),
        "logsigmoid": F.logsigmoid,
        "silu": F.silu,
        "mish": F.mish,
        "gelu": F.gelu,
        "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
        "hardtanh": F.hardtanh,
        "relu": lib.relu,
    }[name]


_ACTIVATIONS = ["softplus", "softplus-beta-threshold", "elu", "elu-alpha", "selu", "celu", "elu-in-place",
                "celu-in-place", "logsigmoid", "silu", "mish", "gelu", "leaky_relu", "hardtanh", "relu"]


@pytest.mark.parametrize("name", _ACTIVATIONS)
def test_activation_double_backward_nodes_and_values_match_torch(name):
    x0 = np.concatenate([np.random.default_rng(2).standard_normal(12) * 3, [0.0, 1.5, -30.0, 30.0]])
    seen = {}
    for lib in (torch, sg):
        x = lib.tensor(x0, requires_grad=True)
        w = lib.tensor(np.linspace(-1.0, 2.0, x0.size), requires_grad=True)
        y = _activation(lib, name)(x)
        g, = lib.autograd.grad((y * w).sum(), x, create_graph=True)
        gx, gw = lib.autograd.grad((g * g).sum(), (x, w))
        seen[lib] = (y.grad_fn.name(), g.grad_fn.name(), g.detach().numpy(), gx.numpy(), gw.numpy())
    assert seen[sg][:2] == seen[torch][:2]
    for s, t in zip(seen[sg][2:], seen[torch][2:]):
        np.testing.assert_allclose(s, t, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["softplus", "softplus-beta-threshold", "elu-alpha", "celu-in-place", "logsigmoid"])
def test_activation_double_backward_matches_finite_differences(name):
    x0 = np.random.default_rng(4).standard_normal(8) * 2
    w = sg.tensor(np.linspace(-1.0, 2.0, 8))

    def first(values):
        x = sg.tensor(values, requires_grad=True)
        g, = sg.autograd.grad((_activation(sg, name)(x) * w).sum(), x, create_graph=True)
        return x, g

    x, g = first(x0)
    analytic, = sg.autograd.grad(g.sum(), x)
    eps = 1e-6
    numeric = np.array([(first(x0 + eps * e)[1].detach().numpy().sum() - first(x0 - eps * e)[1].detach().numpy().sum())
                        / (2 * eps) for e in np.eye(8)])
    np.testing.assert_allclose(analytic.numpy(), numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softplus-beta-threshold", "elu-alpha", "selu", "celu", "logsigmoid"])
def test_activation_backward_ops_replay_as_eager(name):
    from tests.replay_check import replay_matches_eager

    fn = _activation(sg, name)
    replay_matches_eager(lambda a, b: fn(a - b), lambda rng: (rng.normal(0, 2, (3, 5)), rng.normal(0, 1, (3, 5))))
