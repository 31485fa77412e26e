"""The bench models of every family (tanh MLP, CNN, LSTM, Transformer LM), each built alike in
staticgrad and in PyTorch with the same initial weights, with its loss, optimizer and batches."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from staticgrad.bench.models import LR, MOMENTUM, SIZES, MLPSize, initial_weights, mlp_model
from staticgrad.bench.models import batches as mlp_batches

FAMILIES = ("mlp", "cnn", "lstm", "transformer")


@dataclass(frozen=True)
class BenchModel:
    """A model to time: ``model(lib)`` builds it in staticgrad or torch (its initial weights come
    from staticgrad's build: see ``twins``), ``optimizer(lib, params)`` its optimizer,
    ``batches(count)`` (input, target) NumPy pairs, ``loss(lib, output, target)`` its loss."""

    name: str
    family: str
    shape: str
    model: Callable
    optimizer: Callable
    batches: Callable
    loss: Callable
    optimizer_name: str


def _mse(lib, output, target):
    return lib.nn.functional.mse_loss(output, target)


def _cross_entropy(lib, output, target):
    return lib.nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def _sgd(lib, params):
    return lib.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def _adam(lib, params):
    return lib.optim.Adam(params, lr=1e-3)


def _adamw(lib, params):
    return lib.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


# ---- tanh MLP ------------------------------------------------------------------------------------

def mlp(size: MLPSize) -> BenchModel:
    weights = initial_weights(size)

    def model(lib):
        return mlp_model(lib, weights)

    return BenchModel(size.name, "mlp", size.describe(), model, _sgd, lambda count: mlp_batches(size, count), _mse,
                      "SGD(momentum=0.9)")


# ---- CNN: two conv + ReLU + 2x2 max pool blocks, a linear head ------------------------------------

CNN_BATCH = 32


def _cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * 7 * 7, 10))


def _cnn_batches(count: int, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((CNN_BATCH, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, CNN_BATCH))
            for _ in range(count)]


# ---- LSTM: one layer over a sequence, a linear head on the last step -------------------------------

LSTM_BATCH, LSTM_STEPS, LSTM_IN, LSTM_HIDDEN, LSTM_OUT = 16, 16, 32, 64, 10


def _lstm(lib):
    nn = lib.nn

    class SequenceModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(LSTM_IN, LSTM_HIDDEN, batch_first=True)
            self.head = nn.Linear(LSTM_HIDDEN, LSTM_OUT)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return SequenceModel()


def _lstm_batches(count: int, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((LSTM_BATCH, LSTM_STEPS, LSTM_IN), dtype=np.float32),
             rng.standard_normal((LSTM_BATCH, LSTM_OUT), dtype=np.float32)) for _ in range(count)]


# ---- Transformer LM: embeddings, pre-norm blocks of causal self-attention and a GELU MLP ------------

LM_BATCH, LM_CONTEXT, LM_DIM, LM_HEADS, LM_VOCAB, LM_LAYERS = 8, 32, 64, 4, 128, 2


def _lm(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(LM_DIM), nn.LayerNorm(LM_DIM)
            self.qkv, self.proj = nn.Linear(LM_DIM, 3 * LM_DIM), nn.Linear(LM_DIM, LM_DIM)
            self.mlp = nn.Sequential(nn.Linear(LM_DIM, 4 * LM_DIM), nn.GELU(), nn.Linear(4 * LM_DIM, LM_DIM))
            self.register_buffer("mask", lib.ones(LM_CONTEXT, LM_CONTEXT, dtype=lib.bool).triu(1))

        def forward(self, x):
            batch, steps, width = x.shape
            q, k, v = (t.view(batch, steps, LM_HEADS, width // LM_HEADS).transpose(1, 2)
                       for t in self.qkv(self.ln1(x)).split(width, dim=2))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(width // LM_HEADS))
            weights = scores.masked_fill(self.mask[:steps, :steps], float("-inf")).softmax(-1)
            x = x + self.proj((weights @ v).transpose(1, 2).reshape(batch, steps, width))
            return x + self.mlp(self.ln2(x))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(LM_VOCAB, LM_DIM), nn.Embedding(LM_CONTEXT, LM_DIM)
            self.blocks = nn.Sequential(*[Block() for _ in range(LM_LAYERS)])
            self.ln_f, self.head = nn.LayerNorm(LM_DIM), nn.Linear(LM_DIM, LM_VOCAB, bias=False)

        def forward(self, idx):
            return self.head(self.ln_f(self.blocks(self.tokens(idx) + self.positions(lib.arange(idx.shape[1])))))

    return LM()


def _lm_batches(count: int, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, LM_VOCAB, (LM_BATCH, LM_CONTEXT)), rng.integers(0, LM_VOCAB, (LM_BATCH, LM_CONTEXT)))
            for _ in range(count)]


def bench_model(family: str, size: str | None = "tiny") -> BenchModel:
    """The bench model of ``family`` (for the MLP, of MLP ``size``)."""
    if family == "mlp":
        return mlp(SIZES[size or "tiny"])
    if family == "cnn":
        return BenchModel("cnn", "cnn", f"batch {CNN_BATCH}, 1x28x28, 2 x (conv 3x3 + ReLU + max pool 2), linear",
                          _cnn, _sgd, _cnn_batches, _cross_entropy, "SGD(momentum=0.9)")
    if family == "lstm":
        return BenchModel("lstm", "lstm", f"batch {LSTM_BATCH}, {LSTM_STEPS} steps, LSTM {LSTM_IN} -> {LSTM_HIDDEN}, "
                          f"linear -> {LSTM_OUT}", _lstm, _adam, _lstm_batches, _mse, "Adam")
    if family == "transformer":
        return BenchModel("transformer", "transformer",
                          f"batch {LM_BATCH}x{LM_CONTEXT} tokens, vocab {LM_VOCAB}, d {LM_DIM}, {LM_LAYERS} blocks, "
                          f"{LM_HEADS} heads", _lm, _adamw, _lm_batches, _cross_entropy, "AdamW")
    raise ValueError(f"unknown bench model family {family!r}; expected one of {FAMILIES}")


def build(lib, bench: BenchModel, state: dict | None = None):
    """(model, optimizer) in ``lib``, its weights loaded from ``state`` (a staticgrad state dict,
    for a twin) when given; staticgrad builds draw them from seed 0."""
    if state is None and lib.__name__ == "staticgrad":
        lib.manual_seed(0)
    model = bench.model(lib)
    if state is not None:
        model.load_state_dict({k: lib.tensor(v.detach().numpy().copy()) for k, v in state.items()})
    return model, bench.optimizer(lib, model.parameters())


def as_tensors(lib, data: list) -> list:
    return [(lib.tensor(x), lib.tensor(y)) for x, y in data]


def training_step(lib, bench: BenchModel, model, opt, step=None):
    """One training step (zero the grads, loss, backward, optimizer step) as ``fn(x, y)``;
    ``step`` replaces ``opt.step`` (a compiled one)."""
    step = step or opt.step

    def run(x, y):
        opt.zero_grad()
        loss = bench.loss(lib, model(x), y)
        loss.backward()
        step()
        return loss

    return run
