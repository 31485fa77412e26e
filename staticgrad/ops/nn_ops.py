"""Transformer-block ops: gelu, layer_norm, embedding, masked_fill, triu/tril, and the dedicated
backward ops of the first three (each differentiable again, for double backward)."""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.elementwise import broadcast_error, fill_outputs, loop_operands, loop_output, loop_result
from staticgrad.ops.reductions import ROW_LOOP_DTYPES
from staticgrad.ops.registry import OpDef, Save, jit_loops, lit, register


def _into(result, out):
    if out is None:
        return result
    np.copyto(out, result)
    return out


# ---- gelu: x * Phi(x), exact ("none", with erf) or with PyTorch's tanh approximation ------------

SQRT1_2 = math.sqrt(0.5)
PDF_SCALE = 1.0 / math.sqrt(2.0 * math.pi)      # PyTorch's kAlpha in the gelu backward
TANH_BETA = math.sqrt(2.0 / math.pi)            # PyTorch's kBeta
TANH_KAPPA = 0.044715


def _gelu(x, out=None, approximate="none"):
    """One Numba pass (erf: a vectorised fit in float32, libm's erf in float64), or around
    NumPy's tanh: x * 0.5 * (1 + erf(x / sqrt 2)), x * 0.5 * (1 + tanh(beta (x + kappa x^3)))."""
    (flat_x,), shape, dtype, work = loop_operands(x)
    flat, T, loops = loop_output(flat_x.size, work, out, (x,)), work.type, jit_loops()
    if approximate == "tanh":
        loops.tanh_gelu_inner(flat_x, flat, T(TANH_KAPPA), T(TANH_BETA))
        np.tanh(flat, out=flat)
        loops.gelu_tanh(flat_x, flat, T(0.5), T(1))
    else:
        loops.gelu_erf(flat_x, flat, T(SQRT1_2), T(0.5), T(1))
    return loop_result(flat, shape, dtype, out)


def _gelu_bw(g, x, out=None, approximate="none"):
    """g times gelu's derivative, in PyTorch's formulas: one Numba pass after NumPy's tanh (or exp
    of -x^2/2, for the normal density in the exact form)."""
    (flat_g, flat_x), shape, dtype, work = loop_operands(g, x)
    flat, T, loops = loop_output(flat_x.size, work, out, (g, x)), work.type, jit_loops()
    if approximate == "tanh":
        loops.tanh_gelu_inner(flat_x, flat, T(TANH_KAPPA), T(TANH_BETA))
        np.tanh(flat, out=flat)
        loops.gelu_tanh_backward(flat_g, flat_x, flat, T(0.5), T(1), T(3 * TANH_KAPPA), T(TANH_BETA))
    else:
        loops.minus_half_square(flat_x, flat, T(-0.5))
        np.exp(flat, out=flat)
        loops.gelu_erf_backward(flat_g, flat_x, flat, T(SQRT1_2), T(0.5), T(1), T(PDF_SCALE))
    return loop_result(flat, shape, dtype, out)


def _gelu_with_backward(g, x, out=None, approximate="none"):
    """(gelu_backward(g, x), gelu(x)) in one pass: for a backward that runs the GELU again instead
    of keeping its output, each bit for bit what the two ops give."""
    (flat_g, flat_x), shape, dtype, work = loop_operands(g, x)
    grad, T, loops = np.empty(flat_x.size, work), work.type, jit_loops()
    value = np.empty(flat_x.size, work)
    if approximate == "tanh":
        loops.tanh_gelu_inner(flat_x, grad, T(TANH_KAPPA), T(TANH_BETA))
        np.tanh(grad, out=grad)
        loops.gelu_tanh_with_backward(flat_g, flat_x, grad, value, T(0.5), T(1), T(3 * TANH_KAPPA), T(TANH_BETA))
    else:
        loops.minus_half_square(flat_x, grad, T(-0.5))
        np.exp(grad, out=grad)
        loops.gelu_erf_with_backward(flat_g, flat_x, grad, value, T(SQRT1_2), T(0.5), T(1), T(PDF_SCALE))
    return loop_result(grad, shape, dtype, None), loop_result(value, shape, dtype, None)


def _gelu_second_derivative(F, x, approximate):
    """d^2 gelu / dx^2 written with staticgrad ops (for the double backward)."""
    x2 = x * x
    if approximate != "tanh":
        pdf = F.mul_scalar(F.exp(F.mul_scalar(x2, other=-0.5)), other=PDF_SCALE)
        return pdf * F.rsub_scalar(x2, other=2.0)
    u = F.mul_scalar(x + F.mul_scalar(x2 * x, other=TANH_KAPPA), other=TANH_BETA)
    t = F.tanh(u)
    du = F.mul_scalar(F.add_scalar(F.mul_scalar(x2, other=3 * TANH_KAPPA), other=1.0), other=TANH_BETA)
    d2u = F.mul_scalar(x, other=6 * TANH_BETA * TANH_KAPPA)
    return F.rsub_scalar(t * t, other=1.0) * (du - x * t * du * du + F.mul_scalar(x * d2u, other=0.5))


def _gelu_bw_backward(F, gg, s, at, need):
    x, approximate = s["self"], s["approximate"]
    grad_g = F.gelu_backward(gg, x, approximate=approximate) if need[0] else None
    grad_x = gg * s["grad_output"] * _gelu_second_derivative(F, x, approximate) if need[1] else None
    return grad_g, grad_x


register(OpDef("gelu", _gelu, "elementwise", "GeluBackward0",
               lambda F, g, s, at, need: (F.gelu_backward(g, s["self"], approximate=s["approximate"]),),
               (Save("self", 0), Save("approximate", "attr:approximate", freed=False))))

register(OpDef("gelu_backward", _gelu_bw, "elementwise", "GeluBackwardBackward0", _gelu_bw_backward,
               (Save("grad_output", 0, when=(1,)), Save("self", 1),
                Save("approximate", "attr:approximate", freed=False)), "promote"))

# Made only by the compiler (a compiled model's backward that recomputes a GELU): no eager face.
register(OpDef("gelu_with_backward", _gelu_with_backward, "other"))


# ---- layer_norm over the trailing dims given by normalized_shape -------------------------------
#
# Forward returns (y, mean, rstd), as PyTorch's native_layer_norm does; mean and rstd are saved
# for backward. Every backward formula gives partial derivatives with respect to its direct
# inputs, mean and rstd included, so gradients of any order are exact. On float32 or float64 the
# forward and the backward ops run one Numba loop over the rows (staticgrad.ops.loops), eager and
# replay alike; other dtypes and shapes take NumPy's reductions.

def _axes(ndim: int, normalized_shape) -> tuple:
    return tuple(range(ndim - len(normalized_shape), ndim))


def _batch_axes(ndim: int, normalized_shape) -> tuple:
    return tuple(range(ndim - len(normalized_shape)))


def _layer_norm_forward(has_weight: bool, has_bias: bool):
    def forward(x, *params, out=None, normalized_shape=(), eps=1e-5):
        if not normalized_shape:  # PyTorch's check: an empty shape would normalize over nothing
            raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                               f"least one element, but got normalized_shape = {list(normalized_shape)}")
        weight = params[0] if has_weight else None
        bias = params[-1] if has_bias else None
        if _row_loops_apply(x, normalized_shape, weight, bias):
            return _layer_norm_rows(x, weight, bias, normalized_shape, eps, out)
        axes = _axes(x.ndim, normalized_shape)
        mean = np.mean(x, axis=axes, keepdims=True)
        centered = x - mean
        var = np.mean(centered * centered, axis=axes, keepdims=True)
        rstd = np.reciprocal(np.sqrt(var + eps))
        y = centered * rstd
        if has_weight:
            y *= params[0]
        if has_bias:
            y += params[-1]
        return (y, mean, rstd) if out is None else fill_outputs((y, mean, rstd), out)
    return forward


def _row_loops_apply(x, normalized_shape, *others) -> bool:
    """The row loops of staticgrad.ops.loops apply: non-empty float32 or float64 arrays of one
    dtype, the trailing dims of x equal to normalized_shape and each parameter of that shape.
    A choice made on shapes and dtypes only, so eager and replay take the same path."""
    shape = tuple(normalized_shape)
    if x.dtype not in ROW_LOOP_DTYPES or x.size == 0 or x.shape[x.ndim - len(shape):] != shape:
        return False
    return all(a is None or (a.dtype == x.dtype and a.shape == shape) for a in others)


def _layer_norm_rows(x, weight, bias, normalized_shape, eps, out=None):
    """(y, mean, rstd) from one Numba loop over the rows of x's normalized dims (written into
    ``out``'s arrays where they fit)."""
    n = math.prod(normalized_shape)
    rows = np.ascontiguousarray(x).reshape(-1, n)
    T, count, inputs = x.dtype.type, rows.shape[0], (x, weight, bias)
    y_out, mean_out, rstd_out = (None, None, None) if out is None else out
    y = loop_output(rows.size, x.dtype, y_out, inputs).reshape(rows.shape)
    mean, rstd = loop_output(count, x.dtype, mean_out, inputs), loop_output(count, x.dtype, rstd_out, inputs)
    unused = np.empty(0, x.dtype) if weight is None or bias is None else None
    weight_row = unused if weight is None else np.ascontiguousarray(weight).reshape(n)
    bias_row = unused if bias is None else np.ascontiguousarray(bias).reshape(n)
    jit_loops().layer_norm(rows, weight_row, bias_row, weight is not None, bias is not None, T(eps), y, mean, rstd,
                           T(n), T(1))
    kept = x.shape[:x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    results = (y.reshape(x.shape), mean.reshape(kept), rstd.reshape(kept))
    return results if out is None else fill_outputs(results, out)


def _layer_norm_backward_formula(has_weight: bool, has_bias: bool):
    def backward(F, grads, s, at, need):
        gy, g_mean, g_rstd = grads
        x, mean, rstd = s["input"], s["result1"], s["result2"]
        shape = at["normalized_shape"]
        grad_x = grad_w = grad_b = None
        if gy is not None:
            if has_weight:
                grad_x, grad_w, grad_b = F.layer_norm_backward_affine(gy, x, mean, rstd, s["weight"],
                                                                      normalized_shape=shape)
            else:
                grad_x = F.layer_norm_backward(gy, x, mean, rstd, normalized_shape=shape)
                grad_b = _sum_batch(F, gy, shape) if has_bias else None
        count = math.prod(shape)
        if g_mean is not None:  # d mean / dx = 1/N
            grad_x = _add(grad_x, F.expand(F.div_scalar(g_mean, other=count), shape=tuple(x.shape)))
        if g_rstd is not None:  # d rstd / dx = -rstd^3 (x - mean) / N
            grad_x = _add(grad_x, F.mul_scalar(g_rstd * rstd * rstd * rstd * (x - mean), other=-1.0 / count))
        grads_out = [grad_x] + ([grad_w] if has_weight else []) + ([grad_b] if has_bias else [])
        return tuple(g if n else None for g, n in zip(grads_out, need))
    return backward


def _add(a, b):
    return b if a is None else a + b


def _sum_batch(F, t, normalized_shape):
    """Sum over the leading (batch) dims, leaving normalized_shape."""
    dims = _batch_axes(len(t.shape), normalized_shape)
    return F.sum(t, dim=dims, keepdim=False) if dims else t


def _sum_rows(F, t, normalized_shape):
    return F.sum(t, dim=_axes(len(t.shape), normalized_shape), keepdim=True)


def _mean_rows(F, t, normalized_shape):
    return F.mean(t, dim=_axes(len(t.shape), normalized_shape), keepdim=True)


for _suffix, _has_weight, _has_bias in (("", False, False), ("_weight", True, False), ("_bias", False, True),
                                        ("_affine", True, True)):
    _saves = (Save("input", 0), Save("normalized_shape", "attr:normalized_shape", freed=False),
              Save("result1", "result:1"), Save("result2", "result:2"))
    if _has_weight:
        _saves += (Save("weight", 1),)
    register(OpDef("layer_norm" + _suffix, _layer_norm_forward(_has_weight, _has_bias), "other",
                   "NativeLayerNormBackward0", _layer_norm_backward_formula(_has_weight, _has_bias), _saves, "float",
                   fills_outputs=True))


def _layer_norm_bw_rows(g, x, mean, rstd, weight, normalized_shape, out=None, outs=None):
    """The row loop's (grad input, grad weight, grad bias), the last two None without a weight;
    ``outs``, if given, the three arrays to write them into (where they fit)."""
    n = math.prod(normalized_shape)
    rows_g, rows_x = np.ascontiguousarray(g).reshape(-1, n), np.ascontiguousarray(x).reshape(-1, n)
    rows_mean, rows_rstd = np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(rstd).reshape(-1)
    inputs = (g, x, mean, rstd, weight)
    flat = loop_output(g.size, g.dtype, out if outs is None else outs[0], inputs)
    scaled = np.empty((1, n), g.dtype)  # the loop's scratch row; stands in for what is not given
    if weight is None:
        weight_row = grad_weight = grad_bias = scaled[0]
    else:
        weight_row = np.ascontiguousarray(weight).reshape(n)
        grad_weight, grad_bias = (loop_output(n, g.dtype, None if outs is None else outs[k], inputs) for k in (1, 2))
    jit_loops().layer_norm_backward(rows_g, rows_x, rows_mean, rows_rstd, weight_row, weight is not None,
                                    flat.reshape(rows_g.shape), scaled, grad_weight, grad_bias, g.dtype.type(n))
    if weight is None:
        grad_weight = grad_bias = None
    else:
        grad_weight, grad_bias = grad_weight.reshape(normalized_shape), grad_bias.reshape(normalized_shape)
    if outs is not None:
        return fill_outputs((flat.reshape(g.shape), grad_weight, grad_bias), outs)
    return loop_result(flat, g.shape, g.dtype, out), grad_weight, grad_bias


def _stats_fit(x, mean, rstd, normalized_shape) -> bool:
    """mean and rstd have the shape layer_norm gives them (x's batch dims, then ones)."""
    kept = x.shape[:x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    return mean.shape == kept and rstd.shape == kept


def _layer_norm_bw(g, x, mean, rstd, out=None, normalized_shape=()):
    """rstd * (g - mean(g) - xhat * mean(g * xhat)): the input gradient when there is no weight."""
    if (g.shape == x.shape and _row_loops_apply(x, normalized_shape) and _stats_fit(x, mean, rstd, normalized_shape)
            and all(a.dtype == x.dtype for a in (g, mean, rstd))):
        return _layer_norm_bw_rows(g, x, mean, rstd, None, normalized_shape, out)[0]
    axes = _axes(x.ndim, normalized_shape)
    xhat = (x - mean) * rstd
    centered = g - np.mean(g, axis=axes, keepdims=True)
    centered -= xhat * np.mean(g * xhat, axis=axes, keepdims=True)
    return np.multiply(centered, rstd, out=out)


def _layer_norm_bw_affine(g, x, mean, rstd, weight, out=None, normalized_shape=()):
    """(grad input, grad weight, grad bias)."""
    if (g.shape == x.shape and _row_loops_apply(x, normalized_shape, weight)
            and _stats_fit(x, mean, rstd, normalized_shape) and all(a.dtype == x.dtype for a in (g, mean, rstd))):
        return _layer_norm_bw_rows(g, x, mean, rstd, weight, tuple(normalized_shape), outs=out)
    batch = _batch_axes(x.ndim, normalized_shape)
    xhat = (x - mean) * rstd
    results = (_layer_norm_bw(g * weight, x, mean, rstd, normalized_shape=normalized_shape),
               np.sum(g * xhat, axis=batch), np.sum(g, axis=batch))
    return results if out is None else fill_outputs(results, out)


def _layer_norm_bw_backward(has_weight: bool):
    """Partial derivatives of the layer_norm backward with respect to (grad, x, mean, rstd[, weight])."""
    def backward(F, gg, s, at, need):
        gg_x, gg_w, gg_b = gg if has_weight else (gg, None, None)
        g, x, mean, rstd, shape = s["grad_out"], s["input"], s["mean"], s["rstd"], at["normalized_shape"]
        weight = s["weight"] if has_weight else None
        centered = x - mean
        xhat = centered * rstd
        g_scaled = g * weight if has_weight else g
        grad_g = grad_w = d_xhat = d_rstd = None
        if gg_x is not None:
            # dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) is self-adjoint in gw
            adjoint = F.layer_norm_backward(gg_x, x, mean, rstd, normalized_shape=shape)
            grad_g = adjoint * weight if has_weight else adjoint
            if has_weight and need[4]:
                grad_w = _sum_batch(F, g * adjoint, shape)
            if need[1] or need[2] or need[3]:
                m_gw_xhat = _mean_rows(F, g_scaled * xhat, shape)
                d_xhat = -(rstd * (g_scaled * _mean_rows(F, gg_x * xhat, shape) + gg_x * m_gw_xhat))
                d_rstd = _sum_rows(F, gg_x * (g_scaled - _mean_rows(F, g_scaled, shape) - xhat * m_gw_xhat), shape)
        if gg_w is not None:  # grad weight = sum_batch(g * xhat)
            grad_g = _add(grad_g, gg_w * xhat)
            d_xhat = _add(d_xhat, g * gg_w)
        if gg_b is not None:  # grad bias = sum_batch(g)
            grad_g = _add(grad_g, F.expand(gg_b, shape=tuple(g.shape)))
        grad_x = grad_mean = None
        if d_xhat is not None:  # xhat = (x - mean) * rstd
            grad_x = rstd * d_xhat
            grad_mean = F.neg(_sum_rows(F, grad_x, shape))
            d_rstd = _add(d_rstd, _sum_rows(F, d_xhat * centered, shape))
        grads = (grad_g, grad_x, grad_mean, d_rstd) + ((grad_w,) if has_weight else ())
        return tuple(t if n else None for t, n in zip(grads, need))
    return backward


_BW_SAVES = (Save("grad_out", 0), Save("input", 1), Save("mean", 2), Save("rstd", 3),
             Save("normalized_shape", "attr:normalized_shape", freed=False))
register(OpDef("layer_norm_backward", _layer_norm_bw, "other", "NativeLayerNormBackwardBackward0",
               _layer_norm_bw_backward(False), _BW_SAVES, "promote"))
register(OpDef("layer_norm_backward_affine", _layer_norm_bw_affine, "other", "NativeLayerNormBackwardBackward0",
               _layer_norm_bw_backward(True), _BW_SAVES + (Save("weight", 4),), "promote", fills_outputs=True))


# ---- embedding: rows of a weight matrix picked by integer indices ---------------------------------

def _embedding(weight, indices, out=None, num_weights=0, padding_idx=-1):
    if (weight.ndim == 2 and weight.dtype.char in "fd" and indices.dtype == np.int64 and weight.flags.c_contiguous
            and indices.flags.c_contiguous and indices.size and (out is None or out.flags.c_contiguous)):
        # the range check and the copy in one pass (a fifth of min, max and take's time on an LM's batch)
        result = np.empty(indices.shape + weight.shape[1:], weight.dtype) if out is None else out
        flat = indices.reshape(-1)
        if _row_gatherer()(_read_only(weight), _read_only(flat), result.reshape(flat.size, weight.shape[1])) >= 0:
            raise IndexError("index out of range in self")
        return result
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    return np.take(weight, indices, axis=0, out=out)


def _embedding_bw(g, indices, out=None, num_weights=0, padding_idx=-1):
    """Scatter-add the rows of g into a (num_weights, dim) zero matrix; the padding row stays zero."""
    rows, flat = g.reshape(-1, g.shape[-1]), indices.reshape(-1)
    if padding_idx >= 0:
        keep = flat != padding_idx
        rows, flat = rows[keep], flat[keep]
    result = np.zeros((num_weights, g.shape[-1]), dtype=g.dtype)
    if rows.dtype.char in "fd" and flat.size:   # np.add.at's additions in its order, in a Numba loop
        _row_adder()(result, _read_only(flat), _read_only(rows))
    else:
        np.add.at(result, flat, rows)
    return _into(result, out)


_ADD_ROWS = None
_GATHER_ROWS = None


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of an array the loop only reads: Numba compiles a loop once per mix of
    read-only and writable arguments, and a replay's indices may be a read-only constant, so the
    loop always gets read-only views and compiles once."""
    view = array.view()
    view.flags.writeable = False
    return view


def _row_gatherer():
    """``scatter_loops.gather_rows``, imported at first use (it loads Numba)."""
    global _GATHER_ROWS
    if _GATHER_ROWS is None:
        from staticgrad.ops.scatter_loops import gather_rows  # here, not at the top: it loads Numba

        _GATHER_ROWS = gather_rows
    return _GATHER_ROWS


def _row_adder():
    """``scatter_loops.add_rows``, imported at first use (it loads Numba)."""
    global _ADD_ROWS
    if _ADD_ROWS is None:
        from staticgrad.ops.scatter_loops import add_rows  # here, not at the top: it loads Numba

        _ADD_ROWS = add_rows
    return _ADD_ROWS


def _embedding_bw_backward(F, gg, s, at, need):
    indices, padding_idx = s["indices"], s["padding_idx"]
    rows = F.embedding(gg, indices, num_weights=at["num_weights"], padding_idx=padding_idx)
    if padding_idx >= 0:
        padding = F.unsqueeze(F.eq_scalar(indices, other=padding_idx), dim=len(indices.shape))
        rows = F.masked_fill(rows, padding, value=0.0)
    return rows, None


register(OpDef("embedding", _embedding, "other", "EmbeddingBackward0",
               lambda F, g, s, at, need: (F.embedding_backward(g, s["indices"], num_weights=s["weight_sym_argsize_0"],
                                                               padding_idx=s["padding_idx"]), None),
               (Save("indices", 1), Save("padding_idx", "attr:padding_idx", freed=False),
                Save("weight_sym_argsize_0", "attr:num_weights", freed=False)),
               grad_inputs=(0,)))

register(OpDef("embedding_backward", _embedding_bw, "other", "EmbeddingDenseBackwardBackward0",
               _embedding_bw_backward,
               (Save("indices", 1), Save("padding_idx", "attr:padding_idx", freed=False)), grad_inputs=(0,)))


# ---- masked_fill, triu, tril ------------------------------------------------------------------------

def _masked_fill(a, mask, out=None, value=0.0):
    return _into(np.where(mask, a.dtype.type(value), a), out)


def _masked_fill_error(shapes, attrs, exc):
    better = broadcast_error(shapes[::-1], attrs, exc)  # PyTorch broadcasts the mask against self
    if better is None and isinstance(exc, ValueError):  # in place: the mask broadcasts beyond self
        full = list(np.broadcast_shapes(*shapes))
        return RuntimeError(f"output with shape {list(shapes[0])} doesn't match the broadcast shape {full}")
    return better


def _fill_literal(value) -> str:
    """The fill value inside a fused kernel, as the kernel's float type T (infinities and NaN by name)."""
    if not isinstance(value, (int, float)):
        return lit(value)  # a value read at replay time
    value = float(value)
    if math.isnan(value):
        return "T(np.nan)"
    if math.isinf(value):
        return "T(-np.inf)" if value < 0 else "T(np.inf)"
    return f"T({value!r})"


register(OpDef("masked_fill", _masked_fill, "elementwise", "MaskedFillBackward0",
               lambda F, g, s, at, need: (F.masked_fill(g, s["mask"], value=0.0), None),
               (Save("mask", 1),), "same",
               lambda x, at: f"({_fill_literal(at['value'])} if {x[1]} else {x[0]})",
               _masked_fill_error, grad_inputs=(0,)))

register(OpDef("triu", lambda a, out=None, diagonal=0: _into(np.triu(a, diagonal), out), "other", "TriuBackward0",
               lambda F, g, s, at, need: (F.triu(g, diagonal=s["diagonal"]),),
               (Save("diagonal", "attr:diagonal", freed=False),)))

register(OpDef("tril", lambda a, out=None, diagonal=0: _into(np.tril(a, diagonal), out), "other", "TrilBackward0",
               lambda F, g, s, at, need: (F.tril(g, diagonal=s["diagonal"]),),
               (Save("diagonal", "attr:diagonal", freed=False),)))
