"""Numba loops for the special functions NumPy lacks: lgamma, digamma, polygamma (Hurwitz zeta),
erfinv, ndtri, erfcx, log_ndtr and the modified Bessel functions i0, i1 (and their exp-scaled forms).

Each scalar function works in float64 from the textbook definitions (series, recurrences,
reflection formulas, Euler-Maclaurin summation, Newton steps on libm's erf/erfc); the array loops
compute every element in float64 and round once to the result dtype. Their values agree with
PyTorch's to a few float64 ulps (tests/test_special_ops.py says how close for each), and a float32
result is PyTorch's within one float32 ulp. Loaded on the first call of such an op (Numba's load
takes about half a second), as ``staticgrad.ops.loops`` is.
"""

from __future__ import annotations

import math

import numpy as np

from staticgrad.ops.numba_cache import njit_cached

INF = math.inf
NAN = math.nan
PI = math.pi
SQRT_PI = math.sqrt(math.pi)
SQRT2 = math.sqrt(2.0)
DIGAMMA_OF_TEN = 2.25175258906672110764  # psi(10), taken as it is (the recurrence below stops at 10)

# Bernoulli numbers B2, B4, ..., B24: the Euler-Maclaurin and asymptotic series below use them.
BERNOULLI = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6, -3617.0 / 510,
             43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730)


def _jit(function):
    """No fastmath (each loop performs the IEEE operations written in it); cached on disk through
    ops.numba_cache (where a cache directory is writable, else compiled in memory); without a C
    wrapper (the loops are called from Python and from each other, never from C)."""
    return njit_cached(function, nogil=True, error_model="numpy", no_cfunc_wrapper=True)


# ---- gamma family -----------------------------------------------------------------------------------

@_jit
def digamma(x):
    """psi(x): reflection below 0, the recurrence psi(x) = psi(x + 1) - 1/x up to 10, then the
    asymptotic series log x - 1/(2x) - sum B2k / (2k x^2k)."""
    if x == 0.0:
        return math.copysign(INF, -x)  # PyTorch: -inf at +0, +inf at -0
    if math.isnan(x) or x == -INF:
        return NAN
    if x == INF:
        return INF
    result = 0.0
    if x < 0.0:
        if x == math.floor(x):
            return NAN
        fraction = x - math.floor(x)
        if fraction > 0.5:
            fraction -= 1.0  # exact; tan has period pi, and pi * fraction stays accurate near the pole
        result = -PI / math.tan(PI * fraction)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    if x == 10.0:
        return result + DIGAMMA_OF_TEN
    tail = 0.0
    if x < 1e17:
        z = 1.0 / (x * x)
        power = z
        for k in range(7):
            tail += BERNOULLI[k] / (2 * (k + 1)) * power
            power *= z
    return result + math.log(x) - 0.5 / x - tail


@_jit
def _signed_power(base, exponent):
    """base ** -exponent for an integer exponent and a base of either sign."""
    magnitude = math.pow(abs(base), -exponent)
    if base < 0.0 and int(exponent) % 2 == 1:
        return -magnitude
    return magnitude


@_jit
def hurwitz_zeta(s, q):
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, s > 1: the first terms summed until q + k is
    large, then the Euler-Maclaurin tail with twelve Bernoulli terms. A q <= 0 needs an integer s
    (q^-s is real only then); at a non-positive integer q a term is infinite."""
    if math.isnan(s) or math.isnan(q):
        return NAN
    if s == 1.0:
        return INF
    if s < 1.0:
        return NAN
    if q <= 0.0:
        if q == math.floor(q):
            return INF
        if s != math.floor(s):
            return NAN
    if q == INF:
        return NAN  # as PyTorch's zeta: the sum's terms vanish but its tail is 0 * inf
    total = 0.0
    a = q
    threshold = 10.0 + s
    while a < threshold:
        total += _signed_power(a, s)
        a += 1.0
    total += math.pow(a, 1.0 - s) / (s - 1.0) + 0.5 * math.pow(a, -s)
    rising = s  # s (s + 1) ... (s + 2j - 2)
    factorial = 2.0  # (2j)!
    power = math.pow(a, -s - 1.0)  # a^(-s - 2j + 1)
    inverse_square = 1.0 / (a * a)
    for j in range(1, 13):
        term = BERNOULLI[j - 1] / factorial * rising * power
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        factorial *= (2 * j + 1) * (2 * j + 2)
        power *= inverse_square
    return total


@_jit
def polygamma(n, x):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x), digamma itself for n = 0."""
    if n == 0:
        return digamma(x)
    if n == 1 and (x == INF or x == -INF):
        return 0.0 if x > 0 else NAN  # PyTorch's trigamma at the infinities
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * hurwitz_zeta(n + 1.0, x)


@_jit
def lgamma(x):
    return math.lgamma(x)


# ---- the error function's inverses and relatives ----------------------------------------------------

@_jit
def _inverse_erfc(t):
    """x with erfc(x) = t, 0 < t <= 1: a start from the tail's leading behaviour, then Newton steps
    on erfc, whose relative error stays small however close t is to 0."""
    if t == 0.0:
        return INF
    if t == 1.0:
        return 0.0
    w = -math.log(t * SQRT_PI)
    x = math.sqrt(w) if w > 0.5 else 0.5 * t  # erfc(x) ~ exp(-x^2) / (x sqrt pi)
    x = max(x, 1e-3)
    for _ in range(100):
        slope = -2.0 / SQRT_PI * math.exp(-x * x)
        if slope == 0.0:
            break
        step = (math.erfc(x) - t) / slope
        x -= step
        if abs(step) <= 1e-16 * abs(x):
            break
    return x


@_jit
def erfinv(y):
    """x with erf(x) = y: Newton on erf near 0, on erfc beyond |y| = 1/2 (there 1 - |y| is exact)."""
    if math.isnan(y) or y < -1.0 or y > 1.0:
        return NAN
    if y == 1.0:
        return INF
    if y == -1.0:
        return -INF
    if y >= 0.5:
        return _inverse_erfc(1.0 - y)
    if y <= -0.5:
        return -_inverse_erfc(1.0 + y)
    x = y * SQRT_PI / 2.0
    for _ in range(100):
        step = (math.erf(x) - y) / (2.0 / SQRT_PI * math.exp(-x * x))
        x -= step
        if abs(step) <= 1e-17 * abs(x) or step == 0.0:
            break
    return x


@_jit
def ndtri(p):
    """x with Phi(x) = p, Phi the standard normal distribution: -sqrt 2 * inverse_erfc(2p)."""
    if math.isnan(p) or p < 0.0 or p > 1.0:
        return NAN
    if p == 0.0:
        return -INF
    if p == 1.0:
        return INF
    if p <= 0.5:
        return -SQRT2 * _inverse_erfc(2.0 * p)
    return SQRT2 * _inverse_erfc(2.0 * (1.0 - p))


@_jit
def _exact_square(x):
    """x * x as an unevaluated sum hi + lo (Dekker's split: every product exact)."""
    split = 134217729.0 * x  # 2^27 + 1
    high = split - (split - x)
    low = x - high
    square = x * x
    error = ((high * high - square) + 2.0 * high * low) + low * low
    return square, error


@_jit
def erfcx(x):
    """exp(x^2) erfc(x): the product with x^2 split exactly below 26, the asymptotic series
    1/(x sqrt pi) (1 - 1/(2x^2) + 3/(2x^2)^2 - ...) above (there erfc underflows)."""
    if math.isnan(x):
        return NAN
    if x < 26.0:
        if x < -26.7:
            return INF
        square, error = _exact_square(x)
        return math.exp(square) * (1.0 + error) * math.erfc(x)
    if x == INF:
        return 0.0
    z = 1.0 / (2.0 * x * x)
    total = 1.0
    term = 1.0
    for k in range(1, 20):
        term *= -(2 * k - 1) * z
        total += term
    return total / (x * SQRT_PI)


@_jit
def log_ndtr(x):
    """log Phi(x): log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1, log1p(-erfc(x / sqrt 2) / 2) above."""
    t = x / SQRT2
    if x < -1.0:
        return math.log(erfcx(-t) / 2.0) - t * t
    return math.log1p(-math.erfc(t) / 2.0)


# ---- modified Bessel functions of the first kind ----------------------------------------------------

@_jit
def bessel_i_scaled(order, x):
    """exp(-|x|) I_order(x) for order 0 or 1: the power series sum (x/2)^(2k+order) / (k! (k+order)!)
    below |x| = 30, Hankel's asymptotic series 1/sqrt(2 pi x) sum (-1)^k a_k / x^k above."""
    if math.isnan(x):
        return NAN
    ax = abs(x)
    if ax <= 30.0:
        quarter_square = 0.25 * ax * ax
        term = 1.0 if order == 0 else 0.5 * ax
        total = term
        k = 1
        while term > 1e-17 * total:
            term *= quarter_square / (k * (k + order))
            total += term
            k += 1
        result = total * math.exp(-ax)
    elif ax == INF:
        result = 0.0
    else:
        mu = 4.0 * order * order
        term = 1.0
        total = 1.0
        for k in range(1, 40):
            term *= -(mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
            total += term
            if abs(term) < 1e-17 * abs(total):
                break
        result = total / math.sqrt(2.0 * PI * ax)
    if order == 1 and x < 0.0:
        return -result
    return result


@_jit
def bessel_i(order, x):
    """I_order(x), order 0 or 1: the power series below 30, the scaled value times exp(|x|) above."""
    ax = abs(x)
    if ax <= 30.0 or math.isnan(x):
        if ax == 0.0:
            return 1.0 if order == 0 else 0.0
        quarter_square = 0.25 * ax * ax
        term = 1.0 if order == 0 else 0.5 * ax
        total = term
        k = 1
        while term > 1e-17 * total:
            term *= quarter_square / (k * (k + order))
            total += term
            k += 1
        if math.isnan(x):
            return NAN
        return -total if (order == 1 and x < 0.0) else total
    if ax == INF:
        return NAN  # as PyTorch's (its series meets inf * 0)
    # inf once exp(|x|) overflows (beyond 709.78), as PyTorch's, though I(x) is finite up to 713.9
    return bessel_i_scaled(order, x) * math.exp(ax)


# ---- the array loops ---------------------------------------------------------------------------------

@_jit
def unary(kind, x, out):
    """out[i] = f(x[i]) in float64, f picked by ``kind``; x and out flat (out of any float dtype)."""
    for i in range(x.size):
        v = np.float64(x[i])
        if kind == 0:
            r = lgamma(v)
        elif kind == 1:
            r = digamma(v)
        elif kind == 2:
            r = erfinv(v)
        elif kind == 3:
            r = ndtri(v)
        elif kind == 4:
            r = erfcx(v)
        elif kind == 5:
            r = log_ndtr(v)
        elif kind == 6:
            r = bessel_i(0, v)
        elif kind == 7:
            r = bessel_i(1, v)
        elif kind == 8:
            r = bessel_i_scaled(0, v)
        elif kind == 9:
            r = bessel_i_scaled(1, v)
        else:
            r = math.erfc(v)
        out[i] = r


@_jit
def polygamma_array(n, x, out):
    for i in range(x.size):
        out[i] = polygamma(n, np.float64(x[i]))


@_jit
def zeta_array(s, q, out):
    for i in range(s.size):
        out[i] = hurwitz_zeta(np.float64(s[i]), np.float64(q[i]))


# Which ``unary`` computes what.
UNARY_KINDS = {"lgamma": 0, "digamma": 1, "erfinv": 2, "ndtri": 3, "erfcx": 4, "log_ndtr": 5, "i0": 6,
               "special_i1": 7, "special_i0e": 8, "special_i1e": 9, "erfc": 10}
