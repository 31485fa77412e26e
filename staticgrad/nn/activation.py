"""gelu and GELU."""

from __future__ import annotations

from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.tensor import Tensor
from staticgrad.nn.module import Module
from staticgrad.ops import OPS

APPROXIMATIONS = ("none", "tanh")

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
