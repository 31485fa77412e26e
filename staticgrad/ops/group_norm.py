"""group_norm's ops: split the channels (dim 1) of an (N, C, *) input into ``group`` groups and
normalize each (sample, group) block over its channels and spatial positions.

The forward returns (y, mean, rstd) like PyTorch's native_group_norm, mean and rstd of shape
(N, group). Every op takes (input, weight, bias), an absent weight or bias being an empty tensor
that needs no gradient (PyTorch's ``(None, 0)`` edge); one op per (weight given, bias given), as
layer_norm has, says which to apply and saves the weight only when there is one.
A float16 input is computed in float32 and its results rounded (forward and backward), as
PyTorch's CPU kernel does. The backward is written with table ops and gives partial derivatives
with respect to the input, the weight, the bias and the returned mean and rstd, so gradients of any order follow."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.opmath import HALF, widen_array, widen_formula
from staticgrad.ops.registry import OpDef, Save, register
from staticgrad.ops.shape import reshape_back


def _sizes(at) -> tuple:
    """(N, group, channels per group, HxW): the 4-dim view every formula works on."""
    group = at["group"]
    return at["N"], group, at["C"] // group, at["HxW"]


def _forward(has_weight: bool, has_bias: bool):
    def forward(x, weight, bias, out=None, N=0, C=0, HxW=1, group=1, eps=1e-5):
        if x.dtype == HALF:  # float32 arithmetic, every result rounded to float16 (PyTorch's CPU kernel)
            y, mean, rstd = forward(widen_array(x), widen_array(weight), widen_array(bias), None, N, C, HxW,
                                    group, eps)
            return y.astype(HALF), mean.astype(HALF), rstd.astype(HALF)
        n, g, per_group, hw = _sizes({"N": N, "C": C, "HxW": HxW, "group": group})
        count = per_group * hw
        if count == 0:  # empty groups: PyTorch's mean 0 and rstd NaN (a variance of 0 / 0)
            mean = np.zeros((n, g), x.dtype)
            rstd = np.full((n, g), np.nan, x.dtype)
            y = np.empty(x.shape, x.dtype)
        else:
            blocks = x.reshape(n, g, count)
            mean = np.mean(blocks, axis=2)
            centered = blocks - mean[:, :, None]
            var = np.mean(centered * centered, axis=2)
            rstd = np.reciprocal(np.sqrt(var + x.dtype.type(eps)))
            y = np.multiply(centered, rstd[:, :, None])
        y4 = y.reshape(n, g, per_group, hw)
        if has_weight:
            y4 *= weight.reshape(g, per_group, 1)
        if has_bias:
            y4 += bias.reshape(g, per_group, 1)
        return y4.reshape(x.shape), mean, rstd
    return forward


def _reshape(F, t, shape: tuple):
    """``t`` in ``shape``: a view when ``t`` is contiguous, else a copy, as reshape does."""
    if tuple(t.shape) == shape:
        return t
    return reshape_back(F, t, shape)


def _add(a, b):
    return b if a is None else a + b


def _backward_formula(has_weight: bool, has_bias: bool):
    def backward(F, grads, s, at, need):
        """grad x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per block, gw = g * weight;
        grad weight = sum over N of rstd * sum over HxW of g * (x - mean); grad bias = sum of g;
        plus what reaches the returned mean and rstd (a double backward differentiates through them)."""
        gy, g_mean, g_rstd = grads
        x, mean, rstd = s["input"], s["result1"], s["result2"]
        n, g, per_group, hw = blocks = _sizes(at)
        count = per_group * hw
        stats = (n, g, 1, 1)
        need_x, need_w, need_b = need[0], has_weight and need[1], has_bias and need[2]
        grad_x = grad_w = grad_b = None
        if x.numel() == 0:
            grad_x = F.zeros_like(x) if need_x else None
            need_x = False
        x4 = _reshape(F, x, blocks)
        centered = x4 - _reshape(F, mean, stats) if need_x or need_w else None
        r4 = _reshape(F, rstd, stats)
        if gy is not None:
            gy4 = _reshape(F, gy, blocks)
            if need_x:
                gw = gy4 * _reshape(F, s["weight"], (1, g, per_group, 1)) if has_weight else gy4
                xhat = centered * r4
                mean_gw = F.div_scalar(F.sum(gw, dim=(2, 3), keepdim=True), other=count)
                mean_gw_xhat = F.div_scalar(F.sum(gw * xhat, dim=(2, 3), keepdim=True), other=count)
                grad_x = (gw - mean_gw - xhat * mean_gw_xhat) * r4
            if need_w:
                per_sample = F.sum(gy4 * centered, dim=(3,), keepdim=False) * _reshape(F, rstd, (n, g, 1))
                grad_w = _reshape(F, F.sum(per_sample, dim=(0,), keepdim=False), (g * per_group,))
            if need_b:
                grad_b = F.sum(gy, dim=(0,) + tuple(range(2, len(x.shape))), keepdim=False)
        if need_x:
            if g_mean is not None:  # d mean / dx = 1 / count
                grad_x = _add(grad_x, F.expand(_reshape(F, F.div_scalar(g_mean, other=count), stats), shape=blocks))
            if g_rstd is not None:  # d rstd / dx = -rstd^3 (x - mean) / count
                grad_rstd = _reshape(F, g_rstd * rstd * rstd * rstd, stats)
                grad_x = _add(grad_x, F.mul_scalar(grad_rstd * centered, other=-1.0 / count))
            if grad_x is not None:
                grad_x = _reshape(F, grad_x, tuple(x.shape))
        return grad_x, grad_w, grad_b
    return backward


_ATTR_SAVES = tuple(Save(name, f"attr:{name}", freed=False) for name in ("N", "C", "HxW", "group", "eps"))

# The group_norm op for each (weight given, bias given), by suffix.
VARIANTS = {(False, False): "group_norm", (True, False): "group_norm_weight", (False, True): "group_norm_bias",
            (True, True): "group_norm_affine"}

for (_has_weight, _has_bias), _name in VARIANTS.items():
    _saves = (Save("input", 0), Save("result1", "result:1"), Save("result2", "result:2")) + _ATTR_SAVES
    if _has_weight:
        _saves += (Save("weight", 1),)
    register(OpDef(_name, _forward(_has_weight, _has_bias), "other", "NativeGroupNormBackward0",
                   widen_formula(_backward_formula(_has_weight, _has_bias), ("input", "result1", "result2", "weight")),
                   _saves, "float"))
