"""Common PyTorch ops beyond the issue's first list, against PyTorch in float64 (values, gradients,
second derivatives, node names), finite differences, PyTorch's errors, and replay: a recorded training
step replays on new inputs exactly as eager runs it."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# (id, fn(lib, x), input) for one float64 input that requires grad
CASES = [
    ("repeat", lambda lib, x: x.repeat(2, 3), rand(2, 3)),
    ("repeat_new_dims", lambda lib, x: x.repeat(2, 1, 2), rand(2, 3)),
    ("repeat_tuple", lambda lib, x: x.repeat((1, 2)), rand(2, 3)),
    ("repeat_list_ones", lambda lib, x: x.repeat([1, 1]), rand(2, 3)),
    ("repeat_zero", lambda lib, x: x.repeat(0, 2), rand(2, 3)),
    ("repeat_0dim", lambda lib, x: x.sum().repeat(3), rand(2, 3)),
    ("repeat_of_transposed", lambda lib, x: x.t().repeat(2, 2), rand(2, 3)),
    ("repeat_size", lambda lib, x: x.repeat(lib.Size([3, 1])), rand(2, 3)),
    ("tile", lambda lib, x: lib.tile(x, (2,)), rand(2, 3)),
    ("tile_more_dims", lambda lib, x: x.tile(2, 1, 2), rand(2, 3)),
    ("tile_empty", lambda lib, x: lib.tile(x, ()), rand(2, 3)),
    ("movedim", lambda lib, x: lib.movedim(x, 0, 2), rand(2, 3, 4)),
    ("movedim_tuple", lambda lib, x: x.movedim((0, -1), (2, 0)), rand(2, 3, 4)),
    ("moveaxis", lambda lib, x: lib.moveaxis(x, 1, 0), rand(2, 3, 4)),
    ("swapdims", lambda lib, x: x.swapdims(0, 2), rand(2, 3, 4)),
    ("broadcast_to", lambda lib, x: lib.broadcast_to(x, (2, 3, 4)), rand(3, 1)),
    ("broadcast_to_method", lambda lib, x: x.broadcast_to((4, 3, 2)), rand(3, 2)),
    ("broadcast_tensors", lambda lib, x: lib.broadcast_tensors(x, lib.ones(2, 1, 1, dtype=x.dtype)), rand(3, 4)),
    ("meshgrid_ij", lambda lib, x: lib.meshgrid(x, x[:2] * 2, indexing="ij"), rand(3)),
    ("meshgrid_xy", lambda lib, x: lib.meshgrid(x, x[:2] * 2, x[1:] + 1, indexing="xy"), rand(3)),
    ("meshgrid_list", lambda lib, x: lib.meshgrid([x, x.sum()], indexing="ij"), rand(3)),
    ("outer", lambda lib, x: lib.outer(x, x[:2] * 3), rand(3)),
    ("ger", lambda lib, x: x.ger(x), rand(3)),
    ("hstack_1d", lambda lib, x: lib.hstack([x, x[:2]]), rand(3)),
    ("hstack_2d", lambda lib, x: lib.hstack((x, x * 2)), rand(2, 3)),
    ("vstack", lambda lib, x: lib.vstack([x, x * 2]), rand(3)),
    ("row_stack", lambda lib, x: lib.row_stack([x, x.sum(0, keepdim=True)]), rand(2, 3)),
    ("dstack", lambda lib, x: lib.dstack([x, x * 2]), rand(2, 3)),
    ("column_stack", lambda lib, x: lib.column_stack([x[:, 0], x]), rand(3, 2)),
    ("atleast_1d", lambda lib, x: lib.atleast_1d(x.sum()), rand(3)),
    ("atleast_2d", lambda lib, x: lib.atleast_2d(x, x.sum()), rand(3)),
    ("atleast_3d", lambda lib, x: lib.atleast_3d([x, x[0], x.sum()]), rand(2, 3)),
    ("tensor_split_sections", lambda lib, x: lib.tensor_split(x, 3, dim=1), rand(2, 7)),
    ("tensor_split_indices", lambda lib, x: x.tensor_split([1, 4, -1], dim=1), rand(2, 7)),
    ("tensor_split_too_many", lambda lib, x: lib.tensor_split(x, 4), rand(3, 2)),
    ("hsplit", lambda lib, x: lib.hsplit(x, 2), rand(3, 4)),
    ("hsplit_1d", lambda lib, x: x.hsplit([1, 3]), rand(5)),
    ("vsplit", lambda lib, x: lib.vsplit(x, [1]), rand(3, 4)),
    ("dsplit", lambda lib, x: lib.dsplit(x, 2), rand(2, 3, 4)),
    ("select", lambda lib, x: x.select(1, -1), rand(2, 3)),
    ("select_fn", lambda lib, x: lib.select(x, 0, 1), rand(2, 3)),
    ("ravel", lambda lib, x: lib.ravel(x), rand(2, 3)),
    ("ravel_transposed", lambda lib, x: x.t().ravel(), rand(2, 3)),
    ("take_along_dim", lambda lib, x: lib.take_along_dim(x, lib.tensor([[0, 2], [1, 1]]), 1), rand(2, 3)),
    ("take_along_dim_bcast", lambda lib, x: x.take_along_dim(lib.tensor([[2], [0], [1]]), dim=1), rand(1, 3, 4)[0]),
    ("take_along_dim_flat", lambda lib, x: lib.take_along_dim(x, lib.tensor([5, 0, 5])), rand(2, 3)),
    ("msort", lambda lib, x: lib.msort(x), rand(4, 3)),
    ("diff", lambda lib, x: lib.diff(x), rand(3, 5)),
    ("diff_n2_dim0", lambda lib, x: x.diff(n=2, dim=0), rand(4, 3)),
    ("diff_prepend_append", lambda lib, x: lib.diff(x, dim=1, prepend=x[:, :1] * 2, append=x[:, -2:]), rand(3, 4)),
    ("cartesian_prod", lambda lib, x: lib.cartesian_prod(x, x[:2] * 2), rand(3)),
    ("cartesian_prod_three", lambda lib, x: lib.cartesian_prod(x, x[:2], x[1:]), rand(3)),
    ("tensordot", lambda lib, x: lib.tensordot(x, x.transpose(0, 1) * 1, dims=([1, 2], [0, 2])), rand(2, 3, 4)),
    ("tensordot_int", lambda lib, x: lib.tensordot(x, x.permute(1, 2, 0), dims=2), rand(2, 3, 4)),
    ("matrix_power_3", lambda lib, x: lib.matrix_power(x, 3), rand(3, 3)),
    ("matrix_power_batched", lambda lib, x: x.matrix_power(4), rand(2, 3, 3)),
    ("matrix_power_1", lambda lib, x: lib.matrix_power(x, 1), rand(3, 3)),
    ("float_power", lambda lib, x: lib.float_power(x.abs(), 1.5), rand(3).astype(np.float32)),
    ("float_power_tensor", lambda lib, x: x.abs().float_power(x), rand(3)),
    ("clamp_min", lambda lib, x: lib.clamp_min(x, -0.2), rand(3, 4)),
    ("clamp_max_method", lambda lib, x: x.clamp_max(0.3), rand(3, 4)),
    ("clamp_min_inplace", lambda lib, x: (x * 1).clamp_min_(0.0), rand(3, 4)),
    ("clamp_max_tensor", lambda lib, x: x.clamp_max(x[0] * 0.5), rand(3, 4)),
    ("relu_inplace_kw", lambda lib, x: lib.nn.functional.relu(x * 1, inplace=True), rand(3, 4)),
    ("relu_", lambda lib, x: lib.nn.functional.relu_(x * 1), rand(3, 4)),
    ("positive", lambda lib, x: lib.positive(x), rand(3)),
    ("nan_to_num", lambda lib, x: lib.nan_to_num(lib.log(x)), rand(3, 4)),
    ("nan_to_num_args", lambda lib, x: (1 / (x * (x > 0))).nan_to_num(nan=0.5, posinf=2.0, neginf=-3.0), rand(3, 4)),
    ("nan_to_num_inplace", lambda lib, x: lib.log(x).nan_to_num_(), rand(3, 4)),
    ("linalg_vector_norm", lambda lib, x: lib.linalg.vector_norm(x, 3, dim=1), rand(3, 4)),
    ("linalg_vector_norm_all", lambda lib, x: lib.linalg.vector_norm(x, float("inf")), rand(3, 4)),
    ("linalg_norm_vector", lambda lib, x: lib.linalg.norm(x, dim=-1, keepdim=True), rand(3, 4)),
    ("linalg_norm_fro", lambda lib, x: lib.linalg.norm(x), rand(2, 3, 4)),
    ("linalg_norm_matrix_dims", lambda lib, x: lib.linalg.norm(x, dim=(0, 2)), rand(2, 3, 4)),
    ("linalg_matrix_norm", lambda lib, x: lib.linalg.matrix_norm(x), rand(2, 3, 4)),
]


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64(name, fn, x):
    compare(fn, [x], atol=1e-12, rtol=1e-10, double=True)


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_float32_matches_torch(name, fn, x):
    compare(fn, [x.astype(np.float32)], atol=1e-5, rtol=1e-5)


FD_CASES = [c for c in CASES if c[0] in ("repeat_new_dims", "repeat_of_transposed", "tile_more_dims")]


@pytest.mark.parametrize("name,fn,x", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_gradients_match_finite_differences(name, fn, x):
    finite_difference_check(lambda t: fn(sg, t), [x])


def test_repeat_saves_what_torch_saves():
    for lib in (torch, sg):
        x = lib.ones(2, 3, requires_grad=True)
        node = x.repeat(2, 1, 2).grad_fn
        assert node.name() == "RepeatBackward0"
        assert tuple(node._saved_repeats) == (2, 1, 2) and tuple(node._saved_self_sym_sizes) == (2, 3)


def test_instance_norm_repeats_its_weight_as_torch_does():
    x = rand(2, 3, 5)
    for lib in (torch, sg):
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        out = lib.nn.functional.instance_norm(lib.tensor(x), weight=w)
        names, stack = set(), [out.grad_fn]
        while stack:
            node = stack.pop()
            names.add(node.name())
            stack.extend(n for n, _ in node.next_functions if n is not None)
        assert "RepeatBackward0" in names, names


# ---- indexed writes: (id, fn(lib, *xs), arrays, requires_grad) ------------------------------------

IDX = np.array([[0, 1], [2, 3], [1, 0]])                  # along dim 1 of a (3, 4): no repeats per row
DUP = np.array([[0, 0], [2, 2], [1, 0]])                  # repeats: the adding forms accumulate
ROWS = np.array([0, 2])
ROWS_DUP = np.array([2, 0, 2])
TIES = np.array([[1.0, 0.5, 1.0, 0.0], [0.0, 2.0, 2.0, 1.0], [3.0, 3.0, 1.0, 1.0]])
WITH_ZEROS = np.array([[0.0, 1.5, -2.0, 0.5], [1.0, 0.0, 3.0, -1.0], [2.0, 0.5, 0.0, 1.0]])

MULTI = [
    ("scatter", lambda lib, x, s, i: x.scatter(1, i, s), [rand(3, 4), rand(3, 2, seed=1), IDX]),
    ("scatter_src_larger", lambda lib, x, s, i: lib.scatter(x, 1, i, s.detach()), [rand(3, 4), rand(3, 3, seed=1),
                                                                                   IDX]),
    ("scatter_dim0", lambda lib, x, s, i: x.scatter(0, i.t(), s), [rand(4, 3), rand(2, 3, seed=1), IDX]),
    ("scatter_value", lambda lib, x, i: x.scatter(1, i, 2.5), [rand(3, 4), IDX]),
    ("scatter_value_kw", lambda lib, x, i: lib.scatter(x, -1, i, value=-1.0), [rand(3, 4), IDX]),
    ("scatter_int32_index", lambda lib, x, s, i: x.scatter(1, i.int(), s), [rand(3, 4), rand(3, 2, seed=1), IDX]),
    ("scatter_inplace", lambda lib, x, s, i: (x * 1).scatter_(1, i, s), [rand(3, 4), rand(3, 2, seed=1), IDX]),
    ("scatter_add", lambda lib, x, s, i: x.scatter_add(1, i, s), [rand(3, 4), rand(3, 2, seed=1), DUP]),
    ("scatter_add_fn", lambda lib, x, s, i: lib.scatter_add(x, 0, i.t(), s), [rand(4, 3), rand(2, 3, seed=1), DUP]),
    ("scatter_add_inplace", lambda lib, x, s, i: (x * 1).scatter_add_(1, i, s), [rand(3, 4), rand(3, 2, seed=1), DUP]),
    ("scatter_add_1d", lambda lib, x, s, i: x.scatter_add(0, i, s), [rand(5), rand(4, seed=1), np.array([0, 4, 0, 2])]),
    ("index_add", lambda lib, x, s, i: x.index_add(0, i, s), [rand(3, 4), rand(3, 4, seed=1), ROWS_DUP]),
    ("index_add_alpha_dim1", lambda lib, x, s, i: lib.index_add(x, 1, i, s, alpha=-2.5),
     [rand(4, 3), rand(4, 3, seed=1), ROWS_DUP]),
    ("index_add_inplace", lambda lib, x, s, i: (x * 1).index_add_(0, i, s, alpha=2), [rand(3, 4), rand(3, 4, seed=1),
                                                                                       ROWS_DUP]),
    ("index_add_0dim_index", lambda lib, x, s, i: x.index_add(0, i[0], s[:1]), [rand(3, 4), rand(3, 4, seed=1), ROWS]),
    ("index_copy", lambda lib, x, s, i: x.index_copy(0, i, s), [rand(3, 4), rand(2, 4, seed=1), ROWS]),
    ("index_copy_dim1", lambda lib, x, s, i: lib.index_copy(x, 1, i, s), [rand(4, 3), rand(4, 2, seed=1), ROWS]),
    ("index_copy_inplace", lambda lib, x, s, i: (x * 1).index_copy_(0, i, s), [rand(3, 4), rand(2, 4, seed=1), ROWS]),
    ("index_fill", lambda lib, x, i: x.index_fill(1, i, -1.5), [rand(3, 4), ROWS]),
    ("index_fill_fn_negative", lambda lib, x, i: lib.index_fill(x, 0, i - 3, 2.0), [rand(3, 4), ROWS]),
    ("index_fill_tensor", lambda lib, x, v, i: x.index_fill(1, i, v), [rand(3, 4), np.array(0.7), ROWS]),
    ("index_fill_tensor_repeats", lambda lib, x, v, i: x.index_fill(0, i, v), [rand(3, 4), np.array(0.7), ROWS_DUP]),
    ("index_fill_inplace", lambda lib, x, i: (x * 1).index_fill_(1, i, 3.0), [rand(3, 4), ROWS]),
    ("masked_fill_tensor", lambda lib, x, v: x.masked_fill(x > 0, v), [rand(3, 4), np.array(0.7)]),
    ("masked_fill_tensor_bcast", lambda lib, x, v: x.masked_fill(lib.tensor([True, False, True, False]), v),
     [rand(3, 4), np.array(-0.3)]),
    ("masked_fill_tensor_fn", lambda lib, x, v: lib.masked_fill(x, x < 0, v), [rand(3, 4), np.array(0.7)]),
    ("masked_fill_tensor_inplace", lambda lib, x, v: (x * 1).masked_fill_(x > 0, v), [rand(3, 4), np.array(0.7)]),
]
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _include in (True, False):
        MULTI.append((f"scatter_reduce_{_reduce}_{_include}",
                      lambda lib, x, s, i, r=_reduce, inc=_include: x.scatter_reduce(1, i, s, r, include_self=inc),
                      [rand(3, 4), rand(3, 2, seed=1), DUP]))
MULTI += [
    ("scatter_reduce_amax_ties", lambda lib, x, s, i: x.scatter_reduce(1, i, s, "amax"),
     [TIES, np.array([[1.0, 1.0], [2.0, 0.0], [3.0, 3.0]]), DUP]),
    ("scatter_reduce_prod_zeros", lambda lib, x, s, i: lib.scatter_reduce(x, 1, i, s, "prod"),
     [WITH_ZEROS, np.array([[0.0, 2.0], [1.5, 0.0], [0.0, 0.0]]), DUP]),
    ("scatter_reduce_prod_zeros_excl", lambda lib, x, s, i: x.scatter_reduce(1, i, s, "prod", include_self=False),
     [WITH_ZEROS, np.array([[0.0, 2.0], [1.5, 0.0], [-1.0, 0.5]]), DUP]),
    ("scatter_reduce_max_alias", lambda lib, x, s, i: x.scatter_reduce(1, i, s.detach(), "max").detach(),
     [rand(3, 4), rand(3, 2), IDX]),
]


def _grads(arrays):
    return [a.dtype.kind == "f" for a in arrays]


@pytest.mark.parametrize("name,fn,arrays", MULTI, ids=[c[0] for c in MULTI])
def test_indexed_writes_match_torch_in_float64(name, fn, arrays):
    # second derivatives: scatter_reduce's prod backward uses data-dependent masks PyTorch itself
    # differentiates only where no zeros meet; the other reductions are checked
    compare(fn, arrays, requires_grad=_grads(arrays), atol=1e-12, rtol=1e-10, double="prod" not in name)


@pytest.mark.parametrize("name,fn,arrays", MULTI, ids=[c[0] for c in MULTI])
def test_indexed_writes_float32(name, fn, arrays):
    arrays = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays]
    compare(fn, arrays, requires_grad=_grads(arrays), atol=1e-5, rtol=1e-5)


FD_MULTI = [c for c in MULTI if c[0] in ("scatter", "scatter_add", "index_add_alpha_dim1", "index_copy_dim1",
                                         "index_fill_tensor_repeats", "masked_fill_tensor_bcast",
                                         "scatter_reduce_mean_False", "scatter_reduce_amax_True",
                                         "scatter_reduce_prod_True", "scatter_reduce_sum_False")]


@pytest.mark.parametrize("name,fn,arrays", FD_MULTI, ids=[c[0] for c in FD_MULTI])
def test_indexed_writes_match_finite_differences(name, fn, arrays):
    floats = [a for a in arrays if a.dtype.kind == "f"]
    rest = [sg.tensor(a) for a in arrays if a.dtype.kind != "f"]
    finite_difference_check(lambda *xs: fn(sg, *xs, *rest), floats)


def test_scatter_with_reduce_has_no_derivative_as_in_torch():
    for lib in (torch, sg):
        x = lib.zeros(3, 4, requires_grad=True)
        with pytest.warns(UserWarning, match="The reduce argument of torch.scatter with Tensor src is deprecated"):
            out = x.scatter(1, lib.tensor(IDX), lib.ones(3, 2), reduce="add")
        assert out.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            out.sum().backward()
    compare(lambda lib, x, i: x.scatter(1, i, 2.0, reduce="multiply"), [rand(3, 4), IDX], requires_grad=[False, False])


def test_scatter_reduce_max_alias_has_no_backward_as_in_torch():
    for lib in (torch, sg):
        out = lib.zeros(3, 4, requires_grad=True).scatter_reduce(1, lib.tensor(IDX), lib.ones(3, 2), "max")
        with pytest.raises(RuntimeError, match=r"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', "
                                               r"'amin' but got max\."):
            out.sum().backward()


def test_index_add_saves_what_torch_saves():
    for lib in (torch, sg):
        x, s = lib.zeros(3, 4, requires_grad=True), lib.ones(2, 4, requires_grad=True)
        node = x.index_add(0, lib.tensor([0, 2]), s, alpha=2).grad_fn
        assert (node._saved_alpha, node._saved_dim, node._saved_source_dim) == (2, 0, 2)
        assert node._saved_index.tolist() == [0, 2]


VALUES = {
    "equal": lambda lib: [lib.equal(lib.ones(2), lib.ones(2)), lib.equal(lib.ones(2), lib.ones(3)),
                          lib.ones(2).equal(lib.zeros(2))],
    "count_nonzero": lambda lib: [lib.count_nonzero(lib.tensor([[0, 1.5], [2.0, 0]])),
                                  lib.tensor([[0, 1], [2, 0]]).count_nonzero(dim=0)],
    "signbit": lambda lib: [lib.signbit(lib.tensor([-0.0, 0.0, -1.5, 2.0])), lib.tensor([-1, 0, 2]).signbit()],
    "tril_indices": lambda lib: [lib.tril_indices(3, 4), lib.tril_indices(4, 3, -1), lib.tril_indices(3, 3, 1)],
    "triu_indices": lambda lib: [lib.triu_indices(3, 4, 1), lib.triu_indices(4, 3, dtype=lib.int32)],
    "logspace": lambda lib: [lib.logspace(0, 2, 5), lib.logspace(-1, 1, 4, base=2.0, dtype=lib.float64),
                             lib.logspace(0, 1, 1)],
    "is_floating_point": lambda lib: [lib.is_floating_point(lib.ones(1)),
                                      lib.ones(1, dtype=lib.int64).is_floating_point()],
    "casts": lambda lib: [(lib.arange(6.0) * 50).byte(), (lib.arange(6.0) * 50).char(),
                          (lib.arange(6.0) * 9e3).short()],
    # PyTorch's vander writes its cumprod into a slice of its result in place: it has no usable gradient
    "vander": lambda lib: [lib.vander(lib.tensor([0.5, -1.5, 2.0, 3.0])),
                           lib.vander(lib.tensor([0.5, -1.5, 2.0]), N=4, increasing=True),
                           lib.vander(lib.tensor([0.5, 2.0]), N=0), lib.vander(lib.tensor([0.5, 2.0]), N=1)],
    "ndimension": lambda lib: [lib.ones(2, 3).ndimension(), lib.ones(()).ndimension()],
    "broadcast_shapes": lambda lib: [tuple(lib.broadcast_shapes((2, 1), (3, 1, 4)))],
    "matrix_power_0": lambda lib: [lib.matrix_power(lib.ones(2, 3, 3), 0)],
    "vander_ints": lambda lib: [lib.vander(lib.tensor([1, 2, 3]), 4)],
    "meshgrid_default_ij": lambda lib: list(lib.meshgrid(lib.arange(3), lib.arange(2))),
    "where_condition_only": lambda lib: list(lib.where(lib.tensor([[0, 1], [1, 0]]))),
    "finfo": lambda lib: [getattr(lib.finfo(d), a) for d in (lib.float16, lib.float32, lib.float64)
                          for a in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution")]
    + [lib.finfo().bits, repr(lib.finfo(lib.float32)), lib.finfo(lib.float64).dtype],
    "iinfo": lambda lib: [getattr(lib.iinfo(d), a) for d in (lib.uint8, lib.int8, lib.int16, lib.int32, lib.int64)
                          for a in ("bits", "max", "min", "dtype")] + [repr(lib.iinfo(lib.int32))],
    "promotion": lambda lib: [str(lib.promote_types(a, b)).split(".")[-1]
                              for a, b in ((lib.int32, lib.float16), (lib.uint8, lib.int8), (lib.bool, lib.int16))]
    + [str(lib.result_type(*args)).split(".")[-1]
       for args in ((lib.ones(2, dtype=lib.int32), 2.5), (2, 3), (lib.tensor(1, dtype=lib.int8),
                                                                lib.ones(2, dtype=lib.uint8)),
                    (lib.ones(2), lib.tensor(1.0, dtype=lib.float64)), (True, lib.ones(1, dtype=lib.bool)))]
    + [lib.can_cast(a, b) for a, b in ((lib.float64, lib.int32), (lib.int32, lib.float64), (lib.bool, lib.uint8),
                                       (lib.int64, lib.int8))],
}


@pytest.mark.filterwarnings("ignore:torch.meshgrid")
@pytest.mark.parametrize("name", VALUES)
def test_values_match_torch(name):
    for t, s in zip(VALUES[name](torch), VALUES[name](sg), strict=True):
        if isinstance(t, torch.Tensor):
            assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and tuple(s.shape) == tuple(t.shape)
            np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6)
        else:
            assert s == t or (isinstance(t, str) and s.replace("staticgrad", "torch") == t)


def test_meshgrid_refuses_a_2d_tensor_as_torch():
    for lib in (torch, sg):  # (PyTorch prints the tensor in its own old format after the colon)
        with pytest.raises(RuntimeError, match="meshgrid: Expected 0D or 1D tensor in the tensor list but got:"):
            lib.meshgrid(lib.zeros(2, 2), indexing="ij")


def test_meshgrid_without_indexing_warns_as_torch():
    for lib in (sg,):  # (PyTorch warns once per process: its warning text is pinned here)
        with pytest.warns(UserWarning, match="torch.meshgrid: in an upcoming release, it will be required to pass "
                                             "the indexing argument."):
            lib.meshgrid(lib.ones(2), lib.ones(3))


ERRORS = [
    lambda lib: lib.zeros(2, 3).repeat(2),
    lambda lib: lib.zeros(2, 3).repeat(2, -1),
    lambda lib: lib.zeros(2, 3).repeat(-1, 2),
    lambda lib: lib.zeros(2, 3).repeat((2.0, 1)),
    lambda lib: lib.zeros(2, 3).repeat(),
    lambda lib: lib.tile(lib.zeros(2, 3), 2),
    lambda lib: lib.zeros(2, 3).tile(),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX).float(), lib.ones(3, 2)),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX) + 4, lib.ones(3, 2)),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX) - 1, 2.0),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX)[0], lib.ones(3, 2)),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.zeros(3, 5, dtype=lib.int64), lib.ones(3, 2)),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.zeros(4, 2, dtype=lib.int64), 2.0),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX), lib.ones(3, 2, dtype=lib.float64)),
    lambda lib: lib.zeros(3, 4).scatter(2, lib.tensor(IDX), lib.ones(3, 2)),
    lambda lib: lib.zeros(3, 4).scatter(1, lib.tensor(IDX), 2.0, reduce="max"),
    lambda lib: lib.zeros(3, 4).scatter_add(1, lib.tensor(IDX), 2.0),
    lambda lib: lib.zeros(3, 4).scatter_add(1, lib.tensor(IDX), lib.ones(3, 2, dtype=lib.float64)),
    lambda lib: lib.zeros(3, 4).scatter_reduce(1, lib.tensor(IDX), lib.ones(3, 2), "foo"),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 1]), lib.ones(3, 4)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 1]), lib.ones(2, 4, dtype=lib.float64)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 2]), lib.ones(2, 3)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 5]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([-1, 0]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([[0, 2]]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0.0, 2.0]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0, 1]), lib.ones(3, 4)),
    lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0.0, 1.0]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([[0, 1]]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0, 5]), lib.ones(2, 4)),
    lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0, 1]), lib.ones(2, 3)),
    lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([0.0, 2.0]), 1.0),
    lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([[0, 2]]), 1.0),
    lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([0, 2]), lib.tensor([1.0])),
    lambda lib: lib.zeros(3, 4).index_fill(1, lib.tensor([0, 7]), 1.0),
    lambda lib: lib.zeros(3, 4).index_fill(0, lib.tensor([-4]), 1.0),
    lambda lib: lib.zeros(3, 4).masked_fill(lib.zeros(3, 4) > 0, lib.tensor([0.5, 1.0])),
    lambda lib: lib.movedim(lib.zeros(2, 3), (0, 1), (1,)),
    lambda lib: lib.movedim(lib.zeros(2, 3), (0, 0), (1, 0)),
    lambda lib: lib.movedim(lib.zeros(2, 3), 2, 0),
    lambda lib: lib.broadcast_to(lib.zeros(2, 3), (3, 3)),
    lambda lib: lib.broadcast_tensors(lib.zeros(2, 3), lib.zeros(4)),
    lambda lib: lib.meshgrid(lib.zeros(2), indexing="ab"),
    lambda lib: lib.outer(lib.zeros(2, 2), lib.zeros(2)),
    lambda lib: lib.tensor_split(lib.zeros(()), 2),
    lambda lib: lib.tensor_split(lib.zeros(3), 0),
    lambda lib: lib.hsplit(lib.zeros(2, 3), 2),
    lambda lib: lib.vsplit(lib.zeros(3), 1),
    lambda lib: lib.dsplit(lib.zeros(2, 3), 1),
    lambda lib: lib.zeros(2, 3).select(1, 3),
    lambda lib: lib.zeros(2, 3).select(2, 0),
    lambda lib: lib.zeros(()).select(0, 0),
    lambda lib: lib.take_along_dim(lib.zeros(2, 3), lib.tensor([0.0])),
    lambda lib: lib.take_along_dim(lib.zeros(2, 3), lib.tensor([0]), 1),
    lambda lib: lib.diff(lib.zeros(())),
    lambda lib: lib.tensordot(lib.zeros(2, 3), lib.zeros(2, 3), dims=1),
    lambda lib: lib.matrix_power(lib.zeros(2, 3), 2),
    lambda lib: lib.vander(lib.zeros(2, 2)),
    lambda lib: lib.positive(lib.ones(2, dtype=lib.bool)),
    lambda lib: lib.equal(lib.ones(2), [1.0, 1.0]),
    lambda lib: lib.finfo(lib.int32),
    lambda lib: lib.iinfo(lib.float32),
    lambda lib: lib.linalg.norm(lib.ones(2, 3, 4), ord=2),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3)),
]


@pytest.mark.parametrize("fn", ERRORS)
def test_errors_match_torch(fn):
    same_error(fn)


# ---- replay ----------------------------------------------------------------------------------------

def _loss_step(fn, weight):
    def step(x):
        out = fn(sg, x * weight)
        out = out[0] if isinstance(out, tuple) else out
        loss = (out * out).sum()
        loss.backward()
        return loss
    return step


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_replayed_training_step_equals_eager(name, fn, x):
    w_eager = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    w_comp = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    eager, compiled = _loss_step(fn, w_eager), sg.compile(_loss_step(fn, w_comp))
    for seed in range(4):
        data = sg.tensor(rand(*x.shape, seed=10 + seed))
        w_eager.grad = w_comp.grad = None
        le, lc = eager(data), compiled(data)
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
        assert w_comp.grad.numpy().tobytes() == w_eager.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2


REPLAY_MULTI = [c for c in MULTI if c[0] != "scatter_reduce_max_alias"]


@pytest.mark.parametrize("name,fn,arrays", REPLAY_MULTI, ids=[c[0] for c in REPLAY_MULTI])
def test_replayed_indexed_write_step_equals_eager(name, fn, arrays):
    """Every float input is scaled by its own parameter; the step's loss, and each parameter's
    gradient, replay eager's bits on new inputs."""
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]

    def make():
        weights = [sg.tensor(rand(*arrays[i].shape, seed=5 + i), requires_grad=True) for i in floats]

        def step(*xs):
            xs = list(xs)
            for w, i in zip(weights, floats):
                xs[i] = xs[i] * w
            out = fn(sg, *xs)
            loss = (out * out).sum()
            loss.backward()
            return loss
        return step, weights

    (eager, w_eager), (compiled, w_comp) = make(), make()
    compiled = sg.compile(compiled)
    for seed in range(4):
        data = [sg.tensor(rand(*a.shape, seed=10 + seed) if a.dtype.kind == "f" else a) for a in arrays]
        for w in w_eager + w_comp:
            w.grad = None
        le, lc = eager(*data), compiled(*data)
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
        for a, b in zip(w_eager, w_comp):
            assert (a.grad is None and b.grad is None) or b.grad.numpy().tobytes() == a.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2
