"""The margin, embedding and likelihood losses (margin_ranking ... gaussian_nll, pairwise_distance) and
their modules against PyTorch in float64 and float32: values, gradients, double backward and node names
for every reduction; finite differences; PyTorch's errors; replay equals eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error
from tests.replay_check import replay_matches_eager

rng = np.random.default_rng(53)


def R(*shape):
    return rng.standard_normal(shape)


def signs(*shape):
    return np.where(rng.standard_normal(shape) > 0, 1.0, -1.0)


SIGNS5, SIGNS4, SIGNS43 = signs(5), signs(4), signs(4, 3)
BITS43 = (R(4, 3) > 0).astype(float)
COUNTS43 = np.abs(R(4, 3)) * 3
LABELS = np.array([[0, 1, -1], [2, -1, 0], [1, 0, 2], [-1, 0, 0]])
CLASSES = np.array([0, 2, 1, 1])

LOSSES = [
    ("margin_ranking", lambda lib, a, b, r: lib.nn.functional.margin_ranking_loss(a, b, lib.tensor(SIGNS5),
                                                                                  margin=0.1, reduction=r),
     [R(5), R(5)]),
    ("hinge_embedding", lambda lib, a, r: lib.nn.functional.hinge_embedding_loss(a, lib.tensor(SIGNS43),
                                                                                 reduction=r), [R(4, 3)]),
    ("hinge_embedding_margin", lambda lib, a, r: lib.nn.functional.hinge_embedding_loss(
        a, lib.tensor(SIGNS43), margin=0.5, reduction=r), [R(4, 3)]),
    ("soft_margin", lambda lib, a, r: lib.nn.functional.soft_margin_loss(a, lib.tensor(SIGNS43), reduction=r),
     [R(4, 3)]),
    ("multilabel_soft_margin", lambda lib, a, r: lib.nn.functional.multilabel_soft_margin_loss(
        a, lib.tensor(BITS43), reduction=r), [R(4, 3)]),
    ("multilabel_soft_margin_weight", lambda lib, a, w, r: lib.nn.functional.multilabel_soft_margin_loss(
        a, lib.tensor(BITS43), weight=w, reduction=r), [R(4, 3), R(3)]),
    ("multilabel_margin", lambda lib, a, r: lib.nn.functional.multilabel_margin_loss(a, lib.tensor(LABELS),
                                                                                     reduction=r), [R(4, 3)]),
    ("multilabel_margin_1d", lambda lib, a, r: lib.nn.functional.multilabel_margin_loss(
        a, lib.tensor([2, 0, -1, 1]), reduction=r), [R(4)]),
    ("multi_margin", lambda lib, a, r: lib.nn.functional.multi_margin_loss(a, lib.tensor(CLASSES), reduction=r),
     [R(4, 3)]),
    ("multi_margin_p2_weight", lambda lib, a, w, r: lib.nn.functional.multi_margin_loss(
        a, lib.tensor(CLASSES), p=2, margin=0.5, weight=w, reduction=r), [R(4, 3), np.array([1.0, 2.0, 3.0])]),
    ("multi_margin_1d", lambda lib, a, r: lib.nn.functional.multi_margin_loss(a, lib.tensor(1), reduction=r),
     [R(3)]),
    ("triplet", lambda lib, a, p, n, r: lib.nn.functional.triplet_margin_loss(a, p, n, reduction=r),
     [R(4, 3), R(4, 3), R(4, 3)]),
    ("triplet_swap_p1", lambda lib, a, p, n, r: lib.nn.functional.triplet_margin_loss(
        a, p, n, margin=0.5, p=1, swap=True, reduction=r), [R(4, 3), R(4, 3), R(4, 3)]),
    ("cosine_embedding", lambda lib, a, b, r: lib.nn.functional.cosine_embedding_loss(
        a, b, lib.tensor(SIGNS4), margin=0.2, reduction=r), [R(4, 3), R(4, 3)]),
    ("cosine_embedding_1d", lambda lib, a, b, r: lib.nn.functional.cosine_embedding_loss(
        a, b, lib.tensor(-1.0), reduction=r), [R(3), R(3)]),
    ("poisson_nll", lambda lib, a, r: lib.nn.functional.poisson_nll_loss(a, lib.tensor(COUNTS43),
                                                                         reduction=r), [R(4, 3)]),
    ("poisson_nll_full", lambda lib, a, r: lib.nn.functional.poisson_nll_loss(
        a.exp(), lib.tensor(COUNTS43), log_input=False, full=True, reduction=r), [R(4, 3)]),
    ("gaussian_nll", lambda lib, a, b, v, r: lib.nn.functional.gaussian_nll_loss(a, b, v, reduction=r),
     [R(4, 3), R(4, 3), np.abs(R(4, 3)) + 0.1]),
    ("gaussian_nll_full_column_var", lambda lib, a, b, v, r: lib.nn.functional.gaussian_nll_loss(
        a, b, v, full=True, reduction=r), [R(4, 3), R(4, 3), np.abs(R(4, 1)) + 0.1]),
    ("gaussian_nll_clamped_var", lambda lib, a, b, v, r: lib.nn.functional.gaussian_nll_loss(
        a, b, v, eps=0.5, reduction=r), [R(4, 3), R(4, 3), np.abs(R(4)) + 0.1]),
]


def _with(fn, reduction):
    return lambda lib, *xs: fn(lib, *xs, reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,fn,arrays", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(name, fn, arrays, reduction):
    requires_grad = [True, False] if name == "multi_margin_p2_weight" else None  # PyTorch: no gradient for weight
    double = not name.startswith(("multi_margin", "multilabel_margin"))  # PyTorch has no double backward there
    compare(_with(fn, reduction), arrays, requires_grad, double=double, atol=1e-10, rtol=1e-10)
    compare(_with(fn, reduction), [a.astype(np.float32) for a in arrays], requires_grad, atol=1e-5, rtol=1e-5)


# Not the clamped var (PyTorch's gradient ignores the clamp) nor multi_margin's weight (no gradient).
SMOOTH = [c for c in LOSSES if c[0] not in ("gaussian_nll_clamped_var", "multi_margin_p2_weight")]


@pytest.mark.parametrize("name,fn,arrays", SMOOTH, ids=[c[0] for c in SMOOTH])
def test_loss_gradient_matches_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs, "sum"), arrays)


PAIRWISE = [
    ("default", lambda lib, a, b: lib.nn.functional.pairwise_distance(a, b), [R(4, 3), R(4, 3)]),
    ("p1_keepdim", lambda lib, a, b: lib.nn.functional.pairwise_distance(a, b, p=1, keepdim=True), [R(4, 3), R(3)]),
    ("vectors", lambda lib, a, b: lib.nn.functional.pairwise_distance(a, b, eps=0.0), [R(3), R(3)]),
    ("module", lambda lib, a, b: lib.nn.PairwiseDistance(p=3)(a, b), [R(2, 5), R(2, 5)]),
]


@pytest.mark.parametrize("name,fn,arrays", PAIRWISE, ids=[c[0] for c in PAIRWISE])
def test_pairwise_distance_matches_torch(name, fn, arrays):
    compare(fn, arrays, double=True, atol=1e-10, rtol=1e-10)


MODULES = [
    ("MarginRankingLoss", lambda lib, a, b: lib.nn.MarginRankingLoss(margin=0.3)(a, b, lib.tensor([1.0, -1.0, 1.0])),
     [R(3), R(3)]),
    ("HingeEmbeddingLoss", lambda lib, a: lib.nn.HingeEmbeddingLoss(2.0, reduction="sum")(
        a, lib.tensor([[1.0, -1.0], [-1.0, 1.0]])), [R(2, 2)]),
    ("SoftMarginLoss", lambda lib, a: lib.nn.SoftMarginLoss()(a, lib.tensor([[1.0, -1.0], [-1.0, 1.0]])), [R(2, 2)]),
    ("MultiLabelSoftMarginLoss", lambda lib, a: lib.nn.MultiLabelSoftMarginLoss()(a, lib.tensor([[1.0, 0.0]])),
     [R(1, 2)]),
    ("MultiLabelMarginLoss", lambda lib, a: lib.nn.MultiLabelMarginLoss()(a, lib.tensor(LABELS)), [R(4, 3)]),
    ("MultiMarginLoss", lambda lib, a: lib.nn.MultiMarginLoss(p=2)(a, lib.tensor(CLASSES)), [R(4, 3)]),
    ("TripletMarginLoss", lambda lib, a, p, n: lib.nn.TripletMarginLoss(margin=0.5)(a, p, n),
     [R(2, 3), R(2, 3), R(2, 3)]),
    ("CosineEmbeddingLoss", lambda lib, a, b: lib.nn.CosineEmbeddingLoss()(a, b, lib.tensor([1.0, -1.0])),
     [R(2, 3), R(2, 3)]),
    ("PoissonNLLLoss", lambda lib, a: lib.nn.PoissonNLLLoss()(a, lib.tensor([[1.0, 2.0]])), [R(1, 2)]),
    ("GaussianNLLLoss", lambda lib, a, b: lib.nn.GaussianNLLLoss()(a, b, lib.ones(2, 3)), [R(2, 3), R(2, 3)]),
]


@pytest.mark.parametrize("name,fn,arrays", MODULES, ids=[c[0] for c in MODULES])
def test_modules_match_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-10)
    assert getattr(sg.nn.modules.loss, name) is getattr(sg.nn, name)


ERRORS = [
    ("multi_margin_p3", lambda lib: lib.nn.functional.multi_margin_loss(lib.ones(2, 3), lib.tensor([0, 1]), p=3)),
    ("margin_ranking_dims", lambda lib: lib.nn.functional.margin_ranking_loss(lib.ones(2), lib.ones(2, 1),
                                                                              lib.ones(2))),
    ("gaussian_negative_var", lambda lib: lib.nn.functional.gaussian_nll_loss(lib.ones(2), lib.ones(2),
                                                                              -lib.ones(2))),
    ("gaussian_var_size", lambda lib: lib.nn.functional.gaussian_nll_loss(lib.ones(2, 3), lib.ones(2, 3),
                                                                          lib.ones(3, 2))),
    ("multilabel_margin_target", lambda lib: lib.nn.functional.multilabel_margin_loss(lib.ones(4, 3),
                                                                                      lib.tensor([0, 1, 2, 0]))),
    ("triplet_dims", lambda lib: lib.nn.functional.triplet_margin_loss(lib.ones(2, 3), lib.ones(2, 3), lib.ones(3))),
    ("triplet_module_margin", lambda lib: lib.nn.TripletMarginLoss(margin=0.0)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


def _inputs(rng):
    return rng.standard_normal((4, 6)), np.where(rng.standard_normal((4, 6)) > 0, 1.0, -1.0)


REPLAYED = [
    ("soft_margin", lambda a, b: sg.nn.functional.soft_margin_loss(a, b) * b),
    ("hinge_embedding", lambda a, b: sg.nn.functional.hinge_embedding_loss(a, b, reduction="none") * b),
    ("multi_margin", lambda a, b: sg.nn.functional.multi_margin_loss(a, sg.tensor([0, 5, 2, 1]), p=2) * b),
    ("multilabel_margin", lambda a, b: sg.nn.functional.multilabel_margin_loss(
        a, sg.tensor([[0, 1, -1, 0, 0, 0]] * 4)) * b),
    ("triplet", lambda a, b: sg.nn.functional.triplet_margin_loss(a, b, a * 2.0) * b),
    ("cosine_embedding", lambda a, b: sg.nn.functional.cosine_embedding_loss(a, b, sg.tensor([1.0, -1.0, 1.0, -1.0]))
     * b),
    ("poisson_nll", lambda a, b: sg.nn.functional.poisson_nll_loss(a, b.abs()) * b),
]


@pytest.mark.parametrize("name,op", REPLAYED, ids=[c[0] for c in REPLAYED])
def test_replay_matches_eager_bit_for_bit(name, op):
    replay_matches_eager(op, _inputs, np.float32)


def test_compiled_gaussian_nll_checks_var_on_every_replay():
    compiled = sg.compile(lambda a, v: sg.nn.functional.gaussian_nll_loss(a, a * 2, v))
    for call in range(3):
        a, v = sg.tensor(R(2, 3).astype(np.float32)), sg.tensor(np.abs(R(2, 3)).astype(np.float32) + 0.1)
        want = sg.nn.functional.gaussian_nll_loss(a, a * 2, v)
        assert compiled(a, v).numpy().tobytes() == want.numpy().tobytes(), call
    assert compiled.stats.replays >= 1
    with pytest.raises(ValueError, match="var has negative entry"):
        compiled(sg.ones(2, 3), -sg.ones(2, 3))


# ---- ctc_loss --------------------------------------------------------------------------------------------

def F(lib):
    return lib.nn.functional


def _log_probs(steps, batch, classes, seed=0):
    x = np.random.default_rng(seed).standard_normal((steps, batch, classes))
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


CTC = [
    ("padded_none", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([[1, 2, 2], [3, 1, 0]]), lib.tensor([6, 5]),
                                                    lib.tensor([3, 2]), reduction="none"), [_log_probs(6, 2, 4)]),
    ("padded_mean", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([[1, 2, 2], [3, 1, 0]]), lib.tensor([6, 5]),
                                                    lib.tensor([3, 2])), [_log_probs(6, 2, 4)]),
    ("concatenated_sum", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([1, 2, 2, 3, 1]), (6, 5), (3, 2),
                                                         reduction="sum"), [_log_probs(6, 2, 4)]),
    ("blank_last_repeats", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([[0, 0, 1], [2, 2, 2]]),
                                                           lib.tensor([7, 7]), lib.tensor([3, 3]), blank=3,
                                                           reduction="none"), [_log_probs(7, 2, 4, 1)]),
    ("empty_target", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([[1, 2], [0, 0]]), lib.tensor([4, 3]),
                                                     lib.tensor([2, 0]), reduction="none"), [_log_probs(4, 2, 3, 2)]),
    ("unbatched", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([1, 2]), lib.tensor(5), lib.tensor(2),
                                                  reduction="none"), [_log_probs(5, 1, 3, 3)[:, 0]]),
    ("impossible_zero_infinity", lambda lib, lp: F(lib).ctc_loss(lp, lib.tensor([[1, 2, 2], [3, 1, 0]]),
                                                                 lib.tensor([2, 2]), lib.tensor([3, 2]),
                                                                 reduction="sum", zero_infinity=True),
     [_log_probs(6, 2, 4)]),
    ("module", lambda lib, lp: lib.nn.CTCLoss(blank=1)(lp, lib.tensor([[0, 2], [2, 3]]), [5, 4], [2, 1]),
     [_log_probs(5, 2, 4, 4)]),
]


@pytest.mark.parametrize("name,fn,arrays", CTC, ids=[c[0] for c in CTC])
def test_ctc_loss_matches_torch(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-10)
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


def test_ctc_loss_gradient_is_pytorchs_logit_gradient():
    """PyTorch's CTC backward returns exp(lp) - posterior, the gradient with respect to the logits before
    log_softmax: through log_softmax it is the true gradient, which finite differences confirm."""
    targets, lengths = sg.tensor([[1, 2, 2], [3, 1, 0]]), sg.tensor([3, 2])
    finite_difference_check(lambda x: F(sg).ctc_loss(x.log_softmax(2), targets, sg.tensor([6, 5]), lengths,
                                                     reduction="sum"), [R(6, 2, 4)])


def test_ctc_loss_errors_and_no_double_backward():
    same_error(lambda lib: F(lib).ctc_loss(lib.zeros(3, 1, 4), lib.tensor([[1]]), lib.tensor([4]), lib.tensor([1])))
    lp = sg.tensor(_log_probs(4, 1, 3), requires_grad=True)
    loss = F(sg).ctc_loss(lp, sg.tensor([[1]]), sg.tensor([4]), sg.tensor([1]))
    (grad,) = sg.autograd.grad(loss, lp, create_graph=True)
    with pytest.raises(NotImplementedError, match="_ctc_loss_backward"):
        sg.autograd.grad(grad.sum(), lp)


def test_compiled_ctc_loss_replays_eager():
    logits = sg.tensor(R(6, 2, 4).astype(np.float32), requires_grad=True)

    def step(targets, input_lengths, target_lengths):
        logits.grad = None
        loss = F(sg).ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths)
        loss.backward()
        return loss, logits.grad

    compiled = sg.compile(step)
    for call in range(3):
        args = (sg.tensor(rng.integers(1, 4, (2, 3))), sg.tensor([6, 4 + call % 2]), sg.tensor([3, 2]))
        for ours, eager in zip(compiled(*args), step(*args)):
            assert ours.detach().numpy().tobytes() == eager.detach().numpy().tobytes(), call
    assert compiled.stats.replays >= 1
