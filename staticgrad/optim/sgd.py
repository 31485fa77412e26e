"""SGD with momentum, dampening, weight decay and Nesterov, as PyTorch's for-loop version."""

from __future__ import annotations

from staticgrad._eager.functions import clone
from staticgrad._state import Tracing
from staticgrad.ops import OPS
from staticgrad.ops.quiet import restore, silence
from staticgrad.optim.loop_arrays import fit_one_loop
from staticgrad.optim.optimizer import Optimizer, hyper


class SGD(Optimizer):
    _branch_keys = ("momentum", "weight_decay", "dampening")

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)


    def _update_group(self, group: dict) -> None:
        if (Tracing.tracer is None and not group["maximize"] and group["weight_decay"] == 0 and not group["nesterov"]
                and all(type(group[k]) in (int, float) for k in ("lr", "momentum", "dampening"))):
            quiet = silence()  # an overflow gives inf silently, as the dispatched ops do
            try:
                self._update_group_untraced(group)
            finally:
                restore(quiet)
            return
        lr = hyper(group, "lr")
        momentum = hyper(group, "momentum")
        dampening = hyper(group, "dampening")
        weight_decay = hyper(group, "weight_decay")
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            d_p = -grad if group["maximize"] else grad
            if group["weight_decay"] != 0:
                d_p = d_p.add(p, alpha=weight_decay)
            if group["momentum"] != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = clone(d_p).detach()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
            p.add_(d_p, alpha=-lr)

    def _update_group_untraced(self, group: dict) -> None:
        """The same update with the same NumPy calls, in the same order, as the ops above run
        (``mul_scalar``, ``add`` with ``alpha``), on the arrays directly: no dispatch per op when
        nothing records it. Each in-place write moves its tensor's version as the op would."""
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        for p in group["params"]:
            grad = p._grad
            if grad is None:
                continue
            d_p = grad
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = clone(d_p).detach()
                    state["momentum_buffer"] = buf
                elif fit_one_loop(p._data, d_p._data, buf._data):
                    _sgd_loop().momentum_update(p._data.reshape(-1), d_p._data.reshape(-1), buf._data.reshape(-1),
                                                p._data.dtype.type(momentum), p._data.dtype.type(1 - dampening),
                                                1 - dampening == 1, p._data.dtype.type(-lr))
                    buf._version_counter[0] += 2
                    p._version_counter[0] += 1
                    continue
                else:
                    data = buf._data
                    _MUL_SCALAR(data, out=data, other=momentum)
                    buf._version_counter[0] += 1
                    _ADD(data, d_p._data, out=data, alpha=1 - dampening)
                    buf._version_counter[0] += 1
                d_p = buf
            _ADD(p._data, d_p._data, out=p._data, alpha=-lr)
            p._version_counter[0] += 1


_LOOP = None


def _sgd_loop():
    """``staticgrad.optim.sgd_loop``, imported on the first untraced step with momentum (it loads Numba)."""
    global _LOOP
    if _LOOP is None:
        from staticgrad.optim import sgd_loop  # here, not at the top: it loads Numba

        _LOOP = sgd_loop
    return _LOOP


# The op table's own forwards, which the in-place ops above run through dispatch.
_MUL_SCALAR, _ADD = OPS["mul_scalar"].forward, OPS["add"].forward
