"""Numba loops for what NumPy has no fast loop for: erf (GELU), max pooling, ReLU's backward.

The op forwards call these (eager dispatch and replay alike), so eager and replay compute the
same numbers. Each loop performs, per element, exactly the IEEE operations written in it: no
fastmath, so LLVM neither reassociates nor contracts into FMAs, and its vector body and scalar
remainder agree bit for bit. Arrays come in C-contiguous, flat or as (planes, H, W).

Loaded on an op's first call, not with staticgrad (loading Numba takes about half a second).
Compiled code is cached next to this file (``cache=True``); where Numba finds no writable cache
directory, the loops compile in memory in each process.
"""

from __future__ import annotations

import math

import numba
import numpy as np


def _jit(function):
    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(function)
    except RuntimeError:  # "no locator available": no writable cache directory
        return numba.njit(nogil=True, error_model="numpy")(function)


# ---- erf ----------------------------------------------------------------------------------------
#
# erf(x) = x P(u) / Q(u), u = x^2 / 16, |x| clamped to 4, evaluated in float64: a rational
# minimax fit to erf(x)/x on [0, 4] (Lawson-weighted least squares; relative error < 9.4e-10),
# made for float32 results: beyond 4, erf rounds to +-1 in float32. Rounded to float32 it equals
# the correctly rounded erf in about 99% of float32 inputs and is one ulp off in the rest (the
# test suite checks a dense sample against libm). It vectorises; libm's erf (math.erf) does not
# and costs ~10 ns an element. float64 keeps libm's erf.

_P0, _P1, _P2, _P3, _P4, _P5, _P6 = (
    1.1283791681376774, 2.6703778882281433, 13.039916963325176, 12.106645067770893,
    20.03563953314075, -0.30486317920117323, -0.7524242678335699)
_Q1, _Q2, _Q3, _Q4, _Q5, _Q6 = (
    7.699894737195804, 27.02236298973134, 55.25793664523762, 68.14147617202374,
    42.97973328305507, -10.406715999562437)


@_jit
def erf_float32(x):
    """erf of a float32 value, as float32 (NaN stays NaN, +-inf gives +-1)."""
    c = np.float64(x)
    c = 4.0 if c > 4.0 else c  # comparisons, not min/max: NaN must pass through
    c = -4.0 if c < -4.0 else c
    u = c * c * 0.0625
    p = (((((_P6 * u + _P5) * u + _P4) * u + _P3) * u + _P2) * u + _P1) * u + _P0
    q = (((((_Q6 * u + _Q5) * u + _Q4) * u + _Q3) * u + _Q2) * u + _Q1) * u + 1.0
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
