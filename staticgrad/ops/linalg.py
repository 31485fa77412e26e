"""Matrix products. They stay on BLAS (NumPy's matmul); the matmul composite that picks one of
them by input rank lives in the front end, as PyTorch's does."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.quiet import restore, silence
from staticgrad.ops.registry import OpDef, Save, register, shape_str, with_emit


def _mm_error(shapes, attrs, exc):
    a, b = shapes[-2], shapes[-1]
    if len(a) != 2 or len(b) != 2:
        return RuntimeError("self must be a matrix" if len(a) != 2 else "mat2 must be a matrix")
    return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({shape_str(a)} and {shape_str(b)})")


def _bmm_error(shapes, attrs, exc):
    a, b = shapes
    if len(a) != 3 or len(b) != 3:
        return RuntimeError("batch1 must be a 3D tensor" if len(a) != 3 else "batch2 must be a 3D tensor")
    if a[0] != b[0]:
        return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a[0]}, {a[2]}] "
                            f"but got: [{b[0]}, {b[1]}].")
    return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a[0]}, {a[2]}] "
                        f"but got: [{b[0]}, {b[1]}].")


def _column_major(sizes, strides) -> bool:
    """A matrix laid out column by column (a transposed contiguous one, as ``weight.t()``)."""
    return strides[0] == 1 and strides[1] == sizes[0]


def _grad_mat1(F, g, mat2, sizes, strides):
    """As PyTorch: for a column-major mat1 the gradient is computed transposed, so it comes out in
    mat1's layout (the BLAS then sees the operands PyTorch's sees)."""
    if _column_major(sizes, strides):
        return F.t(F.mm(mat2, F.t(g)))
    return F.mm(g, F.t(mat2))


def _grad_mat2(F, g, mat1, sizes, strides):
    """As PyTorch: a column-major mat2 (``x @ weight.t()``) gets ``(g.t() @ mat1).t()``, which is
    the weight's gradient computed straight in the weight's own layout."""
    if _column_major(sizes, strides):
        return F.t(F.mm(F.t(g), mat1))
    return F.mm(F.t(mat1), g)


def _matrix_grads(F, g, mat1, mat2, need1, need2, layout1, layout2):
    """The gradients of ``mat1 @ mat2`` (``None`` where not needed), by ``_grad_mat1`` and
    ``_grad_mat2``; when nothing records the formula's ops and every operand is of one float dtype,
    the same two matmuls on arrays, without an op dispatched per transpose and product."""
    if F.untracked and _one_float_dtype(g, mat1 if need2 else None, mat2 if need1 else None):
        quiet = silence()
        try:
            grad = g._data
            grad_a = grad_b = None
            if need1:
                m2 = mat2._data
                grad_a = (F.result(np.matmul(m2, grad.T), True) if _column_major(*layout1)
                          else F.result(np.matmul(grad, m2.T)))
            if need2:
                m1 = mat1._data
                grad_b = (F.result(np.matmul(grad.T, m1), True) if _column_major(*layout2)
                          else F.result(np.matmul(m1.T, grad)))
        finally:
            restore(quiet)
        return grad_a, grad_b
    return (_grad_mat1(F, g, mat2, *layout1) if need1 else None,
            _grad_mat2(F, g, mat1, *layout2) if need2 else None)


def _one_float_dtype(g, *operands) -> bool:
    dtype = g._data.dtype
    return dtype.kind == "f" and all(t is None or t._data.dtype == dtype for t in operands)


def _mm_backward(F, g, s, at, need):
    return _matrix_grads(F, g, s.get("self"), s.get("mat2"), need[0], need[1],
                         (s.get("self_sym_sizes"), s.get("self_sym_strides")),
                         (s.get("mat2_sym_sizes"), s.get("mat2_sym_strides")))


register(OpDef("mm", lambda a, b, out=None: np.matmul(a, b, out=out), "matmul", "MmBackward0", _mm_backward,
               (Save("self", 0, when=(1,)), Save("self_sym_sizes", "shape:0", when=(0,), freed=False),
                Save("self_sym_strides", "strides:0", when=(0,), freed=False), Save("mat2", 1, when=(0,)),
                Save("mat2_sym_sizes", "shape:1", when=(1,), freed=False),
                Save("mat2_sym_strides", "strides:1", when=(1,), freed=False)), "promote", explain=_mm_error))


def _addmm(bias, a, b, out=None, beta=1, alpha=1):
    if out is None or np.may_share_memory(out, bias):
        product = np.matmul(a, b)
    else:
        product = np.matmul(a, b, out=out)
    if alpha != 1:
        np.multiply(product, alpha, out=product)
    if beta != 1:
        bias = np.multiply(bias, beta)
    return np.add(product, bias, out=out)


def _addmm_backward(F, g, s, at, need):
    alpha, beta = s["alpha"], s["beta"]
    grad_bias = (g if beta == 1 else F.mul_scalar(g, other=beta)) if need[0] else None
    grad_a, grad_b = _matrix_grads(F, g, s.get("mat1"), s.get("mat2"), need[1], need[2],
                                   (s.get("mat1_sym_sizes"), s.get("mat1_sym_strides")),
                                   (s.get("mat2_sym_sizes"), s.get("mat2_sym_strides")))
    if alpha != 1:
        grad_a = grad_a if grad_a is None else F.mul_scalar(grad_a, other=alpha)
        grad_b = grad_b if grad_b is None else F.mul_scalar(grad_b, other=alpha)
    return grad_bias, grad_a, grad_b


register(OpDef("addmm", _addmm, "matmul", "AddmmBackward0", _addmm_backward,
               (Save("mat1", 1, when=(2,)), Save("mat1_sym_sizes", "shape:1", when=(1,), freed=False),
                Save("mat1_sym_strides", "strides:1", when=(1,), freed=False), Save("mat2", 2, when=(1,)),
                Save("mat2_sym_sizes", "shape:2", when=(2,), freed=False),
                Save("mat2_sym_strides", "strides:2", when=(2,), freed=False),
                Save("alpha", "attr:alpha", freed=False), Save("beta", "attr:beta", freed=False)),
               "promote", explain=_mm_error))


def _bmm_backward(F, g, s, at, need):
    grad_a = F.bmm(g, F.transpose(s["mat2"], dim0=1, dim1=2)) if need[0] else None
    grad_b = F.bmm(F.transpose(s["self"], dim0=1, dim1=2), g) if need[1] else None
    return grad_a, grad_b


register(OpDef("bmm", lambda a, b, out=None: np.matmul(a, b, out=out), "matmul", "BmmBackward0", _bmm_backward,
               (Save("self", 0, when=(1,)), Save("mat2", 1, when=(0,))), "promote", explain=_bmm_error))


def _mv_error(shapes, attrs, exc):
    m, v = shapes
    return RuntimeError(f"size mismatch, got input ({m[0]}), mat ({shape_str(m)}), vec ({v[0]})")


def _mv_backward(F, g, s, at, need):
    grad_m = F.mul(F.unsqueeze(g, dim=1), s["vec"]) if need[0] else None
    grad_v = F.mv(F.t(s["self"]), g) if need[1] else None
    return grad_m, grad_v


register(OpDef("mv", lambda m, v, out=None: np.matmul(m, v, out=out), "matmul", "MvBackward0", _mv_backward,
               (Save("self", 0, when=(1,)), Save("vec", 1, when=(0,))), "promote", explain=_mv_error))


def _dot_error(shapes, attrs, exc):
    a, b = shapes
    return RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src [{b[0]}] to have the same "
                        f"number of elements, but got {a[0]} and {b[0]} elements respectively")


def _dot(a, b, out=None):
    result = np.dot(a, b)
    if out is None:
        return np.asarray(result)
    out[...] = result
    return out


register(OpDef("dot", _dot, "matmul", "DotBackward0",
               lambda F, g, s, at, need: (g * s["tensor"] if need[0] else None, g * s["self"] if need[1] else None),
               (Save("self", 0, when=(1,)), Save("tensor", 1, when=(0,))), "promote", explain=_dot_error))


# ---- direct NumPy calls for generated replay code ---------------------------------------------

with_emit("mm", lambda ins, out, at, shapes: f"np.matmul({ins[0]}, {ins[1]}, out={out})")
with_emit("bmm", lambda ins, out, at, shapes: f"np.matmul({ins[0]}, {ins[1]}, out={out})")
with_emit("addmm", lambda ins, out, at, shapes: (
    f"np.matmul({ins[1]}, {ins[2]}, out={out}); np.add({out}, {ins[0]}, out={out})"
    if at.get("alpha", 1) == 1 and at.get("beta", 1) == 1 else None))
