"""Numba loops for what NumPy has no fast loop for: erf (GELU), addcmul's fused multiply-add, max
pooling, ReLU's backward, and softmax, log-softmax and layer norm over short rows.

The op forwards call these (eager dispatch and replay alike), so eager and replay compute the
same numbers. Each loop performs, per element, exactly the IEEE operations written in it: no
fastmath, so LLVM neither reassociates nor contracts into FMAs, and its vector body and scalar
remainder agree bit for bit (the fused multiply-adds of addcmul and of erf's polynomials are
written as such, an LLVM intrinsic). The one exception, the row sums, is described where they are.
Arrays come in C-contiguous, flat, as (planes, H, W) or as (rows, n).

Loaded on an op's first call, not with staticgrad (loading Numba takes about half a second).
Compiled code is cached next to this file (``cache=True``); where Numba finds no writable cache
directory, the loops compile in memory in each process.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir

from staticgrad.ops.numba_cache import njit_cached


def _jit(function, fastmath=False, inner=False):
    """Compiled on first call; without a C wrapper (the loops are called from Python and from each
    other, never from C), which would add a tenth to each loop's compile time. ``inner``: called
    from the other loops only, so without the wrapper for calls from Python either (Numba builds
    one per function, per argument)."""
    return njit_cached(function, nogil=True, error_model="numpy", no_cfunc_wrapper=True, fastmath=fastmath,
                       no_cpython_wrapper=inner)


def _jit_inner(function):
    return _jit(function, inner=True)


# ---- fused multiply-add: a * b + c rounded once -------------------------------------------------
#
# LLVM's fma intrinsic: one instruction on CPUs with FMA (x86-64 since Haswell), in the vector
# body and the scalar remainder alike, so a loop using it still gives the same number for an
# element wherever it sits.

@numba.extending.intrinsic
def fused_multiply_add(typingctx, a, b, c):
    """a * b + c rounded once (LLVM's fma), for three floats of one type."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, b, c), codegen


_fma = fused_multiply_add


# ---- erf ----------------------------------------------------------------------------------------
#
# erf(x) = x P(u) / Q(u), u = x^2 / 16, |x| clamped to 4, evaluated in float64: a rational
# minimax fit to erf(x)/x on [0, 4] (Lawson-weighted least squares; relative error < 9.4e-10),
# made for float32 results: beyond 4, erf rounds to +-1 in float32. P and Q are evaluated by
# Horner's rule with fused multiply-adds: the loop takes two thirds of the time it takes with a
# multiply and an add a term, and every float32 input gives the same value either way (a full
# sweep). Rounded to float32 it equals the correctly rounded erf in about 99% of float32 inputs
# and is one ulp off in the rest (the test suite checks a dense sample against libm). It
# vectorises; libm's erf (math.erf) does not and costs ~10 ns an element. float64 keeps libm's erf.

_P0, _P1, _P2, _P3, _P4, _P5, _P6 = (
    1.1283791681376774, 2.6703778882281433, 13.039916963325176, 12.106645067770893,
    20.03563953314075, -0.30486317920117323, -0.7524242678335699)
_Q1, _Q2, _Q3, _Q4, _Q5, _Q6 = (
    7.699894737195804, 27.02236298973134, 55.25793664523762, 68.14147617202374,
    42.97973328305507, -10.406715999562437)
# The same in x^2: the k-th coefficients times 16^-k, exactly (powers of two), saving the multiply
# by 1/16 and changing no bit (x^2 of a float32 is exact in float64).
_A0, _A1, _A2, _A3, _A4, _A5, _A6 = (c * 0.0625 ** k for k, c in enumerate((_P0, _P1, _P2, _P3, _P4, _P5, _P6)))
_B1, _B2, _B3, _B4, _B5, _B6 = (c * 0.0625 ** k for k, c in enumerate((_Q1, _Q2, _Q3, _Q4, _Q5, _Q6), 1))


@_jit_inner
def erf_float32(x):
    """erf of a float32 value, as float32 (NaN stays NaN, +-inf gives +-1)."""
    c = np.float64(x)
    c = 4.0 if c > 4.0 else c  # comparisons, not min/max: NaN must pass through
    c = -4.0 if c < -4.0 else c
    u = c * c
    p = _fma(_fma(_fma(_fma(_fma(_fma(_A6, u, _A5), u, _A4), u, _A3), u, _A2), u, _A1), u, _A0)
    q = _fma(_fma(_fma(_fma(_fma(_fma(_B6, u, _B5), u, _B4), u, _B3), u, _B2), u, _B1), u, 1.0)
    return np.float32(c * p / q)


def erf(x):
    """erf of a float32 or float64 value, in its own type, inside these loops: the rational
    fit for float32, libm's erf for float64."""
    return math.erf(x)


@numba.extending.overload(erf)
def _erf_by_type(x):
    if x == numba.types.float32:
        return lambda x: erf_float32(x)
    return lambda x: math.erf(x)


@_jit
def erf_array(x, out):
    """out = erf(x) elementwise, x and out flat, of one dtype."""
    for i in range(x.size):
        out[i] = erf(x[i])


# ---- addcmul: self + (value * t1) * t2 with one rounding for the last multiply-add ---------------
#
# PyTorch's CPU loop computes (value * t1) * t2 + self as a fused multiply-add (its compiler
# contracts the two operations, in the vector body and the scalar tail alike). LLVM's fma
# intrinsic is that operation, rounded once, exactly, in float32 and float64 alike.

@_jit
def addcmul_array(a, t1, t2, value, out):
    """out = fma(value * t1, t2, a) elementwise; flat arrays of one dtype, value of that dtype."""
    for i in range(out.size):
        out[i] = fused_multiply_add(value * t1[i], t2[i], a[i])


@_jit
def lerp_scalar_array(a, b, weight, one_minus_weight, small, out):
    """out = lerp(a, b, weight) as PyTorch rounds it, d = b - a: fma(weight, d, a) for a small
    weight (|weight| < 0.5), else fma(-d, 1 - weight, b); flat arrays of one dtype."""
    for i in range(out.size):
        d = b[i] - a[i]
        if small:
            out[i] = fused_multiply_add(weight, d, a[i])
        else:
            out[i] = fused_multiply_add(-d, one_minus_weight, b[i])


@_jit
def lerp_array(a, b, w, one, half, out):
    """lerp_scalar_array's rule with a weight per element (one and half: 1 and 0.5 in the dtype)."""
    for i in range(out.size):
        d = b[i] - a[i]
        weight = w[i]
        if abs(weight) < half:
            out[i] = fused_multiply_add(weight, d, a[i])
        else:
            out[i] = fused_multiply_add(-d, one - weight, b[i])


@_jit
def scaled_add_array(a, b, alpha, out):
    """out = fma(b, alpha, a) elementwise: a + alpha * b rounded once, as PyTorch's add and sub with
    an alpha compute it (an explicit multiply-add in its vector loops); flat arrays of one dtype,
    alpha of that dtype. out may be a itself (each element is read before it is written)."""
    for i in range(out.size):
        out[i] = fused_multiply_add(b[i], alpha, a[i])


# ---- GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2)) -------------------------------------------------
#
# Constants come in as arguments of the arrays' dtype (T(c), NumPy's weak-scalar rule), so one
# source serves float32 and float64. The backward takes exp(-x^2 / 2) precomputed by NumPy (its
# SIMD exp is ~5x faster than a scalar one here) in ``out``, which it overwrites: a loop given
# one array as two arguments would fail LLVM's overlap check and run its scalar version.

@_jit
def gelu_erf(x, out, sqrt1_2, half, one):
    """out = (x * half) * (erf(x * sqrt1_2) + one)."""
    for i in range(x.size):
        v = x[i]
        out[i] = (v * half) * (erf(v * sqrt1_2) + one)


@_jit
def minus_half_square(x, out, minus_half):
    """out = x * x * minus_half (the exponent of the normal density)."""
    for i in range(x.size):
        v = x[i]
        out[i] = v * v * minus_half


@_jit
def gelu_erf_backward(g, x, out, sqrt1_2, half, one, pdf_scale):
    """out = g * ((erf(x * sqrt1_2) + one) * half + x * (out * pdf_scale)), out = exp(-x^2/2) on entry."""
    for i in range(x.size):
        v = x[i]
        out[i] = g[i] * ((erf(v * sqrt1_2) + one) * half + v * (out[i] * pdf_scale))


@_jit
def gelu_erf_with_backward(g, x, grad, value, sqrt1_2, half, one, pdf_scale):
    """gelu_erf_backward and gelu_erf in one pass, one erf an element (a backward that runs the
    GELU again instead of keeping its output): the same operations, so the same numbers.
    grad = exp(-x^2/2) on entry."""
    for i in range(x.size):
        v = x[i]
        e = erf(v * sqrt1_2) + one
        value[i] = (v * half) * e
        grad[i] = g[i] * (e * half + v * (grad[i] * pdf_scale))


# ---- GELU, tanh form: x * 0.5 * (1 + tanh(beta * (x + kappa x^3))) -------------------------------
#
# tanh stays NumPy's (SIMD); these loops do the arithmetic around it in one pass each, the
# second reading tanh's value from ``out`` as above.

@_jit
def tanh_gelu_inner(x, out, kappa, beta):
    """out = ((x * x * x) * kappa + x) * beta, the argument of tanh."""
    for i in range(x.size):
        v = x[i]
        out[i] = ((v * v * v) * kappa + v) * beta


@_jit
def gelu_tanh(x, out, half, one):
    """out = (x * half) * (t + one), t = out on entry (tanh of the inner argument)."""
    for i in range(x.size):
        out[i] = (x[i] * half) * (out[i] + one)


@_jit
def gelu_tanh_backward(g, x, out, half, one, three_kappa, beta):
    """out = g * ((x * half) * (one - t * t) * ((x * x * three_kappa + one) * beta) + half * (one + t)),
    t = out on entry."""
    for i in range(x.size):
        v, w = x[i], out[i]
        slope = (v * half) * (one - w * w) * ((v * v * three_kappa + one) * beta)
        out[i] = g[i] * (slope + half * (one + w))


@_jit
def gelu_tanh_with_backward(g, x, grad, value, half, one, three_kappa, beta):
    """gelu_tanh_backward and gelu_tanh in one pass; grad = t on entry."""
    for i in range(x.size):
        v, w = x[i], grad[i]
        value[i] = (v * half) * (w + one)
        slope = (v * half) * (one - w * w) * ((v * v * three_kappa + one) * beta)
        grad[i] = g[i] * (slope + half * (one + w))


# ---- ReLU's backward ----------------------------------------------------------------------------

@_jit
def threshold_backward(g, x, threshold, zero, out):
    """out = zero where x <= threshold, else g (NaN in x lets g through, as in PyTorch)."""
    for i in range(x.size):
        if x[i] <= threshold:
            out[i] = zero
        else:
            out[i] = g[i]


# ---- 2-D max pooling over (planes, H, W) --------------------------------------------------------

# PyTorch's scan: a window's cells row by row, a later value winning only if greater, or NaN (so
# the last NaN wins); the index is h * W + w in the plane. Padding cells are never read: a window
# of -inf (lowest) values reports its first real cell. Selects, not branches: a branch on the
# comparison mispredicts about once a window on real data.

@_jit
def max_pool2d(x, kh, kw, sh, sw, ph, pw, lowest, values, indices):
    """Any window and padding: values, indices (planes, OH, OW) of x (planes, H, W)."""
    planes, height, width = x.shape
    out_h, out_w = values.shape[1], values.shape[2]
    for p in range(planes):
        for i in range(out_h):
            h0 = i * sh - ph
            h1 = min(h0 + kh, height)
            h0 = max(h0, 0)
            for j in range(out_w):
                w0 = j * sw - pw
                w1 = min(w0 + kw, width)
                w0 = max(w0, 0)
                best = lowest
                where = h0 * width + w0
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        v = x[p, h, w]
                        take = (v > best) | (v != v)  # v != v: NaN wins
                        best = v if take else best
                        where = h * width + w if take else where
                values[p, i, j] = best
                indices[p, i, j] = where


@_jit
def max_pool2d_2x2(x, sh, sw, values, indices):
    """2x2 windows without padding (every window inside the plane), unrolled: 2.7x faster than
    the general loop at 32x8x28x28. Starting from the first cell equals starting from lowest."""
    width = x.shape[2]
    out_h, out_w = values.shape[1], values.shape[2]
    for p in range(x.shape[0]):
        for i in range(out_h):
            h = i * sh
            top, bottom = x[p, h], x[p, h + 1]
            row_values, row_indices = values[p, i], indices[p, i]
            for j in range(out_w):
                w = j * sw
                best, where = top[w], 0
                v = top[w + 1]
                take = (v > best) | (v != v)
                best, where = (v, 1) if take else (best, where)
                v = bottom[w]
                take = (v > best) | (v != v)
                best, where = (v, width) if take else (best, where)
                v = bottom[w + 1]
                take = (v > best) | (v != v)
                best, where = (v, width + 1) if take else (best, where)
                row_values[j] = best
                row_indices[j] = h * width + w + where


@_jit
def max_pool2d_dilated(x, kh, kw, sh, sw, ph, pw, dh, dw, lowest, values, indices):
    """Dilated windows (every dh-th row, dw-th column), clipped to the plane as PyTorch clips them:
    the first cell read is the first one of the dilated grid inside the plane."""
    planes, height, width = x.shape
    out_h, out_w = values.shape[1], values.shape[2]
    for p in range(planes):
        for i in range(out_h):
            h0 = i * sh - ph
            h1 = min(h0 + (kh - 1) * dh + 1, height)
            while h0 < 0:
                h0 += dh
            for j in range(out_w):
                w0 = j * sw - pw
                w1 = min(w0 + (kw - 1) * dw + 1, width)
                while w0 < 0:
                    w0 += dw
                best = lowest
                where = h0 * width + w0
                for h in range(h0, h1, dh):
                    for w in range(w0, w1, dw):
                        v = x[p, h, w]
                        take = (v > best) | (v != v)
                        best = v if take else best
                        where = h * width + w if take else where
                values[p, i, j] = best
                indices[p, i, j] = where


@_jit
def max_pool2d_backward(g, indices, out):
    """out (planes, H*W) = 0, then each g added at its index, in output order (PyTorch's order and
    float precision). Returns how many indices fell outside their plane (those are skipped)."""
    out[:] = 0
    planes, count = g.shape
    plane = out.shape[1]
    bad = 0
    for p in range(planes):
        for k in range(count):
            where = indices[p, k]
            if 0 <= where < plane:
                out[p, where] += g[p, k]
            else:
                bad += 1
    return bad


# ---- convolution's columns: im2col and its adjoint col2im over (N, C, H, W) -------------------
#
# A column array (N, C, kh, kw, OH, OW) holds, for each kernel cell (i, j), the input cell each
# output position reads: x[y, x] with y = oy * sh + i - ph, x = ox * sw + j - pw, or zero where
# that falls in the padding. Per output row, the valid ox form one range [lo, hi). Both loops take
# the arrays flat and index them with unsigned offsets: a signed index makes Numba test it for
# negative values (Python's wraparound), which keeps LLVM from vectorising the row loops (3x).

@_jit_inner
def _valid_range(j, stride, pad, size, count):
    """[lo, hi) of the o in range(count) with 0 <= o * stride + j - pad < size (floor divisions, as
    in Python: an empty range comes out with hi <= lo)."""
    lo = max(0, (pad - j + stride - 1) // stride)
    hi = min(count, (size - 1 + pad - j) // stride + 1)
    return lo, max(lo, hi)


@_jit
def im2col(x, n, c, height, width, kh, kw, sh, sw, ph, pw, out_h, out_w, columns):
    """columns (N, C, kh, kw, OH, OW) from x (N, C, H, W), both flat: a pure copy (zeros in the
    padding), so any dtype goes through as unsigned integers of its width."""
    zero = columns.dtype.type(0)
    at = np.uint64(0)
    for plane in range(n * c):
        start = plane * height * width
        for i in range(kh):
            for j in range(kw):
                lo, hi = _valid_range(j, sw, pw, width, out_w)
                for oy in range(out_h):
                    y = oy * sh + i - ph
                    if y < 0 or y >= height:
                        for ox in range(out_w):
                            columns[at + np.uint64(ox)] = zero
                    else:
                        for ox in range(lo):
                            columns[at + np.uint64(ox)] = zero
                        source = np.uint64(start + y * width + j - pw)   # wraps where lo > 0; source + ox does not
                        if sw == 1:
                            for ox in range(lo, hi):
                                columns[at + np.uint64(ox)] = x[source + np.uint64(ox)]
                        else:
                            for ox in range(lo, hi):
                                columns[at + np.uint64(ox)] = x[source + np.uint64(ox * sw)]
                        for ox in range(hi, out_w):
                            columns[at + np.uint64(ox)] = zero
                    at += np.uint64(out_w)


@_jit
def col2im(columns, n, c, height, width, kh, kw, sh, sw, ph, pw, out_h, out_w, out):
    """out (N, C, H, W) = 0, then each column cell added onto the input cell it was read from, kernel
    cell after kernel cell (i, then j): per input cell, NumPy's additions of one shifted window
    after another, in the same order. Both flat, as in im2col."""
    zero = out.dtype.type(0)
    for k in range(out.size):
        out[k] = zero
    at = np.uint64(0)
    for plane in range(n * c):
        start = plane * height * width
        for i in range(kh):
            for j in range(kw):
                lo, hi = _valid_range(j, sw, pw, width, out_w)
                for oy in range(out_h):
                    y = oy * sh + i - ph
                    if 0 <= y < height:
                        target = np.uint64(start + y * width + j - pw)
                        if sw == 1:
                            for ox in range(lo, hi):
                                out[target + np.uint64(ox)] += columns[at + np.uint64(ox)]
                        else:
                            for ox in range(lo, hi):
                                out[target + np.uint64(ox * sw)] += columns[at + np.uint64(ox)]
                    at += np.uint64(out_w)


# ---- negative log likelihood over (N, C) log-probabilities -------------------------------------
#
# What nll_loss's NumPy form takes about ten calls for (a mask, bounds, a fancy index, a negation),
# in one pass; the reduction stays NumPy's sum, so the loss keeps its bits.

@_jit
def nll_picked(logp, target, ignore_index, losses):
    """losses[i] = -logp[i, target[i]], +0.0 where target[i] is ignore_index. Returns the number of
    rows counted, or -1 - i for the first row i whose target is neither a class nor ignore_index."""
    count = 0
    classes = logp.shape[1]
    for i in range(target.shape[0]):
        t = target[i]
        if t == ignore_index:
            losses[i] = 0.0
        elif t < 0 or t >= classes:
            return -1 - i
        else:
            losses[i] = -logp[i, t]
            count += 1
    return count


@_jit
def nll_scatter(target, ignore_index, values, step, out):
    """out = 0 but out[i, target[i]] = values[i * step] on rows whose target is not ignore_index
    (step 0: one value for all). Returns -1, or the first row whose target is out of range (then
    out is partly written)."""
    classes = out.shape[1]
    for i in range(out.shape[0]):
        for j in range(classes):
            out[i, j] = 0.0
        t = target[i]
        if t != ignore_index:
            if t < 0 or t >= classes:
                return i
            out[i, t] = values[i * step]
    return -1


# ---- column sums: a sum over the leading axes (a bias gradient) ----------------------------------
#
# NumPy reduces the leading axes of a C-contiguous array row after row: each kept element starts
# from +0.0 and adds its column's values in row order, with the kept elements innermost. This
# loop performs those same additions (so the same bits), without NumPy's per-row inner-loop calls
# (a 256 x 256 sum in a third of the time, a 32 x 64 one in a fourth).

@_jit
def column_sums(a, out):
    """out[j] = a[0, j] + a[1, j] + ... from +0.0, row after row; a (rows, n), out (n,) C-contiguous."""
    for j in range(out.shape[0]):
        out[j] = 0.0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[j] += a[i, j]


# ---- rows: softmax, log-softmax and layer norm over the last axis of (rows, n) ------------------
#
# NumPy reduces short rows slowly (np.max over rows of 32 costs ~1.7 ns an element, 8x an
# elementwise pass); these loops take one row at a time, indexing the 2-D arrays directly (a row
# view per row would cost reference counting). exp stays NumPy's (its SIMD exp is ~5x faster
# than a scalar one here): a forward runs in passes around it, passing the exp through ``out``.
#
# The row sums alone are compiled with fastmath={"reassoc"}: LLVM may then add a row in vector
# lanes (6x faster than a scalar chain), and does. Only the order of the additions changes (no
# FMA contraction, no assumptions about NaN or infinities), and that order is fixed by the
# compiled code: it depends on the row length and the CPU's vector width, never on the data, the
# row or the alignment. Eager and replay call the same compiled loop, so they agree bit for bit;
# every other operation in these loops is the plain IEEE one written.

def _jit_reassociating(function):
    return _jit(function, fastmath={"reassoc"}, inner=True)


@_jit_reassociating
def row_sum(a, r, zero):
    """Sum of row r of a (rows, n)."""
    total = zero
    for j in range(a.shape[1]):
        total += a[r, j]
    return total


@_jit_reassociating
def row_dot(a, ra, b, rb, zero):
    """Sum of a[ra] * b[rb] (rows of two (rows, n) arrays)."""
    total = zero
    for j in range(a.shape[1]):
        total += a[ra, j] * b[rb, j]
    return total


# The row maximum compares floats by their bits: flipping all but the sign bit of a negative
# float's bits makes their signed integer order the float order (-0.0 just below +0.0, a NaN
# above +inf or below -inf by its sign bit). An integer maximum is the same in any order, so LLVM
# takes it in vector lanes without fastmath (a float maximum it keeps scalar: there the order
# decides which NaN wins); the softmax's first pass takes half the time on rows of 32.

def _float_bits_type(x):
    return numba.types.int32 if x.bitwidth == 32 else numba.types.int64


@numba.extending.intrinsic
def ordered_bits(typingctx, x):
    """The bits of a float32 or float64 as an int32 or int64 whose order is the float order."""
    def codegen(context, builder, signature, args):
        kind = ir.IntType(x.bitwidth)
        bits = builder.bitcast(args[0], kind)
        flip = builder.lshr(builder.ashr(bits, ir.Constant(kind, x.bitwidth - 1)), ir.Constant(kind, 1))
        return builder.xor(bits, flip)
    return _float_bits_type(x)(x), codegen


@numba.extending.intrinsic
def from_ordered_bits(typingctx, key, like):
    """The float (of like's type) whose ordered_bits are key."""
    def codegen(context, builder, signature, args):
        kind = ir.IntType(like.bitwidth)
        flip = builder.lshr(builder.ashr(args[0], ir.Constant(kind, like.bitwidth - 1)), ir.Constant(kind, 1))
        return builder.bitcast(builder.xor(args[0], flip), context.get_value_type(like))
    return like(key, like), codegen


@_jit_inner
def row_max(a, r):
    """Largest of row r of a (rows, n >= 1), +0.0 above -0.0. A NaN may or may not win (it wins
    with its sign bit clear): the softmax loops need no more, since a NaN in a row makes its sum,
    and so the whole row, NaN."""
    first = a[r, 0]
    best = ordered_bits(first)
    for j in range(a.shape[1]):
        key = ordered_bits(a[r, j])
        best = key if key > best else best
    return from_ordered_bits(best, first)


@_jit
def shift_by_row_max(x, out, peaks):
    """out = x - max(x row), the maxima kept in peaks (rows,); a row of -inf gives NaN
    (-inf - -inf), as PyTorch's softmax."""
    rows, n = x.shape
    for r in range(rows):
        peak = row_max(x, r)
        peaks[r] = peak
        for j in range(n):
            out[r, j] = x[r, j] - peak


@_jit
def divide_by_row_sum(out, zero):
    """out /= sum(out row): softmax's last pass, out = exp(x - max) on entry."""
    rows, n = out.shape
    for r in range(rows):
        total = row_sum(out, r, zero)
        for j in range(n):
            out[r, j] = out[r, j] / total


@_jit
def log_softmax_last_pass(x, peaks, out, zero):
    """out = (x - peak) - log(sum(out row)), out = exp(x - peak) on entry: log-softmax's last
    pass, taking x - peak again (the same operation, so the same value) instead of a copy."""
    rows, n = out.shape
    for r in range(rows):
        lse = math.log(row_sum(out, r, zero))
        peak = peaks[r]
        for j in range(n):
            out[r, j] = (x[r, j] - peak) - lse


@_jit
def softmax_backward(g, y, out, zero):
    """out = y * (g - sum(g * y row))."""
    rows, n = g.shape
    for r in range(rows):
        total = row_dot(g, r, y, r, zero)
        for j in range(n):
            out[r, j] = y[r, j] * (g[r, j] - total)


@_jit
def log_softmax_backward(g, out, zero):
    """out = g - out * sum(g row), out = exp(y) on entry."""
    rows, n = g.shape
    for r in range(rows):
        total = row_sum(g, r, zero)
        for j in range(n):
            out[r, j] = g[r, j] - out[r, j] * total


@_jit
def layer_norm(x, weight, bias, has_weight, has_bias, eps, out, mean, rstd, count, one):
    """Per row: mean, rstd = 1 / sqrt(var + eps) (var the mean square of x - mean), and
    out = (x - mean) * rstd, times weight and plus bias when given, in that order. count is n
    in the arrays' dtype; weight and bias are (n,) (any, when not given)."""
    rows, n = x.shape
    zero = one - one
    for r in range(rows):
        mu = row_sum(x, r, zero) / count
        for j in range(n):  # out holds x - mean until the last pass
            out[r, j] = x[r, j] - mu
        inv = one / math.sqrt(row_dot(out, r, out, r, zero) / count + eps)
        mean[r] = mu
        rstd[r] = inv
        if has_weight and has_bias:
            for j in range(n):
                out[r, j] = out[r, j] * inv * weight[j] + bias[j]
        elif has_weight:
            for j in range(n):
                out[r, j] = out[r, j] * inv * weight[j]
        elif has_bias:
            for j in range(n):
                out[r, j] = out[r, j] * inv + bias[j]
        else:
            for j in range(n):
                out[r, j] = out[r, j] * inv


@_jit
def layer_norm_backward(g, x, mean, rstd, weight, has_weight, out, scaled, grad_weight, grad_bias, count):
    """Per row, with xhat = (x - mean) * rstd and gw = g * weight (g itself without a weight):
    out = ((gw - mean(gw)) - xhat * mean(gw * xhat)) * rstd. With a weight, also grad_weight =
    sum of g * xhat and grad_bias = sum of g, over the rows in order. out holds xhat until the
    row's last pass, and scaled (1, n) gw."""
    rows, n = g.shape
    zero = count - count
    top = rows - rows   # scaled's one row, 0 as a variable: a literal would compile row_sum and row_dot again
    if has_weight:
        grad_weight[:] = zero
        grad_bias[:] = zero
    for r in range(rows):
        mu, inv = mean[r], rstd[r]
        for j in range(n):
            out[r, j] = (x[r, j] - mu) * inv
        if has_weight:
            for j in range(n):
                v = g[r, j]
                grad_weight[j] += v * out[r, j]
                grad_bias[j] += v
                scaled[0, j] = v * weight[j]
            mean_gw = row_sum(scaled, top, zero) / count
            mean_gw_xhat = row_dot(scaled, top, out, r, zero) / count
            for j in range(n):
                out[r, j] = ((scaled[0, j] - mean_gw) - out[r, j] * mean_gw_xhat) * inv
        else:
            mean_gw = row_sum(g, r, zero) / count
            mean_gw_xhat = row_dot(g, r, out, r, zero) / count
            for j in range(n):
                out[r, j] = ((g[r, j] - mean_gw) - out[r, j] * mean_gw_xhat) * inv
