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
