"""clip_grad_norm_ (and its parts get_total_norm, clip_grads_with_norm_; the deprecated
clip_grad_norm) and clip_grad_value_ as PyTorch's. The norm stays a tensor and the scaling is
``clamp(max_norm / (norm + 1e-6), max=1)``, so a compiled step records the clipping with no read
of a value back into Python (only ``error_if_nonfinite=True`` reads the norm)."""

from __future__ import annotations

import math
import warnings

from staticgrad._eager import functions as fn
from staticgrad._eager.creation import tensor
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _vector_norm(t, norm_type: float):
    """The norm of ``t``'s elements: max |x| for inf, min |x| for -inf, (sum |x|^p)^(1/p) else."""
    if norm_type == math.inf:
        return fn.amax(fn.abs(t))
    if norm_type == -math.inf:
        return fn.amin(fn.abs(t))
    if norm_type == 2:
        return fn.sqrt(fn.sum(t * t))
    if norm_type == 1:
        return fn.sum(fn.abs(t))
    if norm_type == 0:
        return fn.sum(fn.ne(t, 0).to(t.dtype))
    return fn.pow(fn.sum(fn.pow(fn.abs(t), norm_type)), 1.0 / norm_type)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None):
    """The norm of all the tensors' elements together (the norm of their norms)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        total_norm = _vector_norm(fn.stack([_vector_norm(t, norm_type) for t in tensors]), norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           "so it cannot be clipped. To disable this error and scale the gradients by the "
                           "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients by ``min(max_norm / (total_norm + 1e-6), 1)``, in place."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        clip_coef = fn.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scale all gradients together so their total norm is at most ``max_norm``; returns the total norm."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None):
    """The deprecated name of clip_grad_norm_ (PyTorch's FutureWarning)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
