"""staticgrad.utils.data against torch.utils.data: collation, batching, samplers, errors; shuffling
is reproducible from a Generator (the orders themselves differ: NumPy's PCG64 is not PyTorch's RNG)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.utils import data as sdata

torch = pytest.importorskip("torch")
tdata = torch.utils.data

Point = collections.namedtuple("Point", "x y")


def as_plain(obj):
    """A batch as nested Python/NumPy values, with each tensor's dtype name, for comparison."""
    if hasattr(obj, "detach"):
        return ("tensor", str(obj.dtype).split(".")[-1], obj.detach().numpy().tolist())
    if isinstance(obj, Point):
        return ("Point",) + tuple(as_plain(v) for v in obj)
    if isinstance(obj, dict):
        return {k: as_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [as_plain(v) for v in obj])
    return obj


SAMPLES = {
    "tuples-of-numbers": [(1, 2.5, True), (3, 4.5, False)],
    "numpy-arrays": [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)],
    "numpy-scalars": [np.float64(1.5), np.float64(2.5)],
    "int32-scalars": [np.int32(1), np.int32(7)],
    "dicts": [{"a": 1, "b": [np.float32(1), 2.0]}, {"a": 2, "b": [np.float32(3), 4.0]}],
    "lists": [[1, 2], [3, 4]],
    "strings": ["x", "y"],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
}


@pytest.mark.parametrize("name", SAMPLES)
def test_default_collate_matches_torch(name):
    batch = SAMPLES[name]
    assert as_plain(sdata.default_collate(batch)) == as_plain(tdata.default_collate(batch))


def test_default_collate_stacks_tensors_and_keeps_dtype():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 3)) for _ in range(4)]
    s = sdata.default_collate([sg.tensor(a) for a in arrays])
    t = tdata.default_collate([torch.tensor(a) for a in arrays])
    assert as_plain(s) == as_plain(t)


@pytest.mark.parametrize("batch", [[[1, 2], [3]], [object()], [np.array(["a"])]],
                         ids=["ragged", "object", "strings-array"])
def test_default_collate_errors_match_torch(batch):
    with pytest.raises(Exception) as t_error:
        tdata.default_collate(batch)
    with pytest.raises(type(t_error.value)) as s_error:
        sdata.default_collate(batch)
    assert str(s_error.value) == str(t_error.value)


@pytest.mark.parametrize("value", [(1, np.ones(2)), [np.float32(1)], {"k": np.zeros(1)}, "text"])
def test_default_convert_matches_torch(value):
    assert as_plain(sdata.default_convert(value)) == as_plain(tdata.default_convert(value))


def tensor_datasets(n=11):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((n, 3)).astype(np.float32), np.arange(n)
    return sdata.TensorDataset(sg.tensor(x), sg.tensor(y)), tdata.TensorDataset(torch.tensor(x), torch.tensor(y))


@pytest.mark.parametrize("kwargs", [dict(), dict(batch_size=4), dict(batch_size=4, drop_last=True),
                                    dict(batch_size=None), dict(batch_size=3, collate_fn=lambda b: len(b)),
                                    dict(sampler=[3, 1, 2]), dict(batch_sampler=[[0, 5], [2]])],
                         ids=["default", "batch4", "drop-last", "no-batching", "collate-fn", "sampler",
                              "batch-sampler"])
def test_unshuffled_loader_matches_torch(kwargs):
    s_set, t_set = tensor_datasets()
    s_loader, t_loader = sdata.DataLoader(s_set, **kwargs), tdata.DataLoader(t_set, **kwargs)
    assert len(s_loader) == len(t_loader)
    assert [as_plain(b) for b in s_loader] == [as_plain(b) for b in t_loader]


def test_loader_over_a_plain_list_and_an_iterable_dataset_matches_torch():
    class Stream:
        def __init__(self, base):
            self.base = base

        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    for drop_last in (False, True):
        s_stream = type("S", (Stream, sdata.IterableDataset), {})(None)
        t_stream = type("T", (Stream, tdata.IterableDataset), {})(None)
        s_loader = sdata.DataLoader(s_stream, batch_size=3, drop_last=drop_last)
        t_loader = tdata.DataLoader(t_stream, batch_size=3, drop_last=drop_last)
        assert [as_plain(b) for b in s_loader] == [as_plain(b) for b in t_loader]
        assert len(s_loader) == len(t_loader)
    items = [{"x": np.full(2, i, np.float32), "label": i} for i in range(5)]
    assert ([as_plain(b) for b in sdata.DataLoader(items, batch_size=2)]
            == [as_plain(b) for b in tdata.DataLoader(items, batch_size=2)])


def epoch_orders(loader, epochs=3):
    return [[int(i) for _, y in loader for i in y.tolist()] for _ in range(epochs)]


def test_shuffle_is_a_new_permutation_each_epoch_reproducible_from_a_generator():
    s_set, _ = tensor_datasets(20)
    orders = epoch_orders(sdata.DataLoader(s_set, batch_size=6, shuffle=True,
                                           generator=sg.Generator().manual_seed(5)))
    again = epoch_orders(sdata.DataLoader(s_set, batch_size=6, shuffle=True,
                                          generator=sg.Generator().manual_seed(5)))
    assert orders == again
    assert all(sorted(o) == list(range(20)) for o in orders)
    assert orders[0] != orders[1] and orders[0] != list(range(20))


def test_shuffle_without_a_generator_follows_manual_seed():
    s_set, _ = tensor_datasets(20)
    sg.manual_seed(3)
    first = epoch_orders(sdata.DataLoader(s_set, batch_size=5, shuffle=True), 2)
    sg.manual_seed(3)
    assert epoch_orders(sdata.DataLoader(s_set, batch_size=5, shuffle=True), 2) == first


def test_random_sampler_with_replacement_and_num_samples():
    sampler = sdata.RandomSampler(range(4), replacement=True, num_samples=70, generator=sg.Generator().manual_seed(0))
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 70 and set(drawn) <= {0, 1, 2, 3}
    wrapped = list(sdata.RandomSampler(range(4), num_samples=10, generator=sg.Generator()))
    assert sorted(wrapped[:4]) == [0, 1, 2, 3] and len(wrapped) == 10


@pytest.mark.parametrize("kwargs", [dict(shuffle=True, sampler=[0, 1]), dict(batch_size=2, batch_sampler=[[0, 1]]),
                                    dict(batch_size=None, drop_last=True), dict(num_workers=-1)],
                         ids=["shuffle-sampler", "batch-sampler", "unbatched-drop-last", "workers"])
def test_loader_option_errors_match_torch(kwargs):
    with pytest.raises(ValueError) as t_error:
        tdata.DataLoader([1, 2], **kwargs)
    with pytest.raises(ValueError) as s_error:
        sdata.DataLoader([1, 2], **kwargs)
    assert str(s_error.value) == str(t_error.value)


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.33, 0.33, 0.34], [0.5, 0.5]])
def test_random_split_lengths_match_torch_and_partition_the_dataset(lengths):
    s_parts = sdata.random_split(range(10), lengths, generator=sg.Generator().manual_seed(1))
    t_parts = tdata.random_split(range(10), lengths, generator=torch.Generator().manual_seed(1))
    assert [len(p) for p in s_parts] == [len(p) for p in t_parts]
    assert sorted(i for p in s_parts for i in p) == list(range(10))
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        sdata.random_split(range(10), [3, 3])


def test_subset_concat_and_tensor_dataset_indexing():
    s_set, t_set = tensor_datasets(6)
    s_sub, t_sub = sdata.Subset(s_set, [4, 0, 2]), tdata.Subset(t_set, [4, 0, 2])
    assert [as_plain(s_sub[i]) for i in range(3)] == [as_plain(t_sub[i]) for i in range(3)]
    s_cat, t_cat = s_sub + s_set, t_sub + t_set
    assert len(s_cat) == len(t_cat) == 9
    assert as_plain(s_cat[-1]) == as_plain(t_cat[-1]) and as_plain(s_cat[3]) == as_plain(t_cat[3])
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        sdata.TensorDataset(sg.zeros(2), sg.zeros(3))


def test_generator_seeding_and_state_round_trip():
    g = sg.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed()
    assert g.manual_seed(7) is g and g.initial_seed() == 7
    state = g.get_state()
    assert state.dtype == sg.uint8
    first = sg.randn(3, generator=g)
    g.set_state(state)
    assert np.array_equal(sg.randn(3, generator=g).numpy(), first.numpy())
    assert g.seed() == g.initial_seed()
    with pytest.raises(TypeError, match=r"RNG state must be a torch\.ByteTensor"):
        g.set_state(sg.zeros(3))


def test_default_generator_is_the_one_manual_seed_seeds():
    sg.manual_seed(11)
    assert sg.default_generator.initial_seed() == sg.initial_seed() == 11
    a = sg.rand(4)
    sg.default_generator.manual_seed(11)
    assert np.array_equal(sg.rand(4).numpy(), a.numpy())
    state = sg.get_rng_state()
    b = sg.randn(2)
    sg.set_rng_state(state)
    assert np.array_equal(sg.randn(2).numpy(), b.numpy())


def test_randperm_matches_torch_rules():
    p = sg.randperm(9, generator=sg.Generator().manual_seed(0))
    assert str(p.dtype).split(".")[-1] == str(torch.randperm(9).dtype).split(".")[-1] == "int64"
    assert sorted(p.tolist()) == list(range(9))
    assert str(sg.randperm(3, dtype=sg.float32).dtype).endswith("float32")
    with pytest.raises(RuntimeError) as t_error:
        torch.randperm(-1)
    with pytest.raises(RuntimeError) as s_error:
        sg.randperm(-1)
    assert str(s_error.value) == str(t_error.value)


def test_generator_draws_replay_from_the_generator_in_a_compiled_function():
    """A compiled function drawing from a Generator re-samples from it on every replay, exactly as eager."""
    def draw(x):
        return x + sg.randn(3, generator=gen) + sg.randperm(3, generator=gen).float()

    gen = sg.Generator().manual_seed(4)
    eager = [draw(sg.ones(3)).numpy() for _ in range(4)]
    gen.manual_seed(4)
    compiled = sg.compile(draw)
    replayed = [compiled(sg.ones(3)).numpy() for _ in range(4)]
    assert compiled.stats.replays >= 2
    for e, r in zip(eager, replayed):
        assert np.array_equal(e, r)
