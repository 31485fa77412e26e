"""``default_collate`` and ``default_convert``: PyTorch's rules for turning a list of samples into
a batch (tensors, arrays and numbers stacked along a new first dimension; tuples, lists, dicts
and namedtuples collated field by field; strings kept as lists)."""

from __future__ import annotations

import collections.abc
import re

import numpy as np

from staticgrad._eager.creation import from_numpy, tensor
from staticgrad._eager.functions import stack
from staticgrad._eager.tensor import Tensor

_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
_STRING_DTYPE = re.compile(r"[SaUO]")


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def default_collate(batch):
    """Stack a list of samples into a batch, as ``torch.utils.data.default_collate``."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or (isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_))):
        if _STRING_DTYPE.search(elem.dtype.str) is not None:
            raise TypeError(_ERROR.format(elem.dtype))
        if elem.shape == ():
            return tensor(np.asarray(batch))
        return stack([from_numpy(np.asarray(b)) for b in batch], 0)
    if isinstance(elem, float):
        return tensor(batch, dtype="float64")
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return collated if type(elem) is dict else type(elem)(collated)
        except TypeError:
            return collated
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return transposed
        try:
            return type(elem)(transposed) if type(elem) is not list else transposed
        except TypeError:
            return transposed
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    """Arrays to tensors, recursing into mappings and sequences; everything else unchanged
    (what a DataLoader with ``batch_size=None`` does to each sample)."""
    if isinstance(data, np.ndarray) and _STRING_DTYPE.search(data.dtype.str) is None:
        return from_numpy(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(data[key]) for key in data}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data
