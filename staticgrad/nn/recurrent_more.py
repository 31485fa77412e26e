"""GRUCell, GRU, RNNCell and RNN (tanh or relu) as PyTorch defines them: same parameter names and
gate order (r, z, n), stacked layers, bidirectional, dropout between layers, optional h0.

Each step is an ordinary chain of staticgrad ops in PyTorch's order (a GRU step is
``(h - n) * z + n``), unrolled in Python as the LSTM is, so autograd and the tracer see nothing new.
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import empty, zeros
from staticgrad.nn import functional as F
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.rnn import RecurrentLayers, _uniform_init
from staticgrad.nn.utils.rnn import PackedSequence


def gru_cell(input, h, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell``: one GRU step on a batch; returns the next hidden state."""
    return _gru_update(F.linear(input, w_ih, b_ih), h, w_hh, b_hh)


def _gru_update(input_gates, h, w_hh, b_hh):
    i_r, i_z, i_n = fn.chunk(input_gates, 3, 1)
    h_r, h_z, h_n = fn.chunk(F.linear(h, w_hh, b_hh), 3, 1)
    reset = (h_r + i_r).sigmoid()
    update = (h_z + i_z).sigmoid()
    new = (i_n + h_n * reset).tanh()
    return (h - new) * update + new


def rnn_cell(input, h, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity: str = "tanh"):
    """``torch.rnn_tanh_cell`` / ``rnn_relu_cell``: act(h W_hh^T + b_hh + x W_ih^T + b_ih)."""
    return _rnn_update(F.linear(input, w_ih, b_ih), h, w_hh, b_hh, nonlinearity)


def _rnn_update(input_part, h, w_hh, b_hh, nonlinearity):
    pre = F.linear(h, w_hh, b_hh) + input_part
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def _check_nonlinearity(nonlinearity: str) -> None:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")


# ---- cells ---------------------------------------------------------------------------------------

class _Cell(Module):
    gates = 1
    kind = ""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty(self.gates * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(self.gates * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(self.gates * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(empty(self.gates * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_init(self)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"{self.kind}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{self.kind}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            hx = hx.unsqueeze(0) if hx is not None else None
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        if hx is None:
            hx = zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
        h = self._step(input, hx)
        return h if batched else h.squeeze(0)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class GRUCell(_Cell):
    """One GRU step: ``forward(input, h)`` -> h, for (N, H_in) or unbatched (H_in,) input."""

    gates, kind = 3, "GRUCell"

    def _step(self, input, h):
        return gru_cell(input, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class RNNCell(_Cell):
    """One Elman RNN step, tanh or relu: ``forward(input, h)`` -> h."""

    gates, kind = 1, "RNNCell"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def _step(self, input, h):
        return rnn_cell(input, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity)


# ---- stacked sequence layers ----------------------------------------------------------------------

class _StackedRNN(RecurrentLayers):
    gates = 1
    kind = ""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__()
        self._check_sizes(input_size, hidden_size, num_layers, dropout)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                self._add_layer_weights(suffix, self.gates * hidden_size, layer_input, hidden_size, bias, dtype)
        self.reset_parameters()

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"{self.kind}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if hx is not None:
            rank = 3 if batched else 2
            if hx.dim() != rank:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx should also be {rank}-D but got {hx.dim()}-D tensor")
        if not batched:
            input = input.unsqueeze(batch_dim)
            hx = hx.unsqueeze(1) if hx is not None else None
        if self.batch_first:
            input = input.transpose(0, 1)
        self._check_input(input)
        directions = 2 if self.bidirectional else 1
        expected = (self.num_layers * directions, input.shape[1], self.hidden_size)
        if hx is None:
            hx = zeros(*expected, dtype=input.dtype)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.shape)}")
        output, h_n = self._layers(input, hx, directions)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            return output.squeeze(batch_dim), h_n.squeeze(1)
        return output, h_n

    def _initial_states(self, hx, batch: int, dtype) -> list:
        expected = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        if hx is None:
            hx = zeros(*expected, dtype=dtype)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.shape)}")
        return [(h,) for h in hx.unbind(0)]

    def _step_of(self, index: int):
        """One step of layer-direction ``index`` on its projected input: (h,) -> (h,)."""
        w = self._layer_weights(index)
        return lambda input_part, state: (self._update(input_part, state[0], w["w_hh"], w["b_hh"]),)

    @staticmethod
    def _final_hidden(finals: list):
        return fn.stack([h for (h,) in finals])

    def _check_input(self, input) -> None:
        weight_dtype = self.weight_ih_l0.dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                             f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _layers(self, input, hx, directions: int):
        """Every layer over the (L, N, H_in) sequence: each direction projects its whole input at once
        (as PyTorch does), then steps through time; dropout (training only) between layers."""
        weights, states, h_n = self.all_weights, hx.unbind(0), []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh = weights[index] if self.bias else weights[index] + [None, None]
                h, steps = states[index], []
                projected = F.linear(input, w_ih, b_ih).unbind(0)
                for step_input in (reversed(projected) if direction else projected):
                    h = self._update(step_input, h, w_hh, b_hh)
                    steps.append(h)
                if direction:
                    steps.reverse()
                outputs.append(fn.stack(steps))
                h_n.append(h)
            input = outputs[0] if directions == 1 else fn.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                input = F.dropout(input, self.dropout, True)
        return input, fn.stack(h_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class GRU(_StackedRNN):
    """A stack of GRU layers: ``forward(input, h_0)`` -> ``(output, h_n)``."""

    gates, kind = 3, "GRU"

    def _update(self, input_gates, h, w_hh, b_hh):
        return _gru_update(input_gates, h, w_hh, b_hh)


class RNN(_StackedRNN):
    """A stack of Elman RNN layers (tanh or relu): ``forward(input, h_0)`` -> ``(output, h_n)``."""

    gates, kind = 1, "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype)
        self.nonlinearity = nonlinearity

    def _update(self, input_part, h, w_hh, b_hh):
        return _rnn_update(input_part, h, w_hh, b_hh, self.nonlinearity)
