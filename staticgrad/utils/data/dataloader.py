"""``DataLoader``: batches of a dataset in sampler order, collated into tensors, as PyTorch's
single-process loader. ``num_workers`` and ``pin_memory`` are accepted and run in this process
(the batches are the same; there is no device memory to pin)."""

from __future__ import annotations

from staticgrad.utils.data.collate import default_collate, default_convert
from staticgrad.utils.data.dataset import IterableDataset
from staticgrad.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


class _InfiniteConstantSampler:
    """The sampler of an IterableDataset: one ``None`` per sample (the dataset decides the samples)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Iterate ``dataset`` in batches: ``batch_size``, ``shuffle`` (a new order each epoch, drawn
    from ``generator`` or the default generator), ``sampler``/``batch_sampler``, ``drop_last``,
    ``collate_fn`` (default: ``default_collate``)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers: int = 0,
                 collate_fn=None, pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if isinstance(shuffle, bool) and shuffle:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self._iterable:
            return self._iterate_stream()
        return self._iterate_map()

    def _fetch(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems(indices)
        return [self.dataset[i] for i in indices]

    def _iterate_map(self):
        for index in self._index_sampler:
            if self._auto_collation:
                yield self.collate_fn(self._fetch(index))
            else:
                yield self.collate_fn(self.dataset[index])

    def _iterate_stream(self):
        stream = iter(self.dataset)
        if not self._auto_collation:
            for sample in stream:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in stream:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)
