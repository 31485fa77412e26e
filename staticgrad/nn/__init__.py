"""staticgrad.nn: modules, parameters, functional layers and initialisers."""

from staticgrad.nn import functional, init
from staticgrad.nn.activation import GELU
from staticgrad.nn.conv import Conv2d, MaxPool2d
from staticgrad.nn.dropout import Dropout
from staticgrad.nn.layers import (
                                  Flatten,
                                  Identity,
                                  Linear,
                                  LogSoftmax,
                                  ModuleDict,
                                  ModuleList,
                                  MSELoss,
                                  ReLU,
                                  Sequential,
                                  Sigmoid,
                                  Softmax,
                                  Tanh,
)
from staticgrad.nn.loss import CrossEntropyLoss, NLLLoss
from staticgrad.nn.module import Module
from staticgrad.nn.normalization import LayerNorm
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.rnn import LSTM, LSTMCell
from staticgrad.nn.sparse import Embedding

__all__ = [
                                  "GELU",
                                  "LSTM",
                                  "Conv2d",
                                  "CrossEntropyLoss",
                                  "Dropout",
                                  "Embedding",
                                  "Flatten",
                                  "Identity",
                                  "LSTMCell",
                                  "LayerNorm",
                                  "Linear",
                                  "LogSoftmax",
                                  "MSELoss",
                                  "MaxPool2d",
                                  "Module",
                                  "ModuleDict",
                                  "ModuleList",
                                  "NLLLoss",
                                  "Parameter",
                                  "ReLU",
                                  "Sequential",
                                  "Sigmoid",
                                  "Softmax",
                                  "Tanh",
                                  "functional",
                                  "init",
]

from staticgrad.nn.attention import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
from staticgrad.nn.loss_more import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineSimilarity,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    SmoothL1Loss,
)
from staticgrad.nn.recurrent_more import GRU, RNN, GRUCell, RNNCell

__all__ += ["BCELoss", "BCEWithLogitsLoss", "CosineSimilarity", "HuberLoss", "KLDivLoss", "L1Loss", "SmoothL1Loss"]
__all__ += ["GRU", "RNN", "GRUCell", "RNNCell"]
__all__ += ["MultiheadAttention", "TransformerEncoder", "TransformerEncoderLayer"]
