"""Numba loops of the LSTM layer op (staticgrad.ops.rnn_layer): the gate arithmetic of one time
step, forward and backward, on (N, 4H) gate blocks in PyTorch's order (i, f, g, o).

The transcendentals stay out of these loops: NumPy's SIMD tanh runs several times faster than a
scalar libm call per element, so the forward applies ``np.tanh`` to the whole gate block first and
these loops do the multiplies and adds around it. No fastmath: each loop performs exactly the IEEE
operations written in it, and the op's forward and backward call these loops in eager and replay
alike, so both compute the same numbers.

Loaded on the op's first call, not with staticgrad (loading Numba takes about half a second).
"""

from __future__ import annotations

from staticgrad.ops.numba_cache import njit_cached


def _jit(function):
    """Compiled on first call, without a C wrapper (called from Python only; it costs compile time)."""
    return njit_cached(function, nogil=True, error_model="numpy", no_cfunc_wrapper=True)


@_jit
def gates_forward(act, c_prev, c, half):
    """``act`` holds tanh(x / 2) for the i, f, o gates and tanh(x) for g: turn the first into
    sigmoid(x) = tanh(x / 2) / 2 + 1/2 in place, and write the new cell c = f * c_prev + i * g.
    ``half`` is 0.5 in the arrays' dtype."""
    n, hidden = c.shape
    for b in range(n):
        for j in range(hidden):
            i = act[b, j] * half + half
            f = act[b, hidden + j] * half + half
            act[b, j] = i
            act[b, hidden + j] = f
            act[b, 3 * hidden + j] = act[b, 3 * hidden + j] * half + half
            c[b, j] = f * c_prev[b, j] + i * act[b, 2 * hidden + j]


@_jit
def gates_backward(grad_h, dh, dc, act, c_prev, tanh_c, dgates, one):
    """One step of backpropagation through time. The gradient reaching h is ``grad_h + dh`` (from
    the output and from the next step); ``dc`` holds the cell's gradient from the next step and
    leaves holding the gradient of c_prev. Writes the gate pre-activations' gradients into
    ``dgates`` (N, 4H). ``one`` is 1 in the arrays' dtype."""
    n, hidden = dc.shape
    for b in range(n):
        for j in range(hidden):
            i = act[b, j]
            f = act[b, hidden + j]
            g = act[b, 2 * hidden + j]
            o = act[b, 3 * hidden + j]
            t = tanh_c[b, j]
            d_h = grad_h[b, j] + dh[b, j]
            d_c = d_h * o * (one - t * t) + dc[b, j]
            dgates[b, j] = d_c * g * i * (one - i)
            dgates[b, hidden + j] = d_c * c_prev[b, j] * f * (one - f)
            dgates[b, 2 * hidden + j] = d_c * i * (one - g * g)
            dgates[b, 3 * hidden + j] = d_h * t * o * (one - o)
            dc[b, j] = d_c * f
