"""The padding modules: ZeroPad1d/2d/3d, ConstantPad1d/2d/3d, ReflectionPad1d/2d/3d,
ReplicationPad1d/2d/3d and CircularPad1d/2d/3d, each F.pad with its mode; an int padding pads every
side of the last N dims by it. Reprs as PyTorch prints them."""

from __future__ import annotations

from staticgrad._eager.movement import pad
from staticgrad.nn.module import Module


def _sides(padding, dims: int) -> tuple:
    if isinstance(padding, int):
        return (padding,) * (2 * dims)
    padding = tuple(padding)
    if len(padding) != 2 * dims:
        raise ValueError(f"padding must be an int or a tuple of {2 * dims} ints (got {padding})")
    return padding


class _Pad(Module):
    dims = 1
    mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _sides(padding, self.dims)

    def forward(self, input):
        return pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_Pad):
    def forward(self, input):
        return pad(input, self.padding, "constant", 0.0)


def _family(base, mode: str, name: str) -> tuple:
    return tuple(type(f"{name}{d}d", (base,), {"dims": d, "mode": mode, "__module__": __name__,
                                              "__doc__": f"F.pad over the last {d} dim(s), mode {mode!r}."})
                 for d in (1, 2, 3))


ConstantPad1d, ConstantPad2d, ConstantPad3d = _family(_ConstantPad, "constant", "ConstantPad")
ZeroPad1d, ZeroPad2d, ZeroPad3d = _family(_ZeroPad, "constant", "ZeroPad")
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _family(_Pad, "reflect", "ReflectionPad")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _family(_Pad, "replicate", "ReplicationPad")
CircularPad1d, CircularPad2d, CircularPad3d = _family(_Pad, "circular", "CircularPad")
