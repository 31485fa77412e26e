"""Autograd: backward-graph nodes, the backward engine, grad mode."""

from staticgrad._eager import engine
from staticgrad._eager.engine import is_checkpoint_valid as _is_checkpoint_valid  # noqa: F401  (PyTorch's name)
from staticgrad._eager.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from staticgrad._eager.node import AccumulateGrad, Node
from staticgrad.autograd import function, graph
from staticgrad.autograd.function import Function, FunctionCtx, once_differentiable
from staticgrad.autograd.variable import Variable


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on."""
    return engine.backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated)."""
    return engine.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads)


__all__ = [
    "AccumulateGrad",
    "Function",
    "FunctionCtx",
    "Node",
    "Variable",
    "backward",
    "enable_grad",
    "function",
    "grad",
    "graph",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "once_differentiable",
    "set_grad_enabled",
]
