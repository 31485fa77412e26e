"""Activation ops: silu, softplus, the elu family (elu, selu, celu), hardtanh (and relu6),
hardsigmoid, hardswish, leaky_relu, mish, logsigmoid and glu, with the dedicated backward ops of
the piecewise ones (each differentiable again, for double backward).

The piecewise ones (hardtanh, hardsigmoid, hardswish, leaky_relu and their backward ops) have exact
scalar expressions, so they join fused kernels; those built on exp/log/tanh stay NumPy calls.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.math_ops import into
from staticgrad.ops.registry import OPS, OpDef, Save, as_array, lit, register

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _min_expr(a: str, bound: str) -> str:
    """NumPy's minimum(a, bound) for a non-NaN scalar bound: the bound on ties, a NaN a kept."""
    return f"({bound} if {a} >= {bound} else {a})"


def _max_expr(a: str, bound: str) -> str:
    return f"({bound} if {a} <= {bound} else {a})"


def _run(name: str, *arrays, **attrs):
    """The NumPy forward of a registered op: the backward ops below compute their gradient with the
    very calls (and so the very bits) that the same formula written with staticgrad ops would."""
    return OPS[name].forward(*arrays, **attrs)


# ---- silu, softplus, mish, logsigmoid: NumPy calls, gradients written with staticgrad ops -------------

def _silu(x, out=None):
    """x / (1 + exp(-x)), as PyTorch computes it."""
    t = as_array(np.negative(x))
    np.exp(t, out=t)
    np.add(t, 1, out=t)
    return np.true_divide(x, t, out=out)


def _silu_backward(F, g, s, at, need):
    x = s["self"]
    sig = F.sigmoid(x)
    return (g * (sig * F.add_scalar(x * F.rsub_scalar(sig, other=1.0), other=1.0)),)


register(OpDef("silu", _silu, "elementwise", "SiluBackward0", _silu_backward, (Save("self", 0),), "same"))


def _softplus(x, out=None, beta=1.0, threshold=20.0):
    """x where x * beta > threshold, else log1p(exp(x * beta)) / beta."""
    scaled = np.multiply(x, x.dtype.type(beta))
    with np.errstate(over="ignore"):  # exp overflows only where the threshold picks x
        smooth = np.log1p(np.exp(scaled)) / x.dtype.type(beta)
    return into(np.where(scaled > threshold, x, smooth), out)


register(OpDef("softplus", _softplus, "elementwise", "SoftplusBackward0",
               lambda F, g, s, at, need: (F.softplus_backward(g, s["self"], beta=s["beta"], threshold=s["threshold"]),),
               (Save("self", 0), Save("beta", "attr:beta", freed=False),
                Save("threshold", "attr:threshold", freed=False)), "same"))


def _softplus_bw(g, x, out=None, beta=1.0, threshold=20.0):
    """softplus's gradient: g where x * beta > threshold, else g * sigmoid(x * beta)."""
    scaled = _run("mul_scalar", x, other=beta)
    smooth = _run("mul", g, _run("sigmoid", scaled))
    return _run("where", _run("gt_scalar", scaled, other=threshold), g, smooth, out=out)


def _softplus_bw_backward(F, gg, s, at, need):
    """PyTorch's softplus double backward: the same op on gg, and gg * g * beta * sigmoid'(x * beta)
    where x * beta < threshold."""
    x, beta, threshold = s["self"], at["beta"], at["threshold"]
    grad_x = None
    if need[1]:
        scaled = F.mul_scalar(x, other=beta)
        local = F.mul_scalar(F.sigmoid_backward(gg * s["grad_output"], F.sigmoid(scaled)), other=beta)
        grad_x = F.where(F.lt_scalar(scaled, other=threshold), local, F.zeros_like(local))
    return F.softplus_backward(gg, x, beta=beta, threshold=threshold) if need[0] else None, grad_x


register(OpDef("softplus_backward", _softplus_bw, "elementwise", "SoftplusBackwardBackward0", _softplus_bw_backward,
               (Save("grad_output", 0, when=(1,)), Save("self", 1)), "promote"))


def _mish(x, out=None):
    """x * tanh(log1p(exp(x)))."""
    with np.errstate(over="ignore"):  # exp(x) = inf gives tanh(inf) = 1, as it should
        t = as_array(np.exp(x))
    np.log1p(t, out=t)
    np.tanh(t, out=t)
    return np.multiply(x, t, out=out)


def _mish_backward(F, g, s, at, need):
    x = s["self"]
    t = F.tanh(F.log1p(F.exp(x)))
    return (g * (t + x * F.sigmoid(x) * F.rsub_scalar(t * t, other=1.0)),)


register(OpDef("mish", _mish, "elementwise", "MishBackward0", _mish_backward, (Save("self", 0),), "same"))


def _logsigmoid(x, out=None):
    """min(x, 0) - log1p(exp(-|x|)), stable for large |x|."""
    z = as_array(np.abs(x))
    np.negative(z, out=z)
    np.exp(z, out=z)
    np.log1p(z, out=z)
    return np.subtract(np.minimum(x, 0), z, out=out)


register(OpDef("logsigmoid", _logsigmoid, "elementwise", "LogSigmoidBackward0",
               lambda F, g, s, at, need: (F.logsigmoid_backward(g, s["self"]),), (Save("self", 0),), "same"))


def _logsigmoid_bw(g, x, out=None):
    """logsigmoid's gradient: g * sigmoid(-x)."""
    return _run("mul", g, _run("sigmoid", _run("neg", x)), out=out)


def _logsigmoid_bw_backward(F, gg, s, at, need):
    """PyTorch's logsigmoid double backward: the same op on gg, and gg * g * (z - 1) * z, z = sigmoid(x)."""
    x = s["self"]
    grad_x = None
    if need[1]:
        z = F.sigmoid(x)
        grad_x = (gg * s["grad_output"]) * F.add_scalar(z, other=-1.0) * z
    return F.logsigmoid_backward(gg, x) if need[0] else None, grad_x


register(OpDef("logsigmoid_backward", _logsigmoid_bw, "elementwise", "LogSigmoidBackwardBackward0",
               _logsigmoid_bw_backward, (Save("grad_output", 0, when=(1,)), Save("self", 1)), "promote"))


# ---- elu, selu, celu: one op, PyTorch's (alpha, scale, input_scale) ---------------------------------------
# selu is elu with fixed alpha and scale (EluBackward0), celu is elu with input_scale 1/alpha
# (CeluBackward0). The in-place forms save the result, not the input (EluBackward1, CeluBackward1).

def _elu(x, out=None, alpha=1.0, scale=1.0, input_scale=1.0, celu=False):
    T = x.dtype.type
    with np.errstate(over="ignore"):  # expm1 overflows only where x > 0 picks the other branch
        negative = as_array(np.expm1(x if input_scale == 1 else np.multiply(x, T(input_scale))))
    np.multiply(negative, T(alpha * scale), out=negative)
    positive = x if scale == 1 else np.multiply(x, T(scale))
    return into(np.where(x > 0, positive, negative), out)


def _elu_node(suffix: str):
    return lambda at: ("CeluBackward" if at.get("celu") else "EluBackward") + suffix


def _input_scale(s, at) -> float:
    """The input scale of elu's gradient; celu's is 1 / alpha with alpha rounded to float32, as
    PyTorch's celu gradient computes it (its forward uses the exact 1 / alpha)."""
    return 1.0 / float(np.float32(s["alpha"])) if at.get("celu") else s["input_scale"]


def _elu_backward(F, g, s, at, need):
    return (F.elu_backward(g, s["self"], alpha=s["alpha"], scale=s["scale"], input_scale=_input_scale(s, at),
                           is_result=False),)


def _elu_result_backward(F, g, s, at, need):
    if s["alpha"] < 0:
        raise RuntimeError("In-place elu backward calculation is triggered with a negative slope which is not "
                           "supported. This is caused by calling in-place forward function with a negative slope, "
                           "please call out-of-place version instead.")
    return (F.elu_backward(g, s["result"], alpha=s["alpha"], scale=s["scale"], input_scale=_input_scale(s, at),
                           is_result=True),)


def _scaled(g, factor):
    return g if factor == 1 else _run("mul_scalar", g, other=factor)


def _elu_bw(g, x, out=None, alpha=1.0, scale=1.0, input_scale=1.0, is_result=False):
    """elu's gradient from its input x (or, ``is_result``, from its output y): g * scale where positive,
    else g * input_scale * alpha * scale * exp(x * input_scale) = g * input_scale * (y + alpha * scale)."""
    if is_result:
        slope = _run("mul_scalar", _run("add_scalar", x, other=alpha * scale), other=input_scale)
    else:
        slope = _run("mul_scalar", _run("exp", _scaled(x, input_scale)), other=input_scale * alpha * scale)
    return _run("where", _run("gt_scalar", x, other=0), _scaled(g, scale), _run("mul", g, slope), out=out)


def _elu_bw_backward(F, gg, s, at, need):
    """PyTorch's elu double backward: the same op on gg, and where x (or y) < 0, gg * g * input_scale
    (from the output) or elu_backward(gg * g * input_scale, x) (from the input)."""
    x = s["self_or_result"]
    attrs = {key: at[key] for key in ("alpha", "scale", "input_scale", "is_result")}
    grad_x = None
    if need[1]:
        inner = F.mul_scalar(gg * s["grad_output"], other=at["input_scale"])
        local = inner if at["is_result"] else F.elu_backward(inner, x, **attrs)
        grad_x = F.where(F.lt_scalar(x, other=0), local, F.zeros_like(local))
    return F.elu_backward(gg, x, **attrs) if need[0] else None, grad_x


register(OpDef("elu_backward", _elu_bw, "elementwise", "EluBackwardBackward0", _elu_bw_backward,
               (Save("grad_output", 0, when=(1,)), Save("self_or_result", 1)), "promote"))


_ELU_ATTRS = (Save("alpha", "attr:alpha", freed=False), Save("scale", "attr:scale", freed=False),
              Save("input_scale", "attr:input_scale", freed=False))
register(OpDef("elu", _elu, "elementwise", _elu_node("0"), _elu_backward, (Save("self", 0),) + _ELU_ATTRS, "same"))
register(OpDef("elu_result", _elu, "elementwise", _elu_node("1"), _elu_result_backward,
               (Save("result", "result"),) + _ELU_ATTRS, "same"))


# ---- hardtanh (relu6 is hardtanh(0, 6)) -------------------------------------------------------------------

def _hardtanh(x, out=None, min_val=-1.0, max_val=1.0):
    T = x.dtype.type
    return np.minimum(np.maximum(x, T(min_val)), T(max_val), out=out)


def _hardtanh_expr(x, at):
    return _min_expr(_max_expr(x[0], lit(at["min_val"])), lit(at["max_val"]))


register(OpDef("hardtanh", _hardtanh, "elementwise", "HardtanhBackward0",
               lambda F, g, s, at, need: (F.hardtanh_backward(g, s["self"], min_val=s["min_val"],
                                                              max_val=s["max_val"]),),
               (Save("self", 0), Save("min_val", "attr:min_val", freed=False),
                Save("max_val", "attr:max_val", freed=False)), "same", _hardtanh_expr))


def _hardtanh_bw(g, x, out=None, min_val=-1.0, max_val=1.0):
    """g strictly inside (min_val, max_val), else 0 (a NaN x lets g through, as in PyTorch)."""
    outside = np.logical_or(x <= min_val, x >= max_val)
    return into(np.where(outside, g.dtype.type(0), g), out)


register(OpDef("hardtanh_backward", _hardtanh_bw, "elementwise", "HardtanhBackwardBackward0",
               lambda F, gg, s, at, need: (F.hardtanh_backward(gg, s["self"], min_val=at["min_val"],
                                                               max_val=at["max_val"]) if need[0] else None,
                                           F.zeros_like(gg) if need[1] else None),  # piecewise linear
               (Save("self", 1),), "promote",
               lambda x, at: (f"(T(0.0) if ({x[1]} <= {lit(at['min_val'])} or {x[1]} >= {lit(at['max_val'])}) "
                              f"else {x[0]})")))


# ---- hardsigmoid: min(max(x + 3, 0), 6) / 6 --------------------------------------------------------------

def _hardsigmoid(x, out=None):
    T = x.dtype.type
    t = as_array(np.add(x, T(3)))
    np.maximum(t, T(0), out=t)
    np.minimum(t, T(6), out=t)
    return np.true_divide(t, T(6), out=out)


def _hardsigmoid_clamped(x: str) -> str:
    return _min_expr(_max_expr(f"({x} + T(3.0))", "T(0.0)"), "T(6.0)")


register(OpDef("hardsigmoid", _hardsigmoid, "elementwise", "HardsigmoidBackward0",
               lambda F, g, s, at, need: (F.hardsigmoid_backward(g, s["self"]),), (Save("self", 0),), "same",
               lambda x, at: f"({_hardsigmoid_clamped(x[0])} / T(6.0))"))

ONE_SIXTH = 1.0 / 6.0


def _hardsigmoid_bw(g, x, out=None):
    """g / 6 where -3 < x < 3, else 0."""
    inside = np.logical_and(x > -3, x < 3)
    return into(np.where(inside, np.multiply(g, g.dtype.type(ONE_SIXTH)), g.dtype.type(0)), out)


def _hardsigmoid_bw_backward(F, gg, s, at, need):
    raise RuntimeError("derivative for aten::hardsigmoid_backward is not implemented")  # as in PyTorch


register(OpDef("hardsigmoid_backward", _hardsigmoid_bw, "elementwise", "HardsigmoidBackwardBackward0",
               _hardsigmoid_bw_backward, (), "promote",
               lambda x, at: f"(({x[0]} * {lit(ONE_SIXTH)}) if ({x[1]} > T(-3.0) and {x[1]} < T(3.0)) else T(0.0))"))


# ---- hardswish: x * min(max(x + 3, 0), 6) / 6 ------------------------------------------------------------

def _hardswish(x, out=None):
    T = x.dtype.type
    t = as_array(np.add(x, T(3)))
    np.maximum(t, T(0), out=t)
    np.minimum(t, T(6), out=t)
    np.multiply(x, t, out=t)
    return np.true_divide(t, T(6), out=out)


register(OpDef("hardswish", _hardswish, "elementwise", "HardswishBackward0",
               lambda F, g, s, at, need: (F.hardswish_backward(g, s["self"]),), (Save("self", 0),), "same",
               lambda x, at: f"(({x[0]} * {_hardsigmoid_clamped(x[0])}) / T(6.0))"))


def _hardswish_bw(g, x, out=None):
    """0 where x <= -3, g * (x / 3 + 0.5) where x < 3, else g."""
    T = g.dtype.type
    middle = np.multiply(g, np.add(np.true_divide(x, T(3)), T(0.5)))
    return into(np.where(x <= -3, T(0), np.where(x < 3, middle, g)), out)


def _hardswish_bw_backward(F, gg, s, at, need):
    x = s["self"]
    grad_g = F.hardswish_backward(gg, x) if need[0] else None
    grad_x = None
    if need[1]:
        inside = F.logical_and(F.gt_scalar(x, other=-3.0), F.lt_scalar(x, other=3.0))
        grad_x = F.where(inside, F.div_scalar(gg * s["grad_output"], other=3.0), F.zeros_like(gg))
    return grad_g, grad_x


register(OpDef("hardswish_backward", _hardswish_bw, "elementwise", "HardswishBackwardBackward0",
               _hardswish_bw_backward, (Save("grad_output", 0, when=(1,)), Save("self", 1)), "promote",
               lambda x, at: (f"(T(0.0) if {x[1]} <= T(-3.0) else (({x[0]} * (({x[1]} / T(3.0)) + T(0.5))) "
                              f"if {x[1]} < T(3.0) else {x[0]}))")))


# ---- leaky_relu ---------------------------------------------------------------------------------------------

def _leaky_relu(x, out=None, negative_slope=0.01):
    return into(np.where(x > 0, x, np.multiply(x, x.dtype.type(negative_slope))), out)


def _leaky_relu_expr(x, at):
    return f"({x[0]} if {x[0]} > T(0.0) else ({x[0]} * {lit(at['negative_slope'])}))"


def _leaky_relu_result_backward(F, g, s, at, need):
    slope = s["negative_slope"]
    if slope < 0:
        raise RuntimeError("In-place leakyReLu backward calculation is triggered with a negative slope which is not "
                           "supported. This is caused by calling in-place forward function with a negative slope, "
                           "please call out-of-place version instead. File an issue at "
                           "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
                           "backward calculation with negative slope")
    return (F.leaky_relu_backward(g, s["result"], negative_slope=slope),)


_SLOPE = Save("negative_slope", "attr:negative_slope", freed=False)
register(OpDef("leaky_relu", _leaky_relu, "elementwise", "LeakyReluBackward0",
               lambda F, g, s, at, need: (F.leaky_relu_backward(g, s["self"], negative_slope=s["negative_slope"]),),
               (Save("self", 0), _SLOPE), "same", _leaky_relu_expr))
register(OpDef("leaky_relu_result", _leaky_relu, "elementwise", "LeakyReluBackward1", _leaky_relu_result_backward,
               (Save("result", "result"), _SLOPE), "same", _leaky_relu_expr))


def _leaky_relu_bw(g, x, out=None, negative_slope=0.01):
    return into(np.where(x > 0, g, np.multiply(g, g.dtype.type(negative_slope))), out)


register(OpDef("leaky_relu_backward", _leaky_relu_bw, "elementwise", "LeakyReluBackwardBackward0",
               lambda F, gg, s, at, need: (
                   F.leaky_relu_backward(gg, s["self"], negative_slope=at["negative_slope"]) if need[0] else None,
                   F.zeros_like(gg) if need[1] else None),  # piecewise linear: PyTorch sends zeros to x
               (Save("self", 1),), "promote",
               lambda x, at: f"({x[0]} if {x[1]} > T(0.0) else ({x[0]} * {lit(at['negative_slope'])}))"))


# ---- glu: first half * sigmoid(second half) along dim -------------------------------------------------------

def _halves(x, dim):
    half = x.shape[dim] // 2
    lead = (slice(None),) * dim
    return x[lead + (slice(0, half),)], x[lead + (slice(half, 2 * half),)]


def _glu(x, out=None, dim=-1):
    a, b = _halves(x, dim)
    t = as_array(np.negative(b))
    np.exp(t, out=t)
    np.add(t, 1, out=t)
    np.reciprocal(t, out=t)
    return np.multiply(a, t, out=out)


def _glu_backward(F, g, s, at, need):
    x, dim = s["self"], s["dim"]
    half = x.shape[dim] // 2
    a = F.slice(x, dim=dim, start=0, end=half, step=1)
    b = F.slice(x, dim=dim, start=half, end=2 * half, step=1)
    sig = F.sigmoid(b)
    grad_a = g * sig
    grad_b = grad_a * a * F.rsub_scalar(sig, other=1.0)
    return (F.cat(grad_a, grad_b, dim=dim, sizes=(half, half)),)


register(OpDef("glu", _glu, "other", "GluBackward0", _glu_backward,
               (Save("self", 0), Save("dim", "attr:dim", freed=False)), "same"))
