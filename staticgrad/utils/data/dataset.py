"""Datasets as in ``torch.utils.data``: map-style ``Dataset``, ``IterableDataset``,
``TensorDataset``, ``Subset``, ``ConcatDataset`` and ``random_split``."""

from __future__ import annotations

import bisect
import math
import warnings

from staticgrad._eager.creation import randperm
from staticgrad._eager.generator import default_generator


class Dataset:
    """A map-style dataset: ``dataset[i]`` is sample ``i`` (subclasses define ``__getitem__``, usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream of samples (subclasses define ``__iter__``)."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        raise NotImplementedError("staticgrad.utils.data: adding IterableDatasets (ChainDataset) is not built; "
                                  "chain them with itertools.chain inside one IterableDataset")


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; every tensor has the same first dimension."""

    def __init__(self, *tensors):
        if not all(tensors[0].size(0) == t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[dataset_idx - 1] if dataset_idx > 0 else 0
        return self.datasets[dataset_idx][idx - start]


def _lengths_from_fractions(fractions, total: int) -> list:
    """PyTorch's rule: floor of each fraction's share, the remainder one by one round-robin."""
    lengths = [math.floor(total * frac) for frac in fractions]
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=default_generator) -> list:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths (or fractions summing to 1)."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths = _lengths_from_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    subsets, offset = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, indices[offset:offset + length]))
        offset += length
    return subsets
