"""``torch.nn.modules.activation``: the same classes as ``staticgrad.nn``, under PyTorch's module path."""

from staticgrad.nn.activation import GELU
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
from staticgrad.nn.activations_more import Hardshrink, PReLU, Softmax2d, Softmin, Softshrink, Tanhshrink, Threshold
from staticgrad.nn.attention import MultiheadAttention
from staticgrad.nn.layers import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "MultiheadAttention",
    "PReLU",
    "ReLU",
    "ReLU6",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softmax2d",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
]

from staticgrad.nn.layers_more import RReLU

__all__ += ["RReLU"]
