"""dropout and Dropout: zero elements with probability p, scale the rest by 1/(1-p).

The mask comes from the random ``dropout_mask`` op, so a compiled step draws a new mask on
every replay, from the generator ``staticgrad.manual_seed`` seeds (replays are reproducible).
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._state import bump_epoch, guard
from staticgrad.nn.module import Module
from staticgrad.ops import OPS


def _check_probability(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """``input * mask`` (MulBackward0) in training; ``input`` itself when p == 0 or not training."""
    _check_probability(p)
    if not training or p == 0 or input._data.size == 0:
        return input
    mask = dispatch(OPS["dropout_mask"], (), {"shape": input._data.shape, "p": float(p), "dtype": input._data.dtype})
    return fn.mul_(input, mask) if inplace else fn.mul(input, mask)


class Dropout(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        _check_probability(p)
        self.p = p
        self.inplace = inplace

    @property
    def p(self) -> float:
        return self._p

    @p.setter
    def p(self, value: float) -> None:
        """A new p makes compiled plans re-check the guard on it (and retrace)."""
        self._p = value
        bump_epoch()

    def forward(self, input):
        training = guard(lambda: self.training, "Dropout.training")
        p = guard(lambda: self.p, "Dropout.p")
        return dropout(input, p, training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
