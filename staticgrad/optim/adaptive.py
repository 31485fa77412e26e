"""RMSprop, Adagrad and Adadelta as PyTorch's single-tensor (for-loop) versions, in the same order
of operations, replayable under ``@compile``: hyperparameters are read through ``hyper`` (a replay
re-reads them) and the step count is a 0-dim tensor (Adagrad's lr decay is tensor ops on it)."""

from __future__ import annotations

from staticgrad._eager.creation import full_like, zeros_like
from staticgrad.optim.optimizer import Optimizer, hyper, step_counter


def _check(name: str, value, label: str) -> None:
    if not value >= 0.0:
        raise ValueError(f"Invalid {label}: {value}")


class RMSprop(Optimizer):
    _branch_keys = ("weight_decay", "momentum")

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False):
        for value, label in ((lr, "learning rate"), (eps, "epsilon value"), (momentum, "momentum value"),
                             (weight_decay, "weight_decay value"), (alpha, "alpha value")):
            _check("RMSprop", value, label)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        lr, alpha, eps = hyper(group, "lr"), hyper(group, "alpha"), hyper(group, "eps")
        weight_decay, momentum = hyper(group, "weight_decay"), hyper(group, "momentum")
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = step_counter()
                state["square_avg"] = zeros_like(p)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if group["centered"]:
                    state["grad_avg"] = zeros_like(p)
            if group["maximize"]:
                grad = -grad
            state["step"].add_(1)
            if group["weight_decay"] != 0:
                grad = grad.add(p, alpha=weight_decay)
            square_avg = state["square_avg"]
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.lerp_(grad, 1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg = avg.add_(eps)
            if group["momentum"] > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).addcdiv_(grad, avg)
                p.add_(buf, alpha=-lr)
            else:
                p.addcdiv_(grad, avg, value=-lr)


class Adagrad(Optimizer):
    _branch_keys = ("weight_decay", "lr_decay")

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None):
        for value, label in ((lr, "learning rate"), (lr_decay, "lr_decay value"),
                             (weight_decay, "weight_decay value"),
                             (initial_accumulator_value, "initial_accumulator_value value"), (eps, "epsilon value")):
            _check("Adagrad", value, label)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:  # PyTorch creates Adagrad's state up front
            for p in group["params"]:
                state = self.state[p]
                state["step"] = step_counter()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update_group(self, group: dict) -> None:
        lr, lr_decay, eps = hyper(group, "lr"), hyper(group, "lr_decay"), hyper(group, "eps")
        weight_decay = hyper(group, "weight_decay")
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            step = state["step"].add_(1).double()
            if group["maximize"]:
                grad = -grad
            if group["weight_decay"] != 0:
                grad = grad.add(p, alpha=weight_decay)
            clr = lr / (1 + (step - 1) * lr_decay)
            state["sum"].addcmul_(grad, grad, value=1)
            std = state["sum"].sqrt().add_(eps)
            p.add_(grad * -clr / std)  # addcdiv_(grad, std, value=-clr)


class Adadelta(Optimizer):
    _branch_keys = ("weight_decay",)

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach=None, *, capturable: bool = False, maximize: bool = False, differentiable: bool = False):
        _check("Adadelta", lr, "learning rate")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check("Adadelta", eps, "epsilon value")
        _check("Adadelta", weight_decay, "weight_decay value")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update_group(self, group: dict) -> None:
        lr, rho, eps, weight_decay = (hyper(group, k) for k in ("lr", "rho", "eps", "weight_decay"))
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = step_counter()
                state["square_avg"] = zeros_like(p)
                state["acc_delta"] = zeros_like(p)
            state["step"].add_(1)
            if group["maximize"]:
                grad = -grad
            if group["weight_decay"] != 0:
                grad = grad.add(p, alpha=weight_decay)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(grad)
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            p.add_(delta, alpha=-lr)
