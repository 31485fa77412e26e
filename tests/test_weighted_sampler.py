"""torch.utils.data.WeightedRandomSampler: PyTorch's checks and messages, draws at the given
weights (with and without replacement), reproducible under a Generator, and inside a DataLoader."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
import staticgrad.utils.data as sdata
from tests.oracle import same_error

torch = pytest.importorskip("torch")


def test_draws_follow_the_weights_with_replacement():
    sampler = sdata.WeightedRandomSampler([1.0, 0.0, 3.0, 4.0], 40000, generator=sg.Generator().manual_seed(0))
    assert len(sampler) == 40000 and sampler.replacement
    assert sampler.weights.dtype == sg.float64
    counts = np.bincount(list(sampler), minlength=4) / 40000
    np.testing.assert_allclose(counts, [0.125, 0.0, 0.375, 0.5], atol=0.01)


def test_without_replacement_every_index_once():
    sampler = sdata.WeightedRandomSampler(sg.tensor([0.9, 0.4, 0.05, 0.2, 0.3, 0.1]), 6, replacement=False)
    for _ in range(5):
        assert sorted(sampler) == list(range(6))


def test_a_generator_makes_epochs_reproducible_and_each_epoch_draws_anew():
    def epochs(seed):
        sampler = sdata.WeightedRandomSampler(np.arange(1, 11), 20, generator=sg.Generator().manual_seed(seed))
        return [list(sampler) for _ in range(2)]
    first = epochs(4)
    assert first == epochs(4)
    assert first[0] != first[1]
    sg.manual_seed(8)
    default = list(sdata.WeightedRandomSampler([1, 2, 3], 10))
    sg.manual_seed(8)
    assert list(sdata.WeightedRandomSampler([1, 2, 3], 10)) == default


def test_in_a_data_loader_oversamples_the_rare_class():
    labels = sg.tensor([0] * 90 + [1] * 10)
    data = sdata.TensorDataset(sg.arange(100), labels)
    weights = [1 / 90] * 90 + [1 / 10] * 10
    loader = sdata.DataLoader(data, batch_size=50, sampler=sdata.WeightedRandomSampler(weights, 2000))
    seen = sg.cat([y for _, y in loader]).numpy()
    assert seen.shape == (2000,) and 0.44 < seen.mean() < 0.56


@pytest.mark.parametrize("call", [
    lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], 0),
    lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], -3),
    lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], True),
    lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], 2.0),
    lambda lib: lib.utils.data.WeightedRandomSampler([1.0, 2.0], 2, replacement=1),
    lambda lib: lib.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2),
    lambda lib: list(lib.utils.data.WeightedRandomSampler([1.0, 2.0], 3, replacement=False)),
    lambda lib: list(lib.utils.data.WeightedRandomSampler([0.0, 0.0], 3)),
    lambda lib: list(lib.utils.data.WeightedRandomSampler([-1.0, 1.0], 3)),
], ids=["zero", "negative", "bool", "float", "replacement_int", "2d", "too_many", "all_zero", "negative_weight"])
def test_bad_arguments_raise_torch_errors(call):
    same_error(call)
