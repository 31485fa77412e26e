"""Reading PyTorch-style arguments, shared by the functions and the factories."""

from __future__ import annotations

import numpy as np


def as_scalar(x):
    """A Python number (NumPy scalars would not be weak in NumPy's promotion)."""
    return x.item() if isinstance(x, (np.number, np.bool_)) else x


def shape_argument(args) -> tuple:
    """A shape given as ``f(2, 3)`` or ``f((2, 3))``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(d) for d in args[0])
    return tuple(int(d) for d in args)
