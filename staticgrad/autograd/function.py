"""torch.autograd.Function: a user's own op, its forward and backward written in Python.

``MyFn.apply(*args)`` runs ``forward(ctx, *args)`` with grad mode off and, when a tensor argument
requires grad, attaches one node to the float outputs (shown as ``MyFnBackward``). Its backward
calls ``backward(ctx, *grad_outputs)``, which returns one gradient per forward argument. The ctx
keeps what PyTorch's does: ``save_for_backward``/``saved_tensors`` (checked against in-place
changes, and freed by a backward without ``retain_graph``, as other nodes' saved tensors are),
``needs_input_grad``, ``mark_non_differentiable``, ``mark_dirty``, ``set_materialize_grads``, and
any attribute the forward sets. ``setup_context`` (forward without ctx) works too.

Inside ``staticgrad.compile`` the forward's and backward's ops record as any others; Python state
kept on the ctx is read while tracing, as any Python value a traced function reads."""

from __future__ import annotations

import functools
import warnings

from staticgrad._eager.creation import zeros
from staticgrad._eager.dispatch import _record_node
from staticgrad._eager.grad_mode import GradMode, no_grad
from staticgrad._eager.node import NODE_CLASSES, SavedTensor
from staticgrad._eager.tensor import Tensor
from staticgrad.ops.registry import OpDef


class FunctionCtx:
    """What ``forward`` leaves for ``backward``."""

    def __init__(self):
        self._to_save = ()
        self._saved = None
        self._non_differentiable = set()
        self._dirty = set()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors) -> None:
        for k, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {k} is of type "
                                f"{type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:  # not yet attached to a graph (no input requires grad): as saved
            return tuple(self._to_save)
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


BackwardCFunction = FunctionCtx


def _backward_op(cls) -> OpDef:
    """The op record of ``cls``'s node: its name and its backward, which runs ``cls.backward``."""
    op = cls.__dict__.get("_staticgrad_op")
    if op is None:
        op = OpDef(f"autograd_function:{cls.__module__}.{cls.__qualname__}", _no_forward, "other",
                   f"{cls.__name__}Backward", functools.partial(_run_backward, cls))
        NODE_CLASSES.make(op.node_name, __name__, op)   # its node's class lives here, as PyTorch's does
        cls._staticgrad_op = op
    return op


def _no_forward(*arrays, **attrs):
    raise RuntimeError("an autograd.Function's node has no forward to replay")


def _run_backward(cls, F, grad, saved, attrs, needs):
    ctx = attrs["ctx"]
    ctx._saved = tuple(saved.get(f"saved_{k}") for k in range(attrs["n_saved"]))
    grads = list(grad) if isinstance(grad, tuple) else [grad]
    if ctx.materialize_grads:
        grads = [zeros(shape, dtype=dtype) if g is None else g for g, (shape, dtype) in zip(grads, attrs["outputs"])]
    try:
        with _differentiable(GradMode.enabled):
            result = cls.backward(ctx, *grads)
    finally:
        ctx._saved = None  # the node holds the saved tensors (and frees them), the ctx does not
    if not isinstance(result, tuple):
        result = (result,)
    positions = attrs["tensor_positions"]
    if len(result) < attrs["n_args"]:
        raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients (expected "
                           f"{attrs['n_args']}, got {len(result)})")
    if len(result) > attrs["n_args"]:
        if any(g is not None for g in result[attrs["n_args"]:]):
            raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients (expected "
                               f"{attrs['n_args']}, got {len(result)})")
    out = []
    for k, position in enumerate(positions):
        g = result[position]
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"function {cls.__name__}Backward returned a gradient different than None at position "
                            f"{position + 1}, but the corresponding forward input was not a Variable")
        out.append(g if needs[k] else None)
    return tuple(out)


class _differentiable:
    """Grad mode as the engine set it for this backward (on under create_graph)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __enter__(self):
        self.previous, GradMode.enabled = GradMode.enabled, self.enabled

    def __exit__(self, *exc):
        GradMode.enabled = self.previous
        return False


class Function:
    """Subclass with ``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs,
    output)``) and ``backward(ctx, *grad_outputs)``, both static methods; call ``MyFn.apply(...)``."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, so you "
                      "should invoke them on the class itself. Instantiating an autograd function will raise an error "
                      "in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward
    setup_context = None

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            if cls.setup_context is not None:  # forward(*args), and setup_context fills the ctx
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        flat = (outputs,) if single else outputs
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = tuple(args[i] for i in tensor_positions)
        if not (GradMode.enabled and any(t.requires_grad for t in inputs)):
            return outputs
        flat = tuple(_own_output(o, inputs, ctx) for o in flat)
        tensors = [o for o in flat if isinstance(o, Tensor)]
        for nr, o in enumerate(tensors):
            o._output_nr = nr
        saved, ctx._to_save = list(ctx._to_save), ()
        attrs = {"ctx": ctx, "tensor_positions": tensor_positions, "n_args": len(args), "n_saved": len(saved),
                 "outputs": tuple((tuple(o.shape), o.dtype) for o in tensors)}
        node = _record_node(_backward_op(cls), inputs, attrs, tuple(tensors), None)
        if node is not None:
            _attach_saved(node, saved, tensors)
        for o in flat:
            if isinstance(o, Tensor) and id(o) in ctx._non_differentiable:
                o.grad_fn, o._requires_grad = None, False
        return flat[0] if single else flat


def _own_output(output, inputs, ctx):
    """An output that is one of the inputs: itself when the forward changed it in place (mark_dirty),
    else a new alias of it (the node becomes the alias's grad_fn, not the input's)."""
    if isinstance(output, Tensor) and any(output is t for t in inputs) and id(output) not in ctx._dirty:
        aliased = output.view_as(output)
        if id(output) in ctx._non_differentiable:
            ctx._non_differentiable.add(id(aliased))
        return aliased
    return output


def _attach_saved(node, saved: list, outputs: list) -> None:
    """Keep the saved tensors in the node's slots: checked for in-place changes when unpacked, freed
    by a backward without retain_graph (a second backward then raises PyTorch's error)."""
    slots = {}
    for k, t in enumerate(saved):
        if t is None:
            continue
        is_output = any(t is o for o in outputs)
        slots[f"saved_{k}"] = SavedTensor(t, is_output)
    node._saved = slots
    node._freeable = tuple(slots)


def once_differentiable(backward):
    """A backward that runs with grad mode off: its gradients carry no graph (no double backward)."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            return backward(ctx, *grads)
    return wrapper
