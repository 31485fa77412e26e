"""group_norm and GroupNorm: normalize groups of channels of each sample, then scale and shift
each channel."""

from __future__ import annotations

import math
import operator

from staticgrad._eager.creation import empty, ones, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS
from staticgrad.ops.group_norm import VARIANTS


def _type_name(value) -> str:
    return type(value).__name__


def _check_arguments(num_groups, weight, bias, eps) -> int:
    """PyTorch's argument parser: num_groups an int (not a bool), weight and bias tensors or None."""
    if isinstance(num_groups, bool) or not hasattr(num_groups, "__index__"):
        raise TypeError(f"group_norm(): argument 'num_groups' (position 2) must be int, not {_type_name(num_groups)}")
    for position, name, value in ((3, "weight", weight), (4, "bias", bias)):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"group_norm(): argument '{name}' (position {position}) must be Tensor, "
                            f"not {_type_name(value)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"group_norm(): argument 'eps' (position 5) must be float, not {_type_name(eps)}")
    return operator.index(num_groups)


def _verify_batch_size(size: list) -> None:
    """PyTorch's check that each normalized block has more than one value (it runs it whether
    training or not)."""
    if size[0] * math.prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def _check_shapes(input, num_groups: int, weight, bias) -> None:
    shape = list(input._data.shape)
    channels = shape[1]
    if num_groups <= 0:
        raise RuntimeError(f"Expected num groups to be greater than 0, got {num_groups}")
    if channels % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {shape} and num_groups={num_groups}")
    # PyTorch's bias message shows the weight's shape ([0] without a weight); kept as PyTorch words it.
    weight_shape = list(weight._data.shape) if weight is not None else [0]
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and (param._data.ndim != 1 or param._data.size != channels):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {weight_shape} and input of shape {shape}")


def check_dtypes(input, params, kernel: str, op_name: str) -> None:
    """PyTorch's CPU dtype rules for a norm's input and parameters (``params``, None for absent):
    parameters share the input's dtype (the float16-input, float32-parameter form is not built
    here) and the input is floating point (float16 computes in float32, as PyTorch's kernels do)."""
    dtype = input.dtype
    params = [p for p in params if p is not None]
    if params and params[0].dtype != dtype:  # PyTorch's "mixed type": the first parameter's dtype decides
        if any(p.dtype.tensor_type != "FloatTensor" for p in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if dtype.tensor_type not in ("HalfTensor", "BFloat16Tensor"):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        raise NotImplementedError(
            f"staticgrad's {op_name} takes weight and bias of the input's dtype; a {dtype} input with float32 "
            "weight and bias (PyTorch's mixed-precision form) is not built: cast weight and bias to the input's "
            "dtype, or the input to float32.")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dtype.tensor_type[:-6]}\'')
    for p in params:
        if p.dtype != dtype:
            raise RuntimeError(f"expected scalar type {dtype.tensor_type[:-6]} but found {p.dtype.tensor_type[:-6]}")


def group_norm(input, num_groups, weight=None, bias=None, eps: float = 1e-5):
    """Split the channels (dim 1) into ``num_groups`` groups, normalize each group of each sample
    over its channels and trailing dims, then scale by ``weight`` and shift by ``bias`` per channel
    (NativeGroupNormBackward0, which saves the mean and rstd it computed)."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    shape = list(input._data.shape)
    _verify_batch_size([shape[0] * shape[1] // num_groups, num_groups] + shape[2:])
    num_groups = _check_arguments(num_groups, weight, bias, eps)
    _check_shapes(input, num_groups, weight, bias)
    check_dtypes(input, (weight, bias), "GroupNormKernelImpl", "group_norm")
    op = OPS[VARIANTS[weight is not None, bias is not None]]
    absent = empty(0, dtype=input.dtype) if weight is None or bias is None else None
    inputs = (input, absent if weight is None else weight, absent if bias is None else bias)
    attrs = {"N": shape[0], "C": shape[1], "HxW": math.prod(shape[2:]), "group": num_groups, "eps": float(eps)}
    output, _, _ = dispatch(op, inputs, attrs)
    return output


class GroupNorm(Module):
    """Group normalization over (N, C, *) inputs with a learnable per-channel scale (ones) and
    shift (zeros) when ``affine``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def forward(self, input):
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
