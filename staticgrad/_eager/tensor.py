"""Tensor: a NumPy array plus autograd metadata (requires_grad, grad, grad_fn) and a version
counter shared with its views. Methods delegate to ``staticgrad._eager.functions``."""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from staticgrad._state import Tracing, bump_epoch, bump_grad_epoch
from staticgrad.errors import TraceError
from staticgrad.ops import dtypes as _dtypes

# Every tensor gets a serial number when made; a tracer knows which tensors predate its call.
_serials = itertools.count()


def serial_mark() -> int:
    """A serial number no tensor has: tensors made later get larger ones."""
    return next(_serials)


class Size(tuple):
    """A tensor's shape: a tuple that prints like PyTorch's ``torch.Size``."""

    def __repr__(self) -> str:
        return f"staticgrad.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n


class Device:
    __slots__ = ("type",)

    def __init__(self, type: str = "cpu"):
        self.type = type

    def __repr__(self) -> str:
        return f"device(type='{self.type}')"

    def __eq__(self, other) -> bool:
        return str(other) == self.type or (isinstance(other, Device) and other.type == self.type)

    def __hash__(self) -> int:
        return hash(self.type)

    def __str__(self) -> str:
        return self.type


CPU = Device("cpu")


def _read_guard(t: "Tensor", what: str) -> None:
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.on_data_read(t, what)


class Tensor:
    __slots__ = (
        "__weakref__",
        "_base",
        "_captured",
        "_data",
        "_grad",
        "_grad_acc",
        "_hooks",
        "_output_nr",
        "_requires_grad",
        "_retains_grad",
        "_serial",
        "_version_counter",
        "_view_base_fn",   # a view's: its base's grad_fn when the view was made (see dispatch.stale_view)
        "_view_chain",     # a view's: ((view op, attributes), ...) from its base to it (indexing.view_chain)
        "_view_no_grad",   # a view's: made under no_grad of a base that requires grad (True), or with grad on of
                           # such a view (its op's name); dispatch_inplace refuses changes with grad on
        "grad_fn",
    )

    def __init__(self, *args, dtype=None):
        if len(args) == 1 and not isinstance(args[0], int):
            data = np.array(args[0].numpy() if isinstance(args[0], Tensor) else args[0],
                            dtype=_dtypes.to_numpy_dtype(dtype) if dtype else _dtypes.default_float().np)
        else:
            data = np.zeros(tuple(args), dtype=_dtypes.to_numpy_dtype(dtype) if dtype else _dtypes.default_float().np)
        _init(self, data, False, None)

    @staticmethod
    def _make(data: np.ndarray, requires_grad: bool, grad_fn) -> "Tensor":
        t = object.__new__(Tensor)
        _init(t, data, requires_grad, grad_fn)
        return t

    # ---- metadata ----------------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_normalize_dim(dim, self._data.ndim)]

    def dim(self) -> int:
        return self._data.ndim

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def nelement(self) -> int:
        return int(self._data.size)

    @property
    def dtype(self) -> _dtypes.DType:
        return _dtypes.from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> Device:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_contiguous(self) -> bool:
        return bool(self._data.flags.c_contiguous)

    def element_size(self) -> int:
        return self._data.itemsize

    def stride(self, dim=None):
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_normalize_dim(dim, self._data.ndim)]

    def data_ptr(self) -> int:
        return int(self._data.__array_interface__["data"][0])

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        return self._version_counter[0]

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.grad_fn is None and self._data.dtype.kind != "f":  # (the setter's own wording)
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        requires_grad = bool(requires_grad)
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if self._captured and requires_grad != self._requires_grad:
            bump_epoch()
        self._requires_grad = requires_grad
        tracer = Tracing.tracer
        if tracer is not None:
            tracer.on_requires_grad(self)
        return self

    @property
    def grad(self):
        if self.grad_fn is not None and not self._retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
                "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
                "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead.",
                UserWarning, stacklevel=2)
        tracer = Tracing.tracer
        if tracer is not None:
            tracer.on_grad_read(self)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError("assigned grad has data of a different size")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        tracer = Tracing.tracer
        if tracer is not None:
            tracer.on_grad_write(self, value)
        self._store_grad(value)

    def _store_grad(self, value) -> None:
        """Set ``.grad`` to a checked value: guards that read it re-check when it appears or goes."""
        if self._captured and (value is None) != (self._grad is None):
            bump_grad_epoch()
        self._grad = value

    @property
    def data(self) -> "Tensor":
        """The same storage, detached, with its own version counter (changes are not tracked)."""
        t = Tensor._make(self._data, False, None)
        tracer = Tracing.tracer
        if tracer is not None:
            tracer.on_alias(self, t, "data")
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        tracer = Tracing.tracer
        if tracer is not None:
            raise TraceError("assigning .data inside a compiled function cannot be replayed; do it outside, "
                             "or use copy_() under no_grad")
        if self._captured:
            bump_epoch()
        self._data = value._data

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    # retain_grad, register_hook and backward (which run the engine) are installed by methods.py

    # ---- leaving the tensor world ------------------------------------------------------------

    def numpy(self, *, force: bool = False) -> np.ndarray:
        _read_guard(self, "numpy()")
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def item(self):
        _read_guard(self, "item()")
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self):
        _read_guard(self, "tolist()")
        return self._data.tolist()

    def __float__(self) -> float:
        _read_guard(self, "float()")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self._data.reshape(()))

    def __int__(self) -> int:
        _read_guard(self, "int()")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self._data.reshape(()))

    def __index__(self) -> int:
        _read_guard(self, "an index")
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()))

    def __bool__(self) -> bool:
        _read_guard(self, "bool()")
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()))

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    # __repr__ and __str__ are installed by methods.py (printing reads the functions layer)

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data.copy(), self._requires_grad))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol")
        t = type(self).__new__(type(self)) if type(self) is not Tensor else object.__new__(Tensor)
        _init(t, self._data.copy(), self._requires_grad, None)
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t


def _init(t: Tensor, data: np.ndarray, requires_grad: bool, grad_fn) -> None:
    t._data = data
    t._requires_grad = requires_grad
    t._grad = None
    t.grad_fn = grad_fn
    t._version_counter = [0]
    t._output_nr = 0
    t._grad_acc = None
    t._base = None
    t._hooks = None
    t._retains_grad = False
    t._captured = False
    t._serial = next(_serials)


def _rebuild(data, requires_grad):
    t = Tensor._make(data, requires_grad, None)
    return t


def _normalize_dim(dim: int, ndim: int) -> int:
    lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim + ndim if dim < 0 and ndim else (0 if dim < 0 else dim)

