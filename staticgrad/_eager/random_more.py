"""``torch.bernoulli``, ``torch.multinomial`` and the Tensor refills ``bernoulli_``,
``exponential_``, ``geometric_``, ``log_normal_``, ``cauchy_``, with PyTorch's signatures and
errors. Each draw is a recorded random op (staticgrad/ops/random_more.py), so a compiled function
draws afresh on every replay, from the default generator or ``generator=``."""

from __future__ import annotations

import operator

import numpy as np

from staticgrad._eager.creation import _source
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.out_argument import refuse_autograd, write_out
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS
from staticgrad.ops import dtypes as _dtypes

# The C++ type names PyTorch's Cauchy check prints for integer dtypes.
_CPP_NAMES = _dtypes.CPP_TYPE_NAMES


def _type_name(tensor) -> str:
    """PyTorch's scalar type name of a tensor's dtype: Long, Int, Bool, Float..."""
    return _dtypes.from_numpy_dtype(tensor._data.dtype).tensor_type[:-6]


def _number(value) -> str:
    """A number as PyTorch's messages print a double (C++ stream formatting)."""
    return f"{float(value):g}"


def _is_floating(tensor) -> bool:
    return np.issubdtype(tensor._data.dtype, np.floating)


def _require_floating_probabilities(p) -> None:
    if not _is_floating(p):
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{_type_name(p)}'")


def _check_p(p) -> float:
    p = float(p)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_number(p)}")
    return p


def _bernoulli_arguments_error(*got) -> TypeError:
    """PyTorch's error for arguments that match neither form of ``torch.bernoulli``."""
    return TypeError(f"bernoulli() received an invalid combination of arguments - got ({', '.join(got)}), but "
                     "expected one of:\n * (Tensor input, *, torch.Generator generator = None, Tensor out = None)\n"
                     " * (Tensor input, float p, *, torch.Generator generator = None)\n")


def bernoulli(input, p=None, *, generator=None, out=None) -> Tensor:
    """``torch.bernoulli(input)``: 0/1 draws with the probabilities in ``input`` (its dtype, zero
    gradient to it), or written into ``out`` (any dtype); ``torch.bernoulli(input, p)``: draws with
    probability ``p`` in ``input``'s shape and dtype (a node with no derivative, as PyTorch's)."""
    if out is not None:
        got = ["Tensor"] + ([] if p is None else [type(p).__name__])
        if p is not None or not isinstance(out, Tensor):
            raise _bernoulli_arguments_error(*got, f"out={type(out).__name__}")
        refuse_autograd("bernoulli", input, out)
    if p is None:
        _require_floating_probabilities(input)
        result = dispatch(OPS["bernoulli"], (input,), _source(generator))
        return result if out is None else write_out("bernoulli", result, out)
    if isinstance(p, Tensor):
        raise _bernoulli_arguments_error("Tensor", "Tensor")
    return dispatch(OPS["bernoulli_like"], (input,), {"p": _check_p(p), **_source(generator)})


def _bernoulli_method(self, p=None, *, generator=None) -> Tensor:
    if isinstance(p, Tensor):
        raise TypeError("bernoulli() received an invalid combination of arguments - got (Tensor), "
                        "but expected one of:\n (*, torch.Generator generator)\n"
                        " (float p, *, torch.Generator generator)")
    return bernoulli(self, p, generator=generator)


def _bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    if isinstance(p, Tensor):
        _require_floating_probabilities(p)
        if tuple(p.shape) != tuple(self.shape):
            p = p.expand(self.shape)
        return dispatch_inplace(OPS["bernoulli_tensor_fill"], self, (p,), _source(generator))
    return dispatch_inplace(OPS["bernoulli_fill"], self, (), {"p": _check_p(p), **_source(generator)})


def _exponential_(self, lambd=1.0, *, generator=None) -> Tensor:
    if not _is_floating(self):
        raise RuntimeError("Exponential distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {_type_name(self)}")
    lambd = float(lambd)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_number(lambd)}")
    return dispatch_inplace(OPS["exponential_fill"], self, (), {"lambd": lambd, **_source(generator)})


def _geometric_(self, p, *, generator=None) -> Tensor:
    if self._data.dtype == np.bool_:
        raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
    p = float(p)
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_number(p)}")
    return dispatch_inplace(OPS["geometric_fill"], self, (), {"p": p, **_source(generator)})


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None) -> Tensor:
    if not _is_floating(self):
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{_type_name(self)}'")
    std = float(std)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_number(std)}")
    return dispatch_inplace(OPS["log_normal_fill"], self, (), {"mean": float(mean), "std": std,
                                                                **_source(generator)})


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None) -> Tensor:
    if not _is_floating(self):
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {_CPP_NAMES[self._data.dtype.name]}")
    sigma = float(sigma)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_number(sigma)}")
    return dispatch_inplace(OPS["cauchy_fill"], self, (), {"median": float(median), "sigma": sigma,
                                                            **_source(generator)})


def _sample_count(num_samples) -> int:
    if isinstance(num_samples, (bool, np.bool_)) or (isinstance(num_samples, Tensor) and num_samples.ndim != 0):
        raise TypeError(f"multinomial(): argument 'num_samples' (position 2) must be int, not "
                        f"{type(num_samples).__name__}")
    try:
        return operator.index(num_samples) if not isinstance(num_samples, Tensor) else int(num_samples.item())
    except TypeError:
        raise TypeError(f"multinomial(): argument 'num_samples' (position 2) must be int, not "
                        f"{type(num_samples).__name__}") from None


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None) -> Tensor:
    """``num_samples`` category indices (int64) per row of ``input`` (1-D or 2-D non-negative
    weights, not necessarily summing to 1), with or without replacement, or written into ``out``
    (an int64 tensor). The output's shape depends only on the arguments, so a compiled function
    records the draw and re-draws it."""
    num_samples = _sample_count(num_samples)
    if out is not None and not isinstance(out, Tensor):
        raise TypeError(f"multinomial(): argument 'out' must be Tensor, not {type(out).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not _is_floating(input):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {_type_name(input)}")
    if out is not None and out._data.dtype != np.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {_type_name(out)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if categories > 2 ** 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    attrs = {"num_samples": num_samples, "replacement": bool(replacement), **_source(generator)}
    result = dispatch(OPS["multinomial"], (input,), attrs)
    return result if out is None else write_out("multinomial", result, out)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None) -> Tensor:
    return multinomial(self, num_samples, replacement, generator=generator)


METHODS = {"bernoulli": _bernoulli_method, "bernoulli_": _bernoulli_, "exponential_": _exponential_,
           "geometric_": _geometric_, "log_normal_": _log_normal_, "cauchy_": _cauchy_,
           "multinomial": _multinomial_method}
