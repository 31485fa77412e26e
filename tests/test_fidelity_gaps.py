"""PyTorch behaviours staticgrad once lacked: node classes named as PyTorch's (``type(t.grad_fn)``),
Python bools as indices, cat skipping legacy empty 1-D tensors, and the unsigned dtypes uint16/32/64.
Each compares staticgrad with PyTorch."""

from __future__ import annotations

import copy
import pickle
import re

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error, torch

# ---- node classes ------------------------------------------------------------------------------

NODE_MAKERS = {
    "add": lambda lib, x: x + 1,
    "mul": lambda lib, x: x * x,
    "sum": lambda lib, x: x.sum(),
    "matmul": lambda lib, x: x.reshape(2, 3) @ lib.ones(3, 2),
    "copy_slices": lambda lib, x: _set_first(x * 1),
    "unbind": lambda lib, x: x.unbind(0)[1],
    "index": lambda lib, x: x[[0, 2]],
}


def _set_first(y):
    y[0] = 5.0
    return y


@pytest.mark.parametrize("name", NODE_MAKERS)
def test_a_nodes_class_is_named_as_pytorchs(name):
    got = []
    for lib in (torch, sg):
        fn = NODE_MAKERS[name](lib, lib.arange(6.0, requires_grad=True)).grad_fn
        got.append((type(fn).__name__, str(type(fn)), re.sub(r"0x[0-9a-f]+", "ADDR", repr(fn)),
                    re.sub(r"0x[0-9a-f]+", "ADDR", str(fn))))
    assert got[1] == got[0]


def test_a_leafs_accumulate_grad_class_prints_as_pytorchs():
    got = []
    for lib in (torch, sg):
        acc = (lib.ones(2, requires_grad=True) * 2).grad_fn.next_functions[0][0]
        got.append((type(acc).__name__, str(type(acc))))
    assert got[1] == got[0] == ("AccumulateGrad", "<class 'AccumulateGrad'>")


def test_node_classes_are_shared_per_name_and_are_nodes():
    x = sg.ones(3, requires_grad=True)
    a, b, c = (x * 2).grad_fn, (x * x).grad_fn, (x + x).grad_fn
    assert type(a) is type(b) and type(a) is not type(c)
    assert isinstance(a, sg.autograd.graph.Node) and isinstance(c, sg.autograd.Node)
    assert a.name() == type(a).__name__ == "MulBackward0"


def test_a_custom_functions_node_class_lives_in_the_function_module():
    got = []
    for lib in (torch, sg):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        fn = Double.apply(lib.ones(2, requires_grad=True)).grad_fn
        got.append((type(fn).__name__, str(type(fn)).replace("torch.", "staticgrad."),
                    re.sub(r"0x[0-9a-f]+", "ADDR", repr(fn)).replace("torch.", "staticgrad."), fn.name()))
    assert got[1] == got[0]


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_node_refuses_copying_and_pickling_as_pytorchs(how):
    for make in (lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn,
                 lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn.next_functions[0][0]):
        same_error(lambda lib, make=make: how(make(lib)))


def test_a_missing_attribute_names_the_node_class():
    same_error(lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn.no_such_thing)


def test_a_replayed_output_has_the_eager_nodes_class():
    lin = sg.nn.Linear(3, 1)

    @sg.compile
    def step(x):
        lin.zero_grad()
        loss = lin(x).pow(2).mean()
        loss.backward()
        return loss

    x = sg.randn(4, 3)
    names = []
    for _ in range(3):
        replays = step.stats.replays
        loss = step(x)
        names.append((type(loss.grad_fn).__name__, re.sub(r"0x[0-9a-f]+", "ADDR", repr(loss.grad_fn))))
    assert step.stats.replays == replays + 1, "the last call replayed"
    assert names == [("MeanBackward0", "<MeanBackward0 object at ADDR>")] * 3
    assert isinstance(loss.grad_fn, sg.autograd.graph.Node)


# ---- a Python bool as an index -----------------------------------------------------------------

def _names(fn) -> list:
    """``name()`` of every node depth first from ``fn``, edges to nothing left out (PyTorch's nodes have
    no edges for index tensors)."""
    names, stack = [], [fn]
    while stack:
        node = stack.pop()
        if node is not None:
            names.append(node.name())
            stack.extend(n for n, _ in reversed(node.next_functions))
    return names


def _read(lib, index, shape):
    """``a[index]`` of an arange tensor that requires grad: value, dtype, node names (without the
    edges to index tensors, which PyTorch's IndexBackward0 does not have) and the gradient."""
    a = lib.arange(float(np.prod(shape))).reshape(shape).requires_grad_()
    y = a[index]
    names = _names(y.grad_fn)
    (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
    return tuple(y.shape), str(y.dtype).split(".")[-1], y.tolist(), names, a.grad.tolist()


BOOL_READS = [True, False, (None, True), (Ellipsis, True), (True, 0), (0, True), (True, True), (True, None),
              (slice(None), True, 0), (True, [0, 1]), ([0, 1], True), (True, slice(None), None), (False, 0),
              (True, Ellipsis, False), (True, True, True), (True, [True, False]), (True, -1),
              (1, True, slice(0, 2), [0, 1])]


@pytest.mark.parametrize("shape", [(2, 3), (), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("index", BOOL_READS, ids=repr)
def test_a_bool_index_reads_as_pytorchs(index, shape):
    try:
        expected = _read(torch, index, shape)
    except IndexError:
        same_error(_read, index, shape)
        return
    assert _read(sg, index, shape) == expected


def test_a_bool_and_an_index_list_that_do_not_broadcast_fail_as_pytorchs():
    same_error(lambda lib: lib.ones(2, 3)[False, [0, 1]])
    same_error(lambda lib: lib.ones(2, 3)[[0, 1, 1], [0, 1]])


VALUES = {
    "vector": lambda lib: lib.tensor([7.0, 8.0, 9.0], requires_grad=True),
    "full": lambda lib: lib.full((2, 3), 3.0, requires_grad=True),
    "row": lambda lib: lib.tensor([[7.0, 8.0, 9.0]], requires_grad=True),
    "number": lambda lib: 5.0,
    "ints": lambda lib: lib.tensor([1, 2, 3]),
}


def _write(lib, index, value):
    """``x[index] = value`` on a non-leaf: values, node names, version bumps, both gradients."""
    a = lib.arange(6.0).reshape(2, 3).requires_grad_()
    x = a * 1
    v = VALUES[value](lib)
    version = x._version
    x[index] = v
    got = [x.tolist(), str(x.dtype).split(".")[-1], _names(x.grad_fn),
           x._version - version]
    (x * lib.arange(6.0).reshape(2, 3)).sum().backward()
    v_grad = v.grad if isinstance(v, lib.Tensor) else None
    return got + [a.grad.tolist(), None if v_grad is None else v_grad.tolist()]


BOOL_WRITES = [True, False, (True,), (False,), (None, True), (Ellipsis, True), (True, 0), (0, True),
               (True, [0, 1]), (True, slice(0, 1)), (None, False), (False, 0), (True, True),
               # with no bool: the index tensors go into the view the plain part makes, as in PyTorch
               (0, [1]), (slice(0, 1), [1]), (slice(0, 2), [1]), (None, [0]),
               # and a value PyTorch views and expands to the region it writes
               None, Ellipsis, 0, (None, 0), (None, None), slice(None)]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("index", BOOL_WRITES, ids=repr)
def test_a_bool_index_writes_as_pytorchs(index, value):
    try:
        expected = _write(torch, index, value)
    except RuntimeError as error:
        with pytest.raises(RuntimeError) as info:
            _write(sg, index, value)
        assert str(info.value) == str(error)   # (expand's message names the tensor type as PyTorch's does)
        return
    assert _write(sg, index, value) == expected


def test_an_int_and_an_index_list_apart_write_into_the_ints_view():
    """``x[0, :, [1, 2]] = v``: PyTorch selects x[0] first, so the region is (3, 2), not NumPy's (2, 3)."""
    got = []
    for lib in (torch, sg):
        a = lib.arange(24.0).reshape(2, 3, 4).requires_grad_()
        x = a * 1
        v = lib.arange(6.0).reshape(3, 2).requires_grad_()
        x[0, :, [1, 2]] = v
        (x * lib.arange(24.0).reshape(2, 3, 4)).sum().backward()
        got.append((x.grad_fn.name(), x.tolist(), a.grad.tolist(), v.grad.tolist()))
    assert got[1] == got[0]


OUT_OF_RANGE = [5, (0, 7), (slice(None), 4), (True, 2), (True, 0, 5), (None, 5), (0, [7]), ([7],),
                (None, None, 0, 9), (0, 0, 9), (1, slice(None), 4)]


@pytest.mark.parametrize("index", OUT_OF_RANGE, ids=repr)
def test_an_index_out_of_range_fails_as_pytorchs(index):
    """The error names the dim as PyTorch counts it (every item before it, None and bools included)."""
    def write(lib):
        x = lib.ones(2, 3, 4)
        x[index] = lib.ones(4)

    same_error(write)
    same_error(lambda lib: lib.ones(2, 3, 4)[index])


def test_writing_with_a_lone_false_does_nothing_even_to_a_leaf():
    for lib in (torch, sg):
        leaf = lib.ones(2, requires_grad=True)
        leaf[False] = lib.ones(7)   # no write, so no shape check and no in-place check
        assert leaf._version == 0
    same_error(lambda lib: lib.ones(2, requires_grad=True).__setitem__(True, 1.0))


def test_a_compiled_function_with_bool_indices_replays_as_eager():
    def fn(x):
        y = x.unsqueeze(0)[True, 0] * 2
        y[True] = y[0, 0] + 1
        y[None, False] = 7.0
        return y, x[None, False], x[..., True]

    compiled = sg.compile(fn)
    for k in range(3):
        x = sg.arange(6.0).reshape(2, 3) + k
        got, expected = compiled(x), fn(x)
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert compiled.stats.replays == 2


# ---- cat with legacy empty tensors -------------------------------------------------------------

def _cat(lib, make):
    e = lib.empty(0, requires_grad=True)
    a = lib.arange(6.0).reshape(2, 3).requires_grad_()
    r = make(lib, e, a)
    got = [tuple(r.shape), str(r.dtype).split(".")[-1], r.tolist(), None if r.grad_fn is None else r.grad_fn.name()]
    if r.requires_grad:
        (r * r).sum().backward()
        got += [None if e.grad is None else (tuple(e.grad.shape), str(e.grad.dtype).split(".")[-1]),
                None if a.grad is None else a.grad.tolist()]
    return got


CATS = {
    "after": lambda lib, e, a: lib.cat([a, e]),
    "before_dim1": lambda lib, e, a: lib.cat([e, a], dim=1),
    "both_sides_negative_dim": lambda lib, e, a: lib.cat([e, a, e], dim=-1),
    "between": lambda lib, e, a: lib.cat([a, e, a]),
    "between_dim1": lambda lib, e, a: lib.cat([a, e, lib.ones(2, 4)], dim=1),
    "only_empties": lambda lib, e, a: lib.cat([e, e.detach()]),
    "only_empties_any_dim": lambda lib, e, a: lib.cat([e, e], dim=5),
    "one_empty": lambda lib, e, a: lib.cat([e]),
    "with_a_vector": lambda lib, e, a: lib.cat([e, lib.ones(3)]),
    "double_empty_promotes": lambda lib, e, a: lib.cat([e.double(), a]),
    "long_empty_promotes": lambda lib, e, a: lib.cat([lib.empty(0, dtype=lib.int64), a.int()]),
    "float_empty_promotes": lambda lib, e, a: lib.cat([lib.empty(0), lib.ones(2, 3, dtype=lib.int64)]),
    "bool_empty": lambda lib, e, a: lib.cat([lib.empty(0, dtype=lib.bool), lib.ones(2, 3, dtype=lib.int64)]),
    "half": lambda lib, e, a: lib.cat([lib.empty(0), lib.ones(2, 3, dtype=lib.float16)]),
    "hstack": lambda lib, e, a: lib.hstack([e, a]),
    "concat": lambda lib, e, a: lib.concat([a, e]),
    "twice_dim1": lambda lib, e, a: lib.cat([e, a, e.detach(), a], 1),
}


@pytest.mark.parametrize("name", CATS)
def test_cat_skips_legacy_empty_tensors_as_pytorch(name):
    assert _cat(sg, CATS[name]) == _cat(torch, CATS[name])


CAT_ERRORS = {
    "dim_out_of_range": lambda lib: lib.cat([lib.empty(0), lib.ones(2, 3)], dim=2),
    "sizes_after_an_empty": lambda lib: lib.cat([lib.empty(0), lib.ones(2, 3), lib.ones(2, 4)]),
    "dims_after_an_empty": lambda lib: lib.cat([lib.ones(2, 3), lib.empty(0), lib.ones(2)]),
    "two_dim_empty_is_no_legacy": lambda lib: lib.cat([lib.empty(0, 2), lib.ones(2, 3)]),
    "zero_dim": lambda lib: lib.cat([lib.empty(0), lib.tensor(1.0)]),
}


@pytest.mark.parametrize("name", CAT_ERRORS)
def test_cat_with_legacy_empty_tensors_fails_as_pytorch(name):
    same_error(CAT_ERRORS[name])


def test_a_compiled_step_with_a_legacy_empty_cat_replays_as_eager():
    def make():
        w = sg.ones(2, 3, requires_grad=True)

        def step(x, e):
            w.grad = None
            y = sg.cat([e, x * w, e], dim=1)
            loss = (y * y).sum()
            loss.backward()
            return loss.detach(), y.detach(), w.grad.clone()
        return step

    eager, compiled = make(), sg.compile(make())
    for k in range(3):
        x = sg.arange(6.0).reshape(2, 3) + k
        for g, e in zip(compiled(x, sg.empty(0)), eager(x, sg.empty(0))):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert compiled.stats.replays == 2


# ---- uint16, uint32, uint64 --------------------------------------------------------------------

def _plain(result, lib):
    """A result as plain Python: a tensor as (dtype, shape, values), a dtype by name."""
    if isinstance(result, lib.Tensor):
        return str(result.dtype).split(".")[-1], tuple(result.shape), result.tolist()
    if isinstance(result, (tuple, list)):
        return tuple(_plain(r, lib) for r in result)
    if isinstance(result, lib.dtype):
        return str(result).split(".")[-1]
    if isinstance(result, str):
        return result.replace("torch.", "").replace("staticgrad.", "")
    return result


UNSIGNED = {
    # what PyTorch does with them
    "repr": lambda lib, t, d: repr(t),
    "print_2d": lambda lib, t, d: str(lib.zeros(2, 2, dtype=d)),
    "dtype": lambda lib, t, d: (t.dtype, t.dtype.is_floating_point, t.dtype.is_signed, t.dtype.itemsize,
                                t.element_size(), t.type()),
    "numpy": lambda lib, t, d: str(t.numpy().dtype),
    "shares_memory": lambda lib, t, d: (t.numpy().__setitem__(0, 9), t.tolist())[1],
    "item": lambda lib, t, d: (t[2].item(), int(t[0]), float(t[1])),
    "eq": lambda lib, t, d: (t == t, t == 1, t == 1.0, t != t, t.ne(1), t == lib.tensor(3), lib.equal(t, t)),
    "mul": lambda lib, t, d: (t * t, t * 2, t * 2.5, t * lib.tensor(2), lib.ones(3) * t),
    "div": lambda lib, t, d: (t / t, t / 2),
    "sums": lambda lib, t, d: (t.sum(), t.view(3, 1).sum(1), t.prod(), t.cumsum(0), t.all(), t.any()),
    "casts": lambda lib, t, d: (t.float(), t.long(), t.double(), t.bool(), t.to(lib.uint8), t.to(lib.int64),
                                lib.tensor([1.5, 3.0]).to(d), lib.tensor([-1, 3]).to(d), t.type(lib.float32)),
    "views": lambda lib, t, d: (t.view(3, 1), t.reshape(1, 3), t.view(3, 1).T.contiguous(), t[1:], t[1],
                                t.view(3, 1).expand(3, 2), t.unbind(), t.split(2), t.narrow(0, 0, 1)),
    "index": lambda lib, t, d: (t[[0, 2]], t[t == 1], lib.where(t == 1, t, t)),
    "joins": lambda lib, t, d: (lib.cat([t, t]), lib.stack([t, t]), lib.cat([t, t.float()]), t.roll(1), t.repeat(2)),
    "creation": lambda lib, t, d: (lib.zeros(2, dtype=d), lib.ones(2, dtype=d), lib.full((2,), 7, dtype=d),
                                   lib.tensor([1, 2], dtype=d), lib.zeros_like(t), lib.full_like(t, 3),
                                   t.new_zeros(2), lib.randint(0, 5, (2,), dtype=d).dtype,
                                   lib.tensor(np.array([1, 2], dtype=str(d).split(".")[-1]))),
    "bitwise": lambda lib, t, d: (t & t, t | 1, t ^ t),
    "in_place": lambda lib, t, d: (t.clone().fill_(3), t.clone().copy_(lib.tensor([1, 2, 3])), t.clone().mul_(2)),
    "sort": lambda lib, t, d: (t.sort().values, t.argsort(), t.unique()),
    "iinfo": lambda lib, t, d: (lib.iinfo(d).max, lib.iinfo(d).min, lib.iinfo(d).bits, lib.result_type(t, 1)),
    "setitem": lambda lib, t, d: (t.__setitem__(0, 5), t)[1],
    # and what it refuses
    "lt": lambda lib, t, d: t < t, "lt_scalar": lambda lib, t, d: t < 2, "ge": lambda lib, t, d: t >= t,
    "add": lambda lib, t, d: t + t, "add_scalar": lambda lib, t, d: t + 1, "sub": lambda lib, t, d: t - t,
    "rsub": lambda lib, t, d: 1 - t, "add_": lambda lib, t, d: t.add_(2), "neg": lambda lib, t, d: -t,
    "abs": lambda lib, t, d: t.abs(), "floordiv": lambda lib, t, d: t // t, "remainder": lambda lib, t, d: t % t,
    "pow": lambda lib, t, d: t ** 2, "mean": lambda lib, t, d: t.mean(), "max": lambda lib, t, d: t.max(),
    "argmax": lambda lib, t, d: t.argmax(), "arange": lambda lib, t, d: lib.arange(3, dtype=d),
    "linspace": lambda lib, t, d: lib.linspace(0, 1, 3, dtype=d), "eye": lambda lib, t, d: lib.eye(2, dtype=d),
    "rand": lambda lib, t, d: lib.rand(2, dtype=d), "not": lambda lib, t, d: ~t,
    "shift": lambda lib, t, d: t << 1, "mm": lambda lib, t, d: t.view(3, 1) @ t.view(1, 3),
    "nonzero": lambda lib, t, d: t.nonzero(), "flip": lambda lib, t, d: t.flip(0),
    "masked_fill": lambda lib, t, d: t.masked_fill(t == 1, 0), "topk": lambda lib, t, d: t.topk(1),
    "isin": lambda lib, t, d: lib.isin(t, t), "clamp": lambda lib, t, d: t.clamp(0, 1),
    "maximum": lambda lib, t, d: lib.maximum(t, t), "sign": lambda lib, t, d: t.sign(),
    "gather": lambda lib, t, d: t.gather(0, lib.tensor([0])), "tril": lambda lib, t, d: t.view(3, 1).tril(),
    "index_select": lambda lib, t, d: t.index_select(0, lib.tensor([0])),
    "index_put": lambda lib, t, d: t.__setitem__([0], lib.tensor([5], dtype=d)),
    "promote_long": lambda lib, t, d: t * lib.tensor([1, 2, 3]),
    "long_promote": lambda lib, t, d: lib.tensor([1, 2, 3]) * t,
    "promote_types": lambda lib, t, d: lib.promote_types(d, lib.int64),
    "cat_long": lambda lib, t, d: lib.cat([t, t.long()]), "mul_float_inplace": lambda lib, t, d: t.mul_(2.5),
    "requires_grad": lambda lib, t, d: lib.zeros(2, dtype=d, requires_grad=True),
    "as_index": lambda lib, t, d: lib.ones(3)[lib.tensor([0], dtype=d)],
}


def _unsigned(lib, name, dtype_name):
    array = np.array([3, 1, 65535 if dtype_name == "uint16" else 7], dtype=dtype_name)
    try:
        return _plain(UNSIGNED[name](lib, lib.from_numpy(array), getattr(lib, dtype_name)), lib)
    except Exception as error:   # (the error is what is compared)
        return type(error).__name__, _plain(str(error), lib)


@pytest.mark.parametrize("dtype_name", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("name", UNSIGNED)
def test_wide_unsigned_dtypes_as_pytorch(name, dtype_name):
    assert _unsigned(sg, name, dtype_name) == _unsigned(torch, name, dtype_name)


def test_uint8_sums_to_int64_as_pytorch():
    for make in (lambda lib, t: t.sum(), lambda lib, t: t.prod(), lambda lib, t: t.cumsum(0),
                 lambda lib, t: t.cumprod(0)):
        got = [_plain(make(lib, lib.tensor([200, 100], dtype=lib.uint8)), lib) for lib in (torch, sg)]
        assert got[1] == got[0]


def test_a_compiled_function_on_wide_unsigned_tensors_replays_as_eager():
    w = sg.ones(3, requires_grad=True)

    def fn(u, v):
        w.grad = None
        loss = (u.float() * w).sum()
        loss.backward()
        return u == v, u * v, u / v, sg.cat([u, v]).sum(), loss.detach(), w.grad.clone()

    compiled = sg.compile(fn)
    for k in range(3):
        u = sg.from_numpy(np.array([1, 2, 3 + k], np.uint32))
        v = sg.from_numpy(np.array([1, 5, 3], np.uint32))
        for g, e in zip(compiled(u, v), fn(u, v)):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g.numpy(), e.numpy())
    assert compiled.stats.replays == 2


REPRS = {
    "uint64": lambda lib: lib.from_numpy(np.array([1, 2, 2**64 - 1], np.uint64)),
    "int32_fits": lambda lib: lib.arange(30, dtype=lib.int32),
    "two_suffixes": lambda lib: lib.ones(2, 12, dtype=lib.float64).requires_grad_() * 3,
    "grad_fn": lambda lib: lib.arange(30.0).requires_grad_() * 2,
    "empty": lambda lib: lib.zeros(0, 3, dtype=lib.int32),
}


@pytest.mark.parametrize("name", REPRS)
def test_a_long_repr_puts_its_suffixes_where_pytorchs_does(name):
    shown = [repr(REPRS[name](lib)).replace("torch.", "").replace("staticgrad.", "") for lib in (torch, sg)]
    assert shown[1] == shown[0]


def test_every_backward_node_is_an_autograd_graph_node_as_in_pytorch():
    """torch.autograd.graph.Node answers isinstance for function nodes, custom Functions' nodes and
    AccumulateGrad alike (an abstract class), and for nothing else."""
    answers = []
    for lib in (torch, sg):
        class Triple(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 3

            @staticmethod
            def backward(ctx, g):
                return g * 3

        x = lib.randn(2, requires_grad=True)
        y = x * 2
        node = lib.autograd.graph.Node
        accumulate = y.grad_fn.next_functions[0][0]
        answers.append((isinstance(accumulate, node), isinstance(y.grad_fn, node),
                        isinstance(Triple.apply(x).grad_fn, node), isinstance(x, node), isinstance(None, node),
                        issubclass(type(y.grad_fn), node), issubclass(type(accumulate), node), issubclass(int, node)))
    assert answers[0] == answers[1] == (True, True, True, False, False, True, True, False)
