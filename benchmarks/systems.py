"""Every system the benchmarks race on the bench MLP step, each built from the same weights and
data and returned as a zero-argument callable that runs one training step."""

from __future__ import annotations

from floors import NumbaFloor, NumPyFloor

import staticgrad
from staticgrad.bench.models import LR, MOMENTUM, MLPSize, batches, build, initial_weights
from staticgrad.bench.runner import cycle_batches, staticgrad_steps


def staticgrad_systems(size: MLPSize) -> dict:
    weights, raw = initial_weights(size), batches(size)
    data = [(staticgrad.tensor(x), staticgrad.tensor(y)) for x, y in raw]
    eager, compiled, _ = staticgrad_steps(size, weights, data)
    runs = {"staticgrad eager": cycle_batches(eager, data), "staticgrad replay": cycle_batches(compiled, data)}
    return runs, compiled


def floor_systems(size: MLPSize) -> dict:
    weights, raw = initial_weights(size), batches(size)
    systems = {}
    for name, cls in (("numpy floor", NumPyFloor), ("numba floor", NumbaFloor)):
        floor = cls([w.copy() for w, _ in weights], [b.copy() for _, b in weights], size.batch, LR, MOMENTUM)
        systems[name] = cycle_batches(floor, raw)
    return systems


def torch_systems(size: MLPSize, with_compile: bool = True) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    weights, raw = initial_weights(size), batches(size)
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in raw]
    _, _, eager = build(torch, size, weights)
    systems = {"torch eager": cycle_batches(eager, data)}
    if with_compile:
        systems["torch.compile"] = cycle_batches(_torch_functional_step(torch, weights), data)
    return systems


def _torch_functional_step(torch, weights):
    """The whole step as one pure function (grad via torch.func), which torch.compile captures as a
    single graph; compiling the usual loss.backward() step breaks the graph."""
    params = [torch.from_numpy(a.copy()) for pair in weights for a in pair]
    buffers = [torch.zeros_like(p) for p in params]
    layers = len(weights)

    def loss_fn(params, x, y):
        h = x
        for i in range(layers):
            h = torch.nn.functional.linear(h, params[2 * i], params[2 * i + 1])
            if i < layers - 1:
                h = torch.tanh(h)
        return torch.nn.functional.mse_loss(h, y)

    grad_and_loss = torch.func.grad_and_value(loss_fn)

    @torch.compile
    def step(params, buffers, x, y):
        grads, loss = grad_and_loss(params, x, y)
        buffers = [MOMENTUM * b + g for b, g in zip(buffers, grads)]
        params = [p - LR * b for p, b in zip(params, buffers)]
        return params, buffers, loss

    state = [params, buffers]

    def call(x, y):
        state[0], state[1], loss = step(state[0], state[1], x, y)
        return loss
    return call


def jax_systems(size: MLPSize) -> dict:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    weights, raw = initial_weights(size), batches(size)
    params = [jnp.asarray(a) for pair in weights for a in pair]
    buffers = [jnp.zeros_like(p) for p in params]
    layers = len(weights)

    def loss_fn(params, x, y):
        h = x
        for i in range(layers):
            h = h @ params[2 * i].T + params[2 * i + 1]
            if i < layers - 1:
                h = jnp.tanh(h)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def step(params, buffers, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        buffers = [MOMENTUM * b + g for b, g in zip(buffers, grads)]
        params = [p - LR * b for p, b in zip(params, buffers)]
        return params, buffers, loss

    state = [params, buffers]
    data = [(jnp.asarray(x), jnp.asarray(y)) for x, y in raw]

    def call(x, y):
        state[0], state[1], loss = step(state[0], state[1], x, y)
        return loss.block_until_ready()
    return {"jax jit": cycle_batches(call, data)}


__all__ = ["floor_systems", "jax_systems", "staticgrad_systems", "torch_systems"]
