"""staticgrad.utils.data: PyTorch's datasets, samplers, collation and DataLoader."""

from staticgrad.utils.data.collate import default_collate, default_convert
from staticgrad.utils.data.dataloader import DataLoader
from staticgrad.utils.data.dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from staticgrad.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler
from staticgrad.utils.data.weighted_sampler import WeightedRandomSampler

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
           "default_collate", "default_convert", "random_split"]
