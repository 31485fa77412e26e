"""The legacy tensor types: ``LongTensor``, ``FloatTensor``... as PyTorch keeps them.

``LongTensor(3)`` or ``LongTensor(2, 3)`` makes a tensor of that size (zero-filled: staticgrad never
hands out uninitialised memory), ``LongTensor([1, 2])`` one holding that data, ``LongTensor()`` an
empty one; ``isinstance(t, FloatTensor)`` asks whether ``t`` is a float32 tensor. Old scripts use
them (``torch.LongTensor(n).zero_()``)."""

from __future__ import annotations

from staticgrad._eager.creation import empty, tensor
from staticgrad._eager.tensor import Size, Tensor
from staticgrad.ops import dtypes as _dtypes


class tensortype(type):
    """The metaclass of the legacy types: calling one builds a tensor, ``isinstance`` checks the dtype."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"staticgrad runs on the CPU only; cannot make a tensor on {device!r}")
        if not args:
            return empty(0, dtype=cls.dtype)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or (
                len(args) == 1 and isinstance(args[0], Size)):
            return empty(*args, dtype=cls.dtype)
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor):
                if data.dtype != cls.dtype:
                    raise TypeError(f"expected {cls.__name__} of dtype {cls.dtype} (got {data.dtype})")
                return data.detach()
            if isinstance(data, (list, tuple)) or hasattr(data, "__array__"):
                return tensor(data, dtype=cls.dtype)
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        raise TypeError(f"new() received an invalid combination of arguments - got {len(args)} positional "
                        "arguments; pass sizes as ints, or one sequence of data")


def _legacy(dtype) -> type:
    return tensortype(dtype.tensor_type, (), {"dtype": dtype, "__module__": "staticgrad",
                                              "__doc__": f"The legacy tensor type of {dtype}."})


FloatTensor = _legacy(_dtypes.float32)
DoubleTensor = _legacy(_dtypes.float64)
HalfTensor = _legacy(_dtypes.float16)
LongTensor = _legacy(_dtypes.int64)
IntTensor = _legacy(_dtypes.int32)
ShortTensor = _legacy(_dtypes.int16)
CharTensor = _legacy(_dtypes.int8)
ByteTensor = _legacy(_dtypes.uint8)
BoolTensor = _legacy(_dtypes.bool_)
