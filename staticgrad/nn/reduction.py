"""The losses' reduction: the legacy ``size_average`` / ``reduce`` arguments, read as PyTorch reads
them (given either, they decide the reduction, overriding ``reduction``, and PyTorch's deprecation
warning is shown: ``size_average=False`` means "sum", ``reduce=False`` means "none"), and the base
classes of the loss modules, which keep the reduction they decide."""

from __future__ import annotations

import warnings

from staticgrad.nn.module import Module

_WARNING = "size_average and reduce args will be deprecated, please use reduction='{}' instead."


def legacy_reduction(size_average, reduce, reduction: str, stacklevel: int = 3) -> str:
    """The reduction a loss applies: ``reduction`` unless ``size_average`` or ``reduce`` is given."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(_WARNING.format(result), UserWarning, stacklevel=stacklevel)
    return result


class _Loss(Module):
    """A loss module: its reduction, from the legacy ``size_average``/``reduce`` when given."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction, stacklevel=4)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
