"""JAX ``jit`` of the whole training step of each bench model family, in pure ``jax.numpy``: the
same models as staticgrad/bench/families.py (their parameters are staticgrad's initial state dict,
read by name), the same losses, and functional_optim's SGD with momentum, Adam and AdamW.

Skipped, with the reason, when JAX is not installed. Shapes and layouts follow PyTorch's: linear
weights are (out, in), images NCHW with OIHW kernels, the LSTM's gates stacked i, f, g, o.
"""

from __future__ import annotations

import math

from functional_optim import init_state, optimizer_spec, update

import staticgrad
from staticgrad.bench.families import LM_HEADS, build
from staticgrad.bench.runner import cycle_batches

try:
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError:   # the optional JAX peer
    jax = jnp = lax = None

BATCHES = 4   # batches the step cycles through, as the other systems


# ---- layers, over a dict of parameters named as in the staticgrad model's state dict ----------------

def _linear(params, name, x):
    y = x @ params[f"{name}.weight"].T
    return y + params[f"{name}.bias"] if f"{name}.bias" in params else y


def _conv3x3(params, name, x):
    """nn.Conv2d(kernel 3, padding 1): a cross-correlation, as lax's convolution."""
    y = lax.conv_general_dilated(x, params[f"{name}.weight"], window_strides=(1, 1), padding=((1, 1), (1, 1)),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + params[f"{name}.bias"][None, :, None, None]


def _max_pool2(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def _layer_norm(params, name, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(variance + eps) * params[f"{name}.weight"] + params[f"{name}.bias"]


def _mse(output, target):
    return jnp.mean((output - target) ** 2)


def _cross_entropy(logits, target):
    """Mean negative log-likelihood over every position (logits flattened to (-1, classes))."""
    logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_probs, target[:, None], axis=1))


# ---- the four families' losses, (params, x, y) -> scalar --------------------------------------------

def mlp_loss(params, x, y):
    """Linear layers "0", "2", ... with tanh between them (an nn.Sequential), MSE loss."""
    layers = sorted({int(name.split(".")[0]) for name in params})
    for i in layers[:-1]:
        x = jnp.tanh(_linear(params, str(i), x))
    return _mse(_linear(params, str(layers[-1]), x), y)


def cnn_loss(params, x, y):
    """conv "0" + ReLU + pool, conv "3" + ReLU + pool, flatten, linear "7"; cross-entropy."""
    x = _max_pool2(jax.nn.relu(_conv3x3(params, "0", x)))
    x = _max_pool2(jax.nn.relu(_conv3x3(params, "3", x)))
    return _cross_entropy(_linear(params, "7", x.reshape(x.shape[0], -1)), y)


def lstm_loss(params, x, y):
    """One LSTM layer over (batch, steps, features) from zero state, the head on the last step; MSE."""
    w_hh = params["lstm.weight_hh_l0"]
    projected = x @ params["lstm.weight_ih_l0"].T + params["lstm.bias_ih_l0"] + params["lstm.bias_hh_l0"]

    def cell(carry, gates_in):
        h, c = carry
        i, f, g, o = jnp.split(gates_in + h @ w_hh.T, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), None

    zeros = jnp.zeros((x.shape[0], w_hh.shape[1]), x.dtype)
    (h, _), _ = lax.scan(cell, (zeros, zeros), jnp.swapaxes(projected, 0, 1))
    return _mse(_linear(params, "head", h), y)


def _block(params, name, x):
    batch, steps, width = x.shape
    head = width // LM_HEADS
    qkv = _linear(params, f"{name}.qkv", _layer_norm(params, f"{name}.ln1", x))
    q, k, v = (t.reshape(batch, steps, LM_HEADS, head).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
    scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(head))
    causal = jnp.triu(jnp.ones((steps, steps), bool), 1)
    weights = jax.nn.softmax(jnp.where(causal, -jnp.inf, scores), axis=-1)
    x = x + _linear(params, f"{name}.proj", (weights @ v).transpose(0, 2, 1, 3).reshape(batch, steps, width))
    hidden = jax.nn.gelu(_linear(params, f"{name}.mlp.0", _layer_norm(params, f"{name}.ln2", x)), approximate=False)
    return x + _linear(params, f"{name}.mlp.2", hidden)


def transformer_loss(params, idx, targets):
    """Token + position embeddings, pre-norm causal attention blocks with a GELU MLP, final layer
    norm, a bias-free head; cross-entropy over the vocabulary."""
    blocks = sorted({int(name.split(".")[1]) for name in params if name.startswith("blocks.")})
    x = params["tokens.weight"][idx] + params["positions.weight"][jnp.arange(idx.shape[1])]
    for i in blocks:
        x = _block(params, f"blocks.{i}", x)
    return _cross_entropy(_linear(params, "head", _layer_norm(params, "ln_f", x)), targets)


LOSSES = {"mlp": mlp_loss, "cnn": cnn_loss, "lstm": lstm_loss, "transformer": transformer_loss}


def jax_systems(bench, state: dict):
    """{"JAX jit": step} for ``bench`` from staticgrad's initial ``state``, or the reason it is skipped."""
    if jax is None:
        return {}, {"JAX jit": "jax is not installed"}, {}
    model, opt = build(staticgrad, bench, state)
    spec = optimizer_spec(opt)
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.named_parameters()}
    loss_of = LOSSES[bench.family]

    @jax.jit
    def compiled(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_of)(params, x, y)
        params, opt_state = update(spec, params, grads, opt_state)
        return params, opt_state, loss

    held = {"params": params, "opt": init_state(spec, params, jnp.zeros_like, jnp.zeros((), jnp.float32))}
    data = [(jnp.asarray(x), jnp.asarray(y)) for x, y in bench.batches(BATCHES)]

    def step(x, y):
        held["params"], held["opt"], loss = compiled(held["params"], held["opt"], x, y)
        return loss.block_until_ready()   # JAX dispatches asynchronously: wait for the step

    return {"JAX jit": cycle_batches(step, data)}, {}, {}


__all__ = ["LOSSES", "jax_systems"]
