"""torch.trace, kron, cross (and linalg.cross), addmv, addbmm, baddbmm, addr, inner, vdot, rot90,
block_diag and diagflat over the op table (staticgrad.ops.linalg_more): PyTorch's signatures, argument
checks and errors, the in-place forms and the Tensor methods. kron, inner and diagflat are composed
from other ops as PyTorch composes them, so their graphs show PyTorch's nodes."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.composites import tensordot
from staticgrad._eager.creation import zeros
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _dtype_name(t: Tensor) -> str:
    return fn._scalar_type(t)


def check_expandable(input: Tensor, target: tuple) -> None:
    """PyTorch's error when ``input`` cannot be expanded to ``target`` (the first mismatch from the end)."""
    source = input._data.shape
    if len(source) > len(target):
        raise RuntimeError(f"expand(CPU{_dtype_name(input)}Type{{{list(source)}}}, size={list(target)}): the number "
                           f"of sizes provided ({len(target)}) must be greater or equal to the number of dimensions "
                           f"in the tensor ({len(source)})")
    for back in range(1, len(source) + 1):
        have, want = source[-back], target[-back]
        if have != want and have != 1:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) at "
                               f"non-singleton dimension {len(target) - back}.  Target sizes: {list(target)}.  "
                               f"Tensor sizes: {list(source)}")


def _size(t: Tensor, dim: int) -> int:
    """``t.size(dim)`` with PyTorch's IndexError for a dim the tensor lacks."""
    if t._data.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return t._data.shape[_normalize_dim(dim, t._data.ndim)]


def _require_output_shape(input: Tensor, shape: tuple) -> None:
    """An in-place product writes a result of ``shape``: input must have it already."""
    if input._data.shape != tuple(shape):
        raise RuntimeError(f"Bad in-place call: input tensor size {list(input._data.shape)} and output tensor size "
                           f"{list(shape)} should match")


def _no_bool(kernel: str, t: Tensor) -> None:
    if t._data.dtype == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _scales(beta, alpha) -> dict:
    return {"beta": beta, "alpha": alpha}


# ---- trace, kron --------------------------------------------------------------------------------

def trace(input):
    """The sum of a matrix's diagonal (TraceBackward0); integer matrices sum to int64."""
    fn.require_tensor(input, "trace")
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    if input._data.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input._data.dtype.kind in "iu":
        input = fn.to_dtype(input, _dtypes.int64)
    return dispatch(OPS["trace"], (input,), {})


def _unsafe_view(t: Tensor, shape: tuple) -> Tensor:
    if not t._data.flags.c_contiguous:
        t = fn.clone(t)
    return dispatch(OPS["unsafe_view"], (t,), {"shape": tuple(shape)})


def kron(input, other):
    """The Kronecker product, PyTorch's composition: both viewed with interleaved unit dims, multiplied,
    viewed back (UnsafeViewBackward0 over MulBackward0)."""
    fn.require_tensor(input, "kron")
    fn.require_tensor(other, "kron", "other", 2)
    a, b = input._data.shape, other._data.shape
    ndim = max(len(a), len(b))
    a = (1,) * (ndim - len(a)) + a
    b = (1,) * (ndim - len(b)) + b
    a_shape = tuple(s for size in a for s in (size, 1))
    b_shape = tuple(s for size in b for s in (1, size))
    product = fn.mul(_unsafe_view(input, a_shape), _unsafe_view(other, b_shape))
    return _unsafe_view(product, tuple(x * y for x, y in zip(a, b)))


# ---- cross --------------------------------------------------------------------------------------

def linalg_cross(input, other, *, dim=-1):
    """torch.linalg.cross: the cross product of 3-vectors along ``dim``, the other dims broadcast
    (LinalgCrossBackward0)."""
    fn.require_tensor(input, "linalg_cross")
    fn.require_tensor(other, "linalg_cross", "other", 2)
    ndim = input._data.ndim
    if other._data.ndim != ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _normalize_dim(dim, ndim)
    size_a, size_b = input._data.shape[d], other._data.shape[d]
    if size_a != 3 or size_b != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {size_a} and {size_b}")
    try:
        np.broadcast_shapes(input._data.shape, other._data.shape)
    except ValueError:
        for back in range(1, ndim + 1):
            x, y = input._data.shape[-back], other._data.shape[-back]
            if x != y and 1 not in (x, y):
                raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                                   f"non-singleton dimension {ndim - back}") from None
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(f"expected scalar type {_dtype_name(input)} but found {_dtype_name(other)}")
    return dispatch(OPS["linalg_cross"], (input, other), {"dim": d})


def cross(input, other, dim=None):
    """torch.cross: linalg.cross along ``dim``; without one (deprecated, with PyTorch's warning) along the
    first dim of size 3."""
    fn.require_tensor(input, "cross")
    fn.require_tensor(other, "cross", "other", 2)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        try:
            shape = np.broadcast_shapes(input._data.shape, other._data.shape)
        except ValueError:
            shape = input._data.shape
        dim = next((d for d, size in enumerate(shape) if size == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


# ---- addmv, addbmm, baddbmm, addr -----------------------------------------------------------------

def _addmv_checks(input, mat, vec):
    fn.require_tensor(input, "addmv")
    fn.require_tensor(mat, "addmv", "mat", 2)
    fn.require_tensor(vec, "addmv", "vec", 3)
    if mat._data.ndim != 2 or vec._data.ndim != 1 or input._data.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input._data.ndim}, {mat._data.ndim}, "
                           f"{vec._data.ndim}")
    rows, cols = mat._data.shape
    if cols != vec._data.shape[0] or (input._data.size not in (rows, 1)):
        size = input._data.shape[0] if input._data.ndim else input._data.size
        raise RuntimeError(f"size mismatch, got input ({size}), mat ({rows}x{cols}), vec ({vec._data.shape[0]})")
    if not input._data.dtype == mat._data.dtype == vec._data.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_dtype_name(input)}, "
                           f"{_dtype_name(mat)}, and {_dtype_name(vec)}")
    _no_bool("addmv_impl_cpu", input)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec) (AddmvBackward0); input broadcasts to mat's rows."""
    _addmv_checks(input, mat, vec)
    return dispatch(OPS["addmv"], (input, mat, vec), _scales(beta, alpha))


def addmv_(input, mat, vec, *, beta=1, alpha=1):
    _addmv_checks(input, mat, vec)
    _require_output_shape(input, (mat._data.shape[0],))
    return dispatch_inplace(OPS["addmv"], input, (mat, vec), _scales(beta, alpha))


def _batched_checks(batch1, batch2):
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if t._data.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")


def _cpp_name(t: Tensor) -> str:
    return fn._CPP_TYPE_NAMES.get(t._data.dtype.name, t._data.dtype.name)


def _addbmm_checks(input, batch1, batch2) -> tuple:
    fn.require_tensor(input, "addbmm")
    fn.require_tensor(batch1, "addbmm", "batch1", 2)
    fn.require_tensor(batch2, "addbmm", "batch2", 3)
    target = (_size(batch1, 1), _size(batch2, 2))
    check_expandable(input, target)
    _batched_checks(batch1, batch2)
    (b1, n, m), (b2, m2, p) = batch1._data.shape, batch2._data.shape
    if b1 != b2:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b1} and {b2}")
    if m != m2:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{m} and {m2}x{p})")
    for name, operand in (("self", input), ("mat1", batch1)):  # checked per batch as addmm checks
        if operand._data.dtype != batch2._data.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {_dtype_name(operand)} and "
                               f"{_dtype_name(batch2)}")
    _no_bool("addmm_impl_cpu_", input)
    return target


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i] (AddbmmBackward0)."""
    _addbmm_checks(input, batch1, batch2)
    return dispatch(OPS["addbmm"], (input, batch1, batch2),
                    {**_scales(beta, alpha), "batches": batch1._data.shape[0]})


def addbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    _require_output_shape(input, _addbmm_checks(input, batch1, batch2))
    return dispatch_inplace(OPS["addbmm"], input, (batch1, batch2),
                            {**_scales(beta, alpha), "batches": batch1._data.shape[0]})


def _baddbmm_checks(input, batch1, batch2) -> tuple:
    fn.require_tensor(input, "baddbmm")
    fn.require_tensor(batch1, "baddbmm", "batch1", 2)
    fn.require_tensor(batch2, "baddbmm", "batch2", 3)
    target = (_size(batch1, 0), _size(batch1, 1), _size(batch2, 2))
    check_expandable(input, target)
    _batched_checks(batch1, batch2)
    (b1, _, m), (b2, m2, _) = batch1._data.shape, batch2._data.shape
    if (b1, m) != (b2, m2):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{b1}, {m}] but got: "
                           f"[{b2}, {m2}].")
    if batch1._data.dtype != batch2._data.dtype:
        raise RuntimeError(f"expected scalar type {_dtype_name(batch1)} but found {_dtype_name(batch2)}")
    if input._data.dtype != batch1._data.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_cpp_name(input)}, batch1: "
                           f"{_cpp_name(batch1)}, batch2: {_cpp_name(batch2)}")
    _no_bool("baddbmm", input)
    return target


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch (BaddbmmBackward0)."""
    _baddbmm_checks(input, batch1, batch2)
    return dispatch(OPS["baddbmm"], (input, batch1, batch2), _scales(beta, alpha))


def baddbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    _require_output_shape(input, _baddbmm_checks(input, batch1, batch2))
    return dispatch_inplace(OPS["baddbmm"], input, (batch1, batch2), _scales(beta, alpha))


def _addr_checks(input, vec1, vec2) -> tuple:
    fn.require_tensor(input, "addr")
    fn.require_tensor(vec1, "addr", "vec1", 2)
    fn.require_tensor(vec2, "addr", "vec2", 3)
    for name, t in (("vec1", vec1), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {t._data.ndim}-D")
    target = (vec1._data.shape[0], vec2._data.shape[0])
    check_expandable(input, target)
    return target


def _addr_scales(result_kind: str, beta, alpha) -> dict:
    if result_kind in "iub":
        for name, value in (("beta", beta), ("alpha", alpha)):
            if isinstance(value, float):
                kind = "Boolean" if result_kind == "b" else "integral"
                raise RuntimeError(f"For {kind} input tensors, argument {name} must not be a floating point number.")
    return _scales(beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2) (AddrBackward0); the dtypes promote."""
    _addr_checks(input, vec1, vec2)
    kind = np.result_type(input._data, vec1._data, vec2._data).kind
    return dispatch(OPS["addr"], (input, vec1, vec2), _addr_scales(kind, beta, alpha))


def addr_(input, vec1, vec2, *, beta=1, alpha=1):
    target = _addr_checks(input, vec1, vec2)
    if input._data.shape != target:
        raise RuntimeError(f"size mismatch, input: {list(input._data.shape)}, v1: {list(vec1._data.shape)}, "
                           f"v2: {list(vec2._data.shape)}")
    return dispatch_inplace(OPS["addr"], input, (vec1, vec2), _addr_scales(input._data.dtype.kind, beta, alpha))


# ---- inner, vdot ----------------------------------------------------------------------------------

def inner(input, other):
    """The sum over the last dims, PyTorch's composition: a product for a 0-dim operand, else
    tensordot over the last dims (ViewBackward0 over DotBackward0 or MmBackward0)."""
    fn.require_tensor(input, "inner")
    fn.require_tensor(other, "inner", "other", 2)
    if input._data.ndim == 0 or other._data.ndim == 0:
        return fn.mul(input, other)
    a, b = input._data.shape, other._data.shape
    if a[-1] != b[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes {list(a)} "
                           f"and {list(b)}")
    if len(a) == 1 and len(b) == 1:
        if input._data.dtype != other._data.dtype:  # tensordot's check, which PyTorch runs first
            raise RuntimeError("both inputs should have same dtype")
        return fn.view(fn.dot(fn.permute(input, (0,)), fn.permute(other, (0,))), ())  # tensordot's permutes
    return tensordot(input, other, ([-1], [-1]))


def vdot(input, other):
    """The dot product of the conjugated first vector with the second (real tensors: dot), VdotBackward0."""
    fn.require_tensor(input, "vdot")
    fn.require_tensor(other, "vdot", "other", 2)
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input._data.ndim}D and {other._data.ndim}D tensors")
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_dtype_name(input)} and "
                           f"{_dtype_name(other)}")
    return dispatch(OPS["vdot"], (input, other), {})


# ---- rot90, block_diag, diagflat -------------------------------------------------------------------

def rot90(input, k=1, dims=(0, 1)):
    """The tensor rotated k quarter turns from dims[0] towards dims[1] (Rot90Backward0), a new tensor."""
    fn.require_tensor(input, "rot90")
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    ndim = input._data.ndim
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    wrapped = (_normalize_dim(dims[0], ndim), _normalize_dim(dims[1], ndim))
    if wrapped[0] == wrapped[1]:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    dims = wrapped
    return dispatch(OPS["rot90"], (input,), {"k": int(k), "dims": dims})


def block_diag(*tensors):
    """The tensors (0-dim: 1x1, 1-dim: one row) along the diagonal of one matrix (BlockDiagBackward0)."""
    for i, t in enumerate(tensors):
        fn.require_tensor(t, "block_diag", f"tensors[{i}]", i + 1)
        if t._data.ndim > 2:
            raise RuntimeError(f"staticgrad.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t._data.ndim} dimensions")
    if not tensors:
        return zeros(1, 0)
    return dispatch(OPS["block_diag"], tuple(tensors), {"shapes": tuple(t._data.shape for t in tensors)})


def diagflat(input, offset=0):
    """The flattened input on diagonal ``offset`` of a square matrix, PyTorch's composition: a view to
    1-D (after a copy if not contiguous), then DiagEmbedBackward0."""
    fn.require_tensor(input, "diagflat")
    flat = input if input.is_contiguous() else fn.clone(input)
    return dispatch(OPS["diag_embed"], (fn.view(flat, (-1,)),), {"offset": int(offset)})


# ---- inv, det ------------------------------------------------------------------------------------------

def _square_matrices(A, name: str) -> None:
    """PyTorch's checks on linalg.inv/det's input: a float tensor of (batches of) square matrices."""
    fn.require_tensor(A, name)
    if A._data.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    rows, cols = A._data.shape[-2:]
    if rows != cols:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are {rows} by {cols} "
                           f"matrices")
    if A._data.dtype.kind != "f":
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_dtype_name(A)}")


def linalg_inv(A, *, out=None):
    """torch.linalg.inv (and torch.inverse): the inverse of each square matrix (LinalgInvExBackward0);
    a singular one raises PyTorch's error naming the zero pivot."""
    if out is not None:
        raise NotImplementedError("staticgrad's linalg.inv does not support out=; assign the result instead")
    _square_matrices(A, "inv")
    return dispatch(OPS["linalg_inv"], (A,), {})


def linalg_det(A, *, out=None):
    """torch.linalg.det (and torch.det): the determinant of each square matrix (LinalgDetBackward0); its
    gradient is the cofactor matrix, singular matrices included."""
    if out is not None:
        raise NotImplementedError("staticgrad's linalg.det does not support out=; assign the result instead")
    _square_matrices(A, "det")
    return dispatch(OPS["linalg_det"], (A,), {})


def inverse(input, *, out=None):
    return linalg_inv(input, out=out)


def det(input):
    return linalg_det(input)


FUNCTIONS = {"inverse": inverse, "det": det, "trace": trace, "kron": kron, "cross": cross, "addmv": addmv,
             "addbmm": addbmm, "baddbmm": baddbmm, "addr": addr, "inner": inner, "vdot": vdot, "rot90": rot90,
             "diagflat": diagflat}
METHODS = dict(FUNCTIONS, addmv_=addmv_, addbmm_=addbmm_, baddbmm_=baddbmm_, addr_=addr_)
