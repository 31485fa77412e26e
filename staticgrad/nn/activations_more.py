"""More activations as F functions and nn modules: threshold, hardshrink, softshrink, tanhshrink,
softmin, prelu; and the Threshold, Hardshrink, Softshrink, Tanhshrink, Softmin, Softmax2d and PReLU
modules, with PyTorch's arguments, defaults, reprs and errors."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import full
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.activations import _floating
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS


def _thresholded(input: Tensor, bound, value, inplace: bool) -> Tensor:
    fn.require_tensor(input, "threshold")
    attrs = {"threshold": fn.as_scalar(bound), "value": fn.as_scalar(value)}
    if inplace:  # ThresholdBackward1, as PyTorch names the in-place form
        return dispatch_inplace(OPS["threshold_inplace"], input, (), attrs)
    return dispatch(OPS["threshold"], (input,), attrs)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where input <= threshold, input elsewhere (ThresholdBackward0)."""
    return _thresholded(input, threshold, value, inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _thresholded(input, threshold, value, True)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """input where |input| > lambd, else 0 (HardshrinkBackward0)."""
    _floating(input, "hardshrink", "hardshrink_cpu")
    return dispatch(OPS["hardshrink"], (input,), {"lambd": float(lambd)})


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """input moved toward 0 by lambd, and 0 where |input| <= lambd (SoftshrinkBackward0)."""
    _floating(input, "softshrink", "softshrink_cpu")
    if not 0 <= lambd <= float(np.finfo(input._data.dtype).max):
        name = {"float32": "Float", "float64": "Double", "float16": "Half"}[input._data.dtype.name]
        raise RuntimeError(f"lambda must be in range [0, {float(np.finfo(input._data.dtype).max):.6g}] for input "
                           f"dtype {name}, but found {lambd:g}")
    return dispatch(OPS["softshrink"], (input,), {"lambd": float(lambd)})


def tanhshrink(input: Tensor) -> Tensor:
    """input - tanh(input) (SubBackward0)."""
    fn.require_tensor(input, "tanhshrink")
    return fn.sub(input, fn.tanh(input))


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an "
                  "argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax of -input (SoftmaxBackward0 over NegBackward0)."""
    fn.require_tensor(input, "softmin")
    if dim is None:
        dim = _implicit_dim("softmin", input._data.ndim)
    return fn.softmax(fn.neg(input), dim, dtype=dtype)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """input where positive, weight * input elsewhere, weight one value or one per channel (dim 1)
    (PreluKernelBackward0)."""
    fn.require_tensor(input, "prelu")
    fn.require_tensor(weight, "prelu", "weight", 2)
    if weight._data.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight._data.ndim}")
    count = weight.numel()
    channels = input._data.shape[1] if input._data.ndim >= 2 else 1
    if count != 1 and count != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {count} "
                           f"and channel size = {channels}.")
    return dispatch(OPS["prelu"], (input, weight), {})


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return _thresholded(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return softshrink(input, self.lambd)


class Tanhshrink(Module):
    def forward(self, input):
        return tanhshrink(input)


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """softmax over the channels (dim -3) of a 3-D or 4-D input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return fn.softmax(input, -3)


class PReLU(Module):
    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def reset_parameters(self) -> None:
        self.weight.data.fill_(self.init)

    def forward(self, input):
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
