"""The bench optimizers (SGD with momentum, Adam, AdamW) as pure functions over dicts of arrays, for
the peers that compile a whole training step as one function (``torch.compile``, JAX ``jit``).

The updates use arithmetic operators only, so torch tensors and JAX arrays both run them; the step
count is a 0-dim array (a Python number would be baked into the compiled step). Hyperparameters
come from staticgrad's optimizer of the same bench model, so every system trains alike.
"""

from __future__ import annotations


def optimizer_spec(opt) -> dict:
    """The hyperparameters of ``opt`` (one param group, a staticgrad or torch optimizer) that the
    functional update needs; refuses what it does not implement."""
    (group,) = opt.param_groups
    if group.get("maximize") or group.get("amsgrad") or group.get("nesterov"):
        raise ValueError(f"functional {type(opt).__name__}: maximize, amsgrad and nesterov are not implemented")
    if "betas" in group:
        decoupled = group.get("decoupled_weight_decay", type(opt).__name__ == "AdamW")
        if group["weight_decay"] and not decoupled:
            raise ValueError("functional Adam: L2 weight decay (not decoupled) is not implemented")
        return {"kind": "adam", "lr": group["lr"], "beta1": group["betas"][0], "beta2": group["betas"][1],
                "eps": group["eps"], "weight_decay": group["weight_decay"]}
    if group.get("dampening") or group.get("weight_decay"):
        raise ValueError("functional SGD: dampening and weight decay are not implemented")
    return {"kind": "sgd", "lr": group["lr"], "momentum": group["momentum"]}


def init_state(spec: dict, params: dict, zeros_like, zero_scalar) -> dict:
    """The optimizer state for ``params``: momentum buffers, or Adam's moments and step count."""
    if spec["kind"] == "sgd":
        return {"momentum": {k: zeros_like(p) for k, p in params.items()}}
    return {"m": {k: zeros_like(p) for k, p in params.items()}, "v": {k: zeros_like(p) for k, p in params.items()},
            "step": zero_scalar}


def update(spec: dict, params: dict, grads: dict, state: dict):
    """(new params, new state) after one step. SGD: buf = momentum * buf + grad (the first buffer is
    the gradient itself, as zeros make it), p -= lr * buf. Adam(W): PyTorch's update with bias
    corrections, AdamW first shrinking p by lr * weight_decay."""
    lr = spec["lr"]
    if spec["kind"] == "sgd":
        buffers = {k: spec["momentum"] * state["momentum"][k] + g for k, g in grads.items()}
        return {k: p - lr * buffers[k] for k, p in params.items()}, {"momentum": buffers}
    beta1, beta2, eps, decay = spec["beta1"], spec["beta2"], spec["eps"], spec["weight_decay"]
    step = state["step"] + 1
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    m = {k: beta1 * state["m"][k] + (1 - beta1) * g for k, g in grads.items()}
    v = {k: beta2 * state["v"][k] + (1 - beta2) * g * g for k, g in grads.items()}
    new = {}
    for k, p in params.items():
        if decay:
            p = p * (1 - lr * decay)
        new[k] = p - (lr / bias_correction1) * m[k] / (v[k] ** 0.5 / bias_correction2_sqrt + eps)
    return new, {"m": m, "v": v, "step": step}
