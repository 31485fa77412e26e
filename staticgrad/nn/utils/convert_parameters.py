"""parameters_to_vector and vector_to_parameters: every parameter's values as one flat vector, and
back (the parameters' data replaced by views of the vector, as PyTorch does)."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.tensor import Tensor


def parameters_to_vector(parameters):
    """The parameters' values flattened and joined end to end (CatBackward0)."""
    return fn.cat([fn.reshape(p, (-1,)) for p in parameters], 0)


def vector_to_parameters(vec, parameters) -> None:
    """Each parameter's data set to its slice of ``vec``, reshaped to the parameter's shape."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    start = 0
    for p in parameters:
        count = p.numel()
        p.data = fn.view(vec.detach()[start:start + count], tuple(p.shape))
        start += count
