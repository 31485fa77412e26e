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
from staticgrad.nn.attention import MultiheadAttention
from staticgrad.nn.layers import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "MultiheadAttention",
    "ReLU",
    "ReLU6",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Softsign",
    "Tanh",
]
