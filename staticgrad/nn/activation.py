"""gelu and GELU, and the masking ops attention is built from (masked_fill, triu, tril; PyTorch
keeps its attention module in nn/modules/activation.py too)."""

from __future__ import annotations

from staticgrad.dispatch import dispatch, dispatch_inplace
from staticgrad.functional import as_scalar
from staticgrad.nn.module import Module
from staticgrad.ops import OPS
from staticgrad.tensor import Tensor

APPROXIMATIONS = ("none", "tanh")

# The C++ type names PyTorch's mask-dtype error shows.
_CPP_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
                   "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char"}


def require_floating(input: Tensor, kernel: str) -> None:
    """PyTorch's error for a float-only kernel given an integer tensor."""
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{input.dtype.tensor_type[:-6]}\'')


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (GeluBackward0); ``approximate="tanh"`` uses PyTorch's tanh formula."""
    if approximate not in APPROXIMATIONS:
        raise RuntimeError("approximate argument must be either none or tanh.")
    require_floating(input, "GeluKernelImpl")
    return dispatch(OPS["gelu"], (input,), {"approximate": approximate})


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


# ---- masks -------------------------------------------------------------------------------------

def _mask_attrs(mask, value) -> dict:
    if mask._data.dtype.kind != "b":
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_CPP_TYPE_NAMES.get(mask._data.dtype.name, mask._data.dtype.name)}")
    if isinstance(value, Tensor):
        raise NotImplementedError("staticgrad's masked_fill takes a Python number as value; for a tensor value "
                                  "use staticgrad.where(mask, value, input)")
    return {"value": as_scalar(value)}


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where ``mask`` is True, ``input`` elsewhere (MaskedFillBackward0)."""
    return dispatch(OPS["masked_fill"], (input, mask), _mask_attrs(mask, value))


def masked_fill_(input: Tensor, mask: Tensor, value) -> Tensor:
    return dispatch_inplace(OPS["masked_fill"], input, (mask,), _mask_attrs(mask, value))


def _triangle(name: str):
    op = OPS[name]

    def fn(input: Tensor, diagonal: int = 0) -> Tensor:
        if input._data.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return dispatch(op, (input,), {"diagonal": int(diagonal)})

    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: the {'upper' if name == 'triu' else 'lower'} triangle of the last two dims."
    return fn


triu = _triangle("triu")
tril = _triangle("tril")
