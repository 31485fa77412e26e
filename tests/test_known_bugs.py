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
