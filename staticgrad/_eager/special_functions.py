"""torch.erfc ... torch.heaviside and torch.special's functions over the op table (staticgrad.ops.special_ops
and staticgrad.ops.arith_more): PyTorch's signatures, argument checks and errors, the in-place forms
and the Tensor methods."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.arguments import as_scalar
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.math_functions import _name_as_public, _type_name
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS
from staticgrad.ops.math_ops import kernel_not_implemented

FUNCTIONS: dict = {}
INPLACE: dict = {}


def _float_only(kernel: str):
    def check(input):
        if input._data.dtype.kind != "f":
            raise kernel_not_implemented(kernel, input._data.dtype)
    return check


def _unary(op_name: str, public: str, check=None):
    """torch.<public>(input) and Tensor.<public>_(): the op ``op_name`` on one tensor."""
    op = OPS[op_name]

    def function(input):
        fn.require_tensor(input, public)
        if check is not None:
            check(input)
        return dispatch(op, (input,), {})

    def inplace(input):
        if check is not None:
            check(input)
        return dispatch_inplace(op, input, (), {})

    _name_as_public(function, inplace, public)
    function.__doc__ = f"torch.{public}: elementwise, with PyTorch's gradient and dtype rules."
    return function, inplace


for _op, _public, _check in (("erfc", "erfc", None), ("erfinv", "erfinv", None), ("lgamma", "lgamma", None),
                             ("digamma", "digamma", None), ("i0", "i0", None), ("sinc", "sinc", None),
                             ("frac", "frac", _float_only("frac_cpu")), ("sgn", "sgn", None),
                             ("deg2rad", "deg2rad", None), ("rad2deg", "rad2deg", None)):
    FUNCTIONS[_public], INPLACE[_public + "_"] = _unary(_op, _public, _check)

erfc, erfinv, lgamma, digamma, i0, sinc = (FUNCTIONS[n] for n in ("erfc", "erfinv", "lgamma", "digamma", "i0", "sinc"))
frac, sgn, deg2rad, rad2deg = (FUNCTIONS[n] for n in ("frac", "sgn", "deg2rad", "rad2deg"))


# ---- logit, polygamma --------------------------------------------------------------------------------

def logit(input, eps=None):
    """log(p / (1 - p)), p first clamped to [eps, 1 - eps] when eps is given (LogitBackward0)."""
    fn.require_tensor(input, "logit")
    return dispatch(OPS["logit"], (input,), {"eps": None if eps is None else float(eps)})


def logit_(input, eps=None):
    return dispatch_inplace(OPS["logit"], input, (), {"eps": None if eps is None else float(eps)})


def _polygamma_order(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {fn._type_name(n)}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return n


def polygamma(n, input):
    """The n-th derivative of digamma (PolygammaBackward0)."""
    n = _polygamma_order(n)
    fn.require_tensor(input, "polygamma", "input", 2)
    return dispatch(OPS["polygamma"], (input,), {"n": n})


def _polygamma_method(input, n):
    return polygamma(n, input)


def _polygamma_inplace(input, n):
    return dispatch_inplace(OPS["polygamma_inplace"], input, (), {"n": _polygamma_order(n)})


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension p: sum over j < p of lgamma(x - j/2) + p(p-1)/4 log(pi)
    (MvlgammaBackward0)."""
    fn.require_tensor(input, "mvlgamma")
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return dispatch(OPS["mvlgamma"], (input,), {"p": p})


def mvlgamma_(input, p):
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return dispatch_inplace(OPS["mvlgamma"], input, (), {"p": p})


FUNCTIONS.update(logit=logit, polygamma=_polygamma_method, mvlgamma=mvlgamma)
INPLACE.update(logit_=logit_, polygamma_=_polygamma_inplace, mvlgamma_=mvlgamma_)


# ---- addcmul, addcdiv --------------------------------------------------------------------------------

def _addc_check(name, input, tensor1, tensor2):
    fn.require_tensor(input, name)
    fn.require_tensor(tensor1, name, "tensor1", 2)
    fn.require_tensor(tensor2, name, "tensor2", 3)
    if name == "addcdiv" and tensor1._data.dtype.kind in "biu" and tensor2._data.dtype.kind in "biu":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
            "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
            "(input + value * staticgrad.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.")


def _addc(name: str):
    op = OPS[name]

    def function(input, tensor1, tensor2, *, value=1):
        _addc_check(name, input, tensor1, tensor2)
        return dispatch(op, (input, tensor1, tensor2), {"value": as_scalar(value)})

    def inplace(input, tensor1, tensor2, *, value=1):
        _addc_check(name, input, tensor1, tensor2)
        return dispatch_inplace(op, input, (tensor1, tensor2), {"value": as_scalar(value)})

    _name_as_public(function, inplace, name)
    function.__doc__ = f"torch.{name}: input + value * tensor1 {'*' if name == 'addcmul' else '/'} tensor2."
    return function, inplace


addcmul, addcmul_ = _addc("addcmul")
addcdiv, addcdiv_ = _addc("addcdiv")
FUNCTIONS.update(addcmul=addcmul, addcdiv=addcdiv)
INPLACE.update(addcmul_=addcmul_, addcdiv_=addcdiv_)


# ---- binary: hypot, fmax, fmin, nextafter, heaviside, xlogy, xlog1py -----------------------------------

def _pair(name: str, check=None):
    op = OPS[name]

    def function(input, other):
        fn.require_tensor(input, name)
        fn.require_tensor(other, name, "other", 2)
        if check is not None:
            check(input, other)
        return dispatch(op, (input, other), {})

    def inplace(input, other):
        fn.require_tensor(other, name + "_", "other", 1)
        if check is not None:
            check(input, other)
        return dispatch_inplace(op, input, (other,), {})

    _name_as_public(function, inplace, name)
    function.__doc__ = f"torch.{name}: elementwise over broadcast tensors, with PyTorch's gradient and dtypes."
    return function, inplace


def _float_pair(kernel: str):
    def check(input, other):
        if input._data.dtype.kind != "f" and other._data.dtype.kind != "f":
            raise kernel_not_implemented(kernel, input._data.dtype)
    return check


def _same_dtypes(input, values):
    if input._data.dtype != values._data.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")


for _name, _check in (("hypot", _float_pair("hypot_cpu")), ("fmax", None), ("fmin", None),
                      ("nextafter", _float_pair("nextafter_cpu")), ("heaviside", _same_dtypes)):
    FUNCTIONS[_name], _inplace = _pair(_name, _check)
    if _name not in ("fmax", "fmin"):  # PyTorch has no fmax_ / fmin_
        INPLACE[_name + "_"] = _inplace
hypot, fmax, fmin, nextafter, heaviside = (FUNCTIONS[n] for n in ("hypot", "fmax", "fmin", "nextafter", "heaviside"))


def _xlog(name: str, public: str):
    """xlogy-like: (Tensor, Tensor), (Number, Tensor) or (Tensor, Number)."""
    op, scalar_op = OPS[name], OPS[name + "_scalar"]

    def function(input, other):
        if isinstance(input, Tensor) and isinstance(other, Tensor):
            return dispatch(op, (input, other), {})
        if isinstance(other, Tensor) and fn.is_scalar(input):
            return dispatch(scalar_op, (other,), {"other": as_scalar(input), "scalar_first": True})
        if isinstance(input, Tensor) and fn.is_scalar(other):
            return dispatch(scalar_op, (input,), {"other": as_scalar(other), "scalar_first": False})
        raise TypeError(f"{public}() received an invalid combination of arguments - got ({_type_name(input)}, "
                        f"{_type_name(other)}), but expected one of:\n"
                        " * (Tensor input, Tensor other, *, Tensor out = None)\n"
                        " * (Number self, Tensor other, *, Tensor out = None)\n"
                        " * (Tensor input, Number other, *, Tensor out = None)")

    def inplace(input, other):
        if isinstance(other, Tensor):
            return dispatch_inplace(op, input, (other,), {})
        return dispatch_inplace(scalar_op, input, (), {"other": as_scalar(other), "scalar_first": False})

    function.__name__ = function.__qualname__ = public
    function.__doc__ = f"torch.{public}: x * log{'1p' if name == 'xlog1py' else ''}(y), 0 where x == 0 (NaN y kept)."
    return function, inplace


xlogy, xlogy_ = _xlog("xlogy", "xlogy")
FUNCTIONS["xlogy"], INPLACE["xlogy_"] = xlogy, xlogy_
xlog1py, _ = _xlog("xlog1py", "xlog1py")

# Tensor methods: every function above as a method, and the in-place forms.
METHODS = {**FUNCTIONS, **INPLACE}
