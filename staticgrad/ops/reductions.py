"""Reductions: sum, mean, sum_to_size (the un-broadcast of gradients), max/min, logsumexp, softmax."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from staticgrad.ops.elementwise import loop_output, loop_result
from staticgrad.ops.registry import OPS, ZEROS_SELF, OpDef, Save, as_array, jit_loops, register, with_emit


def axis_error(shapes, attrs, exc):
    if isinstance(exc, np.exceptions.AxisError):
        ndim = len(shapes[0])
        lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
        return IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {exc.axis})")
    return None


def keepdim_shape(shape, dim):
    """The input shape with reduced dims set to 1 (what a keepdim=True result looks like)."""
    if dim is None:
        return (1,) * len(shape)
    return tuple(1 if i in dim else n for i, n in enumerate(shape))


def _expand_back(F, g, shape, dim, keepdim):
    if not keepdim:
        g = F.view(g, shape=keepdim_shape(shape, dim))
    return F.expand(g, shape=tuple(shape))


def _numel_reduced(shape, dim):
    if dim is None:
        return int(np.prod(shape, dtype=np.int64))
    return int(np.prod([shape[d] for d in dim], dtype=np.int64))


def _sum(a, out=None, dim=None, keepdim=False, dtype=None):
    if dtype is None and a.dtype.kind in "biu":
        dtype = np.int64
    if a.dtype == np.float16 and (dtype is None or np.dtype(dtype) == np.float16):
        return half_sum(a, dim, keepdim, out)
    if dim is not None and (dtype is None or np.dtype(dtype) == a.dtype):
        summed = _column_sums(a, dim, out)
        if summed is not None and out is not None:
            return out
        if summed is not None:
            return summed.reshape(keepdim_shape(a.shape, dim) if keepdim else a.shape[len(dim):])
    return np.sum(a, axis=dim, keepdims=keepdim, out=out, dtype=dtype)


def half_sum(a, axis, keepdims: bool, out=None):
    """A float16 sum as PyTorch's CPU kernels take it: added up in float32, rounded to float16 once
    (NumPy's float16 sum adds in float16, rounding every partial sum)."""
    total = np.add.reduce(a, axis=axis, dtype=np.float32, keepdims=keepdims)
    if out is None:
        return total.astype(np.float16)
    np.copyto(out, total, casting="unsafe")
    return out


register(OpDef(
    "sum", _sum, "reduction", lambda at: "SumBackward0" if at.get("dim") is None else "SumBackward1",
    lambda F, g, s, at, need: (_expand_back(F, g, s["self_sym_sizes"], at.get("dim"), at.get("keepdim", False)),),
    (Save("self_sym_sizes", "shape:0", freed=False),), "same",
    explain=axis_error))


def mean_of_all(a):
    """``np.mean(a)`` of a non-empty float32 or float64 array, bit for bit, without its Python
    wrapper: the pairwise sum, then its value over the count divided in double precision and
    rounded to the dtype, which is what np.mean's NumPy-scalar division by an intp count does
    (at about a third of the time: that scalar division alone costs several microseconds)."""
    total = np.add.reduce(a, axis=None)
    return total.dtype.type(float(total) / a.size)


def mean_values(a, out=None, dim=None, keepdim=False):
    """The mean op's forward (np.mean, into ``out`` if given, with the same result either way)."""
    if out is None and dim is None and not keepdim and a.size and a.dtype.char in "fd":
        return mean_of_all(a)
    if a.size:
        if out is not None and a.dtype == np.float16:
            # NumPy's float16 mean sums in float32 and divides before rounding, but given out= it
            # rounds the sum into out first: a replay's planned buffer would change the result
            np.copyto(out, np.mean(a, axis=dim, keepdims=keepdim))
            return out
        return np.mean(a, axis=dim, keepdims=keepdim, out=out)
    # No values: the sum over the count, nan where the count is 0 (NumPy's mean would also warn
    # "Mean of empty slice", which PyTorch does not).
    total = np.sum(a, axis=dim, keepdims=keepdim)
    return np.true_divide(total, _numel_reduced(a.shape, dim), out=out, dtype=total.dtype)


def _mean_backward(F, g, s, at, need):
    shape = s["self_sym_sizes"]
    count = _numel_reduced(shape, at.get("dim"))
    return (F.div_scalar(_expand_back(F, g, shape, at.get("dim"), at.get("keepdim", False)), other=count),)


register(OpDef(
    "mean", mean_values, "reduction", lambda at: "MeanBackward0" if at.get("dim") is None else "MeanBackward1",
    _mean_backward, (Save("self_sym_sizes", "shape:0", freed=False),), "float", explain=axis_error))


def sum_to_axes(in_shape, shape):
    """The axes to sum so that a tensor of ``in_shape`` reduces to ``shape`` (keepdim form)."""
    lead = len(in_shape) - len(shape)
    axes = list(range(lead))
    for i, n in enumerate(shape):
        if n == 1 and in_shape[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes)


def leading_sum_columns(in_shape, axes) -> int:
    """How many elements a sum over ``axes`` keeps per row, when ``axes`` are the leading axes and
    NumPy adds row after row over them (more than one kept element: one it sums pairwise); else 0."""
    k = len(axes)
    if k == 0 or tuple(axes) != tuple(range(k)):
        return 0
    columns = 1
    for d in in_shape[k:]:
        columns *= d
    return columns if columns > 1 else 0


def _column_sums(a, axes, out):
    """The sum over ``axes`` into ``out`` by the column-sum loop (NumPy's additions, fewer calls), or
    None where the loop does not apply: not float32/float64, not C-contiguous, other axes."""
    if a.dtype.char not in "fd" or not a.flags.c_contiguous or a.size == 0:
        return None
    columns = leading_sum_columns(a.shape, axes)
    if not columns:
        return None
    if out is None:
        out = np.empty(a.shape[len(axes):], dtype=a.dtype)
    elif out.dtype != a.dtype or not out.flags.c_contiguous or out.size != columns:
        return None
    jit_loops().column_sums(a.reshape(-1, columns), out.reshape(columns))
    return out


def _sum_to_size(a, out=None, shape=()):
    axes = sum_to_axes(a.shape, shape)
    lead = len(a.shape) - len(shape)
    summed = _column_sums(a, axes, out)
    if summed is not None:
        return summed.reshape(shape) if out is None else out
    if out is None:
        total = half_sum(a, axes, True) if a.dtype == np.float16 else np.sum(a, axis=axes, keepdims=True)
        return total.reshape(shape)
    keep = (1,) * lead + tuple(shape)
    if a.dtype == np.float16:
        half_sum(a, axes, True, out.reshape(keep))
    else:
        np.sum(a, axis=axes, keepdims=True, out=out.reshape(keep))
    return out


register(OpDef(
    "sum_to_size", _sum_to_size, "reduction", "SumBackward1",
    lambda F, g, s, at, need: (F.expand(g, shape=s["self_sym_sizes"]),),
    (Save("self_sym_sizes", "shape:0", freed=False),), "same"))


# ---- max / min ------------------------------------------------------------------------------

def _amax(a, out=None, dim=None, keepdim=False):
    return np.amax(a, axis=dim, keepdims=keepdim, out=out)


def _amin(a, out=None, dim=None, keepdim=False):
    return np.amin(a, axis=dim, keepdims=keepdim, out=out)


def _extreme_backward(F, g, s, at, need):
    """Gradient of a full max/min: shared evenly among the elements equal to the result."""
    x, result = s["self"], s["result"]
    dim, keepdim = at.get("dim"), at.get("keepdim", False)
    flat = keepdim or dim is None  # a full reduction's 0-dim result broadcasts as it is
    r = result if flat else F.view(result, shape=keepdim_shape(x.shape, dim))
    gk = g if flat else F.view(g, shape=keepdim_shape(x.shape, dim))
    mask = F.to_dtype(F.eq(x, r), dtype=g.dtype)
    count = F.sum(mask, dim=dim if dim is not None else tuple(range(len(x.shape))), keepdim=True)
    return (gk * mask / count,)


register(OpDef("amax", _amax, "reduction", lambda at: "MaxBackward1" if at.get("dim") is None else "AmaxBackward0",
               _extreme_backward, (Save("self", 0), Save("result", "result")), "same", explain=axis_error))
register(OpDef("amin", _amin, "reduction", lambda at: "MinBackward1" if at.get("dim") is None else "AminBackward0",
               _extreme_backward, (Save("self", 0), Save("result", "result")), "same", explain=axis_error))


def _extreme_along(pick):
    """max/min along one dim: (values, int64 indices), like torch.max(x, dim)."""
    def forward(a, out=None, dim=0, keepdim=False):
        if a.ndim == 0:  # PyTorch takes dim 0 or -1 of a 0-dim tensor: its one element, index 0
            return a.copy(), np.zeros((), np.int64)
        indices = pick(a, axis=dim, keepdims=True)
        values = np.take_along_axis(a, indices, axis=dim)
        if not keepdim:
            values = np.squeeze(values, axis=dim)
            indices = np.squeeze(indices, axis=dim)
        return values, indices.astype(np.int64)
    return forward


_max_dim, _min_dim = _extreme_along(np.argmax), _extreme_along(np.argmin)


def _indexed_extreme_backward(F, g, s, at, need):
    """Gradient of max/min along a dim: scattered to the selected index (PyTorch's value_selecting)."""
    grad_values = g[0]
    dim, keepdim = at["dim"], at.get("keepdim", False)
    indices = s["indices"]
    if not keepdim:
        grad_values = F.unsqueeze(grad_values, dim=dim)
        indices = F.unsqueeze(indices, dim=dim)
    return (F.scatter_zeros(grad_values, indices, dim=dim, sizes=tuple(s["self_sym_sizes"])),)


register(OpDef("max_dim", _max_dim, "reduction", "MaxBackward0", _indexed_extreme_backward,
               (Save("indices", "result:1"), Save("self_sym_sizes", "shape:0", freed=False)), "same",
               explain=axis_error))
register(OpDef("min_dim", _min_dim, "reduction", "MinBackward0", _indexed_extreme_backward,
               (Save("indices", "result:1"), Save("self_sym_sizes", "shape:0", freed=False)), "same",
               explain=axis_error))

def _arg_extreme(function):
    def forward(a, out=None, dim=None, keepdim=False):
        result = function(a, axis=dim, keepdims=keepdim)
        if out is None:
            return result.astype(np.int64)
        out[...] = result
        return out
    return forward


register(OpDef("argmax", _arg_extreme(np.argmax), "reduction", dtype_rule="index", explain=axis_error))
register(OpDef("argmin", _arg_extreme(np.argmin), "reduction", dtype_rule="index", explain=axis_error))


# ---- gather and its adjoint -------------------------------------------------------------------

def _gather(a, index, out=None, dim=0):
    """a's values at ``index`` along ``dim``; an index outside [0, size) is refused, as PyTorch refuses it
    (NumPy would wrap a negative one around)."""
    size = a.shape[dim] if a.ndim else 1
    if index.size and (index.min() < 0 or index.max() >= size):  # NumPy would wrap a negative index
        bad = index.reshape(-1)[np.flatnonzero((index.reshape(-1) < 0) | (index.reshape(-1) >= size))[0]]
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    if a.ndim == 0:  # a 0-dim input gathers like a 1-element vector; the result has the index's shape
        result = np.take_along_axis(a.reshape(1), index.reshape(-1), axis=0).reshape(index.shape)
    else:
        # the index may be smaller than the input in the other dims: it reads the leading block there
        block = tuple(slice(None) if k == dim else slice(0, n) for k, n in enumerate(index.shape))
        result = np.take_along_axis(a[block], index, axis=dim)
    if out is None:
        return result
    np.copyto(out, result)
    return out


register(OpDef("gather", _gather, "other", "GatherBackward0",
               lambda F, g, s, at, need: (F.scatter_add_zeros(g, s["index"], dim=at["dim"],
                                                              sizes=tuple(s["self_sym_sizes"])), None),
               (Save("index", 1), Save("self_sym_sizes", "shape:0", freed=False), Save("dim", "attr:dim", freed=False)),
               "same", explain=axis_error, grad_inputs=(0,)))


def _scatter_add_zeros(g, index, out=None, dim=0, sizes=()):
    if out is None:
        out = np.zeros(sizes, dtype=g.dtype)
    else:
        out.fill(0)
    if not sizes:  # a 0-dim self: scatter into its one element, seen as a 1-element vector
        np.add.at(out.reshape(1), (index.reshape(-1),), g.reshape(-1))
        return out
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    np.add.at(out, tuple(grid), g)
    return out


register(OpDef("scatter_add_zeros", _scatter_add_zeros, "other", "ScatterAddBackward0",
               lambda F, gg, s, at, need: (F.gather(gg, s["index"], dim=at["dim"]), None),
               (Save("index", 1),), "same", grad_inputs=ZEROS_SELF))
# the same write where no index repeats (a value-selecting op's indices): PyTorch scatters there
register(replace(OPS["scatter_add_zeros"], name="scatter_zeros", node_name="ScatterBackward0"))


# ---- logsumexp -----------------------------------------------------------------------------------

def _logsumexp(a, out=None, dim=(), keepdim=False):
    """log(sum(exp(a))) over ``dim``, shifted by the peak; over no elements -inf (the log of 0), as PyTorch."""
    peak = np.max(a, axis=dim, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0)
    total = np.sum(np.exp(a - peak), axis=dim, keepdims=True)
    with np.errstate(divide="ignore"):
        result = np.log(total) + peak
    if not keepdim:
        result = np.squeeze(result, axis=dim)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _logsumexp_backward(F, g, s, at, need):
    x, result, dim = s["self"], s["result"], at["dim"]
    if not at.get("keepdim", False):
        g = F.view(g, shape=keepdim_shape(x.shape, dim))
        result = F.view(result, shape=keepdim_shape(x.shape, dim))
    return (g * F.exp(x - result),)


register(OpDef("logsumexp", _logsumexp, "reduction", "LogsumexpBackward0", _logsumexp_backward,
               (Save("self", 0), Save("result", "result"), Save("dim", "attr:dim", freed=False),
                Save("keepdim", "attr:keepdim", freed=False)), "float", explain=axis_error))


# ---- softmax family (numerically stable: shift by the max along dim) ------------------------
#
# Over the last axis of float32 or float64 arrays, the forwards run the row loops of
# staticgrad.ops.loops (NumPy reduces short rows slowly); elsewhere NumPy's reductions. The
# choice depends on shapes, dtypes and dim only, never on a layout, so eager and replay take
# the same path and compute the same numbers.

ROW_LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def over_last_axis(dim, *arrays) -> bool:
    """The row loops apply: non-empty float32 or float64 arrays of one shape and dtype, reduced
    over their last axis."""
    first = arrays[0]
    if first.dtype not in ROW_LOOP_DTYPES or first.ndim == 0 or first.size == 0:
        return False
    if dim % first.ndim != first.ndim - 1:
        return False
    return all(a.dtype == first.dtype and a.shape == first.shape for a in arrays[1:])


def row_operands(*arrays):
    """Each array as a C-contiguous (rows, n) matrix, n its last dim."""
    return [np.ascontiguousarray(a).reshape(-1, a.shape[-1]) for a in arrays]


def _softmax(a, out=None, dim=-1):
    if over_last_axis(dim, a):
        (x,) = row_operands(a)
        flat = loop_output(a.size, a.dtype, out, (a,))
        rows, loops = flat.reshape(x.shape), jit_loops()
        loops.shift_by_row_max(x, rows, np.empty(len(x), a.dtype))
        np.exp(flat, out=flat)
        loops.divide_by_row_sum(rows, a.dtype.type(0))
        return loop_result(flat, a.shape, a.dtype, out)
    if a.size == 0:  # an empty result, as PyTorch (NumPy's max of an empty row raises)
        return np.exp(a) if out is None else out
    shifted = as_array(a - np.max(a, axis=dim, keepdims=True))
    np.exp(shifted, out=shifted)
    return np.true_divide(shifted, np.sum(shifted, axis=dim, keepdims=True), out=out)


def _softmax_backward(F, g, s, at, need):
    return (F.softmax_backward(g, s["result"], dim=at["dim"]),)


register(OpDef("softmax", _softmax, "reduction", "SoftmaxBackward0", _softmax_backward,
               (Save("result", "result"), Save("dim", "attr:dim", freed=False)), "float", explain=axis_error))


def _softmax_bw(g, y, out=None, dim=-1):
    if over_last_axis(dim, g, y):
        rows_g, rows_y = row_operands(g, y)
        flat = loop_output(g.size, g.dtype, out, (g, y))
        jit_loops().softmax_backward(rows_g, rows_y, flat.reshape(rows_g.shape), g.dtype.type(0))
        return loop_result(flat, g.shape, g.dtype, out)
    total = np.sum(np.multiply(g, y), axis=dim, keepdims=True)
    return np.multiply(y, np.subtract(g, total), out=out)


def _listed(x, dim) -> tuple:
    """``dim`` as the dims tuple a sum takes: none for a 0-dim ``x``, which has no axis."""
    return (dim,) if len(x.shape) else ()


def _softmax_bw_backward(F, gg, s, at, need):
    g, y, dim = s["grad_output"], s["output"], at["dim"]
    # d(out)/d(g) is softmax_backward itself; d(out)/d(y) = gg*g - gg*sum(g*y) - g*sum(gg*y)
    grad_g = F.softmax_backward(gg, y, dim=dim) if need[0] else None
    grad_y = None
    if need[1]:
        gy_sum = F.sum(g * y, dim=_listed(y, dim), keepdim=True)
        ggy_sum = F.sum(gg * y, dim=_listed(y, dim), keepdim=True)
        grad_y = gg * g - gg * gy_sum - g * ggy_sum
    return grad_g, grad_y


register(OpDef("softmax_backward", _softmax_bw, "reduction", "SoftmaxBackwardDataBackward0", _softmax_bw_backward,
               (Save("grad_output", 0), Save("output", 1)), "promote"))


def _log_softmax(a, out=None, dim=-1):
    if over_last_axis(dim, a):
        (x,) = row_operands(a)
        flat = loop_output(a.size, a.dtype, out, (a,))
        rows, loops = flat.reshape(x.shape), jit_loops()
        peaks = np.empty(len(x), a.dtype)
        loops.shift_by_row_max(x, rows, peaks)
        np.exp(flat, out=flat)
        loops.log_softmax_last_pass(x, peaks, rows, a.dtype.type(0))
        return loop_result(flat, a.shape, a.dtype, out)
    if a.size == 0:  # an empty result, as PyTorch (NumPy's max of an empty row raises)
        return np.exp(a) if out is None else out
    shifted = a - np.max(a, axis=dim, keepdims=True)
    lse = np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
    return np.subtract(shifted, lse, out=out)


register(OpDef("log_softmax", _log_softmax, "reduction", "LogSoftmaxBackward0",
               lambda F, g, s, at, need: (F.log_softmax_backward(g, s["result"], dim=at["dim"]),),
               (Save("result", "result"), Save("dim", "attr:dim", freed=False)), "float", explain=axis_error))


def _log_softmax_bw(g, y, out=None, dim=-1):
    if over_last_axis(dim, g, y):
        rows_g, rows_y = row_operands(g, y)
        flat = loop_output(g.size, g.dtype, out, (g, y))
        rows = flat.reshape(rows_g.shape)
        np.exp(rows_y, out=rows)
        jit_loops().log_softmax_backward(rows_g, rows, g.dtype.type(0))
        return loop_result(flat, g.shape, g.dtype, out)
    total = np.sum(g, axis=dim, keepdims=True)
    return np.subtract(g, np.exp(y) * total, out=out)


def _log_softmax_bw_backward(F, gg, s, at, need):
    g, y, dim = s["grad_output"], s["output"], at["dim"]
    p = F.exp(y)
    grad_g = None
    if need[0]:
        grad_g = gg - F.sum(gg * p, dim=_listed(y, dim), keepdim=True)
    grad_y = None
    if need[1]:
        grad_y = -(gg * p) * F.sum(g, dim=_listed(y, dim), keepdim=True)
    return grad_g, grad_y


register(OpDef("log_softmax_backward", _log_softmax_bw, "reduction", "LogSoftmaxBackwardDataBackward0",
               _log_softmax_bw_backward, (Save("grad_output", 0), Save("output", 1)), "promote"))


# ---- direct NumPy calls for generated replay code ---------------------------------------------

# (an emitter is not told dtypes: float16, summed in float32 as the forward does, is a test at run time)
def _sum_emit(ins, out, at, shapes):
    axis = at.get("dim")
    keepdims = at.get("keepdim", False)
    if axis is not None and at.get("dtype") is None and shapes[0] is not None:
        columns = _column_sums_emit(ins, out, axis, tuple(shapes[0]))
        if columns is not None:
            return columns
    return (f"np.add.reduce({ins[0]}, axis={axis!r}, dtype={out}.dtype, out={out}, keepdims={keepdims!r}) "
            f"if {out}.dtype.char != 'e' else np.copyto({out}, np.add.reduce({ins[0]}, axis={axis!r}, "
            f"dtype=np.float32, keepdims={keepdims!r}), casting='unsafe')")


def column_sums_into(a, out, axes, columns):
    """A sum over leading ``axes`` into ``out`` for generated replay code (``_column_sums``): the
    column-sum loop where the arrays allow it, else NumPy (float16 added up in float32, as the
    forward does); the same bits either way."""
    if (a.dtype is out.dtype and a.dtype.char in "fd" and a.flags.c_contiguous and out.flags.c_contiguous
            and a.size):
        jit_loops().column_sums(a.reshape(-1, columns), out.reshape(columns))
    elif out.dtype.char == "e":
        np.copyto(out, np.add.reduce(a, axis=axes, dtype=np.float32).reshape(out.shape), casting="unsafe")
    else:
        np.add.reduce(a, axis=axes, dtype=out.dtype, out=out.reshape(a.shape[len(axes):]))


def _column_sums_emit(ins, out, axes, in_shape):
    """The call of column_sums_into for a sum over leading axes, or None for any other sum."""
    columns = leading_sum_columns(in_shape, axes)
    return f"_column_sums({ins[0]}, {out}, {tuple(axes)!r}, {columns})" if columns else None


def _sum_to_size_emit(ins, out, at, shapes):
    in_shape, out_shape = tuple(shapes[0]), tuple(shapes[-1])
    axes = sum_to_axes(in_shape, out_shape)
    keep = (1,) * (len(in_shape) - len(out_shape)) + out_shape
    columns = _column_sums_emit(ins, out, axes, in_shape)
    if columns is not None:
        return columns
    return (f"np.add.reduce({ins[0]}, axis={axes!r}, out={out}.reshape({keep!r}), keepdims=True) "
            f"if {out}.dtype.char != 'e' else np.copyto({out}, np.add.reduce({ins[0]}, axis={axes!r}, "
            f"dtype=np.float32, keepdims=True).reshape({out_shape!r}), casting='unsafe')")


with_emit("sum", _sum_emit)
with_emit("sum_to_size", _sum_to_size_emit)
