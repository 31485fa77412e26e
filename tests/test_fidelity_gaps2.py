"""More PyTorch behaviours staticgrad once lacked: node classes that refuse construction, index
and mask inputs that are no edges of their node, mixed-dtype writes into a tensor that requires
grad, uint16/32/64 promotion and refusals, reductions' dtype=, inputs PyTorch declares not
differentiable, and the graphs of some losses. Each compares staticgrad with PyTorch; the compiled
steps check that replay equals eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error, torch

# ---- constructing a node class -----------------------------------------------------------------

NODE_MAKERS = {
    "mul": lambda lib, x: x * 2,
    "add": lambda lib, x: x + 1,
    "sum": lambda lib, x: x.sum(),
    "exp": lambda lib, x: x.exp(),
    "unbind": lambda lib, x: x.unbind(0)[1],
    "index": lambda lib, x: x[lib.tensor([0, 2])],
    "copy_slices": lambda lib, x: _set_first(x * 1),
    "accumulate_grad": lambda lib, x: (x * 2).grad_fn.next_functions[0][0],
}


def _set_first(y):
    y[0] = 5.0
    return y


def _node(lib, name):
    out = NODE_MAKERS[name](lib, lib.arange(3.0, requires_grad=True))
    return out.grad_fn if isinstance(out, lib.Tensor) else out


@pytest.mark.parametrize("args", [(), (1,), ("x", 2)])
@pytest.mark.parametrize("name", NODE_MAKERS)
def test_a_node_class_refuses_construction_as_pytorchs(name, args):
    same_error(lambda lib: type(_node(lib, name))(*args))


def test_a_node_class_refuses_construction_with_keywords_as_pytorchs():
    same_error(lambda lib: type(_node(lib, "mul"))(a=1))
    same_error(lambda lib: type(_node(lib, "accumulate_grad"))(variable=lib.ones(1)))


def test_the_abstract_autograd_node_refuses_construction_as_pytorchs():
    same_error(lambda lib: lib.autograd.graph.Node())
    assert isinstance(_node(sg, "mul"), sg.autograd.graph.Node)
    assert isinstance(_node(sg, "accumulate_grad"), sg.autograd.graph.Node)


def _custom_node(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            return i * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Double.apply(lib.ones(3, requires_grad=True)).grad_fn


@pytest.mark.parametrize("args", [(), (1,), ("x", 2)])
def test_a_custom_functions_node_class_makes_a_bare_node_as_pytorchs(args):
    got = []
    for lib in (torch, sg):
        node = type(_custom_node(lib))(*args)
        got.append((type(node).__name__, node.name(), node.next_functions, node.metadata,
                    isinstance(node, lib.autograd.graph.Node)))
    assert got[1] == got[0]


def test_a_nodes_metadata_is_a_dict_of_its_own_as_pytorchs():
    got = []
    for lib in (torch, sg):
        x = lib.ones(2, requires_grad=True)
        node = (x * 2).grad_fn
        first = node.metadata
        node.metadata["note"] = 1
        leaf = node.next_functions[0][0]
        leaf.metadata["leaf"] = True
        with pytest.raises(AttributeError) as info:
            node.metadata = {}
        got.append((first is node.metadata, node.metadata, leaf.metadata, _custom_node(lib).metadata,
                    str(info.value)))
    assert got[1] == got[0]


def test_a_replayed_outputs_node_class_refuses_construction():
    w = sg.ones(3, requires_grad=True)

    @sg.compile
    def f(x):
        return x * w

    for _ in range(2):
        y = f(sg.ones(3))
    with pytest.raises(TypeError, match=f"cannot create '{type(y.grad_fn).__name__}' instances"):
        type(y.grad_fn)()


# ---- uint16, uint32, uint64 with other dtypes ---------------------------------------------------

def _plain(result, lib):
    """A result as plain Python: a tensor as (dtype, shape, values), a dtype by name."""
    if isinstance(result, lib.Tensor):
        values = result.tolist()
        if result.dtype.is_floating_point:   # (to 6 digits: math libraries may differ by an ulp)
            values = [float(f"{v:.6g}") for v in np.ravel(values)]
        return str(result.dtype).split(".")[-1], tuple(result.shape), values
    if isinstance(result, (tuple, list)):
        return tuple(_plain(r, lib) for r in result)
    if isinstance(result, lib.dtype):
        return str(result).split(".")[-1]
    return result


def _outcome(make, lib, *args):
    """What ``make(lib, *args)`` gives, plainly, or its error's type and message."""
    try:
        return _plain(make(lib, *args), lib)
    except Exception as error:   # (the error is what is compared)
        return type(error).__name__, str(error).replace("torch.", "").replace("staticgrad.", "")


def _bools(lib):
    return lib.tensor([True, False, True])


WIDE_MIXED = {
    # promotion with bool and the other integer types is refused before any kernel is asked
    "add_bool": lambda lib, t, d: t + _bools(lib),
    "bool_add": lambda lib, t, d: _bools(lib) + t,
    "mul_bool": lambda lib, t, d: t * _bools(lib),
    "bool_mul": lambda lib, t, d: _bools(lib) * t,
    "sub_bool": lambda lib, t, d: t - _bools(lib),
    "add_bool_": lambda lib, t, d: t.add_(_bools(lib)),
    "mul_bool_": lambda lib, t, d: t.mul_(_bools(lib)),
    "eq_bool": lambda lib, t, d: t == _bools(lib),
    "and_bool": lambda lib, t, d: t & _bools(lib),
    "maximum_bool": lambda lib, t, d: lib.maximum(t, _bools(lib)),
    "where_bool": lambda lib, t, d: lib.where(_bools(lib), t, _bools(lib)),
    "where_same": lambda lib, t, d: lib.where(_bools(lib), t, t),
    "cat_bool": lambda lib, t, d: lib.cat([t, _bools(lib)]),
    "add_uint8": lambda lib, t, d: t + lib.tensor([1, 1, 1], dtype=lib.uint8),
    "add_int8": lambda lib, t, d: t + lib.tensor([1, 1, 1], dtype=lib.int8),
    "add_long": lambda lib, t, d: t + lib.tensor([1, 1, 1]),
    "and_uint8": lambda lib, t, d: t & lib.tensor([1, 1, 1], dtype=lib.uint8),
    # a bool or integer 0-dim tensor or scalar joins without promotion: the kernel refuses
    "add_true": lambda lib, t, d: t + True,
    "add_bool_0d": lambda lib, t, d: t + lib.tensor(True),
    "bool_add_wide_0d": lambda lib, t, d: _bools(lib) + lib.tensor(1, dtype=d),
    "bool_mul_wide_0d": lambda lib, t, d: _bools(lib) * lib.tensor(1, dtype=d),
    "long_mul_wide_0d": lambda lib, t, d: lib.tensor([1, 2, 3]) * lib.tensor(1, dtype=d),
    "mul_long_0d": lambda lib, t, d: t * lib.tensor(2),
    "promote_types_bool": lambda lib, t, d: lib.promote_types(d, lib.bool),
    "bool_promote_types": lambda lib, t, d: lib.promote_types(lib.bool, d),
    "promote_types_half": lambda lib, t, d: lib.promote_types(d, lib.float16),
    "result_type_bool": lambda lib, t, d: lib.result_type(t, _bools(lib)),
    "result_type_true": lambda lib, t, d: lib.result_type(t, True),
    # with a float, the float kernel runs
    "add_float": lambda lib, t, d: t + lib.tensor([0.5, 1.0, 2.0]),
    "float_add": lambda lib, t, d: lib.tensor([0.5, 1.0, 2.0]) + t,
    "add_float_scalar": lambda lib, t, d: t + 1.5,
    "add_float_0d": lambda lib, t, d: t + lib.tensor(1.5),
    "sub_float": lambda lib, t, d: t - lib.tensor([0.5, 1.0, 2.0]),
    "lt_float": lambda lib, t, d: t < lib.tensor([0.5, 1.0, 2.0]),
    "maximum_float": lambda lib, t, d: lib.maximum(t, lib.tensor([0.5, 1.0, 2.0])),
    "atan2_float": lambda lib, t, d: lib.atan2(t, lib.tensor([0.5, 1.0, 2.0])),
    "pow_float": lambda lib, t, d: t ** lib.tensor([0.5, 1.0, 2.0]),
    "pow_float_scalar": lambda lib, t, d: t ** 2.0,
    "clamp_float": lambda lib, t, d: t.clamp(0.5, 1.5),
    "add_float_": lambda lib, t, d: t.add_(lib.tensor([0.5, 1.0, 2.0])),
    "float_add_": lambda lib, t, d: lib.tensor([0.5, 1.0, 2.0]).add_(t),
    # float ops compute in float; rounding and NaN tests change no integer
    "exp": lambda lib, t, d: t.exp(), "sqrt": lambda lib, t, d: t.sqrt(), "sigmoid": lambda lib, t, d: t.sigmoid(),
    "log": lambda lib, t, d: t.log(), "reciprocal": lambda lib, t, d: t.reciprocal(),
    "logsumexp": lambda lib, t, d: t.logsumexp(0),
    "rounding": lambda lib, t, d: (t.floor(), t.ceil(), t.round(), t.trunc(), t.fix()),
    "nan_tests": lambda lib, t, d: (t.isnan(), t.isfinite(), t.isinf(), t.isposinf(), t.isneginf()),
    "nan_to_num": lambda lib, t, d: t.nan_to_num(), "signbit": lambda lib, t, d: t.signbit(),
    # refusals named by PyTorch's kernels
    "relu": lambda lib, t, d: t.relu(), "logical_not": lambda lib, t, d: t.logical_not(),
    "logical_and": lambda lib, t, d: t.logical_and(t), "logical_or": lambda lib, t, d: t.logical_or(t),
    "clamp_min": lambda lib, t, d: lib.clamp_min(t, 1), "clamp_max": lambda lib, t, d: lib.clamp_max(t, 1),
    "sgn": lambda lib, t, d: t.sgn(), "count_nonzero": lambda lib, t, d: t.count_nonzero(),
    "bincount": lambda lib, t, d: t.bincount(),
    "lerp_end": lambda lib, t, d: lib.lerp(lib.ones(3), t, 0.5),
}


@pytest.mark.parametrize("dtype_name", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("name", WIDE_MIXED)
def test_wide_unsigned_with_other_dtypes_as_pytorch(name, dtype_name):
    def run(lib):
        dtype = getattr(lib, dtype_name)
        return _outcome(WIDE_MIXED[name], lib, lib.tensor([3, 1, 2], dtype=dtype), dtype)

    assert run(sg) == run(torch)


REDUCTION_DTYPES = ["uint16", "uint32", "uint64", "int32", "int16", "int8", "uint8", "bool", "float64", "float16"]
REDUCTIONS = {
    "sum": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(dtype=d),
    "sum_dim": lambda lib, d: lib.tensor([[1, 2], [3, 4]]).sum(1, dtype=d),
    "sum_keepdim": lambda lib, d: lib.sum(lib.tensor([[1, 2], [3, 4]]), 1, True, dtype=d),
    "sum_wraps": lambda lib, d: lib.tensor([200, 100, 90]).sum(dtype=d),
    "prod": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(dtype=d),
    "prod_dim": lambda lib, d: lib.tensor([[1, 2], [3, 4]]).prod(0, dtype=d),
    "prod_wraps": lambda lib, d: lib.tensor([200, 100, 7]).prod(dtype=d),
    "cumsum": lambda lib, d: lib.tensor([[1, 2], [3, 4]]).cumsum(0, dtype=d),
    "cumsum_fn": lambda lib, d: lib.cumsum(lib.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, dtype=d),
    "cumprod": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).cumprod(1, dtype=d),
    "nansum": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).nansum(dtype=d),
    "nansum_int": lambda lib, d: lib.tensor([[1, 2], [3, 4]]).nansum(dtype=d),
    "mean": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(dtype=d),
    "mean_int": lambda lib, d: lib.tensor([[1, 2], [3, 4]]).mean(dtype=d),
    "nanmean": lambda lib, d: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).nanmean(dtype=d),
    "vector_norm": lambda lib, d: lib.linalg.vector_norm(lib.tensor([3.0, 4.0]), dtype=d),
    "vector_norm_double": lambda lib, d: lib.linalg.vector_norm(lib.tensor([3.0, 4.0], dtype=lib.float64),
                                                                dtype=d),
    "norm": lambda lib, d: lib.tensor([3.0, 4.0]).norm(dtype=d),
}


@pytest.mark.parametrize("dtype_name", REDUCTION_DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_a_reductions_dtype_argument_as_pytorchs(name, dtype_name):
    def run(lib):
        return _outcome(REDUCTIONS[name], lib, getattr(lib, dtype_name))

    assert run(sg) == run(torch)


def test_vector_norm_of_integers_is_refused_before_its_dtype_as_pytorchs():
    same_error(lambda lib: lib.linalg.vector_norm(lib.tensor([3, 4]), dtype=lib.float32))
    same_error(lambda lib: lib.linalg.vector_norm(lib.tensor([3, 4]), dtype=lib.int64))


def test_a_compiled_function_mixing_wide_unsigned_and_floats_replays_as_eager():
    w = sg.ones(3, requires_grad=True)

    def fn(u, f):
        w.grad = None
        loss = ((u + f) * w).sum() + (u.exp() * w).sum()
        loss.backward()
        return u < f, u.floor(), f.sum(dtype=sg.float64), u.sum(dtype=sg.int16), f.cumsum(0, dtype=sg.int8), \
            loss.detach(), w.grad.clone()

    compiled = sg.compile(fn)
    for k in range(3):
        u = sg.from_numpy(np.array([1, 2, 300 + k], np.uint16))
        f = sg.tensor([0.5, 2.0, 100.0 * k])
        for g, e in zip(compiled(u, f), fn(u, f)):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert compiled.stats.replays == 2


# ---- index, mask and target inputs are no edges ---------------------------------------------------

def _edges(fn):
    return [(None if n is None else n.name().split("::")[-1], nr) for n, nr in fn.next_functions]


def _walk(fn):
    """Every node's name and edges, depth first."""
    rows, stack, seen = [], [fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        rows.append((node.name().split("::")[-1], _edges(node)))
        stack.extend(n for n, _ in reversed(node.next_functions))
    return rows


def _idx(lib, *values):
    return lib.tensor(list(values))


EDGE_CASES = {
    "index": lambda lib, x: x[_idx(lib, 0, 2)],
    "index_two": lambda lib, x: x[_idx(lib, 0, 2), _idx(lib, 1, 3)],
    "index_column": lambda lib, x: x[:, _idx(lib, 1, 3)],
    "index_ellipsis": lambda lib, x: x[..., _idx(lib, 1)],
    "index_list": lambda lib, x: x[[0, 2]],
    "index_mask": lambda lib, x: x[x > 3],
    "index_mask_and_tensor": lambda lib, x: x[lib.tensor([True, False, True]), _idx(lib, 1, 3)],
    "index_and_int": lambda lib, x: x[_idx(lib, 0, 2), 1],
    "index_and_slice": lambda lib, x: x[_idx(lib, 0, 2), :2],
    "index_broadcast": lambda lib, x: x[_idx(lib, 0, 2).reshape(2, 1), _idx(lib, 1, 3)],
    "index_of_result": lambda lib, x: (x * 2)[_idx(lib, 1)],
    "index_select": lambda lib, x: x.index_select(0, _idx(lib, 0, 2)),
    "take": lambda lib, x: x.take(_idx(lib, 0, 5)),
    "gather": lambda lib, x: x.gather(0, lib.tensor([[0, 1, 2, 0]])),
    "repeat_interleave": lambda lib, x: x.repeat_interleave(_idx(lib, 1, 2, 1), dim=0),
    "take_along_dim": lambda lib, x: lib.take_along_dim(x, lib.zeros(3, 4, dtype=lib.int64), 0),
    "take_along_dim_row": lambda lib, x: lib.take_along_dim(x, lib.tensor([[0, 1, 2, 0]]), 0),
    "take_along_dim_flat": lambda lib, x: lib.take_along_dim(x, _idx(lib, 0, 5)),
    "where": lambda lib, x: lib.where(x > 3, x, x * 2),
    "where_scalar": lambda lib, x: lib.where(x > 3, x, 0.0),
    "masked_fill": lambda lib, x: x.masked_fill(x > 3, 1.0),
    "masked_fill_tensor": lambda lib, x: x.masked_fill(x > 3, (x * 2).sum()),
    "masked_select": lambda lib, x: x.masked_select(x > 3),
    "masked_scatter": lambda lib, x: x.masked_scatter(x > 3, x * 2),
    "scatter": lambda lib, x: x.scatter(0, lib.tensor([[0, 1, 2, 0]]), x[:1] * 2),
    "scatter_value": lambda lib, x: x.scatter(0, lib.tensor([[0, 1, 2, 0]]), 2.0),
    "scatter_add": lambda lib, x: x.scatter_add(0, lib.tensor([[0, 1, 2, 0]]), x[:1] * 2),
    "index_add": lambda lib, x: x.index_add(0, _idx(lib, 0, 2), x[:2] * 2),
    "index_copy": lambda lib, x: x.index_copy(0, _idx(lib, 0, 2), x[:2] * 2),
    "index_fill": lambda lib, x: x.index_fill(0, _idx(lib, 0, 2), 2.0),
    "embedding": lambda lib, x: lib.nn.functional.embedding(_idx(lib, 0, 2), x),
    "embedding_bag": lambda lib, x: lib.nn.functional.embedding_bag(_idx(lib, 0, 1, 2), x, _idx(lib, 0, 1)),
    "nll_loss": lambda lib, x: lib.nn.functional.nll_loss(x.log_softmax(1), _idx(lib, 0, 3, 1)),
    "nll_loss_weight": lambda lib, x: lib.nn.functional.nll_loss(x.log_softmax(1), _idx(lib, 0, 3, 1),
                                                                 weight=lib.ones(4)),
    "cross_entropy": lambda lib, x: lib.nn.functional.cross_entropy(x, _idx(lib, 0, 3, 1)),
    "multi_margin": lambda lib, x: lib.nn.functional.multi_margin_loss(x, _idx(lib, 0, 3, 1)),
    "bce_weight": lambda lib, x: lib.nn.functional.binary_cross_entropy(x.sigmoid(), lib.ones(3, 4),
                                                                        weight=lib.ones(4)),
    "max_dim": lambda lib, x: x.max(1)[0],
    "sort": lambda lib, x: x.sort(1)[0],
}


def _x(lib):
    return lib.tensor([[1.0, 5.0, 2.0, 4.0], [3.0, 0.5, 7.0, 6.0], [9.0, 8.0, 1.5, 2.5]], requires_grad=True)


@pytest.mark.parametrize("name", EDGE_CASES)
def test_a_nodes_edges_leave_out_index_inputs_as_pytorchs(name):
    got = [_walk(EDGE_CASES[name](lib, _x(lib)).grad_fn) for lib in (torch, sg)]
    assert got[1] == got[0]


@pytest.mark.parametrize("name", EDGE_CASES)
def test_gradients_through_edgeless_inputs_as_pytorchs(name):
    grads = []
    for lib in (torch, sg):
        x = _x(lib)
        out = EDGE_CASES[name](lib, x)
        g, = lib.autograd.grad((out * out).sum(), x, create_graph=True)
        try:
            gg, = lib.autograd.grad((g * g).sum(), x, allow_unused=True)
        except (NotImplementedError, RuntimeError):   # (PyTorch has no double backward for some)
            gg = None
        grads.append((g.detach().tolist(), None if gg is None else gg.tolist(), _walk(g.grad_fn)[:1]))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5, atol=1e-6)
    if grads[0][1] is not None and grads[1][1] is not None:
        np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5, atol=1e-6)


DOUBLE_BACKWARD_NODES = {
    "index": lambda lib, x: x[_idx(lib, 0, 2)],
    "index_select": lambda lib, x: x.index_select(0, _idx(lib, 0, 2)),
    "gather": lambda lib, x: x.gather(0, lib.tensor([[0, 1, 2, 0]])),
    "masked_select": lambda lib, x: x.masked_select(x > 3),
    "take": lambda lib, x: x.take(_idx(lib, 0, 5)),
    "max_dim": lambda lib, x: x.max(1)[0],
    "min_dim": lambda lib, x: x.min(1)[0],
    "kthvalue": lambda lib, x: x.kthvalue(2, 1)[0],
    "sort": lambda lib, x: x.sort(1)[0],
    "topk": lambda lib, x: x.topk(2)[0],
    "cummax": lambda lib, x: x.cummax(1)[0],
}


@pytest.mark.parametrize("name", DOUBLE_BACKWARD_NODES)
def test_the_node_a_gradient_is_scattered_by_has_pytorchs_name_and_edges(name):
    got = []
    for lib in (torch, sg):
        x = _x(lib)
        out = DOUBLE_BACKWARD_NODES[name](lib, x)
        g, = lib.autograd.grad((out * out).sum(), x, create_graph=True)
        got.append((g.grad_fn.name(), _edges(g.grad_fn)))
    assert got[1] == got[0]


def test_a_post_hook_and_a_node_call_see_one_gradient_per_edge_as_pytorchs():
    seen = []
    for lib in (torch, sg):
        x = _x(lib)
        y = x[_idx(lib, 0, 2)]
        calls = []
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs, calls=calls: calls.append(
            [None if g is None else tuple(g.shape) for g in grad_inputs]))
        y.sum().backward(retain_graph=True)
        called = y.grad_fn(lib.ones(2, 4))
        called = called if isinstance(called, tuple) else (called,)
        seen.append((calls, [tuple(c.shape) for c in called], x.grad.tolist()))
    assert seen[1] == seen[0]


def test_a_compiled_step_through_edgeless_inputs_replays_as_eager():
    w = sg.tensor([[1.0, 5.0, 2.0, 4.0], [3.0, 0.5, 7.0, 6.0], [9.0, 8.0, 1.5, 2.5]], requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.1)

    def step(idx, mask, target):
        opt.zero_grad()
        picked = w[idx] * w.index_select(0, idx) + w.masked_fill(mask, 0.0)[idx]
        loss = sg.nn.functional.cross_entropy(picked, target) + w.gather(1, idx[:, None].expand(2, 4)).sum()
        loss = loss + sg.where(mask, w, w * 2).max(1)[0].sum()
        loss.backward()
        opt.step()
        return loss.detach(), w.grad.clone()

    compiled = sg.compile(step)
    eager_w = w.detach().clone()
    for k in range(3):
        idx, target = sg.tensor([k % 3, 2]), sg.tensor([1, k])
        mask = sg.tensor([[True, False, True, False]] * 3)
        got = compiled(idx, mask, target)
        with sg.no_grad():
            w_after = w.detach().clone()
            w.copy_(eager_w)
        want = step(idx, mask, target)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(w_after.numpy(), w.detach().numpy())
        eager_w = w.detach().clone()
    assert compiled.stats.replays == 2


# ---- writing a value of another dtype into a tensor that requires grad ----------------------------

def _write(index):
    def write(lib, x, v):
        a = x.clone()
        a[index(lib)] = v
        return a
    return write


WRITES = {
    "int": _write(lambda lib: 0),
    "slice": _write(lambda lib: slice(1, None)),
    "ellipsis": _write(lambda lib: ...),
    "whole_slice": _write(lambda lib: slice(None)),
    "mask": _write(lambda lib: lib.tensor([True, False, True])),
    "mask_and_int": _write(lambda lib: (lib.tensor([True, False, True]), 0)),
    "index_tensor": _write(lambda lib: lib.tensor([0, 2])),
    "zero_dim_mask": _write(lambda lib: lib.tensor(True)),
    "of_a_result": lambda lib, x, v: _write(lambda lib: 0)(lib, x, v * 2),
    "stacked": lambda lib, x, v: _write(lambda lib: slice(1, None))(lib, x, lib.stack([v, v * 3])),
    "into_a_plain_tensor": lambda lib, x, v: _write(lambda lib: 0)(lib, lib.zeros(3, 2), v),
    "into_double": lambda lib, x, v: _write(lambda lib: 0)(lib, x.double(), x[1] * 2),
    "fill_": lambda lib, x, v: x.clone().fill_(v),
    "fill_number": lambda lib, x, v: x.clone().fill_(2.5),
    "fill_zero": lambda lib, x, v: x.clone().fill_(0),
    "zero_": lambda lib, x, v: x.clone().zero_(),
    "fill_vector": lambda lib, x, v: x.clone().fill_(v.reshape(1)),
    "fill_no_grad_value": lambda lib, x, v: x.clone().fill_(lib.tensor(5)),
    "masked_fill": lambda lib, x, v: x.masked_fill(lib.tensor([[True, False]] * 3), v),
    "masked_fill_": lambda lib, x, v: x.clone().masked_fill_(lib.tensor([[True, False]] * 3), v),
    "index_fill": lambda lib, x, v: x.index_fill(0, lib.tensor([0]), v),
    "index_fill_": lambda lib, x, v: x.clone().index_fill_(1, lib.tensor([1]), v),
}
VALUE_DTYPES = ["float64", "float16", "int64", "bool"]


@pytest.mark.parametrize("value_dtype", VALUE_DTYPES)
@pytest.mark.parametrize("name", WRITES)
def test_writing_a_value_of_another_dtype_as_pytorch(name, value_dtype):
    def run(lib):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
        dtype = getattr(lib, value_dtype)
        floating = dtype.is_floating_point
        v = lib.tensor(5.5 if floating else 5, dtype=dtype, requires_grad=floating)
        try:
            out = WRITES[name](lib, x, v)
        except Exception as error:   # (the error is what is compared)
            return type(error).__name__, str(error).replace("torch.", "").replace("staticgrad.", "")
        graph = _walk(out.grad_fn) if out.grad_fn is not None else None
        weights = lib.arange(1.0, out.numel() + 1, dtype=out.dtype).reshape(out.shape)
        if out.requires_grad:
            (out * weights).sum().backward()
        grads = [None if t.grad is None else (str(t.grad.dtype).split(".")[-1], t.grad.tolist()) for t in (x, v)]
        return str(out.dtype).split(".")[-1], out.tolist(), graph, grads

    assert run(sg) == run(torch)


def test_a_compiled_step_writing_values_of_another_dtype_replays_as_eager():
    w = sg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    v = sg.tensor(0.25, dtype=sg.float64, requires_grad=True)
    opt = sg.optim.SGD([w, v], lr=0.1)
    mask = sg.tensor([[True, False]] * 3)

    def step(x):
        opt.zero_grad()
        a = w * x
        a[0] = v * 3
        a[1:, 1] = v.half()
        b = a.masked_fill(mask, v).index_fill(0, sg.tensor([2]), v * 2)
        c = b.clone()
        c.fill_(v)
        loss = (b * b).sum() + (c * a).sum()
        loss.backward()
        opt.step()
        return loss.detach(), w.grad.clone(), v.grad.clone()

    compiled = sg.compile(step)
    for k in range(3):
        x = sg.tensor([[1.0, 0.5]] * 3) * (k + 1)
        state = (w.detach().clone(), v.detach().clone())
        got = compiled(x)
        after = (w.detach().clone(), v.detach().clone())
        with sg.no_grad():
            w.copy_(state[0])
            v.copy_(state[1])
        want = step(x)
        for a, b in zip(got + after, want + (w.detach(), v.detach())):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert compiled.stats.replays == 2


# ---- float inputs PyTorch declares not differentiable ---------------------------------------------

def _loss_input(lib):
    return lib.tensor([[0.2, -0.5, 0.9], [0.4, 0.1, -0.3]], requires_grad=True)


NONDIFFERENTIABLE = {
    "nll_loss_weight": lambda lib, x, w: lib.nn.functional.nll_loss(x.log_softmax(1), lib.tensor([0, 2]), weight=w),
    "cross_entropy_weight": lambda lib, x, w: lib.nn.functional.cross_entropy(x, lib.tensor([0, 2]), weight=w),
    "nll_loss2d_weight": lambda lib, x, w: lib.nn.functional.nll_loss(x.log_softmax(1)[..., None, None],
                                                                      lib.tensor([0, 2])[:, None, None], weight=w),
    "bce_weight": lambda lib, x, w: lib.nn.functional.binary_cross_entropy(x.sigmoid(), lib.ones(2, 3), weight=w),
    "bce_logits_weight": lambda lib, x, w: lib.nn.functional.binary_cross_entropy_with_logits(
        x, lib.ones(2, 3), weight=w),
    "bce_logits_pos_weight": lambda lib, x, w: lib.nn.functional.binary_cross_entropy_with_logits(
        x, lib.ones(2, 3), pos_weight=w),
    "multi_margin_weight": lambda lib, x, w: lib.nn.functional.multi_margin_loss(x, lib.tensor([0, 2]), weight=w),
    "soft_margin_target": lambda lib, x, w: lib.nn.functional.soft_margin_loss(x, w.expand(2, 3)),
    "batch_norm_running_mean": lambda lib, x, w: lib.nn.functional.batch_norm(x, w, lib.ones(3), training=False),
    "batch_norm_running_var": lambda lib, x, w: lib.nn.functional.batch_norm(x, lib.zeros(3), w + 1,
                                                                             training=False),
}


@pytest.mark.parametrize("name", NONDIFFERENTIABLE)
def test_a_nondifferentiable_input_that_requires_grad_is_refused_as_pytorch(name):
    same_error(lambda lib: NONDIFFERENTIABLE[name](lib, _loss_input(lib), lib.tensor([1.0, 2.0, 3.0],
                                                                                     requires_grad=True)))


@pytest.mark.parametrize("name", NONDIFFERENTIABLE)
def test_a_nondifferentiable_input_without_grad_or_under_no_grad_runs_as_pytorch(name):
    got = []
    for lib in (torch, sg):
        x = _loss_input(lib)
        out = NONDIFFERENTIABLE[name](lib, x, lib.tensor([1.0, 2.0, 3.0]))
        out.sum().backward()
        with lib.no_grad():
            quiet = NONDIFFERENTIABLE[name](lib, x, lib.tensor([1.0, 2.0, 3.0], requires_grad=True))
        got.append((out.detach().numpy(), x.grad.numpy(), quiet.numpy()))
    for mine, theirs in zip(got[1], got[0]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tensor_value", [False, True])
def test_fill_into_a_view_of_a_tensor_in_autograd_is_pytorchs(tensor_value):
    got = []
    for lib in (torch, sg):
        x = lib.ones(3, requires_grad=True)
        a = x.clone()
        value = lib.tensor(2.0, requires_grad=True) if tensor_value else 2.0
        a[1:].fill_(value)
        (a * lib.arange(3.0)).sum().backward()
        got.append((a.tolist(), x.grad.tolist(), value.grad.item() if tensor_value else None,
                    a.grad_fn.name()))
    assert got[0] == got[1]


# ---- a reduction's dtype= is computed in by the op (no ToCopyBackward0 before its node) -----------

DTYPE_REDUCTIONS = {
    "sum": lambda lib, x, d: x.sum(dtype=d), "sum_dim": lambda lib, x, d: x.sum(1, dtype=d),
    "torch_sum": lambda lib, x, d: lib.sum(x, 0, True, dtype=d),
    "prod": lambda lib, x, d: x.prod(dtype=d), "prod_dim": lambda lib, x, d: x.prod(1, dtype=d),
    "cumsum": lambda lib, x, d: x.cumsum(1, dtype=d), "cumprod": lambda lib, x, d: x.cumprod(0, dtype=d),
    "mean": lambda lib, x, d: x.mean(dtype=d), "mean_dim": lambda lib, x, d: x.mean(1, dtype=d),
    "nansum": lambda lib, x, d: x.nansum(dtype=d), "nanmean": lambda lib, x, d: x.nanmean(dtype=d),
    "vector_norm": lambda lib, x, d: lib.linalg.vector_norm(x, dtype=d), "norm": lambda lib, x, d: x.norm(dtype=d),
    "softmax": lambda lib, x, d: x.softmax(1, dtype=d), "log_softmax": lambda lib, x, d: x.log_softmax(1, dtype=d),
}


@pytest.mark.parametrize("dtype_name", ["float64", "float32", "float16", "int32", "int64", "bool"])
@pytest.mark.parametrize("name", DTYPE_REDUCTIONS)
def test_a_reductions_dtype_keeps_pytorchs_graph_and_gradient(name, dtype_name):
    def run(lib):
        x = lib.tensor([[1.5, 2.5], [0.5, -1.0]], requires_grad=True)
        try:
            out = DTYPE_REDUCTIONS[name](lib, x, getattr(lib, dtype_name))
        except Exception as error:   # (the error is what is compared)
            return type(error).__name__, str(error).replace("torch.", "").replace("staticgrad.", "")
        g, = lib.autograd.grad(out.sum(), x)
        with lib.no_grad():
            quiet = DTYPE_REDUCTIONS[name](lib, x, getattr(lib, dtype_name))
        return ((str(out.dtype).split(".")[-1], _walk(out.grad_fn), str(g.dtype).split(".")[-1],
                 str(quiet.dtype).split(".")[-1]), out.detach().double().numpy(), g.double().numpy())

    mine, theirs = run(sg), run(torch)
    assert mine[0] == theirs[0]
    if len(theirs) == 3:   # (half precision: to its precision)
        for a, b in zip(mine[1:], theirs[1:]):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-3)


def test_a_compiled_step_with_reductions_in_another_dtype_replays_as_eager():
    w = sg.tensor([[1.5, 2.5], [0.5, -1.0]], requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.01)

    def step(x):
        opt.zero_grad()
        y = w * x
        loss = (y.sum(dtype=sg.float64) + y.prod(1, dtype=sg.float64).sum() + y.cumsum(0, dtype=sg.float64).sum()
                + y.mean(dtype=sg.float64) + y.nansum(dtype=sg.float64) + y.norm(dtype=sg.float64))
        loss.backward()
        opt.step()
        return loss.detach(), w.grad.clone(), y.detach().sum(dtype=sg.int32)

    compiled = sg.compile(step)
    for k in range(3):
        x = sg.tensor([[1.0, 0.5], [2.0, 1.0]]) * (k + 1)
        before = w.detach().clone()
        got = compiled(x) + (w.detach().clone(),)
        with sg.no_grad():
            w.copy_(before)
        want = step(x) + (w.detach(),)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert compiled.stats.replays == 2


# ---- the margin losses' graphs: PyTorch's C++ composites add and subtract numbers ----------------

MARGIN_LOSSES = {
    "hinge_embedding": lambda lib, x, p, t: lib.nn.functional.hinge_embedding_loss(x, t),
    "hinge_embedding_none": lambda lib, x, p, t: lib.nn.functional.hinge_embedding_loss(x, t, margin=0.5,
                                                                                        reduction="none"),
    "cosine_embedding": lambda lib, x, p, t: lib.nn.functional.cosine_embedding_loss(x, p, t[:, 0]),
    "cosine_embedding_margin": lambda lib, x, p, t: lib.nn.functional.cosine_embedding_loss(x, p, t[:, 0],
                                                                                            margin=0.2),
    "margin_ranking": lambda lib, x, p, t: lib.nn.functional.margin_ranking_loss(x[0], x[1], t[0]),
    "margin_ranking_margin": lambda lib, x, p, t: lib.nn.functional.margin_ranking_loss(x[0], p[1], t[0], margin=0.5),
}


@pytest.mark.parametrize("name", MARGIN_LOSSES)
def test_a_margin_losss_graph_and_gradients_as_pytorchs(name):
    got = []
    for lib in (torch, sg):
        x = lib.tensor([[0.2, -0.5, 0.9], [0.4, 0.1, -0.3]], requires_grad=True)
        p = lib.tensor([[0.2, 0.5, 0.9], [0.4, 0.1, 0.3]], requires_grad=True)
        t = lib.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
        out = MARGIN_LOSSES[name](lib, x, p, t)
        gx, gp = lib.autograd.grad(out.sum(), (x, p), allow_unused=True)
        got.append((_walk(out.grad_fn), out.detach().numpy(), gx.numpy(), None if gp is None else gp.numpy()))
    assert got[1][0] == got[0][0]
    for mine, theirs in zip(got[1][1:], got[0][1:]):
        if theirs is None:
            assert mine is None
        else:
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_a_compiled_step_with_margin_losses_replays_as_eager():
    w = sg.tensor([[0.2, -0.5, 0.9], [0.4, 0.1, -0.3]], requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.1)
    F = sg.nn.functional

    def step(p, t):
        opt.zero_grad()
        loss = (F.hinge_embedding_loss(w, t, margin=0.7) + F.cosine_embedding_loss(w, p, t[:, 0], margin=0.1)
                + F.margin_ranking_loss(w[0], p[1], t[0], margin=0.3))
        loss.backward()
        opt.step()
        return loss.detach(), w.grad.clone()

    compiled = sg.compile(step)
    t = sg.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    for k in range(3):
        p = sg.tensor([[0.2, 0.5, 0.9], [0.4, 0.1, 0.3]]) * (k + 1)
        before = w.detach().clone()
        got = compiled(p, t) + (w.detach().clone(),)
        with sg.no_grad():
            w.copy_(before)
        want = step(p, t) + (w.detach(),)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert compiled.stats.replays == 2


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
def test_kl_div_is_composed_with_xlogy_as_pytorchs(reduction):
    got = []
    for lib in (torch, sg):
        x = lib.tensor([[-1.2, -0.5, -2.0], [-0.4, -1.1, -0.3]], requires_grad=True)
        p = lib.tensor([[0.2, 0.0, 0.8], [0.4, 0.1, 0.5]], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = lib.nn.functional.kl_div(x, p, reduction=reduction)
        gx, gp = lib.autograd.grad(out.sum(), (x, p))
        got.append((_walk(out.grad_fn), out.detach().numpy(), gx.numpy(), gp.numpy()))
    assert got[1][0] == got[0][0]
    for mine, theirs in zip(got[1][1:], got[0][1:]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)   # (nan where the target is 0, as there)


def test_a_compiled_step_with_kl_div_replays_as_eager():
    w = sg.tensor([[-1.2, -0.5, -2.0], [-0.4, -1.1, -0.3]], requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.1)

    def step(p):
        opt.zero_grad()
        loss = sg.nn.functional.kl_div(w.log_softmax(1), p, reduction="batchmean")
        loss.backward()
        opt.step()
        return loss.detach(), w.grad.clone()

    compiled = sg.compile(step)
    for k in range(3):
        p = sg.tensor([[0.2, 0.0, 0.8], [0.4, 0.1, 0.5]]) * (1 + k / 10)
        before = w.detach().clone()
        got = compiled(p) + (w.detach().clone(),)
        with sg.no_grad():
            w.copy_(before)
        want = step(p) + (w.detach(),)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert compiled.stats.replays == 2
