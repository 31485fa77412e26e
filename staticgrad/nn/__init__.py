"""staticgrad.nn: modules, parameters, functional layers and initialisers."""

from staticgrad.nn import functional, init
from staticgrad.nn.activation import GELU
from staticgrad.nn.conv_more import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
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
from staticgrad.nn.pooling import (
                                   AdaptiveAvgPool1d,
                                   AdaptiveAvgPool2d,
                                   AvgPool1d,
                                   AvgPool2d,
                                   MaxPool1d,
                                   MaxPool2d,
                                   MaxUnpool2d,
)
from staticgrad.nn.rnn import LSTM, LSTMCell
from staticgrad.nn.sparse import Embedding
from staticgrad.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
                                  "GELU",
                                  "LSTM",
                                  "AdaptiveAvgPool1d",
                                  "AdaptiveAvgPool2d",
                                  "AvgPool1d",
                                  "AvgPool2d",
                                  "Conv1d",
                                  "Conv2d",
                                  "Conv3d",
                                  "ConvTranspose1d",
                                  "ConvTranspose2d",
                                  "ConvTranspose3d",
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
                                  "MaxPool1d",
                                  "MaxPool2d",
                                  "MaxUnpool2d",
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
                                  "Upsample",
                                  "UpsamplingBilinear2d",
                                  "UpsamplingNearest2d",
                                  "functional",
                                  "init",
]
