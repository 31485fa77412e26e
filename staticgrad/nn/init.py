"""nn.init: fill parameters in place from staticgrad's random generator, without recording grads."""

from __future__ import annotations

import math

from staticgrad._eager.creation import _factory, empty
from staticgrad._eager.grad_mode import no_grad
from staticgrad.nn.parameter import Parameter


def _fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for d in tensor.shape[2:]:
        receptive *= d
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity: str, param=None) -> float:
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a: float = 0.0, b: float = 1.0):
    with no_grad():
        drawn = _factory("uniform", False, shape=tuple(tensor.shape), low=a, high=b, dtype=tensor._data.dtype)
        return tensor.copy_(drawn)


def normal_(tensor, mean: float = 0.0, std: float = 1.0):
    with no_grad():
        drawn = _factory("normal", False, shape=tuple(tensor.shape), mean=mean, std=std, dtype=tensor._data.dtype)
        return tensor.copy_(drawn)


def constant_(tensor, val: float):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def xavier_uniform_(tensor, gain: float = 1.0):
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain: float = 1.0):
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def make_weight_and_bias(module, weight_shape: tuple, bias: bool, dtype) -> None:
    """Give a layer ``weight`` (and ``bias``, one per output, or a registered None) initialised as
    PyTorch initialises Linear and Conv layers."""
    module.weight = Parameter(empty(*weight_shape, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(weight_shape[0], dtype=dtype))
    else:
        module.register_parameter("bias", None)
    reset_weight_and_bias(module.weight, module.bias)


def reset_weight_and_bias(weight, bias) -> None:
    """PyTorch's default for Linear and Conv layers: Kaiming-uniform weight (a=sqrt(5), i.e. within
    +-1/sqrt(fan_in)) and a bias uniform within the same bound."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
