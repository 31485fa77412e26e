"""The ``size`` argument of the factories (``zeros``, ``ones``, ``empty``, ``full``, ``rand``, ``randn``,
``randint``, ``Tensor.new_*``), read as PyTorch's argument parser reads a "tuple of ints": given as
``f(2, 3)`` or ``f((2, 3))``, with PyTorch's TypeError for anything else (a float, a bool first...)
and its RuntimeError for a negative dimension."""

from __future__ import annotations

import operator

import numpy as np

from staticgrad._eager.tensor import Tensor

# zeros has its own wording for a negative dimension; every other factory says "Trying to create...".
_NEGATIVE_MESSAGES = {"zeros": "zeros: Dimension size must be non-negative."}


def _type_name(value) -> str:
    """A Python type's name as PyTorch's messages print it (NumPy's types with their module)."""
    kind = type(value)
    return f"numpy.{kind.__name__}" if kind.__module__ == "numpy" else kind.__name__


def _as_int(value, first: bool):
    """``value`` as a dimension, or None if PyTorch would not take it: an int (a bool only after the
    first place, as PyTorch's parser), a NumPy integer, an object with ``__index__``, or an integer tensor."""
    if isinstance(value, Tensor):
        return int(value) if value._data.dtype.kind in "iu" and value._data.size == 1 else None
    if isinstance(value, (bool, np.bool_)) and first:
        return None
    if isinstance(value, (float, np.floating, complex, np.complexfloating, str, bytes)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _unpack(name: str, values, where: str) -> list:
    """Each item of a tuple of ints, with PyTorch's error for the first one that is not an int."""
    dims = []
    for i, value in enumerate(values):
        dim = _as_int(value, first=i == 0)
        if dim is None:
            if i == 0:
                raise TypeError(f"{name}(): argument 'size'{where} must be tuple of ints, but found element of type "
                                f"{_type_name(value)} at pos 0")
            raise TypeError(f"{name}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {_type_name(value)}\"")
        dims.append(dim)
    return dims


def _sequence(name: str, value, where: str) -> list:
    if isinstance(value, (tuple, list)):
        return _unpack(name, value, where)
    raise TypeError(f"{name}(): argument 'size'{where} must be tuple of ints, not {_type_name(value)}")


def check_size(name: str, dims) -> tuple:
    """``dims`` as a shape, with PyTorch's error for a negative dimension."""
    for dim in dims:
        if dim < 0:
            raise RuntimeError(_NEGATIVE_MESSAGES.get(name, f"Trying to create tensor with negative dimension {dim}: "
                                                            f"{list(dims)}"))
    return tuple(dims)


# How PyTorch's "got (...)" part of an error names the keyword arguments a factory was given.
_KEYWORD_TYPES = {"generator": "torch._C.Generator", "dtype": "torch.dtype", "requires_grad": "bool"}


def given(args: tuple, **keywords) -> list:
    """The "got (...)" items of PyTorch's no-matching-form error: positional types, then keywords given."""
    return [_type_name(a) for a in args] + [f"{key}={_KEYWORD_TYPES.get(key) or _type_name(value)}"
                                            for key, value in keywords.items() if value not in (None, False)]


def invalid_arguments(name: str, got: list, leading=("",)) -> TypeError:
    """PyTorch's error when the arguments match no form of a random factory (each form with and
    without ``generator``, after the arguments in ``leading``)."""
    forms = "".join(f" * ({lead}tuple of ints size, *,{generator} Tensor out = None, torch.dtype dtype = None, "
                    "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                    "bool requires_grad = False)\n"
                    for lead in leading for generator in (" torch.Generator generator,", ""))
    return TypeError(f"{name}() received an invalid combination of arguments - got ({', '.join(got)}), but "
                     f"expected one of:\n{forms}")


def varargs_size(name: str, args: tuple, keywords=None) -> tuple:
    """The shape of ``name(*args)``, where PyTorch takes ``name(2, 3)`` as well as ``name((2, 3))``.
    ``keywords`` (the call's other arguments) marks a factory with several forms (rand, randn): a
    wrong number of arguments then gets PyTorch's no-matching-form error."""
    if not args or (len(args) > 1 and _as_int(args[0], first=True) is None):
        if keywords is not None:
            raise invalid_arguments(name, given(args, **keywords))
        if not args:
            raise TypeError(f"{name}() missing 1 required positional arguments: \"size\"")
        raise TypeError(f"{name}() takes 1 positional argument but {len(args)} were given")
    if _as_int(args[0], first=True) is not None:
        return check_size(name, _unpack(name, args, ""))
    return check_size(name, _sequence(name, args[0], " (position 1)"))


def factory_size(name: str, args: tuple, size=None, keywords=None) -> tuple:
    """The shape of ``name(*args)`` or ``name(size=...)``: PyTorch takes the size by keyword too (as
    a sequence, never an int), and refuses it given both ways."""
    if size is None:
        return varargs_size(name, args, keywords)
    if args:
        if keywords is not None:
            raise invalid_arguments(name, given(args, size=size, **keywords))
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    if isinstance(size, (tuple, list)) and any(_as_int(v, first=i == 0) is None for i, v in enumerate(size)):
        raise TypeError(f"{name}(): argument 'size' must be tuple of ints, not {_type_name(size)}")
    return check_size(name, _sequence(name, size, ""))


def sequence_size(name: str, size, position: int = 1) -> tuple:
    """The shape given as a sequence (``full``'s and ``new_full``'s ``size``, which is not varargs)."""
    return check_size(name, _sequence(name, size, f" (position {position})"))
