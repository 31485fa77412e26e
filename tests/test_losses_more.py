"""binary_cross_entropy (+ with logits), smooth_l1/huber/l1, kl_div, cosine_similarity, class-weighted
nll_loss / cross_entropy and class-probability cross_entropy against PyTorch: values, gradients, node
names and errors in float64; finite differences; each loss in a compiled training step that replays
eager bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(11)
REDUCTIONS = ["none", "mean", "sum"]
EXACT = dict(atol=1e-12, rtol=1e-10)


def F(lib):
    return lib.nn.functional


def probs(*shape):
    return rng.uniform(0.05, 0.95, size=shape)


def R(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def positive(*shape):
    return rng.uniform(0.2, 2.0, size=shape)


def classes(*shape, high=4):
    return rng.integers(0, high, size=shape)


def with_ignored(t):
    t = t.copy()
    t.flat[1] = -100
    return t


def soft_targets(*shape):
    p = rng.uniform(0.0, 1.0, size=shape)
    return p / p.sum(1, keepdims=True)


def kl(lib, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return F(lib).kl_div(*args, **kwargs)


# (id, fn(lib, *tensors), arrays, requires_grad)
CASES = []
for _r in REDUCTIONS:
    CASES += [
        (f"bce_{_r}", lambda lib, x, t, r=_r: F(lib).binary_cross_entropy(x, t, reduction=r),
         [probs(3, 4), probs(3, 4)], None),
        (f"bce_weight_{_r}", lambda lib, x, t, w, r=_r: F(lib).binary_cross_entropy(x, t, w, reduction=r),
         [probs(3, 4), probs(3, 4), positive(4)], [True, True, False]),
        (f"bce_logits_{_r}", lambda lib, x, t, r=_r: F(lib).binary_cross_entropy_with_logits(x, t, reduction=r),
         [R(3, 4), probs(3, 4)], None),
        (f"bce_logits_weights_{_r}",
         lambda lib, x, t, w, pw, r=_r: F(lib).binary_cross_entropy_with_logits(x, t, w, reduction=r, pos_weight=pw),
         [R(3, 4), probs(3, 4), positive(3, 4), positive(4)], [True, True, False, False]),
        (f"bce_logits_pos_weight_{_r}",
         lambda lib, x, t, pw, r=_r: F(lib).binary_cross_entropy_with_logits(x, t, reduction=r, pos_weight=pw),
         [R(2, 3), probs(2, 3), positive(3)], [True, True, False]),
        (f"smooth_l1_{_r}", lambda lib, x, t, r=_r: F(lib).smooth_l1_loss(x, t, reduction=r, beta=0.7),
         [R(3, 4), R(3, 4)], None),
        (f"smooth_l1_beta0_{_r}", lambda lib, x, t, r=_r: F(lib).smooth_l1_loss(x, t, reduction=r, beta=0.0),
         [R(3, 4), R(3, 4)], None),
        (f"huber_{_r}", lambda lib, x, t, r=_r: F(lib).huber_loss(x, t, reduction=r, delta=0.8),
         [R(3, 4), R(3, 4)], None),
        (f"l1_{_r}", lambda lib, x, t, r=_r: F(lib).l1_loss(x, t, reduction=r), [R(3, 4), R(3, 4)], None),
        (f"kl_{_r}", lambda lib, x, t, r=_r: kl(lib, x, t, reduction=r), [R(3, 4), probs(3, 4)], [True, False]),
        (f"kl_log_target_{_r}", lambda lib, x, t, r=_r: kl(lib, x, t, reduction=r, log_target=True),
         [R(3, 4), R(3, 4)], None),
        (f"nll_weight_{_r}", lambda lib, x, t, w, r=_r: F(lib).nll_loss(x, t, w, reduction=r),
         [R(5, 4), with_ignored(classes(5)), positive(4)], [True, False, False]),
        (f"nll_weight_4d_{_r}", lambda lib, x, t, w, r=_r: F(lib).nll_loss(x, t, w, reduction=r),
         [R(2, 3, 2, 2), classes(2, 2, 2, high=3), positive(3)], [True, False, False]),
        (f"nll_weight_3d_{_r}", lambda lib, x, t, w, r=_r: F(lib).nll_loss(x, t, w, reduction=r),
         [R(2, 3, 4), classes(2, 4, high=3), positive(3)], [True, False, False]),
        (f"ce_weight_{_r}", lambda lib, x, t, w, r=_r: F(lib).cross_entropy(x, t, w, reduction=r),
         [R(5, 4), with_ignored(classes(5)), positive(4)], [True, False, False]),
        (f"ce_weight_smoothing_{_r}",
         lambda lib, x, t, w, r=_r: F(lib).cross_entropy(x, t, w, reduction=r, label_smoothing=0.2),
         [R(5, 4), with_ignored(classes(5)), positive(4)], [True, False, False]),
        (f"ce_probabilities_{_r}", lambda lib, x, t, r=_r: F(lib).cross_entropy(x, t, reduction=r),
         [R(3, 4), soft_targets(3, 4)], None),
        (f"ce_probabilities_weight_smoothing_{_r}",
         lambda lib, x, t, w, r=_r: F(lib).cross_entropy(x, t, w, reduction=r, label_smoothing=0.1),
         [R(2, 3, 2), soft_targets(2, 3, 2), positive(3)], [True, True, False]),
    ]
CASES += [
    ("bce_clamped_log", lambda lib, x, t: F(lib).binary_cross_entropy(x, t, reduction="sum"),
     [np.array([0.0, 1.0, 0.5, 1e-50]), np.array([1.0, 0.0, 0.3, 1.0])], [False, True]),
    ("kl_batchmean", lambda lib, x, t: kl(lib, x, t, reduction="batchmean"), [R(3, 4), probs(3, 4)], [True, False]),
    ("kl_zero_target", lambda lib, x, t: kl(lib, x, t, reduction="sum"),
     [R(2, 3), np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])], [True, False]),
    ("cosine_similarity", lambda lib, a, b: F(lib).cosine_similarity(a, b), [R(3, 5), R(3, 5)], None),
    ("cosine_similarity_dim_eps", lambda lib, a, b: F(lib).cosine_similarity(a, b, dim=-1, eps=0.5),
     [R(2, 3, 4) * 0.1, R(1, 4)], None),
    ("cosine_similarity_zero_vector", lambda lib, a, b: F(lib).cosine_similarity(a, b, dim=0),
     [np.zeros((3, 2)), R(3, 2)], None),
    ("CosineSimilarity", lambda lib, a, b: lib.nn.CosineSimilarity(dim=0)(a, b), [R(4), R(4)], None),
    ("BCELoss", lambda lib, x, t: lib.nn.BCELoss(reduction="sum")(x, t), [probs(4), probs(4)], None),
    ("BCEWithLogitsLoss", lambda lib, x, t: lib.nn.BCEWithLogitsLoss(pos_weight=lib.tensor([2.0, 0.5], dtype=x.dtype))(
        x, t), [R(3, 2), probs(3, 2)], None),
    ("SmoothL1Loss", lambda lib, x, t: lib.nn.SmoothL1Loss(beta=2.0)(x, t), [R(6), R(6)], None),
    ("HuberLoss", lambda lib, x, t: lib.nn.HuberLoss(delta=0.5)(x, t), [R(6), R(6)], None),
    ("L1Loss", lambda lib, x, t: lib.nn.L1Loss(reduction="none")(x, t), [R(6), R(6)], None),
    ("KLDivLoss", lambda lib, x, t: lib.nn.KLDivLoss(reduction="batchmean", log_target=True)(x, t),
     [R(2, 3), R(2, 3)], None),
    ("NLLLoss_weight", lambda lib, x, t, w: lib.nn.NLLLoss(weight=w)(x, t),
     [R(4, 3), classes(4, high=3), positive(3)], [True, False, False]),
    ("CrossEntropyLoss_weight", lambda lib, x, t, w: lib.nn.CrossEntropyLoss(weight=w, label_smoothing=0.3)(x, t),
     [R(4, 3), classes(4, high=3), positive(3)], [True, False, False]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case):
    _, fn, arrays, requires_grad = case
    compare(fn, arrays, requires_grad, **EXACT)


DOUBLE = ["bce_mean", "bce_logits_weights_sum", "smooth_l1_mean", "ce_probabilities_weight_smoothing_sum",
          "cosine_similarity"]


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in DOUBLE], ids=[c[0] for c in CASES if c[0] in DOUBLE])
def test_double_backward_matches_torch(case):
    _, fn, arrays, requires_grad = case
    compare(fn, arrays, requires_grad, double=True, **EXACT)


def test_float32_keeps_dtype():
    compare(lambda lib, x, t: F(lib).binary_cross_entropy_with_logits(x, t),
            [R(3, 4).astype(np.float32), probs(3, 4).astype(np.float32)], atol=1e-6)
    compare(lambda lib, x, t: F(lib).smooth_l1_loss(x, t), [R(5).astype(np.float32), R(5).astype(np.float32)])


@pytest.mark.parametrize("fn", [
    lambda x, t: sg.nn.functional.binary_cross_entropy(sg.sigmoid(x), sg.sigmoid(t)),
    lambda x, t: sg.nn.functional.binary_cross_entropy_with_logits(x, sg.sigmoid(t), pos_weight=sg.tensor([1.5, 0.5])),
    lambda x, t: sg.nn.functional.huber_loss(x, t, delta=0.3, reduction="sum"),
    lambda x, t: sg.nn.functional.smooth_l1_loss(x, t, beta=0.4),
    lambda x, t: sg.nn.functional.cosine_similarity(x, t),
], ids=["bce", "bce_logits", "huber", "smooth_l1", "cosine"])
def test_finite_differences(fn):
    finite_difference_check(fn, [R(3, 2), R(3, 2)])


ERRORS = [
    ("bce_out_of_range", lambda lib: F(lib).binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0]))),
    ("bce_size", lambda lib: F(lib).binary_cross_entropy(lib.tensor([0.5, 0.5]), lib.tensor([1.0]))),
    ("bce_logits_size", lambda lib: F(lib).binary_cross_entropy_with_logits(lib.tensor([0.5, 0.5]), lib.tensor([1.0]))),
    ("bce_reduction", lambda lib: F(lib).binary_cross_entropy(lib.tensor([0.5]), lib.tensor([1.0]), reduction="avg")),
    ("smooth_l1_negative_beta", lambda lib: F(lib).smooth_l1_loss(lib.tensor([0.5]), lib.tensor([1.0]), beta=-1.0)),
    ("huber_zero_delta", lambda lib: F(lib).huber_loss(lib.tensor([0.5]), lib.tensor([1.0]), delta=0.0)),
    ("nll_weight_shape", lambda lib: F(lib).nll_loss(lib.zeros(2, 3), lib.tensor([0, 1]), lib.ones(2))),
    ("ce_probabilities_int", lambda lib: F(lib).cross_entropy(lib.zeros(2, 3), lib.zeros(2, 3, dtype=lib.int64))),
    ("cosine_dim", lambda lib: F(lib).cosine_similarity(lib.zeros(3), lib.zeros(3), dim=2)),
]


@pytest.mark.parametrize("case", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_match_torch(case):
    same_error(case)


def test_broadcast_target_warns_and_expands():
    for lib in (torch, sg):
        with pytest.warns(UserWarning, match="different to the input size"):
            F(lib).l1_loss(lib.zeros(2, 3), lib.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        compare(lambda lib, x, t: F(lib).huber_loss(x, t), [R(2, 3), R(3)], **EXACT)


def test_weight_buffers_load_from_torch():
    t_loss = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0]))
    s_loss = sg.nn.CrossEntropyLoss(weight=sg.zeros(3))
    s_loss.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t_loss.state_dict().items()})
    assert list(s_loss.state_dict()) == list(t_loss.state_dict()) == ["weight"]
    np.testing.assert_array_equal(s_loss.weight.numpy(), [1.0, 2.0, 3.0])


# ---- replay ----------------------------------------------------------------------------------------

REPLAYED = {
    "bce": lambda y, t: sg.nn.functional.binary_cross_entropy(sg.sigmoid(y), t, weight=sg.tensor([1.0, 2.0, 0.5])),
    "bce_logits": lambda y, t: sg.nn.functional.binary_cross_entropy_with_logits(
        y, t, pos_weight=sg.tensor([1.0, 2.0, 0.5], dtype=sg.float64)),
    "smooth_l1": lambda y, t: sg.nn.functional.smooth_l1_loss(y, t, beta=0.5),
    "huber": lambda y, t: sg.nn.functional.huber_loss(y, t, reduction="sum"),
    "l1": lambda y, t: sg.nn.functional.l1_loss(y, t),
    "kl": lambda y, t: sg.nn.functional.kl_div(y.log_softmax(1), t, reduction="batchmean"),
    "cosine": lambda y, t: sg.nn.functional.cosine_similarity(y, t).sum(),
    "ce_probabilities": lambda y, t: sg.nn.functional.cross_entropy(y, t, label_smoothing=0.1),
    "nll_weight": lambda y, t: sg.nn.functional.nll_loss(
        y.log_softmax(1), (t * 2.99).to(sg.int64)[:, 0], weight=sg.tensor([0.5, 1.0, 2.0], dtype=sg.float64)),
}


@pytest.mark.parametrize("name", list(REPLAYED))
def test_compiled_training_step_replays_eager(name):
    loss_fn = REPLAYED[name]

    def make():
        sg.manual_seed(3)
        model = sg.nn.Linear(4, 3).to(sg.float64)
        opt = sg.optim.SGD(model.parameters(), lr=0.1)

        def step(x, t):
            opt.zero_grad()
            loss = loss_fn(model(x), t)
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    data = np.random.default_rng(5)
    for _ in range(4):
        x = sg.tensor(data.standard_normal((5, 4)))
        t = sg.tensor(data.uniform(0.0, 1.0, (5, 3)))
        np.testing.assert_array_equal(compiled(x, t).detach().numpy(), eager(x, t).detach().numpy())
    assert compiled.stats.replays >= 2
    for pe, pc in zip(m_eager.parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
