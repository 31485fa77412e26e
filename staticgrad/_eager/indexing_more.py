"""torch.take, masked_scatter (and Tensor.masked_scatter_) and argwhere over the op table
(staticgrad.ops.linalg_more and the nonzero op): PyTorch's signatures, argument checks and errors.
Index and mask values are checked inside the forwards, so a replay on bad values raises as eager does;
argwhere's result size depends on the values, so a compiled function refuses it, as nonzero."""

from __future__ import annotations

import warnings

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager import movement
from staticgrad._eager.dispatch import dispatch, dispatch_inplace
from staticgrad._eager.linalg_more import check_expandable
from staticgrad.ops import OPS


def take(input, index):
    """The elements of the flattened input at ``index`` (int64; negative counts from the end), in
    index's shape (TakeBackward0)."""
    fn.require_tensor(input, "take")
    fn.require_tensor(index, "take", "index", 2)
    if index._data.dtype.name != "int64":
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {fn._scalar_type(index)}")
    return dispatch(OPS["take"], (input, index), {})


def _masked_scatter_checks(name, input, mask, source) -> None:
    fn.require_tensor(input, name)
    fn.require_tensor(mask, name, "mask", 2)
    fn.require_tensor(source, name, "source", 3)
    if mask._data.dtype.kind != "b":
        if mask._data.dtype.name == "uint8":
            warnings.warn("masked_scatter_ received a mask with dtype torch.uint8, this behavior is now "
                          "deprecated,please use a mask with dtype torch.bool instead.", UserWarning, stacklevel=3)
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{fn._scalar_type(mask)}")
    if input._data.dtype != source._data.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{fn._scalar_type(input)} and {fn._scalar_type(source)}")


def masked_scatter(input, mask, source):
    """A copy of input (broadcast with mask) with source's elements, in order, where mask is true
    (MaskedScatterBackward0)."""
    _masked_scatter_checks("masked_scatter", input, mask, source)
    try:
        np.broadcast_shapes(input._data.shape, mask._data.shape)
    except ValueError:
        check_expandable(mask, input._data.shape)
    return dispatch(OPS["masked_scatter"], (input, mask, source), {})


def masked_scatter_(input, mask, source):
    """masked_scatter in place: the mask must broadcast to input's shape."""
    _masked_scatter_checks("masked_scatter_", input, mask, source)
    check_expandable(mask, input._data.shape)
    return dispatch_inplace(OPS["masked_scatter"], input, (mask, source), {})


def argwhere(input):
    """torch.argwhere: nonzero(input), a (count, ndim) int64 tensor of indices."""
    fn.require_tensor(input, "argwhere")
    return movement.nonzero(input)


FUNCTIONS = {"take": take, "masked_scatter": masked_scatter, "argwhere": argwhere}
METHODS = dict(FUNCTIONS, masked_scatter_=masked_scatter_)
