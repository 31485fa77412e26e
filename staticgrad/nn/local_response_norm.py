"""local_response_norm and LocalResponseNorm, composed as PyTorch composes them: each value divided by
(k + alpha * mean of the squares over ``size`` neighbouring channels)^beta, the mean an average pooling
over the zero-padded channel axis."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.movement import pad
from staticgrad.nn.module import Module
from staticgrad.nn.pooling import avg_pool2d
from staticgrad.nn.pooling_more import avg_pool3d


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * avg over the channel window of x^2)^beta over (N, C, *) input."""
    dim = input._data.ndim
    if dim < 3:
        # PyTorch's message, with the run of spaces its source line break leaves in it
        raise ValueError(f"Expected 3D or higher dimensionality{' ' * 26}input (got {dim} dimensions)")
    if input._data.size == 0:
        return input
    div = fn.mul(input, input)
    if dim == 3:
        div = fn.unsqueeze(div, 1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = fn.squeeze(avg_pool2d(div, (size, 1), stride=1), 1)
    else:
        sizes = input._data.shape
        div = fn.view(div, (sizes[0], 1, sizes[1], sizes[2], -1))
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = fn.squeeze(avg_pool3d(div, (size, 1, 1), stride=1), 1)
        div = fn.view(div, sizes)
    div = fn.pow(fn.add(fn.mul(div, alpha), k), beta)
    return fn.div(input, div)


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
