"""nn.init: fill parameters in place from staticgrad's random generator, without recording grads."""

from __future__ import annotations

import math

import numpy as np

from staticgrad._eager.creation import _factory, empty, randperm
from staticgrad._eager.creation import tensor as tensor_from
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


def _normal_array(shape: tuple, mean: float, std: float, dtype):
    return _factory("normal", False, shape=shape, mean=mean, std=std, dtype=dtype)._data


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """N(mean, std) values redrawn until each lies in [a, b] (the truncated normal)."""
    with no_grad():
        shape, dtype = tuple(tensor.shape), tensor._data.dtype
        values = np.asarray(_normal_array(shape, mean, std, np.float64))
        outside = (values < a) | (values > b)
        while outside.any():
            values[outside] = np.asarray(_normal_array((int(outside.sum()),), mean, std, np.float64))
            outside = (values < a) | (values > b)
        return tensor.copy_(tensor_from(values.astype(dtype)))


def orthogonal_(tensor, gain: float = 1, generator=None):
    """A (semi-)orthogonal matrix (the Q of a QR of a normal draw, signs fixed), times ``gain``."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = np.asarray(_normal_array((rows, cols), 0.0, 1.0, np.float64))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_(tensor_from((gain * q).reshape(tuple(tensor.shape)).astype(tensor._data.dtype)))


def eye_(tensor):
    """The identity matrix (2-D tensors only)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(tensor_from(np.eye(*tensor.shape, dtype=tensor._data.dtype)))


def dirac_(tensor, groups: int = 1):
    """Identity-preserving convolution weights (3, 4 or 5 dims): 1 at each kernel's centre."""
    ndim = tensor.dim()
    if ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_channels = tensor.shape[0]
    if out_channels % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out_channels // groups
    smallest = min(per_group, tensor.shape[1])
    values = np.zeros(tuple(tensor.shape), dtype=tensor._data.dtype)
    centre = tuple(size // 2 for size in tensor.shape[2:])
    for g in range(groups):
        for d in range(smallest):
            values[(g * per_group + d, d) + centre] = 1
    with no_grad():
        return tensor.copy_(tensor_from(values))


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """N(0, std) values with ceil(sparsity * rows) entries of each column zeroed (2-D tensors only)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    values = np.asarray(_normal_array((rows, cols), 0.0, std, tensor._data.dtype)).copy()
    for col in range(cols):
        order = randperm(rows).numpy()
        values[order[:zeros], col] = 0
    with no_grad():
        return tensor.copy_(tensor_from(values))


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
