"""randint with a float or bool dtype, and randint_like, against PyTorch: shapes, dtypes, bounds,
requires_grad and errors (the draws themselves come from staticgrad's generator)."""

from __future__ import annotations

import pytest
import torch

import staticgrad as sg


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_randint_draws_in_bounds_in_any_dtype(dtype):
    for lib in (torch, sg):
        lib.manual_seed(0)
        high = 2 if dtype == "bool" else 7
        t = lib.randint(0 if dtype == "bool" else 3, high, (50,), dtype=getattr(lib, dtype))
        assert t.dtype == getattr(lib, dtype) and tuple(t.shape) == (50,)
        values = set(t.tolist())
        assert values <= ({False, True} if dtype == "bool" else {3, 4, 5, 6}) and len(values) > 1


@pytest.mark.parametrize("make", [
    lambda L, x: L.randint_like(x, 5), lambda L, x: L.randint_like(x, 2, 4), lambda L, x: L.randint_like(x, high=9),
    lambda L, x: L.randint_like(x, low=1, high=3), lambda L, x: L.randint_like(x, 4, dtype=L.int32),
    lambda L, x: L.randint_like(x, 0, 3, dtype=L.float32, requires_grad=True),
], ids=["high", "low-high", "high=", "low=high=", "dtype", "requires_grad"])
def test_randint_like_takes_input_s_shape_and_dtype(make):
    seen = []
    for lib in (torch, sg):
        x = lib.zeros(3, 4, dtype=lib.float64)
        t = make(lib, x)
        seen.append((tuple(t.shape), str(t.dtype).split(".")[1], t.requires_grad, t.min().item() >= 0,
                     t.max().item() < 9))
    assert seen[0] == seen[1]


def test_randint_like_refuses_what_torch_refuses():
    outcomes = []
    for lib in (torch, sg):
        found = []
        for call in (lambda lib=lib: lib.randint_like(lib.zeros(2)),
                     lambda lib=lib: lib.randint_like(lib.zeros(2, dtype=lib.int64), 3, requires_grad=True)):
            with pytest.raises((TypeError, RuntimeError)) as info:
                call()
            found.append((type(info.value).__name__, str(info.value).split("\n")[0]))
        outcomes.append(found)
    assert outcomes[0] == outcomes[1]
