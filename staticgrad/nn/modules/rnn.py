"""``torch.nn.modules.rnn``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.recurrent_more import GRU, RNN, GRUCell, RNNCell
from staticgrad.nn.rnn import LSTM, LSTMCell

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell"]
