"""The Transformer-block family against PyTorch: gelu, layer_norm, embedding, dropout, masked_fill,
triu/tril, cross_entropy/nll_loss; then a tiny causal-attention LM trained in both libraries, and
the same training step compiled, with dropout re-sampled on every replay."""

from __future__ import annotations

import math

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.functional import tril as sg_tril
from staticgrad.functional import triu as sg_triu
from staticgrad.ops import OPS
from tests.oracle import compare, finite_difference_check, same_error, torch

rng = np.random.default_rng(2024)


def R(*shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def I(*shape, high=5):
    return rng.integers(0, high, size=shape)


def F(lib):
    return lib.nn.functional


def CE(lib, *args, **kwargs):
    return F(lib).cross_entropy(*args, **kwargs)


def targets_with_ignored(*shape, high):
    t = I(*shape, high=high)
    t.flat[1] = -100
    return t


CASES = [
    ("gelu", lambda lib, x: F(lib).gelu(x), [R(3, 5)]),
    ("gelu_tanh", lambda lib, x: F(lib).gelu(x, approximate="tanh"), [R(3, 5)]),
    ("GELU_module", lambda lib, x: lib.nn.GELU("tanh")(x), [R(2, 3, 4)]),
    ("layer_norm_affine", lambda lib, x, w, b: F(lib).layer_norm(x, (4,), w, b), [R(3, 4), R(4), R(4)]),
    ("layer_norm_2d_shape", lambda lib, x, w, b: F(lib).layer_norm(x, (3, 4), w, b, eps=1e-3),
     [R(2, 3, 4), R(3, 4), R(3, 4)]),
    ("layer_norm_plain", lambda lib, x: F(lib).layer_norm(x, [5]), [R(2, 3, 5)]),
    ("layer_norm_weight_only", lambda lib, x, w: F(lib).layer_norm(x, (4,), w), [R(3, 4), R(4)]),
    ("layer_norm_bias_only", lambda lib, x, b: F(lib).layer_norm(x, (4,), None, b), [R(3, 4), R(4)]),
    ("layer_norm_1d", lambda lib, x, w, b: F(lib).layer_norm(x, (6,), w, b), [R(6), R(6), R(6)]),
    ("LayerNorm_module", lambda lib, x: lib.nn.LayerNorm(4).to(x.dtype)(x), [R(2, 3, 4)]),
    ("embedding", lambda lib, w: F(lib).embedding(lib.tensor([[0, 2, 4], [2, 2, 1]]), w), [R(5, 3)]),
    ("embedding_padding", lambda lib, w: F(lib).embedding(lib.tensor([[0, 2, 4], [2, 3, 1]]), w, padding_idx=2),
     [R(5, 3)]),
    ("embedding_negative_padding", lambda lib, w: F(lib).embedding(lib.tensor([4, 0, 4]), w, padding_idx=-1),
     [R(5, 3)]),
    ("embedding_scalar_index", lambda lib, w: F(lib).embedding(lib.tensor(3), w), [R(5, 3)]),
    ("masked_fill", lambda lib, x, m: x.masked_fill(m > 0, -1.5), [R(3, 4), R(3, 4)]),
    ("masked_fill_broadcast_mask", lambda lib, x, m: x.masked_fill(m > 0, 2.0), [R(3, 4), R(4)]),
    ("masked_fill_mask_wider_than_input", lambda lib, x, m: x.masked_fill(m > 0, 2.0), [R(4), R(3, 4)]),
    ("masked_fill_inplace", lambda lib, x, m: (x * 2).masked_fill_(m > 0, 0.5), [R(3, 4), R(3, 4)]),
    ("masked_softmax", lambda lib, x: x.masked_fill(lib.ones(4, 4, dtype=lib.bool).triu(1), float("-inf")).softmax(-1),
     [R(2, 4, 4)]),
    ("triu", lambda lib, x: x.triu(), [R(4, 5)]),
    ("triu_diagonal", lambda lib, x: x.triu(1), [R(2, 4, 4)]),
    ("tril_negative_diagonal", lambda lib, x: x.tril(-1), [R(5, 4)]),
    ("cross_entropy", lambda lib, x, t: CE(lib, x, t), [R(4, 5), I(4)]),
    ("cross_entropy_sum", lambda lib, x, t: CE(lib, x, t, reduction="sum"), [R(4, 5), I(4)]),
    ("cross_entropy_none", lambda lib, x, t: CE(lib, x, t, reduction="none"), [R(4, 5), I(4)]),
    ("cross_entropy_ignore_index", lambda lib, x, t: CE(lib, x, t), [R(4, 5), targets_with_ignored(4, high=5)]),
    ("cross_entropy_ignore_other", lambda lib, x, t: CE(lib, x, t, ignore_index=1), [R(6, 3), I(6, high=3)]),
    ("cross_entropy_byte_target", lambda lib, x, t: CE(lib, x, t), [R(4, 5), I(4).astype(np.uint8)]),
    ("cross_entropy_class_vector", lambda lib, x, t: CE(lib, x, t), [R(5), np.array(3)]),
    ("cross_entropy_3d", lambda lib, x, t: CE(lib, x, t), [R(2, 4, 3), I(2, 3, high=4)]),
    ("cross_entropy_3d_none", lambda lib, x, t: CE(lib, x, t, reduction="none"),
     [R(2, 4, 3), targets_with_ignored(2, 3, high=4)]),
    ("cross_entropy_4d", lambda lib, x, t: CE(lib, x, t, reduction="sum"), [R(2, 4, 3, 2), I(2, 3, 2, high=4)]),
    ("cross_entropy_5d_none", lambda lib, x, t: CE(lib, x, t, reduction="none"),
     [R(2, 3, 2, 2, 2), I(2, 2, 2, 2, high=3)]),
    ("cross_entropy_label_smoothing", lambda lib, x, t: CE(lib, x, t, label_smoothing=0.1),
     [R(4, 5), targets_with_ignored(4, high=5)]),
    ("cross_entropy_label_smoothing_sum_3d", lambda lib, x, t: CE(lib, x, t, reduction="sum", label_smoothing=0.2),
     [R(2, 4, 3), I(2, 3, high=4)]),
    ("cross_entropy_label_smoothing_none", lambda lib, x, t: CE(lib, x, t, reduction="none", label_smoothing=0.3),
     [R(4, 5), targets_with_ignored(4, high=5)]),
    ("CrossEntropyLoss_module", lambda lib, x, t: lib.nn.CrossEntropyLoss(label_smoothing=0.05)(x, t), [R(4, 5), I(4)]),
    ("nll_loss", lambda lib, x, t: F(lib).nll_loss(x.log_softmax(1), t), [R(4, 5), I(4)]),
    ("NLLLoss_module_4d", lambda lib, x, t: lib.nn.NLLLoss(reduction="none")(x.log_softmax(1), t),
     [R(2, 3, 2, 2), I(2, 2, 2, high=3)]),
    ("dropout_p0", lambda lib, x: F(lib).dropout(x * 1, p=0.0), [R(3, 4)]),
    ("dropout_eval", lambda lib, x: lib.nn.Dropout(0.4).eval()(x * 1), [R(3, 4)]),
    ("dropout_p1", lambda lib, x: F(lib).dropout(x, p=1.0), [R(3, 4)]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=IDS)
def test_against_torch_float32(name, fn, arrays):
    compare(fn, [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays], atol=1e-5, rtol=1e-4)


NO_FD = {"embedding_padding", "embedding_negative_padding"}  # the padding row gets no gradient by definition


@pytest.mark.parametrize("name,fn,arrays", [c for c in CASES if c[0] not in NO_FD],
                         ids=[i for i in IDS if i not in NO_FD])
def test_against_finite_differences(name, fn, arrays):
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]

    def of_floats(*xs):
        full = list(arrays)
        for i, x in zip(floats, xs):
            full[i] = x
        return fn(sg, *[sg.tensor(a) if isinstance(a, np.ndarray) else a for a in full])

    finite_difference_check(of_floats, [arrays[i] for i in floats])


# ---- double backward: the gradients are differentiable again ---------------------------------------

def first_order(fn):
    """``fn``'s gradients with create_graph=True: comparing them compares the double backward."""
    def grads(lib, *xs):
        out = fn(lib, *xs)
        leaves = [x for x in xs if x.requires_grad]
        return lib.autograd.grad((out * out).sum(), leaves, create_graph=True)
    return grads


DOUBLE_CASES = [
    ("gelu", lambda lib, x: F(lib).gelu(x), [R(3, 4)]),
    ("gelu_tanh", lambda lib, x: F(lib).gelu(x, approximate="tanh"), [R(3, 4)]),
    ("layer_norm_affine", lambda lib, x, w, b: F(lib).layer_norm(x, (4,), w, b), [R(3, 4), R(4), R(4)]),
    ("layer_norm_2d_shape", lambda lib, x, w, b: F(lib).layer_norm(x, (2, 3), w, b), [R(2, 2, 3), R(2, 3), R(2, 3)]),
    ("layer_norm_plain", lambda lib, x: F(lib).layer_norm(x, (5,)), [R(3, 5)]),
    ("softmax", lambda lib, x: x.softmax(-1), [R(3, 4)]),
    ("log_softmax", lambda lib, x: x.log_softmax(0), [R(3, 4)]),
    ("cross_entropy", lambda lib, x, t: CE(lib, x, t), [R(4, 5), I(4)]),
    ("cross_entropy_4d", lambda lib, x, t: CE(lib, x, t), [R(2, 3, 2, 2), I(2, 2, 2, high=3)]),
    ("nll_loss", lambda lib, x, t: F(lib).nll_loss(x, t, reduction="sum"), [R(4, 5), I(4)]),
    ("nll_loss_4d", lambda lib, x, t: F(lib).nll_loss(x, t), [R(2, 3, 2, 2), I(2, 2, 2, high=3)]),
    ("embedding_padding", lambda lib, w: F(lib).embedding(lib.tensor([[0, 2], [1, 2]]), w, padding_idx=2) ** 2,
     [R(4, 3)]),
]


@pytest.mark.parametrize("name,fn,arrays", DOUBLE_CASES, ids=[c[0] for c in DOUBLE_CASES])
def test_double_backward_against_torch(name, fn, arrays):
    compare(first_order(fn), arrays, atol=1e-9, rtol=1e-8)


@pytest.mark.parametrize("name,fn,arrays", DOUBLE_CASES, ids=[c[0] for c in DOUBLE_CASES])
def test_double_backward_against_finite_differences(name, fn, arrays):
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]

    def gradient(*xs):
        """The first input's gradient; under no_grad (the numeric side) its value only."""
        full = list(arrays)
        with sg.enable_grad():
            for i, x in zip(floats, xs):
                full[i] = x if x.requires_grad else x.detach().requires_grad_(True)
            tensors = [sg.tensor(a) if isinstance(a, np.ndarray) else a for a in full]
            grad = first_order(fn)(sg, *tensors)[0]
        return grad if xs[0].requires_grad else grad.detach()

    finite_difference_check(gradient, [arrays[i] for i in floats], atol=1e-4)


def test_layer_norm_higher_orders_are_exact():
    """Each layer_norm formula gives partial derivatives (mean and rstd included), so every order
    is exact: the third derivative equals PyTorch's, the fourth matches finite differences (PyTorch
    holds mean and rstd constant in its double backward, so its own fourth is off)."""
    def third(lib, x, w):
        y = F(lib).layer_norm(x, (4,), w)
        (gx,) = lib.autograd.grad((y ** 3).sum(), x, create_graph=True)
        (gxx,) = lib.autograd.grad((gx ** 2).sum(), x, create_graph=True)
        return gxx

    arrays = [R(3, 4), R(4)]
    compare(third, arrays, atol=1e-8, rtol=1e-8, grad=False)

    def third_of_values(x, w):
        with sg.enable_grad():
            leaves = [t if t.requires_grad else t.detach().requires_grad_(True) for t in (x, w)]
            gxx = third(sg, *leaves)
        return gxx if x.requires_grad else gxx.detach()

    finite_difference_check(third_of_values, arrays, rtol=1e-4, atol=1e-3)


# ---- node names and saved values ----------------------------------------------------------------

def test_saved_slots_follow_pytorch():
    x = sg.randn(3, 4, dtype=sg.float64, requires_grad=True)
    w, b = sg.ones(4, dtype=sg.float64, requires_grad=True), sg.zeros(4, dtype=sg.float64, requires_grad=True)
    node = sg.nn.functional.layer_norm(x, (4,), w, b).grad_fn
    assert node._saved_normalized_shape == (4,) and node._saved_input is x and node._saved_weight is w
    assert tuple(node._saved_result1.shape) == (3, 1) and tuple(node._saved_result2.shape) == (3, 1)
    table = sg.randn(5, 3, requires_grad=True)
    node = sg.nn.functional.embedding(sg.tensor([1, 4]), table, padding_idx=-2).grad_fn
    assert node.name() == "EmbeddingBackward0"
    assert node._saved_padding_idx == 3 and node._saved_weight_sym_argsize_0 == 5
    assert sg.nn.functional.gelu(x, approximate="tanh").grad_fn._saved_approximate == "tanh"
    assert x.masked_fill(x > 0, 1.0).grad_fn._saved_mask.dtype == sg.bool
    assert x.triu(2).grad_fn._saved_diagonal == 2


def test_top_level_triu_tril_match_torch():
    compare(lambda lib, x: (sg_triu if lib is sg else torch.triu)(x, 1), [R(3, 3)])
    compare(lambda lib, x: (sg_tril if lib is sg else torch.tril)(x), [R(2, 3, 4)])
    mask = sg_triu(sg.ones(3, 3, dtype=sg.bool), diagonal=1)
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.ones((3, 3), bool), 1))


# ---- errors with PyTorch's wording --------------------------------------------------------------

ERRORS = [
    ("gelu_bad_approximate", lambda lib: F(lib).gelu(lib.ones(2), approximate="exact")),
    ("gelu_integer", lambda lib: F(lib).gelu(lib.arange(3))),
    ("layer_norm_shape", lambda lib: F(lib).layer_norm(lib.ones(3, 4), (3,))),
    ("layer_norm_too_many_dims", lambda lib: F(lib).layer_norm(lib.ones(3, 4), (2, 3, 4))),
    ("layer_norm_weight_shape", lambda lib: F(lib).layer_norm(lib.ones(3, 4), (4,), lib.ones(3))),
    ("layer_norm_bias_shape", lambda lib: F(lib).layer_norm(lib.ones(3, 4), (4,), None, lib.ones(3))),
    ("layer_norm_int_shape", lambda lib: F(lib).layer_norm(lib.ones(3, 4), 4)),
    ("layer_norm_mixed_dtype", lambda lib: F(lib).layer_norm(lib.ones(3, 4, dtype=lib.float64), (4,), lib.ones(4))),
    ("layer_norm_integer", lambda lib: F(lib).layer_norm(lib.arange(12).view(3, 4), (4,))),
    ("embedding_index_too_large", lambda lib: F(lib).embedding(lib.tensor([0, 5]), lib.ones(5, 3))),
    ("embedding_negative_index", lambda lib: F(lib).embedding(lib.tensor([-1]), lib.ones(5, 3))),
    ("embedding_float_indices", lambda lib: F(lib).embedding(lib.tensor([0.0]), lib.ones(5, 3))),
    ("embedding_weight_1d", lambda lib: F(lib).embedding(lib.tensor([0]), lib.ones(5))),
    ("embedding_padding_idx", lambda lib: F(lib).embedding(lib.tensor([0]), lib.ones(5, 3), padding_idx=5)),
    ("Embedding_padding_idx", lambda lib: lib.nn.Embedding(5, 3, padding_idx=-6)),
    ("masked_fill_float_mask", lambda lib: lib.ones(3).masked_fill(lib.ones(3), 1.0)),
    ("masked_fill_long_mask", lambda lib: lib.ones(3).masked_fill(lib.ones(3, dtype=lib.int64), 1.0)),
    ("masked_fill_shapes", lambda lib: lib.ones(2, 3).masked_fill(lib.ones(4, dtype=lib.bool), 1.0)),
    ("masked_fill_inplace_wider_mask", lambda lib: lib.ones(3).masked_fill_(lib.ones(2, 3, dtype=lib.bool), 1.0)),
    ("triu_1d", lambda lib: lib.ones(3).triu()),
    ("dropout_p", lambda lib: F(lib).dropout(lib.ones(3), p=1.5)),
    ("Dropout_p", lambda lib: lib.nn.Dropout(-0.1)),
    ("cross_entropy_target_out_of_bounds", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([0, 4, 1]))),
    ("cross_entropy_negative_target", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([0, -2, 1]))),
    ("cross_entropy_4d_out_of_bounds", lambda lib: CE(lib, lib.ones(2, 4, 3, 2), lib.full((2, 3, 2), 4))),
    ("cross_entropy_3d_out_of_bounds", lambda lib: CE(lib, lib.ones(2, 4, 3), lib.full((2, 3), 7))),
    ("cross_entropy_batch", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([0, 1]))),
    ("cross_entropy_3d_batch", lambda lib: CE(lib, lib.ones(2, 4, 3), lib.zeros(3, 3, dtype=lib.int64))),
    ("cross_entropy_3d_target_size", lambda lib: CE(lib, lib.ones(2, 4, 3), lib.zeros(2, 4, dtype=lib.int64))),
    ("cross_entropy_4d_target_size", lambda lib: CE(lib, lib.ones(2, 4, 3, 2), lib.zeros(2, 3, 3, dtype=lib.int64))),
    ("cross_entropy_int32_target", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([1, 2, 3], dtype=lib.int32))),
    ("cross_entropy_float_target", lambda lib: CE(lib, lib.ones(3, 4), lib.ones(3))),
    ("cross_entropy_long_probabilities", lambda lib: CE(lib, lib.ones(3, 4), lib.ones(3, 4, dtype=lib.int64))),
    ("cross_entropy_reduction", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([1, 2, 3]), reduction="avg")),
    ("cross_entropy_label_smoothing", lambda lib: CE(lib, lib.ones(3, 4), lib.tensor([1, 2, 3]),
                                                                       label_smoothing=1.5)),
    ("nll_loss_reduction", lambda lib: F(lib).nll_loss(lib.ones(3, 4), lib.tensor([1, 2, 3]), reduction="avg")),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    same_error(fn)


def test_unsupported_options_say_what_to_do():
    t = sg.tensor([0, 1, 2])
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq=False"):
        sg.nn.functional.embedding(t, sg.randn(5, 2), scale_grad_by_freq=True)


# ---- modules --------------------------------------------------------------------------------------

def test_module_reprs_match_torch():
    for build in (lambda lib: lib.nn.LayerNorm(4), lambda lib: lib.nn.LayerNorm((3, 4), bias=False),
                  lambda lib: lib.nn.LayerNorm(4, elementwise_affine=False), lambda lib: lib.nn.Embedding(5, 3),
                  lambda lib: lib.nn.Embedding(5, 3, padding_idx=-4), lambda lib: lib.nn.GELU(),
                  lambda lib: lib.nn.GELU("tanh"), lambda lib: lib.nn.Dropout(0.1),
                  lambda lib: lib.nn.CrossEntropyLoss(), lambda lib: lib.nn.NLLLoss()):
        assert repr(build(sg)) == repr(build(torch))
    names = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    assert names(sg.nn.LayerNorm((3, 4), bias=False)) == names(torch.nn.LayerNorm((3, 4), bias=False))
    assert names(sg.nn.LayerNorm(4, elementwise_affine=False)) == []


def test_embedding_init_and_padding_row():
    sg.manual_seed(0)
    table = sg.nn.Embedding(400, 50, padding_idx=7)
    w = table.weight.detach().numpy()
    assert w.dtype == np.float32 and np.all(w[7] == 0)
    others = np.delete(w, 7, axis=0)
    assert abs(others.mean()) < 0.02 and abs(others.std() - 1.0) < 0.02
    out = table(sg.tensor([[7, 1], [7, 7]]))
    out.sum().backward()
    grad = table.weight.grad.numpy()
    assert np.all(grad[7] == 0) and np.all(grad[1] == 1) and np.count_nonzero(grad) == 50


def test_layer_norm_module_in_float64():
    ln = sg.nn.LayerNorm(4).double()
    assert ln.weight.dtype == sg.float64
    out = ln(sg.randn(2, 4, dtype=sg.float64))
    np.testing.assert_allclose(out.detach().numpy().mean(-1), 0, atol=1e-12)


# ---- dropout --------------------------------------------------------------------------------------

def test_dropout_statistics_and_scaling():
    x = sg.ones(200, 500, requires_grad=True)
    y = sg.nn.functional.dropout(x, p=0.3)
    values = y.detach().numpy()
    assert y.grad_fn.name() == "MulBackward0"
    assert abs((values == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(values[values != 0], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), values)


def test_dropout_reproducible_under_manual_seed():
    x = sg.randn(50, 40)
    sg.manual_seed(11)
    first = [sg.nn.functional.dropout(x, 0.5).numpy() for _ in range(2)]
    sg.manual_seed(11)
    again = [sg.nn.functional.dropout(x, 0.5).numpy() for _ in range(2)]
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], first[1])


def test_dropout_identity_cases_return_the_input():
    x = sg.randn(3, 4, requires_grad=True)
    drop = sg.nn.Dropout(0.5)
    assert sg.nn.functional.dropout(x, 0.0) is x
    assert sg.nn.functional.dropout(x, 0.5, training=False) is x
    assert drop.eval()(x) is x
    assert drop.train()(x) is not x


def test_inplace_dropout_writes_its_input():
    x = sg.randn(4, 5, requires_grad=True)
    h = x * 1
    out = sg.nn.functional.dropout(h, 0.5, inplace=True)
    assert out is h and h.grad_fn.name() == "MulBackward0"
    with pytest.raises(RuntimeError, match="leaf Variable"):
        sg.nn.functional.dropout(x, 0.5, inplace=True)


# ---- a tiny causal-attention language model, in both libraries ---------------------------------

VOCAB, DIM, HEADS, CONTEXT = 11, 16, 2, 6


def tiny_lm(lib, p: float = 0.0, layers: int = 2):
    """nanoGPT in miniature: token + position embeddings, pre-norm blocks of causal self-attention
    (matmul, triu mask, masked_fill, softmax) and a GELU MLP, residuals, final norm, linear head."""
    nn = lib.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.drop = nn.Dropout(p)
            self.register_buffer("mask", lib.ones(CONTEXT, CONTEXT, dtype=lib.bool).triu(1))

        def forward(self, x):
            batch, steps, width = x.shape
            q, k, v = (t.view(batch, steps, HEADS, width // HEADS).transpose(1, 2)
                       for t in self.qkv(x).split(width, dim=2))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(width // HEADS))
            weights = self.drop(scores.masked_fill(self.mask[:steps, :steps], float("-inf")).softmax(-1))
            return self.drop(self.proj((weights @ v).transpose(1, 2).reshape(batch, steps, width)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(DIM), Attention(), nn.LayerNorm(DIM)
            self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM), nn.Dropout(p))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(CONTEXT, DIM)
            self.drop = nn.Dropout(p)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, idx):
            x = self.drop(self.tokens(idx) + self.positions(lib.arange(idx.shape[1])))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return LM()


def lm_step(lib, model, opt, flat_logits: bool = True, label_smoothing: float = 0.0):
    """One SGD step; the loss over (N*T, V) logits, or over (N, V, T) ones (the NllLoss2D path)."""
    def step(idx, targets):
        opt.zero_grad()
        logits = model(idx)
        if flat_logits:
            loss = CE(lib, logits.view(-1, VOCAB), targets.view(-1), label_smoothing=label_smoothing)
        else:
            loss = CE(lib, logits.transpose(1, 2), targets, label_smoothing=label_smoothing)
        loss.backward()
        opt.step()
        return loss
    return step


def token_batches(n, batch=3, steps=CONTEXT, seed=5):
    data = np.random.default_rng(seed)
    return [(data.integers(0, VOCAB, (batch, steps)), data.integers(0, VOCAB, (batch, steps))) for _ in range(n)]


def test_tiny_lm_trains_like_torch():
    sg.manual_seed(0)
    s_model = tiny_lm(sg).double()
    t_model = tiny_lm(torch).double()
    assert [n for n, _ in s_model.named_parameters()] == [n for n, _ in t_model.named_parameters()]
    with torch.no_grad():
        for s_param, t_param in zip(s_model.parameters(), t_model.parameters()):
            t_param.copy_(torch.from_numpy(s_param.detach().numpy().copy()))
    s_step = lm_step(sg, s_model, sg.optim.SGD(s_model.parameters(), lr=0.1, momentum=0.9))
    t_step = lm_step(torch, t_model, torch.optim.SGD(t_model.parameters(), lr=0.1, momentum=0.9))
    for idx, targets in token_batches(5):
        s_loss = s_step(sg.tensor(idx), sg.tensor(targets))
        t_loss = t_step(torch.tensor(idx), torch.tensor(targets))
        assert s_loss.grad_fn.name() == t_loss.grad_fn.name() == "NllLossBackward0"
        np.testing.assert_allclose(s_loss.item(), t_loss.item(), rtol=1e-11)
    for (name, s_param), t_param in zip(s_model.named_parameters(), t_model.parameters()):
        np.testing.assert_allclose(s_param.detach().numpy(), t_param.detach().numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_compiled_lm_step_with_dropout_replays_eager():
    """Both runs start from one seed, so replays draw the same dropout masks as eager steps, and
    compute the same numbers bit for bit (masked_fill with -inf joins fused kernels)."""
    sg.manual_seed(0)
    m_eager = tiny_lm(sg, p=0.1)
    sg.manual_seed(0)
    m_comp = tiny_lm(sg, p=0.1)
    eager = lm_step(sg, m_eager, sg.optim.SGD(m_eager.parameters(), lr=0.05, momentum=0.9),
                    flat_logits=False, label_smoothing=0.1)
    compiled = sg.compile(lm_step(sg, m_comp, sg.optim.SGD(m_comp.parameters(), lr=0.05, momentum=0.9),
                                  flat_logits=False, label_smoothing=0.1))
    data = [(sg.tensor(i), sg.tensor(t)) for i, t in token_batches(6)]
    sg.manual_seed(42)
    eager_losses = [eager(*batch).item() for batch in data]
    sg.manual_seed(42)
    compiled_losses = [compiled(*batch).item() for batch in data]
    assert compiled.stats.replays >= 3
    assert compiled_losses == eager_losses
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)
    train_plan = next(p for p in compiled.plans if p.replayable)
    assert sum(op.op == "dropout_mask" for op in train_plan.graph.ops) == 1 + 2 * 3

    m_eager.eval()
    m_comp.eval()
    traces = compiled.stats.traces
    for batch in data[:3]:
        np.testing.assert_allclose(compiled(*batch).item(), eager(*batch).item(), rtol=1e-5)
    assert compiled.stats.traces == traces + 1
    eval_plan = next(p for p in compiled.plans if p.replayable)
    assert not any(op.op == "dropout_mask" for op in eval_plan.graph.ops)


def test_changing_dropout_p_retraces():
    model = tiny_lm(sg, p=0.1, layers=1)
    step = sg.compile(lm_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.01)))
    data = [(sg.tensor(i), sg.tensor(t)) for i, t in token_batches(4)]
    for batch in data[:3]:
        step(*batch)
    traces = step.stats.traces
    model.drop.p = 0.0
    step(*data[3])
    assert step.stats.traces == traces + 1


# ---- every non-view op writes into a given out --------------------------------------------------

def _out_samples():
    x, g = R(3, 4), R(3, 4)
    mean, rstd = x.mean(-1, keepdims=True), 1 / x.std(-1, keepdims=True)
    indices = np.array([[0, 2], [2, 1]])
    logp, target = R(2, 3, 1, 2), I(2, 1, 2, high=3)
    return {
        "gelu": ([x], {"approximate": "none"}),
        "gelu_backward": ([g, x], {"approximate": "tanh"}),
        "layer_norm_backward": ([g, x, mean, rstd], {"normalized_shape": (4,)}),
        "embedding": ([R(3, 5), indices], {"num_weights": 3, "padding_idx": -1}),
        "embedding_backward": ([R(2, 2, 5), indices], {"num_weights": 3, "padding_idx": 2}),
        "masked_fill": ([x, g > 0], {"value": float("-inf")}),
        "triu": ([x], {"diagonal": 1}),
        "tril": ([x], {"diagonal": -1}),
        "nll_loss2d": ([logp, target], {"reduction": 1, "ignore_index": -100}),
        "nll_loss2d_backward": ([np.asarray(1.5), logp, target],
                                {"sizes": logp.shape, "reduction": 1, "ignore_index": -100}),
    }


@pytest.mark.parametrize("name", list(_out_samples()))
def test_forward_writes_into_out(name):
    arrays, attrs = _out_samples()[name]
    forward = OPS[name].forward
    expected = forward(*arrays, **attrs)
    out = np.full_like(expected, 7.0)
    assert forward(*arrays, out=out, **attrs) is out
    np.testing.assert_array_equal(out, expected)


def test_multi_output_ops_return_their_outputs():
    """layer_norm returns (output, mean, rstd) and its affine backward three gradients: the runtime
    runs them as multi-output steps (fresh arrays), never with out."""
    x = R(3, 4)
    y, mean, rstd = OPS["layer_norm_affine"].forward(x, R(4), R(4), normalized_shape=(4,), eps=1e-5)
    assert y.shape == (3, 4) and mean.shape == rstd.shape == (3, 1)
    grads = OPS["layer_norm_backward_affine"].forward(R(3, 4), x, mean, rstd, R(4), normalized_shape=(4,))
    assert [g.shape for g in grads] == [(3, 4), (4,), (4,)]
