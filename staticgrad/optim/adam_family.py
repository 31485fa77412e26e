"""Adamax, NAdam and RAdam as PyTorch's single-tensor (for-loop) versions, replayable under
``@compile``: the step count is a 0-dim tensor and every number PyTorch computes from it in Python
(bias corrections, NAdam's momentum cache, RAdam's rectification) is the same IEEE operations on
that tensor in float64, so the values equal PyTorch's; hyperparameters are read through ``hyper``
(a replay re-reads them). Where PyTorch casts a Python number to the parameter's dtype (``addcdiv_``'s
value, ``mu_product *= mu``) the float64 tensor is cast the same way. RAdam's branch on the
rectification term is a ``where`` over both branches' values, the very values PyTorch's branch picks."""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import ones, zeros_like
from staticgrad.optim.adam import _beta
from staticgrad.optim.optimizer import Optimizer, hyper, step_counter


def _check(lr, eps, betas, weight_decay) -> None:
    if not lr >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not eps >= 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if not weight_decay >= 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _apply_weight_decay(p, grad, group: dict, lr, weight_decay):
    if group["weight_decay"] != 0:
        if group.get("decoupled_weight_decay"):
            p.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(p, alpha=weight_decay)
    return grad


def _stepped(optimizer, group: dict, lr, weight_decay, moments: tuple, first: dict | None = None):
    """Each parameter of ``group`` with a gradient, as (p, grad, state, step): its state made on first use
    (the step counter, then ``first``'s entries from their makers, then zeroed ``moments``, in PyTorch's
    key order), the gradient negated under ``maximize`` and weight-decayed, the step counted (float64)."""
    for p in group["params"]:
        grad = p.grad
        if grad is None:
            continue
        state = optimizer.state[p]
        if not state:
            state["step"] = step_counter()
            for name, make in (first or {}).items():
                state[name] = make(state)
            for name in moments:
                state[name] = zeros_like(p)
        if group["maximize"]:
            grad = -grad
        step = state["step"].add_(1).double()
        yield p, _apply_weight_decay(p, grad, group, lr, weight_decay), state, step


def _moments(state: dict, grad, beta1, beta2) -> None:
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg.add_((grad - exp_avg) * (1 - beta1))  # lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)  # addcmul_(grad, grad, value=1 - beta2)


class Adamax(Optimizer):
    """Adam with the infinity norm: PyTorch's defaults, state keys (step, exp_avg, exp_inf) and errors."""

    _branch_keys = ("weight_decay",)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 foreach=None, *, maximize: bool = False, differentiable: bool = False, capturable: bool = False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        lr, eps, weight_decay = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        beta1, beta2 = _beta(group, 0), _beta(group, 1)
        for p, grad, state, step in _stepped(self, group, lr, weight_decay, ("exp_avg", "exp_inf")):
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            exp_avg.add_((grad - exp_avg) * (1 - beta1))  # lerp_(grad, 1 - beta1)
            exp_inf.copy_(fn.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
            negative_clr = -(lr / (1 - beta1 ** step))
            p.add_(exp_avg * negative_clr / exp_inf)  # addcdiv_(exp_avg, exp_inf, value=-clr)


class NAdam(Optimizer):
    """Adam with Nesterov momentum (the momentum cache of Dozat's paper): PyTorch's defaults, state
    keys (step, mu_product, exp_avg, exp_avg_sq), decoupled weight decay and errors."""

    _branch_keys = ("weight_decay",)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        _check(lr, eps, betas, weight_decay)
        if not momentum_decay >= 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        lr, eps, weight_decay = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        momentum_decay = hyper(group, "momentum_decay")
        beta1, beta2 = _beta(group, 0), _beta(group, 1)
        first = {"mu_product": lambda state: ones((), dtype=state["step"].dtype)}
        for p, grad, state, step in _stepped(self, group, lr, weight_decay, ("exp_avg", "exp_avg_sq"), first):
            bias_correction2 = 1 - beta2 ** step
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product = state["mu_product"]
            mu_product.mul_(fn.to_dtype(mu, mu_product.dtype))  # PyTorch multiplies in mu_product's dtype
            product = mu_product.double()
            _moments(state, grad, beta1, beta2)
            denom = (state["exp_avg_sq"] / bias_correction2).sqrt()
            mu_product_next = product * mu_next
            denom.add_(eps)
            grad_value = (-lr * (1.0 - mu)) / (1.0 - product)
            avg_value = (-lr * mu_next) / (1.0 - mu_product_next)
            p.add_(grad * grad_value / denom)  # addcdiv_(grad, denom, value=...)
            p.add_(state["exp_avg"] * avg_value / denom)  # addcdiv_(exp_avg, denom, value=...)


class RAdam(Optimizer):
    """Rectified Adam: PyTorch's defaults, state keys (step, exp_avg, exp_avg_sq), decoupled weight
    decay and errors; the first steps (rectification term rho_t <= 5) take unadapted steps."""

    _branch_keys = ("weight_decay",)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        lr, eps, weight_decay = hyper(group, "lr"), hyper(group, "eps"), hyper(group, "weight_decay")
        beta1, beta2 = _beta(group, 0), _beta(group, 1)
        for p, grad, state, step in _stepped(self, group, lr, weight_decay, ("exp_avg", "exp_avg_sq")):
            _moments(state, grad, beta1, beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            bias_corrected_exp_avg = state["exp_avg"] / bias_correction1
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2 ** 0.5) / state["exp_avg_sq"].sqrt().add_(eps)
            plain = bias_corrected_exp_avg * lr
            rectified = plain * adaptive_lr * rect
            p.add_(fn.where(rho_t > 5.0, rectified, plain), alpha=-1.0)

