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

from staticgrad.nn import parallel  # noqa: F401  (torch.nn.parallel: DistributedDataParallel)
