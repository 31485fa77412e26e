"""The LSTM layer op's gradient as table ops, for a backward run with ``create_graph=True``: the
layer's steps are recomputed from its saved inputs (the arithmetic of nn.LSTMCell, gates i, f, g,
o) and backpropagated through time op by op, so the gradients it returns are differentiable again
(a gradient penalty's second derivatives). The plain backward keeps the one fast
``lstm_layer_backward`` op; this path runs only when the engine records a graph, as PyTorch switches
to its differentiable formula then."""

from __future__ import annotations


def _gates(F, gates, hidden: int):
    """(i, f, g, o) activated from the (N, 4H) pre-activations."""
    parts = [F.slice(gates, dim=1, start=k * hidden, end=(k + 1) * hidden, step=1) for k in range(4)]
    i, f, g, o = parts
    return F.sigmoid(i), F.sigmoid(f), F.tanh(g), F.sigmoid(o)


def _recompute(F, x, w_ih, w_hh, b_ih, b_hh, h0, c0, order, hidden: int) -> dict:
    """Each step's activated gates, previous cell, tanh of the new cell and previous hidden state,
    recomputed with table ops (a graph back to the layer's inputs)."""
    steps, batch, features = x.shape
    projected = F.mm(F.view(x, shape=(steps * batch, features)), F.t(w_ih)) + (b_ih + b_hh)
    projected = F.view(projected, shape=(steps, batch, 4 * hidden))
    w_hh_t = F.t(w_hh)
    h, c = h0, c0
    cache = {}
    for t in order:
        i, f, g, o = _gates(F, F.select(projected, dim=0, index=t) + F.mm(h, w_hh_t), hidden)
        cell = f * c + i * g
        tanh_cell = F.tanh(cell)
        cache[t] = (i, f, g, o, c, tanh_cell, h)
        h, c = o * tanh_cell, cell
    return cache


def _one_minus(F, t):
    return F.rsub_scalar(t, other=1.0)


def _add(a, b):
    return b if a is None else a if b is None else a + b


def lstm_layer_differentiable_backward(F, grads, s, at, need):
    """Gradients of (x, w_ih, w_hh, b_ih, b_hh, h0, c0) that ``need`` asks for, from the gradients
    of (output, h_n, c_n) (None: zero), every one a differentiable function of the inputs and of
    the incoming gradients."""
    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = (s[k] for k in ("input", "weight0", "weight1", "weight2", "weight3",
                                                          "hx_", "cx_"))
    grad_output, grad_h, grad_c = grads[:3]
    steps, batch, features = x.shape
    hidden = w_hh.shape[1]
    order = range(steps - 1, -1, -1) if at["reverse"] else range(steps)
    cache = _recompute(F, x, w_ih, w_hh, b_ih, b_hh, h0, c0, order, hidden)
    dh, dc = grad_h, grad_c
    dgates = {}
    for t in reversed(order):
        i, f, g, o, c_prev, tanh_cell, _ = cache[t]
        dh_t = _add(dh, F.select(grad_output, dim=0, index=t) if grad_output is not None else None)
        if dh_t is None:
            dh_t = F.zeros_like(h0)
        dc_t = _add(dc, dh_t * o * _one_minus(F, tanh_cell * tanh_cell))
        parts = (dc_t * g * i * _one_minus(F, i), dc_t * c_prev * f * _one_minus(F, f),
                 dc_t * i * _one_minus(F, g * g), dh_t * tanh_cell * o * _one_minus(F, o))
        dgates[t] = F.cat(*parts, dim=1, sizes=(hidden,) * 4)
        dc = dc_t * f
        dh = F.mm(dgates[t], w_hh)
    flat = F.view(F.stack(*(dgates[t] for t in range(steps)), dim=0), shape=(steps * batch, 4 * hidden))
    results = [None] * 7
    if need[0]:
        results[0] = F.view(F.mm(flat, w_ih), shape=tuple(x.shape))
    if need[1]:
        results[1] = F.mm(F.t(flat), F.view(x, shape=(steps * batch, features)))
    if need[2]:
        previous = F.stack(*(cache[t][6] for t in range(steps)), dim=0)
        results[2] = F.mm(F.t(flat), F.view(previous, shape=(steps * batch, hidden)))
    if need[3] or need[4]:
        grad_bias = F.sum(flat, dim=(0,), keepdim=False)
        results[3] = grad_bias if need[3] else None
        results[4] = (F.clone(grad_bias) if need[3] else grad_bias) if need[4] else None
    if need[5]:
        results[5] = dh
    if need[6]:
        results[6] = dc if dc is not None else F.zeros_like(c0)
    return tuple(results)
