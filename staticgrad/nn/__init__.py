"""staticgrad.nn: modules, parameters, functional layers and initialisers."""

from staticgrad.nn import functional, init, utils
from staticgrad.nn.activation import GELU
from staticgrad.nn.attention import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
from staticgrad.nn.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from staticgrad.nn.channel_dropout import Dropout2d
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
from staticgrad.nn.loss_more import (
                                  BCELoss,
                                  BCEWithLogitsLoss,
                                  CosineSimilarity,
                                  HuberLoss,
                                  KLDivLoss,
                                  L1Loss,
                                  SmoothL1Loss,
)
from staticgrad.nn.module import Module
from staticgrad.nn.normalization import LayerNorm
from staticgrad.nn.parameter import Parameter
from staticgrad.nn.recurrent_more import GRU, RNN, GRUCell, RNNCell
from staticgrad.nn.rnn import LSTM, LSTMCell
from staticgrad.nn.sparse import Embedding

__all__ = [
                                  "GELU",
                                  "GRU",
                                  "LSTM",
                                  "RNN",
                                  "BCELoss",
                                  "BCEWithLogitsLoss",
                                  "BatchNorm1d",
                                  "BatchNorm2d",
                                  "BatchNorm3d",
                                  "Conv2d",
                                  "CosineSimilarity",
                                  "CrossEntropyLoss",
                                  "Dropout",
                                  "Dropout2d",
                                  "Embedding",
                                  "Flatten",
                                  "GRUCell",
                                  "HuberLoss",
                                  "Identity",
                                  "KLDivLoss",
                                  "L1Loss",
                                  "LSTMCell",
                                  "LayerNorm",
                                  "Linear",
                                  "LogSoftmax",
                                  "MSELoss",
                                  "MaxPool2d",
                                  "Module",
                                  "ModuleDict",
                                  "ModuleList",
                                  "MultiheadAttention",
                                  "NLLLoss",
                                  "Parameter",
                                  "RNNCell",
                                  "ReLU",
                                  "Sequential",
                                  "Sigmoid",
                                  "SmoothL1Loss",
                                  "Softmax",
                                  "Tanh",
                                  "TransformerEncoder",
                                  "TransformerEncoderLayer",
                                  "functional",
                                  "init",
                                  "utils",
]

# Activation modules (staticgrad.nn.activations).
from staticgrad.nn.activations import (
    CELU,
    ELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    Mish,
    ReLU6,
    SiLU,
    Softplus,
    Softsign,
)

__all__ += ["CELU", "ELU", "GLU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid",
            "Mish", "ReLU6", "SiLU", "Softplus", "Softsign"]
