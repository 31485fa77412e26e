"""The bench model: a tanh MLP with MSE loss and SGD with momentum, built identically in
staticgrad, in PyTorch (when installed) and as the hand-written NumPy floor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MLPSize:
    name: str
    batch: int
    features: int
    hidden: int
    layers: int      # hidden layers
    outputs: int

    @property
    def widths(self) -> list:
        return [self.features] + [self.hidden] * self.layers + [self.outputs]

    def describe(self) -> str:
        return f"batch {self.batch}, {self.features} -> {self.layers} x {self.hidden} -> {self.outputs}"


SIZES = {
    "tiny": MLPSize("tiny", 32, 64, 64, 4, 10),
    "medium": MLPSize("medium", 128, 256, 256, 4, 10),
    "large": MLPSize("large", 512, 1024, 1024, 4, 10),
}
DEFAULT_SIZES = ("tiny", "medium")
LR, MOMENTUM = 0.01, 0.9


def initial_weights(size: MLPSize, seed: int = 0) -> list:
    """(weight, bias) per layer, float32, PyTorch's default Linear initialisation ranges."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(size.widths[:-1], size.widths[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return params


def batches(size: MLPSize, count: int = 4, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((size.batch, size.features), dtype=np.float32),
             rng.standard_normal((size.batch, size.outputs), dtype=np.float32)) for _ in range(count)]


def build(lib, size: MLPSize, weights: list):
    """(model, optimizer, step) in ``lib`` (staticgrad or torch), weights copied in."""
    model = mlp_model(lib, weights)
    opt = lib.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    return model, opt, training_step(lib, model, opt)


def mlp_model(lib, weights: list):
    """The tanh MLP in ``lib`` (staticgrad or torch) with ``weights`` copied in."""
    layers = []
    for i, (w, b) in enumerate(weights):
        linear = lib.nn.Linear(w.shape[1], w.shape[0])
        with lib.no_grad():
            linear.weight.copy_(lib.tensor(w))
            linear.bias.copy_(lib.tensor(b))
        layers.append(linear)
        if i < len(weights) - 1:
            layers.append(lib.nn.Tanh())
    return lib.nn.Sequential(*layers)


def training_step(lib, model, opt):
    """One training step in ``lib`` (staticgrad or torch): zero the grads, MSE loss, backward,
    optimizer step; returns the loss."""
    loss_fn = lib.nn.functional.mse_loss

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step
