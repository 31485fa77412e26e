"""torch.logaddexp2, gcd, lcm, ldexp, frexp, isin and normal (its tensor and number forms) over the op
table (staticgrad.ops.math_extra): PyTorch's signatures, dtype rules, argument checks and errors, the
in-place forms and the Tensor methods."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.arguments import shape_argument
from staticgrad._eager.creation import _np_dtype, _require_grad, _source
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.out_argument import refuse_autograd, write_out
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes
from staticgrad.ops.math_ops import kernel_not_implemented

FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def _pair(name: str, op_name: str | None = None):
    """torch.<name>(input, other) and Tensor.<name>_(other) on two tensors."""
    op = OPS[op_name or name]

    def function(input, other):
        fn.require_tensor(input, name)
        fn.require_tensor(other, name, "other", 2)
        return dispatch(op, (input, other), {})

    def inplace(input, other):
        fn.require_tensor(other, name + "_", "other", 1)
        return dispatch_inplace(op, input, (other,), {})

    function.__name__, inplace.__name__ = name, name + "_"
    function.__doc__ = f"torch.{name}: elementwise over two broadcast tensors, PyTorch's dtype rules."
    return function, inplace


logaddexp2, _ = _pair("logaddexp2")
gcd, gcd_ = _pair("gcd")
lcm, lcm_ = _pair("lcm")


# ---- ldexp, frexp -----------------------------------------------------------------------------------

def _ldexp_attrs(input, other) -> dict:
    """The dtypes of PyTorch's mul(input, pow(2., other)): the power in other's float dtype (the default
    float for integer exponents), the result their promotion."""
    power = other._data.dtype if other._data.dtype.kind == "f" else _dtypes.default_float().np
    dims = [a.dtype for a in (input._data,) if a.ndim] + ([power] if other._data.ndim else [])
    zero_dims = [a.dtype for a in (input._data,) if not a.ndim] + ([] if other._data.ndim else [power])
    return {"dtype": _dtypes.result_type(dims, zero_dims), "power_dtype": power}


def ldexp(input, other):
    """input * 2**other (LdexpBackward0)."""
    fn.require_tensor(input, "ldexp")
    fn.require_tensor(other, "ldexp", "other", 2)
    return dispatch(OPS["ldexp"], (input, other), _ldexp_attrs(input, other))


def ldexp_(input, other):
    fn.require_tensor(other, "ldexp_", "other", 1)
    return dispatch_inplace(OPS["ldexp"], input, (other,), _ldexp_attrs(input, other))


def frexp(input):
    """(mantissa, exponent): input = mantissa * 2**exponent, |mantissa| in [0.5, 1), exponent int32
    (FrexpBackward0)."""
    fn.require_tensor(input, "frexp")
    if input._data.dtype.kind != "f":
        raise RuntimeError("staticgrad.frexp() only supports floating-point dtypes")
    return FrexpResult(*dispatch(OPS["frexp"], (input,), {}))


# ---- isin ---------------------------------------------------------------------------------------------

def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` occurs in ``test_elements`` (either may be a number), a bool tensor."""
    element_tensor, test_tensor = isinstance(elements, Tensor), isinstance(test_elements, Tensor)
    if not (element_tensor or test_tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got ({fn._type_name(elements)}, "
                        f"{fn._type_name(test_elements)}), but expected one of:")
    if not element_tensor:
        elements = fn.full_like_scalar(test_elements, elements)
    if not test_tensor:
        test_elements = fn.full_like_scalar(elements, test_elements)
    for t in (elements, test_elements):
        if t._data.dtype == np.bool_:
            raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    return dispatch(OPS["isin"], (elements, test_elements), {"invert": bool(invert)})


# ---- normal -------------------------------------------------------------------------------------------

def _require_float(t: Tensor) -> None:
    if t._data.dtype.kind != "f":
        raise kernel_not_implemented("normal_kernel_cpu", t._data.dtype)


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _check_std_number(std) -> None:
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_number_text(std)}")


def _broadcast_check(a: Tensor, b: Tensor) -> None:
    x, y = a._data.shape, b._data.shape
    for back in range(1, min(len(x), len(y)) + 1):
        if x[-back] != y[-back] and 1 not in (x[-back], y[-back]):
            raise RuntimeError(f"The size of tensor a ({x[-back]}) must match the size of tensor b ({y[-back]}) at "
                               f"non-singleton dimension {max(len(x), len(y)) - back}")


def _draw(mean, std, size, generator, dtype, requires_grad) -> Tensor:
    source = _source(generator)
    mean_tensor, std_tensor = isinstance(mean, Tensor), isinstance(std, Tensor)
    if mean_tensor and std_tensor:
        _require_float(mean)
        _broadcast_check(mean, std)
        return dispatch(OPS["normal_tensors"], (mean, std), source)
    if mean_tensor:
        _require_float(mean)
        _check_std_number(std)
        return dispatch(OPS["normal_mean_tensor"], (mean,), {"std": float(std), **source})
    if std_tensor:
        _require_float(std)
        return dispatch(OPS["normal_std_tensor"], (std,), {"mean": float(mean), **source})
    if size is None:
        raise TypeError(f"normal() received an invalid combination of arguments - got ({fn._type_name(mean)}, "
                        f"{fn._type_name(std)}), but expected one of:")
    _check_std_number(std)
    result = dispatch(OPS["normal"], (), {"shape": shape_argument((size,)), "mean": float(mean), "std": float(std),
                                           "dtype": _np_dtype(dtype), **source})
    if requires_grad:
        _require_grad(result)
    return result


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, requires_grad=False):
    """Draws from N(mean, std): mean and std tensors (broadcast; NormalBackward3), a tensor and a number
    (NormalBackward1 / 2), or two numbers and a ``size``; ``out=`` receives them. The gradients to mean
    and std are zero, as in PyTorch (the draws are not reparameterised)."""
    if out is None:
        return _draw(mean, std, size, generator, dtype, requires_grad)
    fn.require_tensor(out, "normal", "out", 4)
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    refuse_autograd("normal", *tensors)
    if isinstance(mean, Tensor) and not isinstance(std, Tensor):
        # PyTorch draws into out broadcast with the mean: out keeps a shape the mean broadcasts to
        _require_float(mean)
        _check_std_number(std)
        _broadcast_check(mean, out)
        shape = tuple(np.broadcast_shapes(mean._data.shape, out._data.shape))
        if shape != mean._data.shape:
            mean = fn.expand(mean, shape)
    _require_float(out)
    result = _draw(mean, std, size, generator, dtype, requires_grad)
    # the tensor forms resize a wrong-shaped out with PyTorch's warning (resize_output), the size form silently
    return write_out("normal", result, out, warn_on_resize=bool(tensors))


FUNCTIONS = {"logaddexp2": logaddexp2, "gcd": gcd, "lcm": lcm, "ldexp": ldexp, "frexp": frexp}
METHODS = dict(FUNCTIONS, gcd_=gcd_, lcm_=lcm_, ldexp_=ldexp_)
