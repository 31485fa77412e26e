"""Edges of the public API against PyTorch: losses on an empty batch, non-Tensor arguments to the
torch-level functions, the node PyTorch records for linear and for reductions over dim=(), and
the dtype staticgrad.tensor infers from NumPy scalars, arrays and sequences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad
from tests.oracle import compare, torch

# ---- losses on an empty batch: nan for the mean, zeros for gradients, no NumPy warning --------

EMPTY_LOSSES = [
    ("mse_loss", (0,), np.zeros(0)),
    ("mse_loss", (0, 3), np.zeros((0, 3))),
    ("cross_entropy", (0, 3), np.zeros(0, np.int64)),
    ("cross_entropy", (0, 3, 2, 2), np.zeros((0, 2, 2), np.int64)),
    ("cross_entropy", (2, 3, 0), np.zeros((2, 0), np.int64)),
    ("nll_loss", (0, 3), np.zeros(0, np.int64)),
    ("nll_loss", (0, 3, 2), np.zeros((0, 2), np.int64)),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, shape, target", EMPTY_LOSSES, ids=[f"{n}-{s}" for n, s, _ in EMPTY_LOSSES])
def test_loss_on_an_empty_batch_matches_torch(name, shape, target, reduction):
    def loss(lib, x):
        return getattr(lib.nn.functional, name)(x, lib.tensor(target.copy()), reduction=reduction)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compare(loss, [np.zeros(shape)])
    if reduction == "mean":
        assert np.isnan(out.item())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_label_smoothing_on_an_empty_batch_matches_torch(reduction):
    def loss(lib, x):
        return lib.nn.functional.cross_entropy(x, lib.tensor(np.zeros(0, np.int64)), reduction=reduction,
                                               label_smoothing=0.1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare(loss, [np.zeros((0, 3))])


def _empty_batch_steps(lib, loss_name, target, compiled=False):
    """Three SGD steps of a Linear(3, 2) on a batch of no rows: (loss, weight.grad, bias.grad, weight)."""
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10))
        model.bias.copy_(lib.tensor(np.array([0.1, -0.2], np.float32)))
    opt = lib.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = getattr(lib.nn.functional, loss_name)(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = lib.compile(step) if compiled else step
    x, y = np.zeros((0, 3), np.float32), target
    results = []
    for _ in range(3):
        loss = step(lib.tensor(x), lib.tensor(y.copy()))
        results.append([loss.detach().numpy().copy(), model.weight.grad.numpy().copy(),
                        model.bias.grad.numpy().copy(), model.weight.detach().numpy().copy()])
    return results


@pytest.mark.parametrize("loss_name, target", [("mse_loss", np.zeros((0, 2), np.float32)),
                                               ("cross_entropy", np.zeros(0, np.int64))])
def test_training_step_on_an_empty_batch_gives_nan_loss_and_zero_gradients(loss_name, target):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = _empty_batch_steps(torch, loss_name, target)
        eager = _empty_batch_steps(staticgrad, loss_name, target)
        replayed = _empty_batch_steps(staticgrad, loss_name, target, compiled=True)
    for want, got, again in zip(expected, eager, replayed):
        assert np.isnan(got[0]) and not got[1].any() and not got[2].any()
        for w, g, r in zip(want, got, again):
            assert np.array_equal(g, w, equal_nan=True) and np.array_equal(r, g, equal_nan=True)


# ---- non-Tensor arguments: PyTorch's TypeError, naming the function, argument and type ----------

def _t(lib, *shape):
    return lib.ones(*shape) if shape else lib.ones(2, 3)


# How each torch-level function is called with ``bad`` (an ndarray, a list or None) as a tensor
# argument; every other argument is valid.
NOT_TENSOR_CALLS = {
    **{name: (lambda n: lambda lib, bad: getattr(lib, n)(bad))(name) for name in [
        "abs", "exp", "log", "neg", "negative", "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "sqrt", "square",
        "tanh", "logical_not", "clone", "detach", "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin",
        "flatten", "t", "squeeze", "unbind", "tril", "triu"]},
    **{name: (lambda n: lambda lib, bad: getattr(lib, n)(bad, _t(lib)))(name) for name in [
        "add", "sub", "mul", "div", "pow", "multiply", "subtract", "divide", "true_divide", "maximum", "minimum",
        "logical_and", "eq", "ne", "lt", "le", "gt", "ge"]},
    **{name: (lambda n: lambda lib, bad: getattr(lib, n)(_t(lib), bad))(name) for name in [
        "maximum", "minimum", "logical_and"]},
    "clamp": lambda lib, bad: lib.clamp(bad, 0.0),
    "clip": lambda lib, bad: lib.clip(bad, 0.0),
    "softmax": lambda lib, bad: lib.softmax(bad, 0),
    "log_softmax": lambda lib, bad: lib.log_softmax(bad, 0),
    "logsumexp": lambda lib, bad: lib.logsumexp(bad, 0),
    "gather": lambda lib, bad: lib.gather(bad, 0, lib.zeros(1, 3, dtype=lib.int64)),
    "gather/index": lambda lib, bad: lib.gather(_t(lib), 0, bad),
    "mm": lambda lib, bad: lib.mm(bad, _t(lib, 3, 2)),
    "mm/mat2": lambda lib, bad: lib.mm(_t(lib), bad),
    "bmm": lambda lib, bad: lib.bmm(bad, _t(lib, 1, 3, 2)),
    "bmm/mat2": lambda lib, bad: lib.bmm(_t(lib, 1, 2, 3), bad),
    "mv": lambda lib, bad: lib.mv(bad, _t(lib, 3)),
    "mv/vec": lambda lib, bad: lib.mv(_t(lib), bad),
    "dot": lambda lib, bad: lib.dot(bad, _t(lib, 3)),
    "dot/tensor": lambda lib, bad: lib.dot(_t(lib, 3), bad),
    "addmm": lambda lib, bad: lib.addmm(bad, _t(lib), _t(lib, 3, 3)),
    "addmm/mat1": lambda lib, bad: lib.addmm(_t(lib), bad, _t(lib, 3, 3)),
    "addmm/mat2": lambda lib, bad: lib.addmm(_t(lib), _t(lib, 2, 2), bad),
    "matmul": lambda lib, bad: lib.matmul(bad, _t(lib, 3, 2)),
    "matmul/other": lambda lib, bad: lib.matmul(_t(lib), bad),
    "reshape": lambda lib, bad: lib.reshape(bad, (-1,)),
    "transpose": lambda lib, bad: lib.transpose(bad, 0, 1),
    "swapaxes": lambda lib, bad: lib.swapaxes(bad, 0, 1),
    "permute": lambda lib, bad: lib.permute(bad, (1, 0)),
    "unsqueeze": lambda lib, bad: lib.unsqueeze(bad, 0),
    "expand": lambda lib, bad: (lib.expand if lib is staticgrad else lib.expand_copy)(bad, (2, 3)),
    "split": lambda lib, bad: lib.split(bad, 1),
    "chunk": lambda lib, bad: lib.chunk(bad, 2),
    "narrow": lambda lib, bad: lib.narrow(bad, 0, 0, 1),
    "cat": lambda lib, bad: lib.cat(bad),
    "cat/element": lambda lib, bad: lib.cat([_t(lib), bad]),
    "concat": lambda lib, bad: lib.concat([bad, _t(lib)]),
    "concatenate": lambda lib, bad: lib.concatenate(bad),
    "stack": lambda lib, bad: lib.stack([bad, _t(lib)]),
    "where": lambda lib, bad: lib.where(bad, _t(lib), _t(lib)),
    "masked_fill": lambda lib, bad: lib.masked_fill(bad, _t(lib) > 0, 1.0),
    "F.linear": lambda lib, bad: lib.nn.functional.linear(bad, _t(lib, 4, 3)),
    "F.linear/weight": lambda lib, bad: lib.nn.functional.linear(_t(lib), bad),
    "F.linear/bias": lambda lib, bad: lib.nn.functional.linear(_t(lib), _t(lib, 4, 3), bad),
    "nn.Linear": lambda lib, bad: lib.nn.Linear(3, 4)(bad),
    "F.mse_loss": lambda lib, bad: lib.nn.functional.mse_loss(bad, _t(lib)),
    "F.leaky_relu": lambda lib, bad: lib.nn.functional.leaky_relu(bad),
    "F.relu": lambda lib, bad: lib.nn.functional.relu(bad),
    "F.softmax": lambda lib, bad: lib.nn.functional.softmax(bad, 0),
    "F.cross_entropy": lambda lib, bad: lib.nn.functional.cross_entropy(bad, lib.zeros(2, dtype=lib.int64)),
    "F.cross_entropy/target": lambda lib, bad: lib.nn.functional.cross_entropy(_t(lib), bad),
    "F.nll_loss": lambda lib, bad: lib.nn.functional.nll_loss(bad, lib.zeros(2, dtype=lib.int64)),
    "F.nll_loss/target": lambda lib, bad: lib.nn.functional.nll_loss(_t(lib), bad),
}

BAD_VALUES = {"ndarray": lambda: np.ones((2, 3), np.float32), "list": lambda: [1.0, 2.0], "None": lambda: None}


def _outcome(lib, call, bad):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call(lib, bad)
        except Exception as exc:  # the exception is the outcome compared
            return exc
    return None


@pytest.mark.parametrize("bad", list(BAD_VALUES))
@pytest.mark.parametrize("name", list(NOT_TENSOR_CALLS))
def test_non_tensor_argument_raises_torchs_type_error(name, bad):
    call = NOT_TENSOR_CALLS[name]
    if name == "F.linear/bias" and bad == "None":
        pytest.skip("bias=None is linear without a bias")
    got = _outcome(staticgrad, call, BAD_VALUES[bad]())
    assert isinstance(got, TypeError), f"{type(got).__name__}: {got}"
    expected = _outcome(torch, call, BAD_VALUES[bad]())  # torch has no torch.expand: expand_copy stands in
    want = str(expected).split("\n")[0]
    if name != "expand" and ((isinstance(expected, TypeError) and "must be" in want) or "expected Tensor as" in want):
        assert str(got) == want  # where PyTorch names the argument, the same words
    else:  # PyTorch lists its overloads (or fails elsewhere); staticgrad names the argument
        assert "must be Tensor" in str(got) or "must be tuple of Tensors" in str(got) or "expected Tensor" in str(got)


def test_every_torch_level_function_refuses_non_tensors():
    torch_level = {n for n in dir(staticgrad) if not n.startswith("_") and callable(getattr(staticgrad, n))
                   and getattr(staticgrad.functional, n, None) is getattr(staticgrad, n)
                   and getattr(staticgrad, n) is not staticgrad.Tensor}
    missing = torch_level - {name.split("/")[0] for name in NOT_TENSOR_CALLS}
    assert not missing, f"add non-Tensor cases for: {sorted(missing)}"


# ---- the node PyTorch records -------------------------------------------------------------------

@pytest.mark.parametrize("reduce", [
    lambda lib, x: x.sum(()), lambda lib, x: x.mean([]), lambda lib, x: lib.amax(x), lambda lib, x: x.amin(()),
    lambda lib, x: x.amax((0, 1))])
def test_reduction_over_an_empty_dim_list_reduces_all_and_records_the_dim_form(reduce):
    compare(reduce, [np.linspace(-1, 1, 6).reshape(2, 3)], double=True)  # SumBackward1, AmaxBackward0...


LINEAR_INPUTS = {
    "1d-row-bias": ((3,), (2,)),
    "1d-scalar-bias": ((3,), ()),
    "2d-scalar-bias": ((4, 3), ()),
    "3d-row-bias": ((5, 4, 3), (2,)),
    "3d-(1,2)-bias": ((5, 4, 3), (1, 2)),
    "3d-(4,2)-bias": ((5, 4, 3), (4, 2)),
    "3d-scalar-bias": ((5, 4, 3), ()),
    "3d-transposed": ((4, 5, 3), (2,)),
}


@pytest.mark.parametrize("case", list(LINEAR_INPUTS))
def test_linear_records_pytorchs_nodes_for_every_input_and_bias_shape(case):
    x_shape, b_shape = LINEAR_INPUTS[case]

    def linear(lib, x, w, b):
        x = x.transpose(0, 1) if case == "3d-transposed" else x
        return lib.nn.functional.linear(x, w, b)

    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(x_shape), rng.standard_normal((2, 3)), rng.standard_normal(b_shape)]
    out = compare(linear, arrays)
    t_out = linear(torch, *[torch.tensor(a, requires_grad=True) for a in arrays])
    names = [None if f is None else f.name() for f, _ in out.grad_fn.next_functions]
    t_names = [None if f is None else f.name() for f, _ in t_out.grad_fn.next_functions]
    assert names == t_names


def test_linear_bias_that_would_grow_the_output_is_refused():
    def linear(lib):
        return lib.nn.functional.linear(lib.ones(3), lib.ones(2, 3), lib.ones(4, 2))

    with pytest.raises(RuntimeError) as t_info:
        linear(torch)
    with pytest.raises(RuntimeError) as s_info:
        linear(staticgrad)
    assert str(s_info.value) == str(t_info.value).split("\n")[0]


# ---- the dtype of staticgrad.tensor(data): PyTorch's inference -----------------------------------

# data -> the dtype torch.tensor(data) gives (PyTorch 2.13): a NumPy scalar or array keeps its dtype,
# a Python float is the default float32, and a sequence promotes its elements' types
INFERRED_DTYPES = [
    (np.float64(0.1), "float64"), (np.float32(0.1), "float32"), (np.float16(0.1), "float16"),
    (np.int64(3), "int64"), (np.int32(3), "int32"), (np.int16(3), "int16"), (np.int8(3), "int8"),
    (np.uint8(3), "uint8"), (np.bool_(True), "bool"),
    (np.array(0.1), "float64"), (np.array(0.1, np.float32), "float32"), (np.array(3), "int64"),
    (np.array(3, np.int32), "int32"), (np.array(True), "bool"),
    (0.1, "float32"), (3, "int64"), (True, "bool"), ([], "float32"), ([[]], "float32"),
    ([np.float64(0.1), np.float64(0.2)], "float64"), ([0.1, np.float64(0.2)], "float64"),
    ([[np.float64(1.0), 2], [3, True]], "float64"), ((np.float32(1.0), 2.0), "float32"),
    ([np.int32(1), np.int32(2)], "int32"), ([np.int32(1), 2], "int64"), ([np.int64(1), 1.5], "float32"),
    ([np.float16(1.0), 1], "float16"), ([np.float16(1.0), 1.0], "float32"),
    ([np.uint8(1), np.int8(1)], "int16"), ([np.uint8(200), -1], "int64"), ([np.bool_(True)], "bool"),
    ([np.ones(2), np.ones(2)], "float64"), ([np.ones(2, np.float32), [1.0, 2.0]], "float32"),
]


@pytest.mark.parametrize("data, expected", INFERRED_DTYPES, ids=[repr(d) for d, _ in INFERRED_DTYPES])
def test_tensor_infers_pytorchs_dtype_from_numpy_scalars_arrays_and_sequences(data, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: a list of ndarrays is slow
        assert str(torch.tensor(data).dtype) == f"torch.{expected}"
    made = staticgrad.tensor(data)
    assert made.dtype == getattr(staticgrad, expected)
    np.testing.assert_array_equal(made.numpy(), np.array(data, dtype=expected))
    assert staticgrad.as_tensor(data).dtype == made.dtype


def test_tensor_of_a_numpy_scalar_keeps_its_value_and_tensors_in_a_list_their_dtype():
    assert staticgrad.tensor(np.float64(0.1)).item() == 0.1  # not rounded through float32
    assert staticgrad.tensor([staticgrad.tensor(1.0, dtype=staticgrad.float64), 2.0]).dtype == staticgrad.float64
    assert staticgrad.tensor(np.float64(0.1), dtype=staticgrad.float32).dtype == staticgrad.float32
    with pytest.raises(TypeError, match="complex64"):
        staticgrad.tensor(np.complex64(1))  # PyTorch has complex tensors; staticgrad does not
