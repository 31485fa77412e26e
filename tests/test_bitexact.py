"""Replay computes what eager computes, bit for bit, on every model family and every BLAS kernel.

Each case runs twenty training steps eagerly and compiled from identical copies and compares the
bytes of every loss, parameter, gradient and optimizer buffer. ``.ci/run`` runs this file (marker
``bitexact``) again under two OpenBLAS core types, since the core type changes the order in which
the BLAS adds products: replay must issue the same BLAS calls on the same operand layouts.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.models import training_step

pytestmark = pytest.mark.bitexact

STEPS = 20


def same_bytes(a, b, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.tobytes() != b.tobytes():
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        raise AssertionError(f"{what}: {int(np.sum(a != b))} elements differ, up to {diff.max():.3g}")


def run_twins(make_model, make_opt, make_step, data, steps=STEPS, seed=None):
    """Train an eager and a compiled copy of one model on ``data``; compare every byte of state."""
    model = make_model()
    twin = copy.deepcopy(model)
    eager_opt, comp_opt = make_opt(model), make_opt(twin)
    eager, compiled = make_step(model, eager_opt), sg.compile(make_step(twin, comp_opt))
    batches = [data[i % len(data)] for i in range(steps)]
    if seed is not None:
        sg.manual_seed(seed)
    eager_losses = [eager(*batch).detach().numpy().copy() for batch in batches]
    if seed is not None:
        sg.manual_seed(seed)
    compiled_losses = [compiled(*batch).detach().numpy().copy() for batch in batches]
    assert compiled.stats.replays >= steps - 3, compiled.stats
    for k, (le, lc) in enumerate(zip(eager_losses, compiled_losses)):
        same_bytes(lc, le, f"loss of step {k}")
    for (name, pe), pc in zip(model.named_parameters(), twin.parameters()):
        same_bytes(pc.detach().numpy(), pe.detach().numpy(), f"parameter {name}")
        same_bytes(pc.grad.numpy(), pe.grad.numpy(), f"gradient of {name}")
        for key, value in eager_opt.state[pe].items():
            if isinstance(value, sg.Tensor):
                same_bytes(comp_opt.state[pc][key].numpy(), value.numpy(), f"{key} of {name}")


def sgd(model):
    return sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def adam(model):
    return sg.optim.Adam(model.parameters(), lr=0.01)


def loss_step(model, opt):
    """A training step for a model that returns its own loss."""
    def step(x):
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        return loss
    return step


def tensors(batches):
    return [tuple(sg.tensor(a) for a in batch) for batch in batches]


def test_readme_mlp_replays_eager_bit_for_bit():
    """The README's example: Linear 64 -> Tanh -> Linear 10, MSE, SGD with momentum."""
    rng = np.random.default_rng(0)
    data = tensors([(rng.standard_normal((32, 64), dtype=np.float32), rng.standard_normal((32, 10), dtype=np.float32))
                    for _ in range(4)])

    def make():
        sg.manual_seed(0)
        return sg.nn.Sequential(sg.nn.Linear(64, 64), sg.nn.Tanh(), sg.nn.Linear(64, 10))

    run_twins(make, sgd, lambda m, o: training_step(sg, m, o), data)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deep_mlp_with_adam_replays_eager_bit_for_bit(dtype):
    rng = np.random.default_rng(1)
    data = tensors([(rng.standard_normal((16, 24)).astype(dtype), rng.standard_normal((16, 5)).astype(dtype))
                    for _ in range(3)])

    def make():
        sg.manual_seed(1)
        layers = [sg.nn.Linear(24, 48), sg.nn.Tanh(), sg.nn.Linear(48, 48), sg.nn.ReLU(), sg.nn.Linear(48, 5)]
        return sg.nn.Sequential(*layers).to(getattr(sg, np.dtype(dtype).name))

    run_twins(make, adam, lambda m, o: training_step(sg, m, o), data)


def test_cnn_replays_eager_bit_for_bit():
    from tests.test_cnn import cnn_batches, twin_models

    run_twins(lambda: twin_models(np.float32)[1], sgd, lambda m, o: training_step(sg, m, o),
              tensors(cnn_batches(4, np.float32)))


def test_lstm_replays_eager_bit_for_bit():
    from tests.test_rnn import sequence_model, sequences

    def make():
        sg.manual_seed(0)
        return sequence_model(sg)

    run_twins(make, adam, lambda m, o: training_step(sg, m, o), tensors(sequences(4)))


def test_transformer_with_dropout_replays_eager_bit_for_bit():
    from tests.test_transformer import lm_step, tiny_lm, token_batches

    def make():
        sg.manual_seed(0)
        return tiny_lm(sg, p=0.1)

    data = [(sg.tensor(i), sg.tensor(t)) for i, t in token_batches(4)]
    run_twins(make, lambda m: sg.optim.AdamW(m.parameters(), lr=0.01),
              lambda m, o: lm_step(sg, m, o, flat_logits=False, label_smoothing=0.1), data, seed=42)


@pytest.mark.parametrize("shape", [(2, 2, 2), (3, 5, 7), (64,), (9, 1), (1, 40)])
def test_a_broadcast_parameter_sums_its_gradient_in_numpys_order(shape):
    """A (1,) parameter broadcast over a larger input: NumPy sums its gradient pairwise, so a fused
    row-by-row sum would differ in the last bit."""
    rng = np.random.default_rng(3)
    data = tensors([(rng.standard_normal(shape).astype(np.float32),) for _ in range(3)])

    class Scale(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = sg.nn.Parameter(sg.tensor([0.7]))
            self.q = sg.nn.Parameter(sg.tensor([-0.3]))

        def forward(self, x):
            return ((x * self.p + self.q) ** 2).sum()

    run_twins(Scale, sgd, loss_step, data)


def test_transposed_activations_feed_matmuls_in_eager_layout():
    """An elementwise op on a transposed input: NumPy keeps the transposed layout, a replay's
    planned buffer is C-contiguous; eager makes owned results C-contiguous so a later matmul reads
    the same layout in both."""
    rng = np.random.default_rng(4)
    data = tensors([(rng.standard_normal((12, 33)).astype(np.float32),) for _ in range(3)])

    class Model(sg.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = sg.nn.Parameter(sg.randn(12, 20))

        def forward(self, x):
            h = sg.tanh(x.t())          # (33, 12), transposed layout in NumPy
            return (h @ self.w).sum() + (h * 2).sum(0).sum()

    run_twins(Model, sgd, loss_step, data)
