"""Matrix products take operands of one dtype, as PyTorch's: mm, matmul (every path), addmm, bmm, mv, dot,
linear, einsum and tensordot raise PyTorch's errors for mixed dtypes where PyTorch does, and keep working
for one dtype (integers included)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.oracle import compare, same_error


def _operands(lib):
    return {"f": lib.ones(2, 2), "d": lib.ones(2, 2, dtype=lib.float64), "i": lib.ones(2, 2, dtype=lib.int64),
            "h": lib.ones(2, 2, dtype=lib.float16), "v32": lib.ones(2), "v64": lib.ones(2, dtype=lib.float64),
            "vi": lib.ones(2, dtype=lib.int64), "b32": lib.ones(3, 2, 2), "b64": lib.ones(3, 2, 2, dtype=lib.float64)}


MIXED = [
    ("mm_float_double", lambda lib, o: lib.mm(o["f"], o["d"])),
    ("mm_double_float", lambda lib, o: lib.mm(o["d"], o["f"])),
    ("mm_float_long", lambda lib, o: lib.mm(o["f"], o["i"])),
    ("mm_float_half", lambda lib, o: lib.mm(o["f"], o["h"])),
    ("mm_long_float", lambda lib, o: lib.mm(o["i"], o["f"])),
    ("matmul_2d", lambda lib, o: lib.matmul(o["f"], o["d"])),
    ("matmul_operator", lambda lib, o: o["f"] @ o["d"]),
    ("matmul_matrix_vector", lambda lib, o: lib.matmul(o["f"], o["v64"])),
    ("matmul_vector_vector", lambda lib, o: lib.matmul(o["v32"], o["v64"])),
    ("matmul_vector_matrix", lambda lib, o: lib.matmul(o["v32"], o["d"])),
    ("matmul_long_vector_matrix", lambda lib, o: lib.matmul(o["vi"], o["f"])),
    ("matmul_folded_batch_matrix", lambda lib, o: lib.matmul(o["b32"], o["d"])),
    ("matmul_folded_batch_vector", lambda lib, o: lib.matmul(o["b32"], o["v64"])),
    ("matmul_batched", lambda lib, o: lib.matmul(o["b32"], o["b64"])),
    ("matmul_matrix_batch", lambda lib, o: lib.matmul(o["f"], o["b64"])),
    ("matmul_vector_batch", lambda lib, o: lib.matmul(o["v32"], o["b64"])),
    ("addmm_input", lambda lib, o: lib.addmm(o["d"], o["f"], o["f"])),
    ("addmm_mat1", lambda lib, o: lib.addmm(o["f"], o["d"], o["f"])),
    ("addmm_mat2", lambda lib, o: lib.addmm(o["f"], o["f"], o["d"])),
    ("bmm", lambda lib, o: lib.bmm(o["b32"], o["b64"])),
    ("bmm_double_float", lambda lib, o: lib.bmm(o["b64"], o["b32"])),
    ("bmm_float_long", lambda lib, o: lib.bmm(o["b32"], o["b32"].long())),
    ("mv", lambda lib, o: lib.mv(o["f"], o["v64"])),
    ("mv_double_float", lambda lib, o: lib.mv(o["d"], o["v32"])),
    ("mv_float_long", lambda lib, o: lib.mv(o["f"], o["vi"])),
    ("dot", lambda lib, o: lib.dot(o["v32"], o["v64"])),
    ("dot_float_long", lambda lib, o: lib.dot(o["v32"], o["vi"])),
    ("linear", lambda lib, o: lib.nn.functional.linear(o["f"], o["d"])),
    ("linear_bias", lambda lib, o: lib.nn.functional.linear(o["f"], o["f"], o["v64"])),
    ("linear_3d", lambda lib, o: lib.nn.functional.linear(o["b32"], o["d"])),
    ("linear_3d_bias", lambda lib, o: lib.nn.functional.linear(o["b32"], o["f"], o["v64"])),
    ("linear_1d", lambda lib, o: lib.nn.functional.linear(o["v32"], o["d"])),
    ("einsum_contraction", lambda lib, o: lib.einsum("ij,jk->ik", o["f"], o["d"])),
    ("einsum_dot", lambda lib, o: lib.einsum("i,i->", o["v32"], o["v64"])),
    ("tensordot", lambda lib, o: lib.tensordot(o["f"], o["d"], 1)),
]


@pytest.mark.parametrize("name,fn", MIXED, ids=[c[0] for c in MIXED])
def test_mixed_dtypes_raise_pytorchs_error(name, fn):
    same_error(lambda lib: fn(lib, _operands(lib)))


SAME = [
    ("mm_long", lambda lib, a, b: lib.mm(a, b), "int64"),
    ("matmul_half", lambda lib, a, b: lib.matmul(a.half(), b.half()), "float16"),
    ("outer_promotes", lambda lib, a, b: lib.outer(a[0].float(), b[0].double()), "float64"),
    ("einsum_outer_promotes", lambda lib, a, b: lib.einsum("i,j->ij", a[0].float(), b[0].double()), "float64"),
]


@pytest.mark.parametrize("name,fn,dtype", SAME, ids=[c[0] for c in SAME])
def test_one_dtype_and_elementwise_products_still_work(name, fn, dtype):
    out = compare(fn, [np.array([[1, 2], [3, 4]]), np.array([[5, 6], [7, 8]])], grad=False)
    assert str(out.dtype) == f"staticgrad.{dtype}"
