"""Adam and AdamW as PyTorch's single-tensor (for-loop) versions, replayable under ``@compile``.

A replay runs no Python, so everything that changes from step to step is a tensor: the step
count is a 0-dim tensor incremented in place and the bias corrections are tensor ops on it
(where PyTorch reads the count into Python). Every hyperparameter used as a number is read
through ``hyper`` (betas through ``_beta``), so a replay re-reads it from ``param_groups``.
When nothing records the step, ``adam_untraced`` does the same IEEE operations in one pass per
parameter (AMSGrad, tensor hyperparameters and unusual layouts keep the ops).
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import zeros_like
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing, replay_scalar
from staticgrad.optim.adam_untraced import adam_step, corrections
from staticgrad.optim.optimizer import Optimizer, hyper, step_counter


def _beta(group: dict, index: int):
    """``group['betas'][index]``; while tracing, a number a replay re-reads (``hyper`` for a tuple element)."""
    return replay_scalar(group["betas"][index], lambda: group["betas"][index],
                         ("param_group", id(group), "betas", index))


def _numbers(*values) -> bool:
    return all(type(v) is float or type(v) is int for v in values)


class Adam(Optimizer):
    """Adam (with AMSGrad, maximize, L2 or decoupled weight decay): PyTorch's defaults, param_groups and
    state keys; ``foreach``, ``fused``, ``capturable`` and ``differentiable`` are kept but always run
    the same for-loop update."""

    _branch_keys = ("weight_decay",)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 amsgrad: bool = False, *, foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None, decoupled_weight_decay: bool = False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)


    def _update_group(self, group: dict) -> None:
        lr, eps, weight_decay = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        beta1, beta2 = _beta(group, 0), _beta(group, 1)
        untraced = Tracing.tracer is None and _numbers(lr, beta1, beta2)
        in_one_loop = untraced and not group["amsgrad"] and _numbers(eps, weight_decay)
        numbers, constants = (lr, beta1, beta2, eps, weight_decay), {}
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = step_counter()
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = zeros_like(p)
            if in_one_loop and adam_step(p, grad, state, group, numbers, constants):
                continue
            if group["maximize"]:
                grad = -grad
            step = state["step"].add_(1)
            if group["weight_decay"] != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if untraced:
                make = Tensor._make
                negative_step_size, bias_correction2_sqrt = (make(c, False, None) for c in
                                                             corrections(step._data, beta1, beta2, lr))
            else:
                step = step.double()
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
                negative_step_size = -(lr / bias_correction1)
            if p._data.ndim == 0:   # two 0-dim operands would promote to float64: work in p's dtype, as the loop
                negative_step_size = negative_step_size.to(p.dtype)   # does and PyTorch's Adam (Python floats)
                bias_correction2_sqrt = bias_correction2_sqrt.to(p.dtype)
            second_moment = exp_avg_sq
            if group["amsgrad"]:
                second_moment = state["max_exp_avg_sq"].copy_(fn.maximum(state["max_exp_avg_sq"], exp_avg_sq))
            denom = (second_moment.sqrt() / bias_correction2_sqrt).add_(eps)
            p.add_(exp_avg * negative_step_size / denom)  # addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: the parameter shrinks by ``lr * weight_decay`` each step."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, maximize: bool = False, foreach=None, capturable: bool = False,
                 differentiable: bool = False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
