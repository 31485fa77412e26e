"""layer_norm and LayerNorm: normalize over the trailing dims, then scale and shift."""

from __future__ import annotations

from staticgrad._eager.creation import ones, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad.nn.activation import require_floating
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS

# The layer_norm op for each (weight given, bias given).
_VARIANTS = {(False, False): "layer_norm", (True, False): "layer_norm_weight", (False, True): "layer_norm_bias",
             (True, True): "layer_norm_affine"}


def _check_shapes(input, normalized_shape: tuple, weight, bias) -> None:
    k = len(normalized_shape)
    if input._data.shape[input._data.ndim - k:] != normalized_shape or input._data.ndim < k:
        dims = list(normalized_shape)
        raise RuntimeError(f"Given normalized_shape={dims}, expected input with shape [*, {str(dims)[1:-1]}], "
                           f"but got input of size{list(input._data.shape)}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and param._data.shape != normalized_shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(param._data.shape)} and normalized_shape = {list(normalized_shape)}")
        if param is not None and param._data.dtype != input._data.dtype:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims
    (NativeLayerNormBackward0, which saves the mean and rstd it computed)."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError("layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, "
                        f"not {type(normalized_shape).__name__}")
    normalized_shape = tuple(int(d) for d in normalized_shape)
    require_floating(input, "LayerNormKernelImpl")
    _check_shapes(input, normalized_shape, weight, bias)
    op = OPS[_VARIANTS[weight is not None, bias is not None]]
    params = tuple(p for p in (weight, bias) if p is not None)
    output, _, _ = dispatch(op, (input,) + params, {"normalized_shape": normalized_shape, "eps": float(eps)})
    return output


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = Parameter(zeros(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
