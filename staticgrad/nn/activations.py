"""torch.nn.functional's activations beyond relu/tanh/sigmoid/gelu (silu, softplus, softsign, the elu
family, hardtanh and relu6, hardsigmoid, hardswish, mish, logsigmoid, leaky_relu, glu, normalize)
and their nn modules, with PyTorch's arguments, defaults and ``inplace=``."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager import math_functions as math_fn
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad.nn.module import Module
from staticgrad.ops import OPS
from staticgrad.ops.activations import SELU_ALPHA, SELU_SCALE
from staticgrad.ops.math_ops import kernel_not_implemented


def _floating(input, name: str, kernel: str) -> None:
    fn.require_tensor(input, name)
    if input._data.dtype.kind != "f":
        raise kernel_not_implemented(kernel, input._data.dtype)


def _apply(op_name: str, input: Tensor, attrs: dict, inplace: bool, inplace_op: str | None = None) -> Tensor:
    if inplace:
        return dispatch_inplace(OPS[inplace_op or op_name], input, (), attrs)
    return dispatch(OPS[op_name], (input,), attrs)


# ---- functions ----------------------------------------------------------------------------------------------

def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (SiluBackward0)."""
    _floating(input, "silu", "silu_cpu")
    return _apply("silu", input, {}, inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (SoftplusBackward0)."""
    _floating(input, "softplus", "softplus_cpu")
    return dispatch(OPS["softplus"], (input,), {"beta": beta, "threshold": threshold})


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|), composed as PyTorch composes it (DivBackward0)."""
    fn.require_tensor(input, "softsign")
    return fn.div(input, fn.add(fn.abs(input), 1))


def _elu(input, alpha, scale, input_scale, inplace, celu=False):
    attrs = {"alpha": alpha, "scale": scale, "input_scale": input_scale, "celu": celu}
    return _apply("elu", input, attrs, inplace, "elu_result")


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x for x > 0, alpha (exp(x) - 1) otherwise (EluBackward0; in place EluBackward1)."""
    _floating(input, "elu", "elu_cpu")
    return _elu(input, alpha, 1.0, 1.0, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants (PyTorch's node: EluBackward0)."""
    _floating(input, "selu", "elu_cpu")
    return _elu(input, SELU_ALPHA, SELU_SCALE, 1.0, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)) (CeluBackward0)."""
    _floating(input, "celu", "elu_cpu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu(input, alpha, 1.0, 1.0 / alpha, inplace, celu=True)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val] (HardtanhBackward0); integer tensors stay integer."""
    fn.require_tensor(input, "hardtanh")
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input._data.dtype.kind == "b":
        raise kernel_not_implemented("hardtanh_cpu", input._data.dtype)
    return _apply("hardtanh", input, {"min_val": min_val, "max_val": max_val}, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """hardtanh(x, 0, 6), as PyTorch computes it (HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x + 3, 0), 6) / 6 (HardsigmoidBackward0)."""
    _floating(input, "hardsigmoid", "hardsigmoid_cpu")
    return _apply("hardsigmoid", input, {}, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * min(max(x + 3, 0), 6) / 6 (HardswishBackward0)."""
    _floating(input, "hardswish", "hardswish_cpu")
    return _apply("hardswish", input, {}, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)) (MishBackward0)."""
    _floating(input, "mish", "mish_cpu")
    return _apply("mish", input, {}, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably (LogSigmoidBackward0)."""
    _floating(input, "logsigmoid", "log_sigmoid_cpu")
    return dispatch(OPS["logsigmoid"], (input,), {})


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x for x > 0, negative_slope * x otherwise (LeakyReluBackward0; in place LeakyReluBackward1)."""
    _floating(input, "leaky_relu", "leaky_relu_cpu")
    return _apply("leaky_relu", input, {"negative_slope": negative_slope}, inplace, "leaky_relu_result")


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """First half of ``dim`` times the sigmoid of the second half (GluBackward0)."""
    fn.require_tensor(input, "glu")
    if input._data.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _normalize_dim(dim, input._data.ndim)
    size = input._data.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    if input._data.dtype.kind != "f":
        raise kernel_not_implemented("glu_cpu", input._data.dtype)
    return dispatch(OPS["glu"], (input,), {"dim": d})


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """input / max(||input||_p over dim, eps), as PyTorch composes it (DivBackward0)."""
    fn.require_tensor(input, "normalize")
    if out is not None:
        raise NotImplementedError("staticgrad's normalize has no out= argument; use the returned tensor")
    norm = math_fn.norm(input, p, dim, keepdim=True)
    return fn.div(input, fn.expand_as(fn.clamp(norm, min=eps), input))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


# ---- modules ------------------------------------------------------------------------------------------------

def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class _Inplace(Module):
    """An activation whose only argument is ``inplace``."""

    function = staticmethod(silu)

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self).function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class SiLU(_Inplace):
    function = staticmethod(silu)


class SELU(_Inplace):
    function = staticmethod(selu)


class Mish(_Inplace):
    function = staticmethod(mish)


class Hardsigmoid(_Inplace):
    function = staticmethod(hardsigmoid)

    def extra_repr(self) -> str:
        return ""


class Hardswish(_Inplace):
    function = staticmethod(hardswish)

    def extra_repr(self) -> str:
        return ""


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    def forward(self, input):
        return softsign(input)


class LogSigmoid(Module):
    def forward(self, input):
        return logsigmoid(input)


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input):
        return celu(input, self.alpha, self.inplace)


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None):
        super().__init__()
        if min_value is not None or max_value is not None:
            raise NotImplementedError("Hardtanh's min_value and max_value are deprecated in PyTorch; "
                                      "staticgrad takes min_val and max_val")
        if max_val <= min_val:
            raise AssertionError
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


MODULES = ("CELU", "ELU", "GLU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid", "Mish", "ReLU6",
           "SELU", "SiLU", "Softplus", "Softsign")
