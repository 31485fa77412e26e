"""The in-place view ops: ``t_``, ``transpose_`` (``swapdims_``, ``swapaxes_``), ``unsqueeze_`` and
``squeeze_`` change a tensor's sizes and strides, not its elements. As in PyTorch, the tensor keeps
its memory and identity, its version counter is bumped (a node that saved it refuses to run), a
leaf that requires grad refuses, and with grad on its history goes on through the view op's own
in-place node (``TBackward1``, ``TransposeBackward1``, ``UnsqueezeBackward1``, ``SqueezeBackward3``
to ``5``), whose backward undoes the change. A view stays a view of its base.

Inside a compiled function the change is refused (the trace falls back, or raises TraceError):
a replay binds each tensor's shape once, and cannot change a caller's tensor's shape.
"""

from __future__ import annotations

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch, refresh_view
from staticgrad._eager.grad_mode import GradMode
from staticgrad._eager.tensor import Tensor, _normalize_dim
from staticgrad._state import Tracing
from staticgrad.ops import OPS

_VIEW_SLOTS = ("_view_base_fn", "_view_chain", "_view_no_grad")


def _rebased(input: Tensor, public: str, make_view) -> Tensor:
    """``input`` given the sizes and strides of ``make_view(input)`` (the in-place form's view), in place."""
    fn.require_tensor(input, public)
    if GradMode.enabled and input._requires_grad and input.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    tracer = Tracing.tracer
    if tracer is not None:
        tracer.fail(f"{public}() changes a tensor's shape in place, which a replay cannot repeat; use its "
                    f"out-of-place form (x = x.{public[:-1]}(...))")
    refresh_view(input, public)
    result = make_view(input)
    input._data = result._data
    if input._base is not None:   # still a view of its base, now through one more view op
        for slot in _VIEW_SLOTS:
            setattr(input, slot, getattr(result, slot))
    if result.grad_fn is not None:
        input.grad_fn, input._output_nr = result.grad_fn, result._output_nr
    input._version_counter[0] += 1
    return input


def t_(input):
    ndim = input._data.ndim if isinstance(input, Tensor) else 0
    if ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {ndim}D")
    return _rebased(input, "t_", lambda x: dispatch(OPS["t"], (x,), {"inplace": True}))


def transpose_(input, dim0, dim1):
    def view(x):
        ndim = x._data.ndim
        dims = {"dim0": _normalize_dim(dim0, ndim), "dim1": _normalize_dim(dim1, ndim), "inplace": True}
        return dispatch(OPS["transpose"], (x,), dims)
    return _rebased(input, "transpose_", view)


def unsqueeze_(input, dim):
    return _rebased(input, "unsqueeze_", lambda x: dispatch(
        OPS["unsqueeze"], (x,), {"dim": _normalize_dim(dim, x._data.ndim + 1), "inplace": True}))


def squeeze_(input, dim=None):
    return _rebased(input, "squeeze_", lambda x: fn.squeeze(x, dim, inplace_name=True))


METHODS = {"t_": t_, "transpose_": transpose_, "swapdims_": transpose_, "swapaxes_": transpose_,
           "unsqueeze_": unsqueeze_, "squeeze_": squeeze_}
