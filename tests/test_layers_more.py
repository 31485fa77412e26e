"""embedding_bag / EmbeddingBag, embedding's max_norm, rrelu / RReLU and bilinear / Bilinear against
PyTorch: values, gradients (weights and per-sample weights), double backward and node names; finite
differences; PyTorch's errors; replay equals eager bit for bit (rrelu's training noise re-drawn by
each replay exactly as eager draws it under the same seed)."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(71)


def R(*shape):
    return rng.standard_normal(shape)


def F(lib):
    return lib.nn.functional


INDICES = np.array([1, 2, 4, 5, 4, 3, 7])
OFFSETS = np.array([0, 2, 2, 5])

BAGS = [
    ("sum", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS), mode="sum"), [R(10, 3)]),
    ("mean", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS)), [R(10, 3)]),
    ("max", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS), mode="max"), [R(10, 3)]),
    ("two_d_mean", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES[:6].reshape(2, 3)), w), [R(10, 4)]),
    ("two_d_max", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES[:6].reshape(3, 2)), w, mode="max"),
     [R(10, 4)]),
    ("per_sample_weights", lambda lib, w, p: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS),
                                                                  mode="sum", per_sample_weights=p),
     [R(10, 3), R(7)]),
    ("include_last_offset", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor([0, 2, 5, 7]),
                                                                include_last_offset=True), [R(10, 3)]),
    ("padding_idx_mean", lambda lib, w: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS),
                                                             padding_idx=4), [R(10, 3)]),
    ("padding_idx_sum_weights", lambda lib, w, p: F(lib).embedding_bag(lib.tensor(INDICES), w, lib.tensor(OFFSETS),
                                                                       mode="sum", per_sample_weights=p,
                                                                       padding_idx=5), [R(10, 3), R(7)]),
    ("module", lambda lib, w: lib.nn.EmbeddingBag.from_pretrained(w, freeze=False, mode="sum")(
        lib.tensor(INDICES), lib.tensor(OFFSETS)), [R(10, 3)]),
]


@pytest.mark.parametrize("name,fn,arrays", BAGS, ids=[c[0] for c in BAGS])
def test_embedding_bag_matches_torch(name, fn, arrays):
    double = "weights" not in name  # PyTorch has no double backward through per_sample_weights
    compare(fn, arrays, double=double, atol=1e-12, rtol=1e-12)
    compare(fn, [a.astype(np.float32) for a in arrays])


@pytest.mark.parametrize("name,fn,arrays", [c for c in BAGS if "max" not in c[0] and c[0] != "module"],
                         ids=[c[0] for c in BAGS if "max" not in c[0] and c[0] != "module"])
def test_embedding_bag_gradient_matches_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


def test_embedding_max_norm_renormalises_the_rows_it_reads_in_place():
    weight = R(6, 3) * 2
    for lib in (torch, sg):
        w = lib.tensor(weight.copy(), requires_grad=True)
        out = F(lib).embedding(lib.tensor([[0, 2], [2, 5]]), w, max_norm=1.0)
        (out * lib.tensor(np.arange(12.0).reshape(2, 2, 3))).sum().backward()
        if lib is torch:
            expected = (w.detach().numpy(), out.detach().numpy(), w.grad.numpy(), out.grad_fn.name())
        else:
            got = (w.detach().numpy(), out.detach().numpy(), w.grad.numpy(), out.grad_fn.name())
    for theirs, ours in zip(expected[:3], got[:3]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert got[3] == expected[3]
    module = sg.nn.Embedding(5, 4, max_norm=0.5)
    module(sg.tensor([1, 3]))
    assert np.all(np.linalg.norm(module.weight.detach().numpy()[[1, 3]], axis=1) <= 0.5 + 1e-6)


RRELU = [
    ("eval", lambda lib, x: F(lib).rrelu(x), [R(3, 4)]),
    ("eval_bounds", lambda lib, x: F(lib).rrelu(x, 0.1, 0.5), [R(3, 4)]),
    ("module_eval", lambda lib, x: lib.nn.RReLU(0.2, 0.4).eval()(x), [R(5)]),
    ("inplace_eval", lambda lib, x: F(lib).rrelu_(x * 1.0), [R(5)]),
]


@pytest.mark.parametrize("name,fn,arrays", RRELU, ids=[c[0] for c in RRELU])
def test_rrelu_in_eval_matches_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-12, rtol=1e-12)


def test_rrelu_in_training_draws_slopes_between_the_bounds():
    x = sg.tensor(-np.abs(R(2000)) - 0.1, requires_grad=True)
    y = F(sg).rrelu(x, 0.1, 0.3, training=True)
    assert y.grad_fn.name() == "RreluWithNoiseBackward0"
    slopes = (y / x).detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.01
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes)
    positive = sg.tensor(np.abs(R(10)))
    assert np.array_equal(F(sg).rrelu(positive, training=True).numpy(), positive.numpy())


def test_compiled_rrelu_in_training_replays_eager_draws():
    def step(x):
        return sg.nn.functional.rrelu(x, training=True) * 2.0

    compiled = sg.compile(step)
    for call in range(3):
        x = sg.tensor(R(4, 5))
        sg.manual_seed(call)
        want = step(x)
        sg.manual_seed(call)
        got = compiled(x)
        assert np.array_equal(got.numpy(), want.numpy()), call
    assert compiled.stats.replays >= 1


BILINEAR = [
    ("bias", lambda lib, a, b, w, c: F(lib).bilinear(a, b, w, c), [R(3, 4), R(3, 5), R(6, 4, 5), R(6)]),
    ("no_bias", lambda lib, a, b, w: F(lib).bilinear(a, b, w), [R(3, 4), R(3, 5), R(6, 4, 5)]),
    ("batch_dims", lambda lib, a, b, w, c: F(lib).bilinear(a, b, w, c), [R(2, 3, 4), R(2, 3, 2), R(5, 4, 2), R(5)]),
]


@pytest.mark.parametrize("name,fn,arrays", BILINEAR, ids=[c[0] for c in BILINEAR])
def test_bilinear_matches_torch(name, fn, arrays):
    compare(fn, arrays, double=True, atol=1e-10, rtol=1e-10)
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


def test_bilinear_module_initialises_and_computes_like_torch():
    module = sg.nn.Bilinear(4, 5, 3)
    assert module.weight.shape == (3, 4, 5) and module.bias.shape == (3,)
    bound = 1 / np.sqrt(4)
    assert np.abs(module.weight.detach().numpy()).max() <= bound
    reference = torch.nn.Bilinear(4, 5, 3).double()
    with torch.no_grad():
        reference.weight.copy_(torch.tensor(module.weight.detach().numpy()))
        reference.bias.copy_(torch.tensor(module.bias.detach().numpy()))
    a, b = R(2, 4).astype(np.float32), R(2, 5).astype(np.float32)
    np.testing.assert_allclose(module(sg.tensor(a), sg.tensor(b)).detach().numpy(),
                               reference(torch.tensor(a).double(), torch.tensor(b).double()).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


ERRORS = [
    ("bag_weights_mean", lambda lib: F(lib).embedding_bag(lib.tensor([1, 2]), lib.ones(4, 2), lib.tensor([0]),
                                                          per_sample_weights=lib.ones(2))),
    ("bag_2d_offsets", lambda lib: F(lib).embedding_bag(lib.tensor([[1, 2]]), lib.ones(4, 2), lib.tensor([0]))),
    ("bag_no_offsets", lambda lib: F(lib).embedding_bag(lib.tensor([1, 2]), lib.ones(4, 2))),
    ("bilinear_batch", lambda lib: F(lib).bilinear(lib.ones(2, 3), lib.ones(3, 3), lib.ones(1, 3, 3))),
    ("bilinear_weight", lambda lib: F(lib).bilinear(lib.ones(2, 3), lib.ones(2, 3), lib.ones(1, 2, 3))),
    ("bilinear_dtypes", lambda lib: F(lib).bilinear(lib.ones(2, 3), lib.ones(2, 3), lib.ones(1, 3, 3),
                                                    lib.ones(1, dtype=lib.float64))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


def test_compiled_embedding_bag_and_bilinear_replay_eager():
    weight = sg.tensor(R(10, 4).astype(np.float32), requires_grad=True)
    mixing = sg.tensor(R(3, 4, 4).astype(np.float32), requires_grad=True)

    def step(indices, offsets):
        bags = F(sg).embedding_bag(indices, weight, offsets, mode="mean")
        out = F(sg).bilinear(bags, bags, mixing).sum()
        weight.grad = mixing.grad = None
        out.backward()
        return out, weight.grad, mixing.grad

    compiled = sg.compile(step)
    for call in range(3):
        indices = sg.tensor(rng.integers(0, 10, 8))
        offsets = sg.tensor(np.array([0, 3, 3, 6]))
        for ours, eager in zip(compiled(indices, offsets), step(indices, offsets)):
            assert ours.detach().numpy().tobytes() == eager.detach().numpy().tobytes(), call
    assert compiled.stats.replays >= 1
