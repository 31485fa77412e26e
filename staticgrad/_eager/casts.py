"""torch.floor_divide, remainder, fmod, div's rounding modes, and the Tensor casts PyTorch code
pastes: ``.type()``, ``.type(dtype)``, ``.to(...)`` in all its forms, ``.view(dtype)`` (a bitcast),
``//`` and ``%`` with PyTorch's integer rules."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.functions import full_like_scalar, is_scalar, require_tensor
from staticgrad._eager.tensor import Device, Tensor
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes


def _tensor_operands(name: str, input: Tensor, other) -> tuple:
    """(op, inputs, attrs) of ``name`` on a tensor and a tensor or a number, the number wrapped as
    PyTorch wraps it."""
    if isinstance(other, Tensor):
        return OPS[name], (input, other), {}
    if not is_scalar(other):
        require_tensor(other, name, "other", 2)
    return OPS[name + "_scalar"], (input,), {"other": fn.fit_scalar(input, fn.as_scalar(other))}


def binary_inplace(name: str, input: Tensor, other) -> Tensor:
    """``input.name_(other)``: the op written into ``input`` (fmod_, remainder_)."""
    op, inputs, attrs = _tensor_operands(name, input, other)
    return dispatch_inplace(op, input, inputs[1:], attrs)


def _binary(name: str, input, other):
    """``name`` on (tensor, tensor), (tensor, number) or (number, tensor), the number wrapped as
    PyTorch wraps it."""
    if isinstance(input, Tensor):
        return dispatch(*_tensor_operands(name, input, other))
    if not is_scalar(input):
        require_tensor(input, name)
    require_tensor(other, name, "other", 2)
    if name == "remainder":
        return dispatch(OPS["rremainder_scalar"], (other,), {"other": fn.fit_scalar(other, fn.as_scalar(input))})
    return dispatch(OPS[name], (full_like_scalar(other, fn.fit_scalar(other, fn.as_scalar(input))), other), {})


def floor_divide(input, other):
    return _binary("floor_divide", input, other)


def remainder(input, other):
    return _binary("remainder", input, other)


def fmod(input, other):
    if not isinstance(input, Tensor):
        raise TypeError(f"fmod() received an invalid combination of arguments - got ({type(input).__name__}, "
                        f"{type(other).__name__}), but expected one of:")
    return _binary("fmod", input, other)


# ---- casts -------------------------------------------------------------------------------------------

_BY_TYPE_NAME = {f"torch.{d.tensor_type}": d for d in _dtypes.ALL}


def _device_type(device) -> str:
    """The device type of a string or Device; "cpu" is the only one staticgrad runs on."""
    text = str(device)
    kind = text.split(":")[0]
    if kind == "cpu":
        return kind
    if kind == "cuda":  # what a CPU-only PyTorch says
        raise AssertionError("Torch not compiled with CUDA enabled")
    if kind in ("mps", "xpu", "meta", "hpu", "mtia", "xla", "lazy", "vulkan", "ipu", "hip", "ve",
                "fpga", "maia", "mkldnn", "opengl", "opencl", "ideep", "privateuseone"):
        raise RuntimeError(f"staticgrad runs on the CPU only; cannot move a tensor to {text!r} "
                           "(keep it on 'cpu', or leave the device out)")
    raise RuntimeError("Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, "
                       f"xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device "
                       f"string: {text}")


def tensor_type(self, dtype=None, non_blocking=False, **kwargs):
    """``.type()``: PyTorch's type string ('torch.FloatTensor'); ``.type(dtype or type string)``:
    the tensor cast (itself when the dtype is already right)."""
    if dtype is None:
        return f"torch.{self.dtype.tensor_type}"
    if isinstance(dtype, str):
        if dtype.startswith("torch.cuda."):
            raise RuntimeError("Cannot initialize CUDA without ATen_cuda library.")
        target = _BY_TYPE_NAME.get(dtype)
        if target is None:
            raise ValueError(f"invalid type: '{dtype}'")
    elif isinstance(dtype, _dtypes.DType):
        target = dtype
    else:
        raise ValueError(f"invalid type: '{getattr(dtype, '__name__', dtype)}'")
    return fn.to_dtype(self, target)


def _is_dtype(value) -> bool:
    return isinstance(value, _dtypes.DType)


def to(self, *args, **kwargs):
    """``.to(dtype)``, ``.to(device, dtype)``, ``.to(other_tensor)``, ``dtype=``/``device=``/``copy=``
    keywords: a cast (or a copy with ``copy=True``); itself when nothing changes. Devices other
    than the CPU are refused."""
    unknown = set(kwargs) - {"dtype", "device", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"to() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    dtype, device = kwargs.get("dtype"), kwargs.get("device")
    copy = bool(kwargs.get("copy", False))
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        dtype = rest.pop(0).dtype
    elif rest and (isinstance(rest[0], (str, Device)) or rest[0] is None):
        device = rest.pop(0)
    elif rest and type(rest[0]) is int:  # a device ordinal: an accelerator
        raise RuntimeError("Cannot access accelerator device when none is available.")
    if rest and (_is_dtype(rest[0]) or rest[0] in (float, int, bool)):
        dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):  # non_blocking, then copy
        rest.pop(0)
        if rest and isinstance(rest[0], bool):
            copy = rest.pop(0)
    if rest:
        names = ", ".join(type(a).__name__ if not _is_dtype(a) else "torch.dtype" for a in args)
        raise TypeError(f"to() received an invalid combination of arguments - got ({names}), but expected one of:")
    if device is not None:
        _device_type(device)
    if dtype is float:  # Python's float is double here, as in PyTorch's to()
        dtype = _dtypes.float64
    result = self if dtype is None else fn.to_dtype(self, dtype)
    if copy and result is self:  # a copy all the same, recorded as PyTorch's _to_copy
        np_dtype = self._data.dtype
        return dispatch(OPS["to_dtype"], (self,), {"dtype": np_dtype, "self_dtype": np_dtype})
    return result


def _bitcast_error(self, target, message: str, got=None) -> RuntimeError:
    text = f"{message} to view {self.dtype.tensor_type[:-6]} as {target.tensor_type[:-6]} (different element sizes)"
    return RuntimeError(text if got is None else f"{text}, but got {got}")


def view_dtype(self, dtype):
    """``.view(dtype)``: the same memory read as another dtype, under PyTorch's rules for element
    sizes that differ (the last dim shrinks or grows; strides and offset must allow it). The result
    is a view without gradient, as in PyTorch."""
    target = dtype if _is_dtype(dtype) else _dtypes.from_numpy_dtype(_dtypes.to_numpy_dtype(dtype))
    data = self._data
    old, new = data.itemsize, target.itemsize
    if old != new:
        if data.ndim == 0:
            raise _bitcast_error(self, target, "self.dim() cannot be 0")
        strides = [s // old for s in data.strides]
        if strides[-1] != 1:
            raise _bitcast_error(self, target, "self.stride(-1) must be 1", strides[-1])
        if new > old:
            ratio = new // old
            if data.shape[-1] % ratio:
                raise _bitcast_error(self, target, f"self.size(-1) must be divisible by {ratio}", data.shape[-1])
            base = self._base._data if self._base is not None else data
            offset = (data.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // old
            if offset % ratio:
                raise _bitcast_error(self, target, f"self.storage_offset() must be divisible by {ratio}", offset)
            for i, stride in enumerate(strides[:-1]):
                if stride % ratio:
                    raise _bitcast_error(self, target, f"self.stride({i}) must be divisible by {ratio}", stride)
    return dispatch(OPS["view_dtype"], (self,), {"dtype": target.np})


def view(self, *shape, dtype=None):
    """Tensor.view: a shape, or a dtype (positional or ``dtype=``)."""
    if dtype is None and len(shape) == 1 and (_is_dtype(shape[0]) or shape[0] in (float, int, bool)):
        dtype, shape = shape[0], ()
    if dtype is not None:
        if shape:
            raise TypeError("view() received an invalid combination of arguments - got (shape and dtype), "
                            "but expected one of:")
        return view_dtype(self, dtype)
    return fn.view(self, *shape)


def _reflected(function):
    return lambda self, other: function(other, self)


METHODS = {
    "__floordiv__": floor_divide, "__rfloordiv__": _reflected(floor_divide),
    "__mod__": remainder, "__rmod__": _reflected(remainder),
    "floor_divide": floor_divide, "remainder": remainder, "fmod": fmod,
    "type": tensor_type, "to": to, "view": view,
}
