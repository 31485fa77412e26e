"""batch_norm's ops: normalize each channel (dim 1) over the batch and spatial dims.

``batch_norm_train`` uses the batch's statistics and returns (y, mean, invstd, var) like PyTorch's
native_batch_norm (plus the biased variance the running-statistics update reads);
``batch_norm_eval`` uses given running statistics. Both take weight and bias as tensors (ones
and zeros stand in when absent: multiplying by 1 and adding 0 are exact; a float16 input computes
in float32, its results rounded, as PyTorch's CPU kernel does) and their backward
formulas are written with table ops, so gradients of any order follow."""

from __future__ import annotations

import numpy as np

from staticgrad.ops.opmath import HALF, widen_array, widen_formula
from staticgrad.ops.registry import OpDef, Save, register


def _reduce_axes(ndim: int) -> tuple:
    return (0,) + tuple(range(2, ndim))


def _channel_shape(ndim: int, channels: int) -> tuple:
    """The shape a per-channel vector takes to broadcast against the input: (1, C, 1, ...)."""
    return (1, channels) + (1,) * (ndim - 2)


def _train_forward(x, weight, bias, out=None, eps=1e-5):
    if x.dtype == HALF:
        return _train_forward_half(x, weight, bias, eps)
    axes, shape = _reduce_axes(x.ndim), _channel_shape(x.ndim, x.shape[1])
    mean = np.mean(x, axis=axes)
    centered = x - mean.reshape(shape)
    var = np.mean(centered * centered, axis=axes)
    invstd = np.reciprocal(np.sqrt(var + x.dtype.type(eps)))
    y = centered * (invstd * weight).reshape(shape)
    y += bias.reshape(shape)
    return y, mean, invstd, var


def _train_forward_half(x, weight, bias, eps):
    """float16: statistics in float32 rounded to float16, then y from the rounded statistics in
    float32, rounded (what PyTorch's CPU kernel gives, bit for bit)."""
    axes, shape = _reduce_axes(x.ndim), _channel_shape(x.ndim, x.shape[1])
    wide = widen_array(x)
    mean = np.mean(wide, axis=axes)
    centered = wide - mean.reshape(shape)
    var = np.mean(centered * centered, axis=axes)
    invstd = np.reciprocal(np.sqrt(var + np.float32(eps)))
    mean, invstd = mean.astype(HALF), invstd.astype(HALF)
    y = (wide - widen_array(mean).reshape(shape)) * (widen_array(invstd) * widen_array(weight)).reshape(shape)
    y += widen_array(bias).reshape(shape)
    return y.astype(HALF), mean, invstd, var.astype(HALF)


def _eval_forward(x, weight, bias, running_mean, running_var, out=None, eps=1e-5):
    if x.dtype == HALF:  # in float32, rounded
        y = _eval_forward(*(widen_array(a) for a in (x, weight, bias, running_mean, running_var)), eps=eps)
        if out is None:
            return y.astype(HALF)
        np.copyto(out, y, casting="unsafe")
        return out
    shape = _channel_shape(x.ndim, x.shape[1])
    invstd = np.reciprocal(np.sqrt(running_var + x.dtype.type(eps)))
    y = np.multiply(x - running_mean.reshape(shape), (invstd * weight).reshape(shape), out=out)
    y += bias.reshape(shape)
    return y


def _per_channel(F, t, ndim):
    return F.view(t, shape=_channel_shape(ndim, t.shape[0]))


def _train_backward(F, grads, s, at, need):
    """grad x = w * invstd * (g - mean(g) - xhat * mean(g * xhat)); grad w = sum(g * xhat); grad b = sum(g);
    plus what reaches the returned mean, invstd and var (a double backward differentiates through them)."""
    gy, g_mean, g_invstd, g_var = grads
    x, mean, invstd, weight = s["input"], s["result1"], s["result2"], s["weight"]
    ndim = len(x.shape)
    axes = _reduce_axes(ndim)
    count = x.numel() // x.shape[1]
    grad_x = grad_weight = grad_bias = None
    if gy is not None:
        xhat = (x - _per_channel(F, mean, ndim)) * _per_channel(F, invstd, ndim)
        grad_bias = F.sum(gy, dim=axes, keepdim=False)
        grad_weight = F.sum(gy * xhat, dim=axes, keepdim=False)
        if need[0]:
            centered = gy - _per_channel(F, F.div_scalar(grad_bias, other=count), ndim)
            centered = centered - xhat * _per_channel(F, F.div_scalar(grad_weight, other=count), ndim)
            grad_x = centered * _per_channel(F, invstd * weight, ndim)
    if need[0]:
        if g_mean is not None:  # d mean / dx = 1/N
            grad_x = _add(grad_x, F.expand(_per_channel(F, F.div_scalar(g_mean, other=count), ndim),
                                           shape=tuple(x.shape)))
        if g_invstd is not None:  # d var / dx = 2 (x - mean) / N, d invstd / d var = -invstd^3 / 2
            g_var = _add(g_var, g_invstd * invstd * invstd * invstd * -0.5)
        if g_var is not None:
            grad_x = _add(grad_x, (x - _per_channel(F, mean, ndim)) * _per_channel(F, g_var * (2.0 / count), ndim))
    return grad_x, grad_weight if need[1] else None, grad_bias if need[2] else None


def _add(a, b):
    return b if a is None else a + b


def _eval_backward(F, grads, s, at, need):
    """grad x = g * w * invstd; grad w = sum(g * xhat); grad b = sum(g) (running statistics get none)."""
    gy = grads if not isinstance(grads, (tuple, list)) else grads[0]
    x, weight, running_mean, running_var = s["input"], s["weight"], s["running_mean"], s["running_var"]
    ndim = len(x.shape)
    axes = _reduce_axes(ndim)
    invstd = F.reciprocal(F.sqrt(F.add_scalar(running_var, other=at["eps"])))
    grad_x = gy * _per_channel(F, invstd * weight, ndim) if need[0] else None
    grad_weight = None
    if need[1]:
        xhat = (x - _per_channel(F, running_mean, ndim)) * _per_channel(F, invstd, ndim)
        grad_weight = F.sum(gy * xhat, dim=axes, keepdim=False)
    grad_bias = F.sum(gy, dim=axes, keepdim=False) if need[2] else None
    return (grad_x, grad_weight, grad_bias) + (None,) * (len(need) - 3)


_WIDENED = ("input", "weight", "result1", "result2", "running_mean", "running_var")
register(OpDef("batch_norm_train", _train_forward, "other", "NativeBatchNormBackward0",
               widen_formula(_train_backward, _WIDENED),
               (Save("input", 0), Save("weight", 1), Save("result1", "result:1"), Save("result2", "result:2"),
                Save("eps", "attr:eps", freed=False)), "float"))
register(OpDef("batch_norm_eval", _eval_forward, "other", "NativeBatchNormBackward0",
               widen_formula(_eval_backward, _WIDENED),
               (Save("input", 0), Save("weight", 1), Save("running_mean", 3), Save("running_var", 4),
                Save("eps", "attr:eps", freed=False)), "float", grad_inputs=(0, 1, 2),
               nondifferentiable=((3, "native_batch_norm", "running_mean"), (4, "native_batch_norm", "running_var"))))
