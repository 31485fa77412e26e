"""``WeightedRandomSampler``: indices ``0..len(weights)-1`` drawn with probabilities proportional to
``weights`` (with replacement by default), e.g. to oversample rare classes. Each pass over the
sampler is one ``multinomial`` draw from ``generator`` (the default generator when None)."""

from __future__ import annotations

from staticgrad._eager.creation import as_tensor
from staticgrad._eager.random_more import multinomial
from staticgrad.ops.dtypes import float64
from staticgrad.utils.data.sampler import Sampler


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn by weight (PyTorch's ``torch.utils.data.WeightedRandomSampler``)."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = as_tensor(weights, dtype=float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError("weights should be a 1d sequence but given "
                             f"weights have shape {tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        draw = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from iter(draw.tolist())

    def __len__(self) -> int:
        return self.num_samples
