"""Grad mode, as ``torch.autograd.grad_mode`` offers it (kept per thread, in the eager core)."""

from staticgrad._eager.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["enable_grad", "inference_mode", "is_grad_enabled", "no_grad", "set_grad_enabled"]
