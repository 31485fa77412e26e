"""torch.special: the special functions staticgrad has, under PyTorch's names."""

from __future__ import annotations

import math

from staticgrad._eager import functions as _fn
from staticgrad._eager.default_dtype import get_default_dtype as _default_dtype
from staticgrad._eager.dispatch import dispatch as _dispatch
from staticgrad._eager.functions import log_softmax, logsumexp, softmax
from staticgrad._eager.functions import sigmoid as expit
from staticgrad._eager.math_functions import erf, exp2, expm1, log1p
from staticgrad._eager.math_functions import round as _round
from staticgrad._eager.special_functions import (
    digamma,
    erfc,
    erfinv,
    i0,
    lgamma,
    logit,
    polygamma,
    sinc,
    xlog1py,
    xlogy,
)
from staticgrad._eager.special_functions import mvlgamma as multigammaln
from staticgrad._eager.tensor import Tensor as _Tensor
from staticgrad.ops import OPS as _OPS

gammaln = lgamma
psi = digamma

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
    "zeta",
]


def _unary(op_name: str, public: str):
    op = _OPS[op_name]

    def function(input):
        _fn.require_tensor(input, f"special_{public}")
        return _dispatch(op, (input,), {})

    function.__name__ = function.__qualname__ = public
    function.__doc__ = f"torch.special.{public}: elementwise, with PyTorch's gradient and dtype rules."
    return function


erfcx = _unary("erfcx", "erfcx")
log_ndtr = _unary("log_ndtr", "log_ndtr")
ndtri = _unary("ndtri", "ndtri")
entr = _unary("entr", "entr")
i0e = _unary("special_i0e", "i0e")
i1 = _unary("special_i1", "i1")
i1e = _unary("special_i1e", "i1e")


def ndtr(input):
    """The standard normal distribution function, composed as PyTorch's: (1 + erf(x / sqrt 2)) * 0.5."""
    _fn.require_tensor(input, "special_ndtr")
    if input._data.dtype.kind != "f":
        input = _fn.to_dtype(input, _default_dtype())
    scaled = _dispatch(_OPS["mul_scalar_cpp"], (input,), {"other": math.sqrt(0.5)})
    return _dispatch(_OPS["mul_scalar_cpp"], (_fn.add(erf(scaled), 1),), {"other": 0.5})


def round(input, *, decimals=0):
    """torch.special.round: torch.round with decimals given (RoundBackward1)."""
    return _round(input, decimals=decimals)


def zeta(input, other):
    """The Hurwitz zeta function zeta(x, q) = sum over k of (q + k)^-x; either side may be a number."""
    scalar = 0
    if not isinstance(input, _Tensor):
        input, scalar = _fn.full_like_scalar(other, float(input)), 1
    if not isinstance(other, _Tensor):
        other, scalar = _fn.full_like_scalar(input, float(other)), 2
    return _dispatch(_OPS["zeta"], (input, other), {"scalar": scalar})
