"""One LSTM layer in one direction over a whole sequence, as one op (PyTorch's mkldnn_rnn_layer,
node ``MkldnnRnnLayerBackward0``), and its backward as one op.

``lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse=False)``, x (L, N, H_in), h0 and c0 (N, H),
returns (output (L, N, H), h_n, c_n, workspace). The forward projects the whole sequence with one
matmul, then steps through time (the reverse direction from the last step to the first): per step
one ``h @ w_hh^T`` matmul, one NumPy tanh over the gate block (sigmoid(x) = tanh(x/2)/2 + 1/2, the
halving folded exactly into halved copies of the weights) and a Numba loop for the
rest of the gate arithmetic (staticgrad.ops.rnn_loops). The flat workspace keeps, per step, the
activated gates, the cell and tanh(cell): what backpropagation through time reads.

The backward steps back through time with one matmul per step, then forms the weight gradients
over the whole sequence at once: dW_ih, dW_hh and dx are one matmul each, the bias gradient one sum.
Under create_graph the backward is made of table ops instead (staticgrad.ops.rnn_layer_grad), so
the layer's gradients can be differentiated again, as PyTorch's float32 node allows.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.rnn_layer_grad import lstm_layer_differentiable_backward

# Activated gates (4H), cell (H) and tanh(cell) (H) per step and batch row.
WORKSPACE_WIDTH = 6

_LOOPS = None


def _loops():
    """staticgrad.ops.rnn_loops, imported on first use (it loads Numba)."""
    global _LOOPS
    if _LOOPS is None:
        from staticgrad.ops import rnn_loops  # here, not at the top: it loads Numba

        _LOOPS = rnn_loops
    return _LOOPS


def _gate_scale(hidden: int, dtype) -> np.ndarray:
    """1/2 for the sigmoid gates (i, f, o), 1 for the tanh gate (g): tanh of the scaled
    pre-activation gives both. Multiplying by 1/2 is exact, so it may move into any operand."""
    scale = np.full(4 * hidden, 0.5, dtype=dtype)
    scale[2 * hidden:3 * hidden] = 1
    return scale


def _views(workspace: np.ndarray, steps: int, batch: int, hidden: int):
    """(gates (L, N, 4H), cells (L, N, H), tanh of cells (L, N, H)) inside the flat workspace."""
    block = steps * batch * hidden
    gates = workspace[:4 * block].reshape(steps, batch, 4 * hidden)
    cells = workspace[4 * block:5 * block].reshape(steps, batch, hidden)
    tanh_cells = workspace[5 * block:].reshape(steps, batch, hidden)
    return gates, cells, tanh_cells


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array``, for the loops' inputs they only read: Numba compiles a loop
    once per mix of read-only and writable arguments, and a replay's constants (a zero initial
    state) are read-only, so the loops always get read-only views and compile once."""
    view = array.view()
    view.flags.writeable = False
    return view


def _order(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


def lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, out=None, reverse=False):
    """(output, h_n, c_n, workspace) of one LSTM layer and direction over the (L, N, H_in) sequence."""
    loops = _loops()
    steps, batch, _ = x.shape
    hidden = w_hh.shape[1]
    dtype = x.dtype
    half = dtype.type(0.5)
    scale = _gate_scale(hidden, dtype)
    # Halved copies of the transposed weights (exact), C-contiguous: the layout BLAS runs fastest.
    w_ih_t = np.multiply(w_ih.T, scale, order="C")
    w_hh_t = np.multiply(w_hh.T, scale, order="C")
    output = np.empty((steps, batch, hidden), dtype)
    workspace = np.empty(WORKSPACE_WIDTH * steps * batch * hidden, dtype)
    gates, cells, tanh_cells = _views(workspace, steps, batch, hidden)
    # The whole sequence's input projection goes straight into the gate blocks (fresh memory costs
    # page faults: the op allocates no scratch of the sequence's size).
    projected = gates.reshape(steps * batch, 4 * hidden)
    np.matmul(x.reshape(steps * batch, x.shape[2]), w_ih_t, out=projected)
    projected += (b_ih + b_hh) * scale
    recurrent = np.empty((batch, 4 * hidden), dtype)
    h, c = np.ascontiguousarray(h0), _read_only(np.ascontiguousarray(c0))
    read_cells = _read_only(cells)
    for t in _order(steps, reverse):
        act = gates[t]
        np.matmul(h, w_hh_t, out=recurrent)
        np.add(act, recurrent, out=act)
        np.tanh(act, out=act)
        loops.gates_forward(act, c, cells[t], half)
        np.tanh(cells[t], out=tanh_cells[t])
        np.multiply(act[:, 3 * hidden:], tanh_cells[t], out=output[t])
        h, c = output[t], read_cells[t]
    return output, h.copy(), c.copy(), workspace


def lstm_layer_backward(x, w_ih, w_hh, h0, c0, output, workspace, *grads, out=None, reverse=False,
                        grads_given=(True, True, True), needs=(True,) * 7):
    """Gradients of lstm_layer's inputs (x, w_ih, w_hh, b_ih, b_hh, h0, c0) that ``needs`` asks
    for, in that order, from the gradients of (output, h_n, c_n) that ``grads_given`` says are
    passed (the others are zero). One gradient comes back as an array (written into ``out`` when
    given), several as a tuple."""
    loops = _loops()
    steps, batch, _ = x.shape
    hidden = w_hh.shape[1]
    dtype = x.dtype
    supplied = iter(grads)
    grad_output, grad_h, grad_c = (next(supplied) if given else None for given in grads_given)
    dh = np.array(grad_h, dtype, order="C") if grad_h is not None else np.zeros((batch, hidden), dtype)
    dc = np.array(grad_c, dtype, order="C") if grad_c is not None else np.zeros((batch, hidden), dtype)
    grad_output = (np.ascontiguousarray(grad_output) if grad_output is not None
                   else np.zeros((steps, batch, hidden), dtype))
    gates, cells, tanh_cells = _views(workspace, steps, batch, hidden)
    read_c0, read_cells, read_gates, read_tanh_cells, read_grad_output, read_dh = (
        _read_only(a) for a in (np.ascontiguousarray(c0), cells, gates, tanh_cells, grad_output, dh))
    dgates = np.empty((steps, batch, 4 * hidden), dtype)
    one = dtype.type(1)
    order = _order(steps, reverse)
    first = order[0]
    for k in range(steps - 1, -1, -1):
        t = order[k]
        c_prev = read_c0 if t == first else read_cells[order[k - 1]]
        loops.gates_backward(read_grad_output[t], read_dh, dc, read_gates[t], c_prev, read_tanh_cells[t], dgates[t],
                             one)
        if k or needs[5]:  # after the first step, dh is h0's gradient
            np.matmul(dgates[t], w_hh, out=dh)
    flat = dgates.reshape(steps * batch, 4 * hidden)
    results = []
    if needs[0]:
        results.append(np.matmul(flat, w_ih).reshape(x.shape))
    if needs[1]:
        results.append(np.matmul(flat.T, x.reshape(steps * batch, x.shape[2])))
    if needs[2]:  # the steps after the first read h from output, the first reads h0
        later, previous = (dgates[:-1], output[1:]) if reverse else (dgates[1:], output[:-1])
        grad_w_hh = np.matmul(later.reshape(-1, 4 * hidden).T, previous.reshape(-1, hidden))
        grad_w_hh += np.matmul(dgates[first].T, h0)
        results.append(grad_w_hh)
    if needs[3] or needs[4]:
        grad_bias = flat.sum(0)
        results += [grad_bias] * needs[3] + [grad_bias.copy()] * needs[4]
    results += [dh] * needs[5] + [dc] * needs[6]
    if len(results) == 1:
        if out is None:
            return results[0]
        np.copyto(out, results[0])
        return out
    return tuple(results)


def _lstm_layer_grad(F, g, s, at, need):
    """The backward of lstm_layer: one lstm_layer_backward op, its results put back in place; under
    create_graph, table ops that can be differentiated again (staticgrad.ops.rnn_layer_grad)."""
    if F.recording:
        return lstm_layer_differentiable_backward(F, g, s, at, need)
    given = tuple(grad is not None for grad in g[:3])
    result = F.lstm_layer_backward(s["input"], s["weight0"], s["weight1"], s["hx_"], s["cx_"], s["result0"],
                                   s["result3"], *(grad for grad in g[:3] if grad is not None),
                                   reverse=at["reverse"], grads_given=given, needs=tuple(need))
    supplied = iter(result if type(result) is tuple else (result,))
    return tuple(next(supplied) if n else None for n in need)


def _no_double_backward(F, g, s, at, need):
    raise RuntimeError(
        "staticgrad's lstm_layer_backward op is not differentiable: a backward with create_graph=True "
        "computes the LSTM layer's gradient with differentiable ops instead (staticgrad.ops.rnn_layer_grad), "
        "so this op should not have been recorded with a graph.")


register(OpDef("lstm_layer", lstm_layer, "other", "MkldnnRnnLayerBackward0", _lstm_layer_grad,
               (Save("input", 0), Save("weight0", 1), Save("weight1", 2), Save("weight2", 3), Save("weight3", 4),
                Save("hx_", 5), Save("cx_", 6),
                Save("result0", "result:0"), Save("result3", "result:3"),
                Save("reverse", "attr:reverse", freed=False)),
               "same"))
register(OpDef("lstm_layer_backward", lstm_layer_backward, "other", "MkldnnRnnLayerBackwardBackward0",
               _no_double_backward, (), "same"))
