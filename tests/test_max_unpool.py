"""F.max_unpool1d / max_unpool3d and nn.MaxUnpool1d / MaxUnpool3d against PyTorch: values, gradients
(of the values; indices get none), node names (SqueezeBackward1 over MaxUnpool2DBackward0, and
MaxUnpool3DBackward0), output_size, errors, module reprs; traced and replayed bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import replay_matches_eager

rng = np.random.default_rng(71)


def F(lib):
    return lib.nn.functional


def _pooled(lib, x, dims, kernel, stride=None, padding=0):
    pool = F(lib).max_pool1d if dims == 1 else F(lib).max_pool3d
    return pool(x, kernel, stride, padding, return_indices=True)


CASES = [
    ("1d", 1, (2, 3, 8), dict(kernel_size=2), {}),
    ("1d_unbatched_stride_padding", 1, (3, 9), dict(kernel_size=3, stride=2, padding=1), {}),
    ("1d_output_size", 1, (1, 2, 7), dict(kernel_size=2), dict(output_size=[7])),
    ("1d_output_size_full", 1, (1, 2, 7), dict(kernel_size=2), dict(output_size=(1, 2, 7))),
    ("3d", 3, (1, 2, 4, 4, 4), dict(kernel_size=2), {}),
    ("3d_unbatched_stride", 3, (2, 5, 4, 5), dict(kernel_size=(2, 2, 3), stride=(1, 2, 1)), {}),
    ("3d_output_size", 3, (1, 1, 5, 5, 5), dict(kernel_size=2), dict(output_size=(5, 5, 5))),
]


@pytest.mark.parametrize("name,dims,shape,pool,extra", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, dims, shape, pool, extra):
    def run(lib, x):
        values, indices = _pooled(lib, x, dims, pool["kernel_size"], pool.get("stride"), pool.get("padding", 0))
        unpool = F(lib).max_unpool1d if dims == 1 else F(lib).max_unpool3d
        return unpool(values * 2.0, indices, **pool, **extra)
    array = rng.standard_normal(shape)
    compare(run, [array], atol=1e-12, rtol=1e-12)
    compare(run, [array.astype(np.float32)], atol=1e-6, rtol=1e-6)
    if "stride" not in pool:  # (overlapping windows may pick one element twice: its gradient counts both)
        finite_difference_check(lambda x: run(sg, x), [array])


@pytest.mark.parametrize("dims", [1, 3])
def test_second_derivative_through_the_unpooling_matches_torch(dims):
    shape = (2, 3, 8) if dims == 1 else (1, 2, 4, 4, 2)
    _, indices = _pooled(torch, torch.tensor(rng.standard_normal(shape)), dims, 2)

    def run(lib, values):
        unpool = F(lib).max_unpool1d if dims == 1 else F(lib).max_unpool3d
        return unpool(values * values, lib.tensor(indices.numpy()), 2)
    compare(run, [rng.standard_normal(tuple(indices.shape))], atol=1e-12, rtol=1e-12, double=True)


@pytest.mark.parametrize("dims", [1, 3])
def test_modules_match_torch(dims):
    shape = (2, 3, 6) if dims == 1 else (1, 2, 4, 4, 2)
    array = rng.standard_normal(shape)
    results = []
    for lib in (torch, sg):
        x = lib.tensor(array, requires_grad=True)
        pool_cls, unpool_cls = ((lib.nn.MaxPool1d, lib.nn.MaxUnpool1d) if dims == 1 else
                                (lib.nn.MaxPool3d, lib.nn.MaxUnpool3d))
        values, indices = pool_cls(2, return_indices=True)(x)
        unpool = unpool_cls(2)
        out = unpool(values, indices, output_size=shape)
        out.pow(2).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy(), repr(unpool), repr(unpool_cls(3, stride=1, padding=1)),
                        out.grad_fn.name() if lib is sg else type(out.grad_fn).__name__))
    for mine, theirs in zip(results[1], results[0]):
        if isinstance(mine, np.ndarray):
            np.testing.assert_allclose(mine, theirs, rtol=1e-12)
        else:
            assert mine == theirs


def _unpool3d(lib, **kw):
    x = lib.tensor(np.arange(64.0).reshape(1, 1, 4, 4, 4))
    values, indices = F(lib).max_pool3d(x, 2, return_indices=True)
    return values, indices


# one invalid index (with several, PyTorch reports whichever its threads meet last)
_ONE_BAD = np.zeros((1, 1, 2, 2, 2), dtype=np.int64)
_ONE_BAD[0, 0, 1, 0, 1] = 100

ERRORS = [
    ("3d_index", lambda lib: F(lib).max_unpool3d(_unpool3d(lib)[0], _unpool3d(lib)[1] + lib.tensor(_ONE_BAD), 2)),
    ("3d_rank", lambda lib: F(lib).max_unpool3d(_unpool3d(lib)[0][0, 0], _unpool3d(lib)[1][0, 0], 2)),
    ("3d_int32", lambda lib: F(lib).max_unpool3d(_unpool3d(lib)[0], _unpool3d(lib)[1].int(), 2)),
    ("3d_index_shape", lambda lib: F(lib).max_unpool3d(_unpool3d(lib)[0], _unpool3d(lib)[1][..., :1], 2)),
    ("3d_output_size", lambda lib: F(lib).max_unpool3d(*_unpool3d(lib), 2, output_size=(9, 9, 9))),
    ("3d_output_size_length", lambda lib: F(lib).max_unpool3d(*_unpool3d(lib), 2, output_size=(1, 2))),
    ("3d_long", lambda lib: F(lib).max_unpool3d(lib.ones(1, 1, 1, 1, 1, dtype=lib.int64),
                                                lib.zeros(1, 1, 1, 1, 1, dtype=lib.int64), 2)),
    ("1d_bool", lambda lib: F(lib).max_unpool1d(lib.ones(1, 1, 2, dtype=lib.bool), lib.zeros(1, 1, 2, dtype=lib.int64),
                                                2)),
    ("1d_index", lambda lib: F(lib).max_unpool1d(lib.ones(1, 1, 4), lib.tensor([[[0, 2, 100, 6]]]), 2)),
    ("1d_rank", lambda lib: F(lib).max_unpool1d(lib.ones(4), lib.zeros(4, dtype=lib.int64), 2)),
    ("1d_int32", lambda lib: F(lib).max_unpool1d(lib.ones(1, 4), lib.zeros(1, 4, dtype=lib.int32), 2)),
    ("1d_output_size", lambda lib: F(lib).max_unpool1d(lib.ones(1, 4), lib.zeros(1, 4, dtype=lib.int64), 2,
                                                       output_size=[20])),
]


@pytest.mark.parametrize("name,make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, make):
    same_error(make)


def test_max_unpool3d_replays_eager_bit_for_bit():
    def unpool(a, b):
        _values, indices = F(sg).max_pool3d(b, 2, return_indices=True)
        return F(sg).max_unpool3d(a, indices, 2)
    replay_matches_eager(unpool, lambda r: (r.standard_normal((1, 2, 2, 2, 2)), r.standard_normal((1, 2, 4, 4, 4))))


def test_max_unpool1d_replays_eager_bit_for_bit():
    def unpool(a, b):
        _values, indices = F(sg).max_pool1d(b, 2, return_indices=True)
        return F(sg).max_unpool1d(a, indices, 2)
    replay_matches_eager(unpool, lambda r: (r.standard_normal((2, 3, 4)), r.standard_normal((2, 3, 8))))
