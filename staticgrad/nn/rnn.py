"""LSTMCell and LSTM (stacked, bidirectional, projections; dropout between layers; padded or
packed input) as PyTorch defines them.

An LSTMCell step is an ordinary chain of staticgrad ops (linear, chunk, sigmoid, tanh, mul, add).
An LSTM runs each layer and direction over the whole sequence as one op, ``lstm_layer``
(staticgrad.ops.rnn_layer), one autograd node each, as PyTorch's mkldnn path does
(``MkldnnRnnLayerBackward0``): the time loop runs inside the op, not as hundreds of dispatched ops.
An LSTM with projections or on a PackedSequence steps in ordinary ops (staticgrad.nn.recurrent_loop),
as PyTorch's native code does for those.
"""

from __future__ import annotations

import math
import numbers
import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import empty, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad.nn import functional as F
from staticgrad.nn import init
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.recurrent_loop import run_layers
from staticgrad.nn.utils.rnn import PackedSequence
from staticgrad.ops import OPS


def _lstm_update(gates, c):
    """(h, c) of the next step from the summed gate pre-activations, in PyTorch's order (i, f, g, o)."""
    i, f, g, o = fn.chunk(gates, 4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell``: one LSTM step on a batch, ``hx = (h, c)``; returns ``(h, c)``."""
    h, c = hx
    return _lstm_update(F.linear(h, w_hh, b_hh) + F.linear(input, w_ih, b_ih), c)


def _uniform_init(module) -> None:
    """PyTorch's RNN init: every weight and bias uniform in +-1/sqrt(hidden_size)."""
    bound = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)


class LSTMCell(Module):
    """One LSTM step: ``forward(input, (h, c))`` -> ``(h, c)``, for (N, H_in) or unbatched (H_in,) input."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty(4 * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(4 * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(4 * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(empty(4 * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_init(self)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            if hx is not None:
                hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        if hx is None:
            state = zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
            hx = (state, state)
        h, c = lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RecurrentLayers(Module):
    """What the stacked recurrent modules (LSTM, GRU, RNN) share: PyTorch's argument checks, per-layer
    weights named as PyTorch's (weight_ih_l0, bias_hh_l1_reverse...), uniform initialisation."""

    @staticmethod
    def _check_sizes(input_size: int, hidden_size: int, num_layers: int, dropout) -> None:
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")

    def _add_layer_weights(self, suffix: str, rows: int, layer_input: int, hidden_size: int, bias: bool,
                           dtype) -> None:
        """One layer's (one direction's) parameters, uninitialised; ``rows`` = gates x hidden_size."""
        shapes = {f"weight_ih{suffix}": (rows, layer_input), f"weight_hh{suffix}": (rows, hidden_size)}
        if bias:
            shapes.update({f"bias_ih{suffix}": (rows,), f"bias_hh{suffix}": (rows,)})
        for name, shape in shapes.items():
            setattr(self, name, Parameter(empty(*shape, dtype=dtype)))
        self._all_weights.append(list(shapes))

    def reset_parameters(self) -> None:
        _uniform_init(self)

    def _layer_weights(self, index: int) -> dict:
        """One layer and direction's weights by role: w_ih, w_hh, b_ih, b_hh (None without bias), w_hr
        (None without projections)."""
        weights = list(self.all_weights[index])
        w_ih, w_hh = weights[:2]
        b_ih, b_hh = weights[2:4] if self.bias else (None, None)
        w_hr = weights[-1] if getattr(self, "proj_size", 0) else None
        return {"w_ih": w_ih, "w_hh": w_hh, "b_ih": b_ih, "b_hh": b_hh, "w_hr": w_hr}

    def _forward_packed(self, packed, hx):
        """A PackedSequence through every layer: (PackedSequence of outputs, final hidden state(s)),
        each sequence's final state taken at its own last step; hx and the result in the batch's order."""
        data, batch_sizes = packed.data, packed.batch_sizes.tolist()
        self._check_input(data)
        sorted_indices, unsorted_indices = packed.sorted_indices, packed.unsorted_indices
        if hx is not None and sorted_indices is not None:
            hx = self._permute_hidden(hx, sorted_indices)
        initial = self._initial_states(hx, batch_sizes[0], data.dtype)
        self._check_packed_rows(data, batch_sizes)
        output, finals = run_layers(self, data, batch_sizes, initial, self._step_of)
        hidden = self._final_hidden(finals)
        if unsorted_indices is not None:
            hidden = self._permute_hidden(hidden, unsorted_indices)
        return PackedSequence(output, packed.batch_sizes, sorted_indices, unsorted_indices), hidden

    # PyTorch's LSTM reads a packed batch in which every step holds the whole batch as one (steps,
    # batch, *) view of its data; otherwise (and GRU, RNN always) it takes each step's rows in turn.
    _packed_whole_batch_view = False

    def _check_packed_rows(self, data, batch_sizes: list) -> None:
        """PyTorch's error where the data holds fewer rows than the batch sizes add up to (packed
        with lengths beyond the padded input's steps, or made by hand); more rows are left unread,
        except by the whole-batch view."""
        rows = data.shape[0]
        if self._packed_whole_batch_view and all(size == batch_sizes[0] for size in batch_sizes):
            shape = [len(batch_sizes), batch_sizes[0]] + list(data.shape[1:])
            if math.prod(shape) != data.numel():
                raise RuntimeError(f"shape '{shape}' is invalid for input of size {data.numel()}")
            return
        offset = 0
        for size in batch_sizes:
            if offset + size > rows:
                raise RuntimeError(f"start ({offset}) + length ({size}) exceeds dimension size ({rows}).")
            offset += size

    @staticmethod
    def _permute_hidden(hx, permutation):
        if isinstance(hx, tuple):
            return tuple(h.index_select(1, permutation) for h in hx)
        return hx.index_select(1, permutation)

    def flatten_parameters(self) -> None:
        """A no-op: PyTorch packs the weights for cuDNN here; staticgrad keeps them as they are."""

    @property
    def all_weights(self) -> list:
        """Per layer: [weight_ih, weight_hh] and, with bias, [bias_ih, bias_hh]."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]


def lstm_layer(input, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse: bool = False):
    """One LSTM layer in one direction over the (L, N, H_in) sequence from (h0, c0), each (N, H):
    ``(output (L, N, H), h_n, c_n)``, under one ``MkldnnRnnLayerBackward0`` node."""
    output, h_n, c_n, _workspace = dispatch(LSTM_LAYER, (input, w_ih, w_hh, b_ih, b_hh, h0, c0),
                                            {"reverse": reverse})
    return output, h_n, c_n


LSTM_LAYER = OPS["lstm_layer"]


class LSTM(RecurrentLayers):
    """A stack of LSTM layers over a sequence, one or both directions: ``forward(input, (h_0, c_0))``
    -> ``(output, (h_n, c_n))``, input (L, N, H_in), (N, L, H_in) if batch_first, or unbatched (L, H_in);
    h_0, c_0 and h_n, c_n are (num_layers * num_directions, N, H); a bidirectional output concatenates
    both directions on the feature dim."""

    _packed_whole_batch_view = True

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        self._check_sizes(input_size, hidden_size, num_layers, dropout)
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", UserWarning, stacklevel=2)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bool(bidirectional), int(proj_size)
        directions = 2 if bidirectional else 1
        real_hidden = proj_size or hidden_size
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                self._add_layer_weights(suffix, 4 * hidden_size, layer_input, real_hidden, bias, dtype)
                if proj_size:
                    name = f"weight_hr{suffix}"
                    setattr(self, name, Parameter(empty(proj_size, hidden_size, dtype=dtype)))
                    self._all_weights[-1].append(name)
        self.reset_parameters()

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if hx is not None:
            rank = 3 if batched else 2
            if hx[0].dim() != rank or hx[1].dim() != rank:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {rank}-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
        if not batched:
            input = input.unsqueeze(batch_dim)
            if hx is not None:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        if self.batch_first:
            input = input.transpose(0, 1)
        self._check_input(input)
        directions = 2 if self.bidirectional else 1
        if self.proj_size:
            initial = self._initial_states(hx, input.shape[1], input.dtype)
            output, finals = run_layers(self, input, None, initial, self._step_of)
            h_n, c_n = self._final_hidden(finals)
        else:
            hx = self._check_hidden(hx, input.shape[1], input.dtype)
            output, h_n, c_n = self._layers(input.contiguous(), hx, directions)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            return output.squeeze(batch_dim), (h_n.squeeze(1), c_n.squeeze(1))
        return output, (h_n, c_n)

    def _check_hidden(self, hx, batch: int, dtype) -> tuple:
        """(h_0, c_0), zeros when not given, checked against PyTorch's expected sizes."""
        layers = self.num_layers * (2 if self.bidirectional else 1)
        expected = ((layers, batch, self.proj_size or self.hidden_size), (layers, batch, self.hidden_size))
        if hx is None:
            return tuple(zeros(*shape, dtype=dtype) for shape in expected)
        for i, (value, shape) in enumerate(zip(hx, expected)):
            if tuple(value.shape) != shape:
                raise RuntimeError(f"Expected hidden[{i}] size {shape}, got {list(value.shape)}")
        return hx

    def _initial_states(self, hx, batch: int, dtype) -> list:
        h_0, c_0 = self._check_hidden(hx, batch, dtype)
        return list(zip(h_0.unbind(0), c_0.unbind(0)))

    def _step_of(self, index: int):
        """One LSTM step of layer-direction ``index`` on input gates already projected: (h, c) -> (h, c)."""
        w = self._layer_weights(index)

        def step(input_gates, state):
            h, c = _lstm_update(F.linear(state[0], w["w_hh"], w["b_hh"]) + input_gates, state[1])
            return (h if w["w_hr"] is None else F.linear(h, w["w_hr"])), c
        return step

    @staticmethod
    def _final_hidden(finals: list) -> tuple:
        return fn.stack([h for h, _ in finals]), fn.stack([c for _, c in finals])

    def _check_input(self, input) -> None:
        weight_dtype = self.weight_ih_l0.dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                             f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _layers(self, input, hx, directions: int):
        """Every layer and direction over the (L, N, H_in) sequence as one lstm_layer op (a layer
        without bias adds zeros, as PyTorch's does); both directions read the same input, the
        reverse one from the last step; dropout (training only) on every layer's output but the last."""
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout and self.training:
                input = F.dropout(input, self.dropout, True)
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                weights = self.all_weights[index]
                if not self.bias:
                    no_bias = zeros(weights[0].shape[0], dtype=input.dtype)
                    weights = weights + [no_bias, no_bias]
                output, h, c = lstm_layer(input, *weights, hx[0][index], hx[1][index], reverse=direction == 1)
                outputs.append(output)
                h_n.append(h)
                c_n.append(c)
            input = outputs[0] if directions == 1 else fn.cat(outputs, 2)
        return input, fn.stack(h_n), fn.stack(c_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
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
