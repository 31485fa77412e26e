"""More matrix ops with their own PyTorch backward nodes: trace, linalg_cross, the fused products
addmv, addbmm, baddbmm and addr (``beta * input + alpha * product``), vdot, rot90, take,
block_diag and masked_scatter, each with the adjoint op its backward needs.

The products stay on NumPy's matmul (BLAS); ``input`` broadcasts to the product's shape inside the
forward, as PyTorch's kernels expand it, and the engine sums its gradient back to its shape.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.errors import LinAlgError
from staticgrad.ops.registry import OPS, ZEROS_SELF, OpDef, Save, register


def _into(result, out):
    """``result`` written into ``out`` when the caller planned a buffer (replay), else returned."""
    if out is None:
        return np.asarray(result)
    np.copyto(out, result, casting="unsafe")
    return out


def _kept(name: str) -> Save:
    return Save(name, f"attr:{name}", freed=False)


def _scaled(F, t, factor):
    """PyTorch's maybe_multiply: ``t`` itself when the factor is 1, else ``t * factor``."""
    return t if factor == 1 else F.mul_scalar_cpp(t, other=factor)


def _add_scaled(product, input, beta, alpha, out):
    """beta * input + alpha * product in the product's dtype; input is ignored when beta is 0 (its NaN too)."""
    T = product.dtype.type
    if product.dtype == np.bool_:  # PyTorch's boolean form: (beta and input) or (alpha and product)
        result = np.logical_and(product, bool(alpha))
        if beta:
            result = np.logical_or(result, input)
        return _into(result, out)
    if alpha != 1:
        product = np.multiply(product, T(alpha))
    if beta == 0:
        return _into(product, out)
    bias = input if beta == 1 else np.multiply(input, T(beta))
    return _into(np.add(product, bias).astype(product.dtype, copy=False), out)


# ---- trace ----------------------------------------------------------------------------------------

def _trace(a, out=None):
    return _into(np.trace(a).astype(a.dtype), out)


def _trace_backward(F, g, s, at, need):
    """The gradient lies on the diagonal: the 0-dim gradient expanded along it."""
    rows, cols = s["self_sym_sizes"]
    diagonal = F.expand(g, shape=(min(rows, cols),))
    return (F.diagonal_backward(diagonal, sizes=(rows, cols), offset=0, dim1=0, dim2=1),)


register(OpDef("trace", _trace, "reduction", "TraceBackward0", _trace_backward,
               (Save("self_sym_sizes", "shape:0", freed=False),), "same"))


# ---- linalg_cross: the cross product of 3-vectors along ``dim`` ------------------------------------

def _cross(a, b, out=None, dim=-1):
    return _into(np.cross(a, b, axis=dim), out)


def _cross_backward(F, g, s, at, need):
    dim = at["dim"]
    return (F.linalg_cross(s["other"], g, dim=dim) if need[0] else None,
            F.linalg_cross(g, s["self"], dim=dim) if need[1] else None)


register(OpDef("linalg_cross", _cross, "other", "LinalgCrossBackward0", _cross_backward,
               (_kept("dim"), Save("other", 1, when=(0,)), Save("self", 0, when=(1,))), "promote"))


# ---- addmv, addbmm, baddbmm, addr: beta * input + alpha * (a product) ------------------------------

def _addmv(input, mat, vec, out=None, beta=1, alpha=1):
    return _add_scaled(np.matmul(mat, vec), input, beta, alpha, out)


def _addmv_backward(F, g, s, at, need):
    beta, alpha = s["beta"], s["alpha"]
    return (_scaled(F, g, beta) if need[0] else None,
            _scaled(F, F.mul(F.unsqueeze(g, dim=1), s["vec"]), alpha) if need[1] else None,
            _scaled(F, F.mv(F.t(s["mat"]), g), alpha) if need[2] else None)


_SCALES = (_kept("alpha"), _kept("beta"))
register(OpDef("addmv", _addmv, "matmul", "AddmvBackward0", _addmv_backward,
               _SCALES + (Save("mat", 1, when=(2,)), Save("vec", 2, when=(1,))), "same"))


def _addbmm(input, batch1, batch2, out=None, beta=1, alpha=1, batches=0):
    product = np.matmul(batch1, batch2).sum(axis=0, dtype=batch1.dtype)
    return _add_scaled(product, input, beta, alpha, out)


def _addbmm_backward(F, g, s, at, need):
    beta, alpha = s["beta"], s["alpha"]
    batch1, batch2 = s.get("batch1"), s.get("batch2")
    batches = s["batch1_sym_argsize_0"]
    expanded = F.expand(F.unsqueeze(g, dim=0), shape=(batches,) + tuple(g.shape))
    return (_scaled(F, g, beta) if need[0] else None,
            _scaled(F, F.bmm(expanded, F.transpose(batch2, dim0=1, dim1=2)), alpha) if need[1] else None,
            _scaled(F, F.bmm(F.transpose(batch1, dim0=1, dim1=2), expanded), alpha) if need[2] else None)


register(OpDef("addbmm", _addbmm, "matmul", "AddbmmBackward0", _addbmm_backward,
               _SCALES + (Save("batch1", 1, when=(2,)), Save("batch2", 2, when=(1,)),
                          Save("batch1_sym_argsize_0", "attr:batches", freed=False)), "same"))


def _baddbmm(input, batch1, batch2, out=None, beta=1, alpha=1):
    return _add_scaled(np.matmul(batch1, batch2), input, beta, alpha, out)


def _baddbmm_backward(F, g, s, at, need):
    beta, alpha = s["beta"], s["alpha"]
    return (_scaled(F, g, beta) if need[0] else None,
            _scaled(F, F.bmm(g, F.transpose(s["batch2"], dim0=1, dim1=2)), alpha) if need[1] else None,
            _scaled(F, F.bmm(F.transpose(s["batch1"], dim0=1, dim1=2), g), alpha) if need[2] else None)


register(OpDef("baddbmm", _baddbmm, "matmul", "BaddbmmBackward0", _baddbmm_backward,
               _SCALES + (Save("batch1", 1, when=(2,)), Save("batch2", 2, when=(1,))), "same"))


def _addr(input, vec1, vec2, out=None, beta=1, alpha=1):
    return _add_scaled(np.multiply.outer(vec1, vec2), input, beta, alpha, out)


def _addr_backward(F, g, s, at, need):
    beta, alpha = s["beta"], s["alpha"]
    return (_scaled(F, g, beta) if need[0] else None,
            _scaled(F, F.mv(g, s["vec2"]), alpha) if need[1] else None,
            _scaled(F, F.mv(F.t(g), s["vec1"]), alpha) if need[2] else None)


register(OpDef("addr", _addr, "matmul", "AddrBackward0", _addr_backward,
               _SCALES + (Save("vec1", 1, when=(2,)), Save("vec2", 2, when=(1,))), "promote"))


# ---- vdot: dot of the conjugated first vector (real tensors: dot itself) ----------------------------

register(replace(OPS["dot"], name="vdot", node_name="VdotBackward0",
                 backward=lambda F, g, s, at, need: (g * s["other"] if need[0] else None,
                                                     g * s["self"] if need[1] else None),
                 saves=(Save("other", 1, when=(0,)), Save("self", 0, when=(1,))), emit=None))


# ---- rot90: a copy rotated k quarter turns in the plane of ``dims`` --------------------------------

def _rot90(a, out=None, k=1, dims=(0, 1)):
    return _into(np.ascontiguousarray(np.rot90(a, k % 4, axes=dims)), out)


register(OpDef("rot90", _rot90, "other", "Rot90Backward0",
               lambda F, g, s, at, need: (F.rot90(g, k=-s["k"], dims=s["dims"]),),
               (_kept("dims"), _kept("k")), "same"))


# ---- take: elements of the flattened input at ``index`` (negative counts from the end) -------------

def _check_take(size: int, index) -> None:
    if not index.size:
        return
    if size == 0:
        raise IndexError("take(): tried to take from an empty tensor")
    bad = (index < -size) | (index >= size)
    if bad.any():
        raise IndexError(f"out of range: tried to access index {int(index[bad].flat[0])} on a tensor of {size} "
                         "elements.")


def _take(a, index, out=None):
    _check_take(a.size, index)
    return _into(a.reshape(-1)[index], out)


def _put_into_zeros(g, index, out=None, sizes=()):
    """The adjoint of take: a zero tensor of ``sizes`` with each gradient added at its index."""
    result = np.zeros(sizes, g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    np.add.at(result.reshape(-1), index.reshape(-1), g.reshape(-1))
    return result


register(OpDef("take", _take, "other", "TakeBackward0",
               lambda F, g, s, at, need: (F.put_into_zeros(g, s["index"], sizes=tuple(s["self_sym_sizes"])), None),
               (Save("index", 1), Save("self_sym_sizes", "shape:0", freed=False)), "same", grad_inputs=(0,)))
register(OpDef("put_into_zeros", _put_into_zeros, "other", "PutBackward0",
               lambda F, gg, s, at, need: (F.take(gg, s["index"]), None), (Save("index", 1),), "same",
               grad_inputs=ZEROS_SELF))


# ---- block_diag: 0-, 1- and 2-dim blocks along the diagonal of one matrix --------------------------

def _as_block(shape) -> tuple:
    """A block's (rows, cols): a 0-dim tensor is 1x1, a 1-dim one a single row."""
    return (1, 1) if len(shape) == 0 else (1, shape[0]) if len(shape) == 1 else tuple(shape)


def _block_diag(*arrays, out=None, shapes=()):
    blocks = [_as_block(a.shape) for a in arrays]
    shape = (sum(r for r, _ in blocks), sum(c for _, c in blocks))
    dtype = np.result_type(*arrays)
    result = np.zeros(shape, dtype) if out is None else out
    if out is not None:
        out.fill(0)
    row = col = 0
    for a, (rows, cols) in zip(arrays, blocks):
        result[row:row + rows, col:col + cols] = a.reshape(rows, cols)
        row, col = row + rows, col + cols
    return result


def _block_diag_backward(F, g, s, at, need):
    grads, row, col = [], 0, 0
    for shape, needed in zip(s["shapes"], need):
        rows, cols = _as_block(shape)
        if needed:
            block = F.slice(F.slice(g, dim=0, start=row, end=row + rows, step=1), dim=1, start=col, end=col + cols,
                            step=1)
            grads.append(block if len(shape) == 2 else F.view(block, shape=tuple(shape)))  # one row: a view
        else:
            grads.append(None)
        row, col = row + rows, col + cols
    return tuple(grads)


register(OpDef("block_diag", _block_diag, "other", "BlockDiagBackward0", _block_diag_backward,
               (_kept("shapes"),), "promote"))


# ---- masked_scatter: source's elements, in order, where the mask is true ---------------------------

def _masked_scatter(a, mask, source, out=None):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    full_mask = np.broadcast_to(mask, shape)
    count = int(np.count_nonzero(full_mask))
    if count > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    result = np.array(np.broadcast_to(a, shape)) if out is None else out
    if out is not None and out is not a:
        np.copyto(out, np.broadcast_to(a, shape))
    result[full_mask] = source.reshape(-1)[:count]
    return result


def _masked_scatter_backward(F, g, s, at, need):
    mask = s["mask"]
    grad_self = F.masked_fill(g, mask, value=0.0) if need[0] else None
    grad_source = F.masked_source_grad(g, mask, sizes=tuple(s["source_sym_sizes"])) if need[2] else None
    return grad_self, None, grad_source


def _masked_source_grad(g, mask, out=None, sizes=()):
    """The source's gradient: the gradient at the mask's true places, in order, then zeros."""
    chosen = g[np.broadcast_to(mask, g.shape)]
    result = np.zeros(sizes, g.dtype) if out is None else out
    if out is not None:
        out.fill(0)
    result.reshape(-1)[:chosen.size] = chosen
    return result


register(OpDef("masked_scatter", _masked_scatter, "other", "MaskedScatterBackward0", _masked_scatter_backward,
               (Save("mask", 1), Save("source_sym_sizes", "shape:2", freed=False)), "same", grad_inputs=(0, 2)))
register(OpDef("masked_source_grad", _masked_source_grad, "other", "MaskedScatterBackwardBackward0",
               lambda F, gg, s, at, need: (F.masked_scatter(
                   F.full(shape=tuple(s["grad_sym_sizes"]), value=0.0, dtype=gg._data.dtype), s["mask"], gg), None),
               (Save("mask", 1), Save("grad_sym_sizes", "shape:0", freed=False)), "same", grad_inputs=(0,)))


# ---- linalg_inv, linalg_det: square matrices (batched over leading dims) ------------------------------

def _first_zero_pivot(matrix) -> int:
    """The 1-based diagonal element LAPACK's LU with partial pivoting (getrf) finds to be zero, 0 if none."""
    lu = np.array(matrix, dtype=np.float64)
    n = lu.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(lu[k:, k])))
        if lu[p, k] == 0:
            return k + 1
        lu[[k, p]] = lu[[p, k]]
        lu[k + 1:, k] /= lu[k, k]
        lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    return 0


def _inv(a, out=None):
    try:
        return _into(np.linalg.inv(a), out)
    except np.linalg.LinAlgError:
        batch = a.reshape((-1,) + a.shape[-2:])
        for b, matrix in enumerate(batch):
            k = _first_zero_pivot(matrix)
            if k:
                where = f"(Batch element {b}): " if a.ndim > 2 else ""
                raise LinAlgError(f"linalg.inv: {where}The diagonal element {k} is zero, the inversion could not be "
                                   f"completed because the input matrix is singular.") from None
        raise


def _inv_backward_forward(g, inverse, out=None):
    """-inverse^T @ g @ inverse^T, the gradient of a matrix inverse."""
    t = np.swapaxes(inverse, -1, -2)
    return _into(np.negative(np.matmul(t, np.matmul(g, t))), out)


register(OpDef("linalg_inv", _inv, "other", "LinalgInvExBackward0",
               lambda F, g, s, at, need: (F.linalg_inv_backward(g, s["inverse"]),),
               (Save("inverse", "result"),), "same"))
def _no_double_backward(name: str):
    def backward(F, g, s, at, need):
        raise NotImplementedError(f"staticgrad does not differentiate the gradient of {name} (double backward); "
                                  f"keep {name} out of graphs that need second derivatives")
    return backward


register(OpDef("linalg_inv_backward", _inv_backward_forward, "other", "LinalgInvExBackwardBackward0",
               _no_double_backward("linalg.inv"), dtype_rule="same"))


def _det(a, out=None):
    return _into(np.linalg.det(a).astype(a.dtype, copy=False), out)


def _det_cofactor(a, out=None):
    """d det / d a as PyTorch's backward computes it: det * a^-T, where a matrix whose determinant is
    exactly 0 gets zeros (PyTorch solves against det * I = 0 after nudging the zero pivots)."""
    det = np.linalg.det(a)
    singular = det == 0
    eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    safe = np.where(singular[..., None, None], eye, a)
    cofactor = det[..., None, None].astype(a.dtype) * np.swapaxes(np.linalg.inv(safe), -1, -2)
    return _into(np.where(singular[..., None, None], np.zeros((), a.dtype), cofactor), out)


register(OpDef("linalg_det", _det, "other", "LinalgDetBackward0",
               lambda F, g, s, at, need: (F.mul(F.unsqueeze(F.unsqueeze(g, dim=-1), dim=-1),
                                                F.det_cofactor(s["A"])),),
               (Save("A", 0),), "same"))
register(OpDef("det_cofactor", _det_cofactor, "other", "LinalgDetBackwardBackward0",
               _no_double_backward("linalg.det"), dtype_rule="same"))
