"""Data movement ops against PyTorch in float64 (values, gradients, second derivatives, node names),
against finite differences, PyTorch's errors, and replay: a recorded step replays on new inputs
exactly as eager runs it; ops whose result size depends on values are refused while tracing."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
import staticgrad.nn.functional as SF
from staticgrad.errors import TraceError
from tests.oracle import compare, finite_difference_check, same_error, torch

TF = torch.nn.functional


def lib_f(lib):
    """The library's nn.functional."""
    return TF if lib is torch else SF


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def distinct(*shape, seed=0):
    """Values with no ties (sort/topk orders are then unambiguous)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape).astype(np.float64) / n - 0.5


# (id, fn(lib, x), input) for one float64 input that requires grad
CASES = [
    ("flip0", lambda lib, x: x.flip(0), rand(3, 4)),
    ("flip_dims", lambda lib, x: lib.flip(x, (0, -1)), rand(2, 3, 4)),
    ("flip_method_varargs", lambda lib, x: x.flip(1, 2), rand(2, 3, 4)),
    ("fliplr", lambda lib, x: lib.fliplr(x), rand(3, 4)),
    ("roll_dim", lambda lib, x: lib.roll(x, 1, 0), rand(3, 4)),
    ("roll_tuple", lambda lib, x: lib.roll(x, (2, -1), (1, 0)), rand(3, 4)),
    ("roll_flat", lambda lib, x: lib.roll(x, 5), rand(3, 4)),
    ("diagonal", lambda lib, x: x.diagonal(), rand(3, 4)),
    ("diagonal_offset", lambda lib, x: lib.diagonal(x, 1), rand(3, 4)),
    ("diagonal_neg_offset_dims", lambda lib, x: lib.diagonal(x, -1, 2, 0), rand(3, 2, 4)),
    ("diag_matrix", lambda lib, x: lib.diag(x), rand(3, 4)),
    ("diag_matrix_k", lambda lib, x: lib.diag(x, -1), rand(3, 4)),
    ("diag_vector", lambda lib, x: lib.diag(x), rand(3)),
    ("diag_vector_k", lambda lib, x: lib.diag(x, 2), rand(3)),
    ("unfold", lambda lib, x: x.unfold(1, 2, 1), rand(3, 5)),
    ("unfold_step", lambda lib, x: x.unfold(0, 2, 3), rand(7, 2)),
    ("unfold_whole", lambda lib, x: x.unfold(-1, 4, 2), rand(2, 4)),
    ("unflatten", lambda lib, x: x.unflatten(1, (2, -1)), rand(3, 6)),
    ("unflatten_fn", lambda lib, x: lib.unflatten(x, -1, (3, 2)), rand(3, 6)),
    ("repeat_interleave_int", lambda lib, x: x.repeat_interleave(2), rand(2, 3)),
    ("repeat_interleave_dim", lambda lib, x: lib.repeat_interleave(x, 3, dim=1), rand(2, 3)),
    ("repeat_interleave_tensor", lambda lib, x: x.repeat_interleave(lib.tensor([1, 0, 2]), dim=0), rand(3, 2)),
    ("repeat_interleave_one_count", lambda lib, x: x.repeat_interleave(lib.tensor([2])), rand(2, 3)),
    ("index_select", lambda lib, x: lib.index_select(x, 1, lib.tensor([2, 0, 2])), rand(2, 3)),
    ("sort", lambda lib, x: lib.sort(x).values, distinct(3, 4)),
    ("sort_dim_desc", lambda lib, x: x.sort(dim=0, descending=True), distinct(3, 4)),
    ("sort_stable", lambda lib, x: lib.sort(x, stable=True, dim=1), np.array([[1.0, 0.5, 1.0, 0.5, 2.0]])),
    ("sort_desc_ties", lambda lib, x: lib.sort(x, descending=True), np.array([1.0, 0.5, 1.0, 0.5, 2.0])),
    ("topk", lambda lib, x: lib.topk(x, 2), distinct(3, 4)),
    ("topk_smallest_dim0", lambda lib, x: x.topk(2, dim=0, largest=False), distinct(3, 4)),
    ("masked_select", lambda lib, x: lib.masked_select(x, x > 0), rand(3, 4)),
    ("masked_select_broadcast", lambda lib, x: lib.masked_select(x, lib.tensor([True, False, True, True])),
     rand(3, 4)),
    ("index_list", lambda lib, x: x[[0, 2]], rand(3, 4)),
    ("index_repeated", lambda lib, x: x[[0, 2, 0, 0]], rand(3, 4)),
    ("index_negative", lambda lib, x: x[[-1, 0]], rand(3, 4)),
    ("index_two_lists", lambda lib, x: x[[0, 1], [1, 2]], rand(3, 4)),
    ("index_slice_then_list", lambda lib, x: x[:, [1, 0, 1]], rand(3, 4)),
    ("index_list_slice_list", lambda lib, x: x[[0, 1], 1:, [2, 0]], rand(2, 3, 4)),
    ("index_tuple_inside", lambda lib, x: x[1:, (3, 0)], rand(3, 4)),
    ("index_nested_list", lambda lib, x: x[[[0, 1], [2, 2]]], rand(3, 4)),
    ("index_bool_list", lambda lib, x: x[[True, False, True]], rand(3, 4)),
    ("index_int_and_list", lambda lib, x: x[1, [0, 3]], rand(3, 4)),
    ("pad_constant", lambda lib, x: lib_f(lib).pad(x, (1, 2)), rand(2, 3)),
    ("pad_constant_value", lambda lib, x: lib_f(lib).pad(x, (1, 0, 0, 2), value=1.5), rand(2, 3)),
    ("pad_constant_crop", lambda lib, x: lib_f(lib).pad(x, (-1, 2, 1, -1)), rand(3, 4)),
    ("pad_reflect_1d", lambda lib, x: lib_f(lib).pad(x, (2, 1), mode="reflect"), rand(2, 4)),
    ("pad_reflect_2d", lambda lib, x: lib_f(lib).pad(x, (1, 2, 2, 1), mode="reflect"), rand(1, 3, 4)),
    ("pad_reflect_3d", lambda lib, x: lib_f(lib).pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"), rand(1, 2, 3, 3, 3)),
    ("pad_replicate_1d", lambda lib, x: lib_f(lib).pad(x, (3, 1), mode="replicate"), rand(2, 2, 3)),
    ("pad_replicate_2d", lambda lib, x: lib_f(lib).pad(x, (2, 2, 1, 3), mode="replicate"), rand(2, 2, 3)),
    ("pad_replicate_crop", lambda lib, x: lib_f(lib).pad(x, (-1, 2), mode="replicate"), rand(2, 4)),
    ("pad_circular_1d", lambda lib, x: lib_f(lib).pad(x, (2, 1), mode="circular"), rand(2, 3)),
    ("pad_circular_2d", lambda lib, x: lib_f(lib).pad(x, (1, 3, 2, 0), mode="circular"), rand(1, 3, 3)),
    ("pad_circular_crop", lambda lib, x: lib_f(lib).pad(x, (-1, 2), mode="circular"), rand(2, 4)),
]


@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence")
@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64(name, fn, x):
    # PyTorch's reflection and replication pad backward nodes say their gradient requires grad yet have
    # no graph, so a second derivative cannot be asked of PyTorch there (it is zero: the ops are linear)
    compare(fn, [x], atol=1e-12, rtol=1e-10, double=not name.startswith(("pad_reflect", "pad_replicate")))


FD_CASES = [c for c in CASES if c[0] in ("flip_dims", "roll_tuple", "diagonal_neg_offset_dims", "diag_vector_k",
                                         "unfold_step", "repeat_interleave_tensor", "topk", "sort_dim_desc",
                                         "index_repeated", "index_list_slice_list", "pad_reflect_2d",
                                         "pad_replicate_2d", "pad_circular_2d", "pad_constant_crop",
                                         "masked_select_broadcast")]


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name,fn,x", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_gradients_match_finite_differences(name, fn, x):
    if name == "masked_select_broadcast":  # a fixed mask: the selection must not move with the values
        finite_difference_check(lambda t: sg.masked_select(t, sg.tensor([True, False, True, True])), [x])
        return
    finite_difference_check(lambda t: _first(fn(sg, t)), [x])


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ij,kj->ik", [(3, 4), (2, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("i...->...", [(3, 2, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ab,bc,cd->", [(2, 3), (3, 4), (4, 2)]),
    ("ij,ik->jk", [(1, 3), (4, 2)]),
    ("i j , j k -> i k", [(2, 3), (3, 2)]),
    ("Ab,bA->A", [(3, 2), (2, 3)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_values_and_gradients(equation, shapes):
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    s_in = [sg.tensor(a, requires_grad=True) for a in arrays]
    t_out, s_out = torch.einsum(equation, *t_in), sg.einsum(equation, *s_in)
    assert tuple(s_out.shape) == tuple(t_out.shape)
    np.testing.assert_allclose(s_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rand(*t_out.shape, seed=9)
    t_grads = torch.autograd.grad((t_out * torch.tensor(w)).sum(), t_in)
    s_grads = sg.autograd.grad((s_out * sg.tensor(w)).sum(), s_in)
    for tg, sgr in zip(t_grads, s_grads):
        np.testing.assert_allclose(sgr.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation,shapes", [("ij,jk->ik", [(3, 4), (4, 2)]), ("ii->i", [(3, 3)]),
                                             ("ij->", [(3, 4)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
                                             ("i,i->", [(4,), (4,)]), ("ij->ji", [(3, 4)])])
def test_einsum_node_names_follow_pytorch(equation, shapes):
    compare(lambda lib, *xs: lib.einsum(equation, *xs), [rand(*s, seed=i) for i, s in enumerate(shapes)],
            atol=1e-12, rtol=1e-10)


def test_einsum_operand_list_and_integers():
    a, b = np.array([1, 2]), np.array([3, 4])
    assert sg.einsum("i,i", [sg.tensor(a), sg.tensor(b)]).item() == torch.einsum("i,i", torch.tensor(a),
                                                                                   torch.tensor(b)).item()
    finite_difference_check(lambda x, y: sg.einsum("bn,anm,bm->ba", x, sg.ones(4, 3, 2, dtype=sg.float64), y),
                            [rand(2, 3), rand(2, 2, seed=1)])


def test_sort_results_are_named_and_argsort_matches():
    x = distinct(3, 5)
    for descending in (False, True):
        result = sg.sort(sg.tensor(x), 1, descending)
        expected = torch.sort(torch.tensor(x), 1, descending)
        np.testing.assert_array_equal(result.values.numpy(), expected.values.numpy())
        np.testing.assert_array_equal(result.indices.numpy(), expected.indices.numpy())
        assert result.indices.dtype == sg.int64
        values, indices = result
        assert values is result.values and indices is result.indices
        np.testing.assert_array_equal(sg.argsort(sg.tensor(x), 0, descending).numpy(),
                                      torch.argsort(torch.tensor(x), 0, descending).numpy())
    ties = np.array([3, 1, 3, 2, 1, 3])
    for descending in (False, True):
        np.testing.assert_array_equal(sg.tensor(ties).argsort(descending=descending, stable=True).numpy(),
                                      torch.tensor(ties).argsort(descending=descending, stable=True).numpy())
    with_nan = np.array([1.0, np.nan, -2.0, 0.5])
    for descending in (False, True):
        np.testing.assert_array_equal(sg.sort(sg.tensor(with_nan), descending=descending).indices.numpy(),
                                      torch.sort(torch.tensor(with_nan), descending=descending).indices.numpy())
    top = sg.topk(sg.tensor(x), 3)
    assert type(top).__name__ == "topk" and top.indices.dtype == sg.int64


@pytest.mark.parametrize("fn", [lambda lib: lib.sort(lib.tensor(2.0)), lambda lib: lib.topk(lib.tensor(2.0), 1),
                                lambda lib: lib.nonzero(lib.tensor(0.0)), lambda lib: lib.nonzero(lib.tensor(3.0)),
                                lambda lib: lib.nonzero(lib.tensor(3.0), as_tuple=True),
                                lambda lib: lib.flip(lib.tensor(1.5), (0,)), lambda lib: lib.roll(lib.tensor(1.5), 1),
                                lambda lib: lib.tensor(1.5).unfold(0, 1, 1)])
def test_zero_dim_inputs(fn):
    expected, got = fn(torch), fn(sg)
    for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                    got if isinstance(got, tuple) else (got,)):
        assert tuple(g.shape) == tuple(e.shape) and str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), e.numpy())


@pytest.mark.parametrize("args", [(0, 1, 5), (0, 10, 5), (-3.5, 2.25, 7), (1, 0, 4), (0, 1, 1), (2, 1, 0),
                                  (0.1, 0.7, 1000)])
@pytest.mark.parametrize("dtype", [None, "float64", "int64", "int32"])
def test_linspace_matches_torch_bit_for_bit(args, dtype):
    kw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    skw = {} if dtype is None else {"dtype": getattr(sg, dtype)}
    expected, got = torch.linspace(*args, **kw), sg.linspace(*args, **skw)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("make", [lambda lib: lib.tensor([0, 2, 1, 2]), lambda lib: lib.tensor([[0, 3], [1, 1]]),
                                  lambda lib: lib.tensor([], dtype=lib.int64)])
@pytest.mark.parametrize("num_classes", [-1, 5])
def test_one_hot(make, num_classes):
    if num_classes == -1 and make(torch).numel() == 0:
        same_error(lambda lib: lib_f(lib).one_hot(make(lib)))
        return
    expected, got = TF.one_hot(make(torch), num_classes), SF.one_hot(make(sg), num_classes)
    assert got.dtype == sg.int64 and tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("x", [np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]), np.zeros((2, 2)),
                               np.array([True, False, True])])
def test_nonzero(x):
    np.testing.assert_array_equal(sg.nonzero(sg.tensor(x)).numpy(), torch.nonzero(torch.tensor(x)).numpy())
    assert sg.tensor(x).nonzero().dtype == sg.int64
    for g, e in zip(sg.nonzero(sg.tensor(x), as_tuple=True), torch.nonzero(torch.tensor(x), as_tuple=True)):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_diagonal_is_a_writable_view_and_setitem_with_lists():
    for lib in (torch, sg):
        x = lib.zeros(3, 4)
        x.diagonal(1).fill_(2.0)
        x.unfold(0, 2, 1)[0, 0, 1] = 5.0
        x[[0, 2], [3, 1]] = 7.0
        assert x.diagonal()._base is x if lib is sg else True
        if lib is torch:
            expected = x.numpy().copy()
        else:
            np.testing.assert_array_equal(x.numpy(), expected)


def _err(fn):
    return pytest.param(fn, id=None)


ERRORS = [
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (1,)),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (1, 1, 1, 1, 1, 1, 1, 1)),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (3, 3), mode="reflect"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 4, 5), (1, 1, 4, 1), mode="reflect"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 4, 5), (1, 1, 1, 1, 3, 1), mode="reflect"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (4, 4), mode="circular"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (1, 1), mode="foo"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (1, 1), mode="reflect", value=2),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 3, 3), (-2, -2)),
    lambda lib: lib_f(lib).pad(lib.zeros(3), (1, 1), mode="reflect"),
    lambda lib: lib_f(lib).pad(lib.zeros(1, 2, 3, 4), (1, 1), mode="replicate"),
    lambda lib: lib.zeros(1, 3, 3).unfold(1, 4, 1),
    lambda lib: lib.zeros(1, 3, 3).unfold(1, 2, 0),
    lambda lib: lib.zeros(1, 3, 3).unfold(3, 2, 1),
    lambda lib: lib.zeros(1, 3, 3).unflatten(1, (2, 2)),
    lambda lib: lib.zeros(1, 3, 3).unflatten(1, ()),
    lambda lib: lib.zeros(1, 3, 3).diagonal(0, 1, 1),
    lambda lib: lib.diag(lib.zeros(1, 3, 3)),
    lambda lib: lib.roll(lib.zeros(1, 3, 3), (1, 2), (0,)),
    lambda lib: lib.roll(lib.zeros(1, 3, 3), (1, 2)),
    lambda lib: lib.roll(lib.zeros(1, 3, 3), 1, 5),
    lambda lib: lib.zeros(1, 3, 3).flip(0, 0),
    lambda lib: lib.zeros(1, 3, 3).topk(5, 1),
    lambda lib: lib.zeros(1, 3, 3).sort(5),
    lambda lib: lib_f(lib).one_hot(lib.tensor([0, -1])),
    lambda lib: lib_f(lib).one_hot(lib.tensor([0, 3]), 3),
    lambda lib: lib_f(lib).one_hot(lib.tensor([0.0, 3.0])),
    lambda lib: lib.masked_select(lib.zeros(1, 3, 3), lib.tensor([1, 0, 1])),
    lambda lib: lib.masked_select(lib.zeros(1, 3, 3), lib.tensor([True, False])),
    lambda lib: lib.linspace(0, 1, -1),
    lambda lib: lib.einsum("ij,jk", lib.zeros(1, 3, 3), lib.zeros(3, 3)),
    lambda lib: lib.einsum("ij,jk->ik", lib.zeros(3, 3), lib.zeros(2, 3)),
    lambda lib: lib.einsum("ij->ik", lib.zeros(3, 3)),
    lambda lib: lib.einsum("ij->ii", lib.zeros(3, 3)),
    lambda lib: lib.einsum("ii->i", lib.zeros(3, 2)),
    lambda lib: lib.einsum("ij,jk->ik", lib.zeros(3, 3)),
    lambda lib: lib.einsum("ij->i", lib.zeros(3, 3), lib.zeros(3, 3)),
    lambda lib: lib.einsum("i1->i", lib.zeros(3, 3)),
    lambda lib: lib.zeros(1, 3, 3)[[0, 5]],
    lambda lib: lib.zeros(3, 3)[lib.tensor([0.5, 1.0])],
    lambda lib: lib.zeros(3, 3).repeat_interleave(lib.tensor([1, 2])),
    lambda lib: lib.zeros(3, 3).repeat_interleave(-1),
    lambda lib: lib.index_select(lib.zeros(3, 3), 0, lib.tensor([0, 3])),
]


@pytest.mark.parametrize("fn", ERRORS)
def test_errors_match_torch(fn):
    same_error(fn)


# ---- replay ----------------------------------------------------------------------------------------

REPLAY_CASES = [c for c in CASES if c[0] != "masked_select"]  # its mask comes from the data: refused (below)


def _loss_step(lib, fn, weight):
    def step(x):
        out = _first(fn(lib, x * weight))
        loss = (out * out).sum()
        loss.backward()
        return loss
    return step


@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence")
@pytest.mark.parametrize("name,fn,x", REPLAY_CASES, ids=[c[0] for c in REPLAY_CASES])
def test_replayed_training_step_equals_eager(name, fn, x):
    w_eager = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    w_comp = sg.tensor(rand(*x.shape, seed=5), requires_grad=True)
    eager, compiled = _loss_step(sg, fn, w_eager), sg.compile(_loss_step(sg, fn, w_comp))
    for seed in range(4):
        data = sg.tensor(rand(*x.shape, seed=10 + seed))
        w_eager.grad = w_comp.grad = None
        le, lc = eager(data), compiled(data)
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
        assert w_comp.grad.numpy().tobytes() == w_eager.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2


FORWARD_REPLAYS = [
    ("argsort", lambda x: x.argsort(dim=1, descending=True) * 1, lambda s: sg.tensor(distinct(3, 4, seed=s))),
    ("sort_indices", lambda x: sg.sort(x, 0).indices + 0, lambda s: sg.tensor(distinct(3, 4, seed=s))),
    ("one_hot", lambda i: SF.one_hot(i, 6) * 2, lambda s: sg.tensor(np.random.default_rng(s).integers(0, 6, 5))),
    ("linspace", lambda x: x * sg.linspace(-1, 2, 4, dtype=sg.float64), lambda s: sg.tensor(rand(3, 4, seed=s))),
    ("index_by_tensor", lambda x: x[sg.tensor([2, 0])][:, [1, 1]].sum(0), lambda s: sg.tensor(rand(3, 4, seed=s))),
    ("einsum", lambda x: sg.einsum("bij,bkj->bik", x, x) + 1, lambda s: sg.tensor(rand(2, 3, 4, seed=s))),
]


@pytest.mark.parametrize("name,fn,make", FORWARD_REPLAYS, ids=[c[0] for c in FORWARD_REPLAYS])
def test_replayed_forward_equals_eager(name, fn, make):
    compiled = sg.compile(fn)
    for seed in range(4):
        x = make(seed)
        assert compiled(x).numpy().tobytes() == fn(x).numpy().tobytes()
    assert compiled.stats.replays >= 2


DATA_DEPENDENT = [
    ("nonzero", lambda x: sg.nonzero(x > 0)),
    ("nonzero_tuple", lambda x: sg.nonzero(x, as_tuple=True)[0]),
    ("masked_select", lambda x: sg.masked_select(x, x > 0) * 2),
    ("bool_mask_index", lambda x: x[x > 0] * 2),
    ("one_hot_inferred", lambda x: SF.one_hot((x > 0).long())),
    ("repeat_interleave_tensor", lambda x: x.repeat_interleave((x > 0).long(), dim=0)),
]


@pytest.mark.filterwarnings("ignore:staticgrad.compile:RuntimeWarning")
@pytest.mark.parametrize("name,fn", DATA_DEPENDENT, ids=[c[0] for c in DATA_DEPENDENT])
def test_value_dependent_sizes_are_refused_while_tracing(name, fn):
    with pytest.raises(TraceError, match="depends on"):
        sg.compile(fn)(sg.tensor(rand(5)))
    fallback = sg.compile(fn, fallback="eager")
    for seed in range(3):
        x = sg.tensor(rand(5, seed=seed))
        np.testing.assert_array_equal(fallback(x).numpy(), fn(x).numpy())


def test_nested_list_index_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="non-tuple sequence for multidimensional indexing"):
        y = sg.arange(12).view(3, 4)[[[0, 1], [2, 2]]]
    assert y.tolist() == [2, 6]


def test_constant_mask_inside_a_compiled_function_replays():
    def f(x):
        return sg.masked_select(x, sg.tensor([True, False, True])) + x[[True, True, False]].sum()
    compiled = sg.compile(f)
    for seed in range(3):
        x = sg.tensor(rand(3, seed=seed))
        assert compiled(x).numpy().tobytes() == f(x).numpy().tobytes()
    assert compiled.stats.replays >= 1
