"""PyTorch functions that PyTorch itself builds from other ops, built here from the same ops, so
their graphs show PyTorch's nodes: movedim (PermuteBackward0), broadcast_to/broadcast_tensors/meshgrid
(ExpandBackward0), outer (MulBackward0), hstack/vstack/dstack/column_stack (CatBackward0),
atleast_1d/2d/3d, tensor_split/hsplit/vsplit/dsplit (SliceBackward0), select, ravel, take_along_dim
(GatherBackward0), msort, diff, cartesian_prod, tensordot, matrix_power, vander, float_power, logspace;
and the value-only helpers: equal, count_nonzero, signbit, tril_indices/triu_indices, where(cond)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager import movement
from staticgrad._eager.creation import tensor
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.math_functions import copysign
from staticgrad._eager.reductions_more import cumprod
from staticgrad._eager.tensor import Size, Tensor, _normalize_dim
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.shape import viewable


def _dims(dims) -> tuple:
    return tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)


# ---- moving and broadcasting dims -----------------------------------------------------------------------

def movedim(input, source, destination):
    """torch.movedim / moveaxis: dims ``source`` moved to ``destination``, the others in order (a permute)."""
    fn.require_tensor(input, "movedim")
    ndim = input._data.ndim
    src, dst = _dims(source), _dims(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                           f"the same number of dims as destination ({list(dst)} dims)")
    src = tuple(_normalize_dim(d, ndim) for d in src)
    dst = tuple(_normalize_dim(d, ndim) for d in dst)
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            given = _dims(source if name == "source" else destination)
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(given)})")
    if ndim == 0:  # dims 0 and -1 name the 0-dim tensor's one position: PyTorch returns an alias
        return dispatch(OPS["alias"], (input,), {})
    order = [None] * ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(ndim) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return fn.permute(input, tuple(order))


moveaxis = movedim


def swapdims(input, dim0, dim1):
    return fn.transpose(input, dim0, dim1)


def broadcast_to(input, size):
    """torch.broadcast_to: ``input`` expanded to ``size`` (ExpandBackward0)."""
    fn.require_tensor(input, "broadcast_to")
    return fn.expand(input, *_dims(size))


def broadcast_shapes(*shapes) -> Size:
    try:
        return Size(np.broadcast_shapes(*(_dims(s) for s in shapes)))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: {list(shapes)}") from None


def broadcast_tensors(*tensors):
    """torch.broadcast_tensors: each tensor expanded to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        fn.require_tensor(t, "broadcast_tensors", "tensors")
    shapes = [t._data.shape for t in tensors]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise _mismatch(shapes) from None
    return tuple(fn.expand(t, *shape) for t in tensors)


def _mismatch(shapes) -> RuntimeError:
    """PyTorch's broadcast error for the first pair of shapes that do not broadcast."""
    for i in range(len(shapes)):
        for j in range(i):
            a, b = shapes[j], shapes[i]
            for k in range(1, min(len(a), len(b)) + 1):
                if a[-k] != b[-k] and 1 not in (a[-k], b[-k]):
                    return RuntimeError(f"The size of tensor a ({a[-k]}) must match the size of tensor b ({b[-k]}) "
                                        f"at non-singleton dimension {max(len(a), len(b)) - k}")
    return RuntimeError("shape mismatch: objects cannot be broadcast to a single shape")


def meshgrid(*tensors, indexing=None):
    """torch.meshgrid: grids from 0/1-D tensors, "ij" (matrix) or "xy" (Cartesian) indexing."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'staticgrad.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"staticgrad.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("staticgrad.meshgrid: Expected all tensors in the tensor list to have the same dtype.")
    swap = indexing == "xy" and len(tensors) >= 2
    order = list(tensors)
    if swap:
        order[0], order[1] = order[1], order[0]
    sizes = tuple(t.numel() for t in order)
    grids = []
    for i, t in enumerate(order):
        view = [1] * len(order)
        view[i] = -1
        grids.append(fn.expand(fn.view(t, tuple(view)), *sizes))
    if swap:  # PyTorch swaps the first two inputs, then the first two grids back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def outer(input, vec2):
    """torch.outer / ger: input (n,) times vec2 (m,) as an (n, m) table (MulBackward0)."""
    fn.require_tensor(input, "outer")
    fn.require_tensor(vec2, "outer", "vec2", 2)
    for name, t in (("self", input), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t._data.ndim}-D")
    return fn.mul(fn.reshape(input, (input._data.shape[0], 1)), vec2)


ger = outer


# ---- stacking ------------------------------------------------------------------------------------------

def _each(name: str, tensors, make):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(make(t) for t in tensors[0])
    results = tuple(make(t) for t in tensors)
    return results[0] if len(results) == 1 else results


def _at_least(t: Tensor, ndim: int) -> Tensor:
    have = t._data.ndim
    if have >= ndim:
        return t
    if have == 0:
        return fn.reshape(t, (1,) * ndim)
    if ndim == 2:
        return fn.unsqueeze(t, 0)
    return fn.unsqueeze(fn.unsqueeze(t, 0), -1) if have == 1 else fn.unsqueeze(t, -1)


def atleast_1d(*tensors):
    return _each("atleast_1d", tensors, lambda t: _at_least(t, 1))


def atleast_2d(*tensors):
    return _each("atleast_2d", tensors, lambda t: _at_least(t, 2))


def atleast_3d(*tensors):
    return _each("atleast_3d", tensors, lambda t: _at_least(t, 3))


def _tensor_sequence(name: str, tensors) -> list:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return list(tensors)


def hstack(tensors):
    tensors = [_at_least(t, 1) for t in _tensor_sequence("hstack", tensors)]
    return fn.cat(tensors, 0 if tensors[0]._data.ndim == 1 else 1)


def vstack(tensors):
    return fn.cat([_at_least(t, 2) for t in _tensor_sequence("vstack", tensors)], 0)


row_stack = vstack


def dstack(tensors):
    return fn.cat([_at_least(t, 3) for t in _tensor_sequence("dstack", tensors)], 2)


def column_stack(tensors):
    tensors = _tensor_sequence("column_stack", tensors)
    return fn.cat([fn.reshape(t, (t.numel(), 1)) if t._data.ndim <= 1 else t for t in tensors], 1)


# ---- splitting and selecting ----------------------------------------------------------------------------

def tensor_split(input, indices_or_sections, dim=0):
    """torch.tensor_split: ``sections`` nearly equal pieces (the first ones one longer), or pieces
    between the given indices, along ``dim`` (views: SliceBackward0)."""
    fn.require_tensor(input, "tensor_split")
    ndim = input._data.ndim
    if ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = _normalize_dim(dim, ndim)
    size = input._data.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(size, sections)
        bounds, start = [], 0
        for k in range(sections):
            stop = start + base + (1 if k < extra else 0)
            bounds.append((start, stop))
            start = stop
    else:
        cuts = [int(i) for i in indices_or_sections]
        edges = [0] + cuts + [size]
        bounds = []
        for a, b in itertools.pairwise(edges):
            a = min(max(a + size if a < 0 else a, 0), size)
            b = min(max(b + size if b < 0 else b, 0), size)
            bounds.append((a, max(a, b)))
    return tuple(fn.narrow(input, d, a, b - a) for a, b in bounds)


def _split_along(name: str, input, indices_or_sections, dim: int, need: int):
    fn.require_tensor(input, name)
    ndim = input._data.ndim
    if ndim < need:
        raise RuntimeError(f"staticgrad.{name} requires a tensor with at least {need} dimension, but got a tensor "
                           f"with {ndim} dimensions!")
    if isinstance(indices_or_sections, int):
        size = input._data.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"staticgrad.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {indices_or_sections}!")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    return _split_along("hsplit", input, indices_or_sections, 1 if input._data.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def select(input, dim, index):
    """torch.select / Tensor.select: the slice at ``index`` along ``dim``, that dim removed (a view)."""
    fn.require_tensor(input, "select")
    ndim = input._data.ndim
    if ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _normalize_dim(dim, ndim)
    size = input._data.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input._data.shape)} at "
                         f"dimension {d}")
    return dispatch(OPS["select"], (input,), {"dim": d, "index": index % size})


def ravel(input):
    """torch.ravel: the elements as one dim (a view of a contiguous tensor, else of a contiguous copy)."""
    fn.require_tensor(input, "ravel")
    contiguous = input if input.is_contiguous() else fn.clone(input)
    return fn.view(contiguous, (-1,))


def take_along_dim(input, indices, dim=None):
    """torch.take_along_dim: ``input`` gathered at ``indices`` along ``dim`` (indices broadcast against
    input's other dims), or over the flattened tensor when dim is None (GatherBackward0)."""
    fn.require_tensor(input, "take_along_dim")
    fn.require_tensor(indices, "take_along_dim", "indices", 2)
    if indices._data.dtype.kind not in "iu":
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if dim is None:
        return fn.gather(fn.reshape(input, (-1,)), 0, fn.reshape(indices, (-1,)))
    ndim = input._data.ndim
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = _normalize_dim(dim, ndim)
    if indices._data.ndim != ndim:
        raise RuntimeError(f"staticgrad.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {ndim} dimensions for input, and {indices._data.ndim} dimensions for indices")
    shape_in, shape_ix = list(input._data.shape), list(indices._data.shape)
    shape_in[d] = shape_ix[d] = 1
    common = list(np.broadcast_shapes(tuple(shape_in), tuple(shape_ix)))
    target_in, target_ix = list(common), list(common)
    target_in[d], target_ix[d] = input._data.shape[d], indices._data.shape[d]
    input = fn.expand(input, *target_in)   # (always, as PyTorch: an ExpandBackward0 even of the same shape)
    if tuple(target_ix) != indices._data.shape:
        indices = fn.expand(indices, *target_ix)
    return fn.gather(input, d, indices)


# ---- small compositions --------------------------------------------------------------------------------

def msort(input):
    """torch.msort: sorted along dim 0 (SortBackward0)."""
    return movement.sort(input, 0).values


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """torch.diff: the n-th forward difference along ``dim`` (SubBackward0), after prepend/append."""
    fn.require_tensor(input, "diff")
    ndim = input._data.ndim
    if ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = _normalize_dim(dim, ndim)
    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        input = fn.cat([p if p._data.ndim else fn.expand(p, *_with(input._data.shape, d, 1)) for p in parts], d)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    for _ in range(n):
        length = input._data.shape[d]
        if length == 0:
            break
        later, earlier = fn.narrow(input, d, 1, length - 1), fn.narrow(input, d, 0, length - 1)
        input = fn.logical_xor(later, earlier) if input.dtype == _dtypes.bool_ else fn.sub(later, earlier)
    return input


def _with(shape: tuple, dim: int, size: int) -> tuple:
    return shape[:dim] + (size,) + shape[dim + 1:]


def cartesian_prod(*tensors):
    """torch.cartesian_prod: every combination of the 1-D tensors' elements, one per row (StackBackward0)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return fn.stack([fn.reshape(g, (-1,)) for g in grids], 1)


def tensordot(a, b, dims=2, out=None):
    """torch.tensordot: a contraction over ``dims`` (the last n of a with the first n of b, or two lists)."""
    fn.require_tensor(a, "tensordot")
    fn.require_tensor(b, "tensordot", "b", 2)
    if a._data.dtype != b._data.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))  # PyTorch counts a's from the end
    else:
        dims_a, dims_b = (list(_dims(d)) for d in dims)
    for da, db in zip(dims_a, dims_b):  # checked as given (PyTorch names dim -1 so)
        size_a = a._data.shape[_normalize_dim(da, a._data.ndim)]
        size_b = b._data.shape[_normalize_dim(db, b._data.ndim)]
        if size_a != size_b:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {size_a} in dim {da} and "
                               f"second has size {size_b} in dim {db}")
    dims_a = [_normalize_dim(d, a._data.ndim) for d in dims_a]
    dims_b = [_normalize_dim(d, b._data.ndim) for d in dims_b]
    free_a = [d for d in range(a._data.ndim) if d not in dims_a]
    free_b = [d for d in range(b._data.ndim) if d not in dims_b]
    size_a = [a._data.shape[d] for d in free_a]
    size_b = [b._data.shape[d] for d in free_b]
    k = int(np.prod([a._data.shape[d] for d in dims_a], dtype=np.int64))
    rows, columns = int(np.prod(size_a, dtype=np.int64)), int(np.prod(size_b, dtype=np.int64))
    permuted_a, permuted_b = fn.permute(a, tuple(free_a + dims_a)), fn.permute(b, tuple(dims_b + free_b))
    if rows == 1 and columns == 1:   # one number: PyTorch's dot of the two flattened, or, where
        # flattening either would copy, the sum of their product
        if viewable(permuted_a._data, (k,)) and viewable(permuted_b._data, (k,)):
            left = permuted_a if permuted_a._data.ndim == 1 else fn.reshape(permuted_a, (k,))
            right = permuted_b if permuted_b._data.ndim == 1 else fn.reshape(permuted_b, (k,))
            product = fn.dot(left, right)
        else:
            product = fn.sum(fn.mul(fn.squeeze(permuted_a), fn.squeeze(permuted_b)))
        return fn.view(product, tuple(size_a + size_b))
    left = fn.reshape(permuted_a, (rows, k))
    right = fn.reshape(permuted_b, (k, columns))
    return fn.view(fn.mm(left, right), tuple(size_a + size_b))


def matrix_power(input, n):
    """torch.matrix_power for n >= 0: the identity, a copy, or products by repeated squaring."""
    fn.require_tensor(input, "matrix_power")
    shape = input._data.shape
    if len(shape) < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if shape[-1] != shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {shape[-2]} by "
                           f"{shape[-1]} matrices")
    if n < 0:
        raise NotImplementedError("staticgrad's matrix_power takes n >= 0: a negative power needs a matrix inverse, "
                                  "which staticgrad does not have")
    if n == 0:
        eye = tensor(np.broadcast_to(np.eye(shape[-1], dtype=input._data.dtype), shape).copy())
        return eye
    if n == 1:
        return fn.clone(input)
    product, power, result = input, n, None
    while power:
        if power & 1:
            result = product if result is None else fn.matmul(result, product)
        power >>= 1
        if power:
            product = fn.matmul(product, product)
    return result


def vander(x, N=None, increasing=False):
    """torch.vander: columns of powers of a 1-D ``x`` (x^(N-1) ... x^0, or increasing): ones, then
    the running product of x (cumprod), flipped unless increasing (FlipBackward0)."""
    fn.require_tensor(x, "vander")
    if x._data.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    rows = x._data.shape[0]
    n = rows if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if x.dtype.category != _dtypes.FLOAT:
        x = fn.to_dtype(x, _dtypes.int64)
    columns = fn.expand(fn.reshape(fn.full_like_scalar(x, 1), (1, 1)), rows, 1)
    if n > 1:
        columns = fn.cat([columns, cumprod(fn.expand(fn.unsqueeze(x, 1), rows, n - 1), 1)], 1)
    columns = fn.narrow(columns, 1, 0, n)
    return columns if increasing or n == 0 else movement.flip(columns, 1)


def float_power(input, exponent):
    """torch.float_power: pow computed in float64 (PowBackward0/1)."""
    def double(v):
        return fn.to_dtype(v, _dtypes.float64) if isinstance(v, Tensor) else float(v)
    if not isinstance(input, Tensor):
        fn.require_tensor(exponent, "float_power", "exponent", 2)
    return fn.pow(double(input), double(exponent))


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False, device=None):
    """torch.logspace: ``base`` to the powers of linspace(start, end, steps)."""
    exponents = movement.linspace(start, end, steps, dtype=_dtypes.float64)
    target = _dtypes.default_float() if dtype is None else dtype
    if _dtypes.to_numpy_dtype(target) == np.bool_:
        raise NotImplementedError("\"logspace_cpu\" not implemented for 'Bool'")
    values = np.power(float(base), exponents.numpy())
    result = tensor(values.astype(_dtypes.to_numpy_dtype(target)))
    return result.requires_grad_() if requires_grad else result


# ---- values, not graphs ---------------------------------------------------------------------------------

def equal(input, other) -> bool:
    """torch.equal: the same shape and the same values."""
    fn.require_tensor(input, "equal")
    fn.require_tensor(other, "equal", "other", 2)
    if input._data.shape != other._data.shape:
        return False
    return bool(np.array_equal(input._data, other._data))


def count_nonzero(input, dim=None):
    fn.require_tensor(input, "count_nonzero")
    if input._data.dtype in _dtypes.WIDE_UNSIGNED:
        _dtypes.refuse_wide_unsigned("count_nonzero", input._data.dtype)
    return fn.sum(fn.ne(input, 0), dim)


def signbit(input):
    """torch.signbit: whether the sign bit is set (True for -0.0)."""
    fn.require_tensor(input, "signbit")
    if input.dtype.category == _dtypes.FLOAT:
        return fn.lt(copysign(fn.full_like_scalar(input, 1.0), input), 0)
    if input._data.dtype in _dtypes.WIDE_UNSIGNED:   # (no sign bit; their lt is refused)
        return fn.ne(input, input)
    return fn.lt(input, 0)


def _triangle_indices(row, col, offset, dtype, upper: bool):
    rows, cols = (np.triu_indices if upper else np.tril_indices)(int(row), int(offset), int(col))
    return tensor(np.stack([rows, cols]).astype(_dtypes.to_numpy_dtype(dtype)))


def tril_indices(row, col, offset=0, *, dtype=_dtypes.int64, device=None, layout=None):
    return _triangle_indices(row, col, offset, dtype, False)


def triu_indices(row, col, offset=0, *, dtype=_dtypes.int64, device=None, layout=None):
    return _triangle_indices(row, col, offset, dtype, True)


def nan_to_num(input, nan: float = 0.0, posinf=None, neginf=None):
    """torch.nan_to_num: NaN as ``nan``, +inf as ``posinf`` and -inf as ``neginf`` (default: the
    dtype's largest and lowest values) (NanToNumBackward0)."""
    fn.require_tensor(input, "nan_to_num")
    return dispatch(OPS["nan_to_num"], (input,), {"nan": float(nan), "posinf": posinf, "neginf": neginf})


def nan_to_num_(input, nan: float = 0.0, posinf=None, neginf=None):
    return dispatch_inplace(OPS["nan_to_num"], input, (), {"nan": float(nan), "posinf": posinf, "neginf": neginf})


def where(condition, input=None, other=None):
    """torch.where: ``input`` where ``condition``, else ``other``; with the condition alone, the
    indices of its nonzero elements (nonzero(as_tuple=True))."""
    if input is None and other is None:
        fn.require_tensor(condition, "where", "condition")
        return movement.nonzero(condition, as_tuple=True)
    return fn.where(condition, input, other)


def positive(input):
    """torch.positive: the tensor itself (refused on bool, as PyTorch does)."""
    fn.require_tensor(input, "positive")
    if input.dtype == _dtypes.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


METHODS = {
    "movedim": movedim, "moveaxis": moveaxis, "swapdims": swapdims, "broadcast_to": broadcast_to,
    "outer": outer, "ger": ger, "tensor_split": tensor_split, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
    "select": select, "ravel": ravel, "take_along_dim": take_along_dim, "msort": msort, "diff": diff,
    "matrix_power": matrix_power, "float_power": float_power, "equal": equal, "count_nonzero": count_nonzero,
    "signbit": signbit, "positive": positive, "nan_to_num": nan_to_num, "nan_to_num_": nan_to_num_,
    "ndimension": lambda self: self._data.ndim,
    "byte": lambda self: fn.to_dtype(self, _dtypes.uint8), "char": lambda self: fn.to_dtype(self, _dtypes.int8),
    "short": lambda self: fn.to_dtype(self, _dtypes.int16),
}


def is_floating_point(input) -> bool:
    fn.require_tensor(input, "is_floating_point")
    return input.dtype.is_floating_point
