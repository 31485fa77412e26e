"""Elementwise ops: arithmetic, activations and their dedicated backward ops, casts and copies.

Forward functions write ``out`` only in their last NumPy call, so a planner may hand them an
``out`` that aliases one of their inputs.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.registry import OpDef, Save, amend, as_array, jit_loops, lit, register, with_emit

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


def broadcast_error(shapes, attrs, exc):
    """PyTorch's message for shapes that do not broadcast (it checks from the last dim)."""
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    ndim = max(len(a), len(b))
    for i in range(ndim - 1, -1, -1):
        offset = ndim - 1 - i
        size_a = a[len(a) - 1 - offset] if len(a) - 1 - offset >= 0 else 1
        size_b = b[len(b) - 1 - offset] if len(b) - 1 - offset >= 0 else 1
        if size_a != size_b and size_a != 1 and size_b != 1:
            return RuntimeError(
                f"The size of tensor a ({size_a}) must match the size of tensor b ({size_b}) "
                f"at non-singleton dimension {i}"
            )
    if "non-broadcastable output" in str(exc):
        out_shape = list(a)
        full = list(np.broadcast_shapes(*shapes))
        return RuntimeError(f"output with shape {out_shape} doesn't match the broadcast shape {full}")
    return None


# ---- calling a Numba loop (staticgrad.ops.loops) on an elementwise op's operands -------------------

def loop_operands(*arrays):
    """(flat operands, shape, result dtype, work dtype) for an elementwise Numba loop: the arrays
    broadcast to one shape and cast to their common dtype, C-contiguous and flat. float16 works
    in float32 and is rounded once at the end, as PyTorch computes half precision on CPU."""
    first = arrays[0]
    if all(a.dtype == first.dtype for a in arrays):
        dtype = first.dtype
    else:
        dtype = np.result_type(*arrays)
    if all(a.shape == first.shape for a in arrays):
        shape = first.shape
    else:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        arrays = [np.broadcast_to(a, shape) for a in arrays]
    work = _FLOAT32 if dtype == _FLOAT16 else dtype
    flats = [np.ascontiguousarray(a, dtype=work).reshape(-1) for a in arrays]
    return flats, shape, dtype, work


# np.may_share_memory without its __array_function__ wrapper, where this NumPy has it: a third of
# the call, which the loop ops make several times each (an out against each input)
may_share_memory_fast = getattr(getattr(getattr(np, "_core", None), "_multiarray_umath", None), "may_share_memory",
                            np.may_share_memory)


def loop_output(size: int, work, out, inputs, elementwise: bool = False):
    """The flat array a loop writes: ``out``'s memory when it can take the work dtype directly and
    shares no memory with an input (the loops may also use it as scratch), else a new array.
    Inputs may hold None (a parameter not given). ``elementwise``: the loop reads each element of
    its inputs before it writes that element of out, so out may also be an input itself (the same
    memory and layout: an in-place ``p.add_(d, alpha=-lr)``)."""
    if out is None or out.dtype != work or not out.flags.c_contiguous:
        return np.empty(size, work)
    for a in inputs:
        if a is not None and may_share_memory_fast(out, a) and not (elementwise and _same_array(out, a)):
            return np.empty(size, work)
    return out.reshape(-1)


def _same_array(out, x) -> bool:
    """x is out's very memory, in out's layout."""
    return x is out or (x.shape == out.shape and x.strides == out.strides and x.dtype == out.dtype
                        and x.__array_interface__["data"][0] == out.__array_interface__["data"][0])


def loop_result(flat, shape, dtype, out):
    """The op's result from the loop's flat output: ``out`` (filled, if the loop wrote elsewhere)
    or a new array of the result dtype."""
    if out is None:
        result = flat.reshape(shape)
        return result if result.dtype == dtype else result.astype(dtype)
    if not may_share_memory_fast(flat, out):
        np.copyto(out, flat.reshape(shape), casting="unsafe")
    return out


def fill_outputs(results: tuple, out: tuple) -> tuple:
    """A multi-output forward's results (OpDef.fills_outputs) as the arrays of ``out``: each copied
    in unless a loop already wrote it there (a None result stays None)."""
    return tuple(None if result is None else loop_result(result, target.shape, target.dtype, target)
                 for result, target in zip(results, out))


def _binary(name, forward, node_name, backward, saves=(), expr=None, dtype_rule="promote"):
    return register(OpDef(name, forward, "elementwise", node_name, backward, saves, dtype_rule,
                          expr, broadcast_error))


def _unary(name, forward, node_name, backward, saves=(), expr=None, dtype_rule="float"):
    return register(OpDef(name, forward, "elementwise", node_name, backward, saves, dtype_rule, expr))


# ---- tensor (+) tensor ---------------------------------------------------------------------

def _add(a, b, out=None, alpha=1):
    if alpha != 1:
        return _scaled_add(a, b, alpha, out)
    return np.add(a, b, out=out)


def _sub(a, b, out=None, alpha=1):
    if alpha != 1:
        return _scaled_add(a, b, -alpha, out)
    return np.subtract(a, b, out=out)


_FMA_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _scaled_add(a, b, alpha, out):
    """a + alpha * b for add and sub with an alpha: in float32 and float64 one fused multiply-add per
    element, rounded once, as PyTorch computes it; integers exactly, and float16 in its own steps."""
    if (a.dtype if a.dtype == b.dtype else np.result_type(a, b)) not in _FMA_DTYPES:
        return np.add(a, np.multiply(b, alpha), out=out)   # float16: PyTorch's half loops round otherwise
    (flat_a, flat_b), shape, dtype, work = loop_operands(a, b)
    flat = loop_output(flat_a.size, work, out, (a, b), elementwise=True)
    jit_loops().scaled_add_array(flat_a, flat_b, work.type(alpha), flat)
    return loop_result(flat, shape, dtype, out)


def _negated(alpha) -> str:
    """-alpha inside a fused kernel (a number, or a scalar read at replay time): negation is exact."""
    return lit(-alpha) if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) else f"(-{lit(alpha)})"


def _scaled(F, grad, factor):
    return grad if factor == 1 else F.mul_scalar(grad, other=factor)


_binary("add", _add, "AddBackward0",
        lambda F, g, s, at, need: (g, _scaled(F, g, at.get("alpha", 1))),
        (Save("alpha", "attr:alpha", freed=False),),
        lambda x, at: f"({x[0]} + {x[1]})" if at.get("alpha", 1) == 1 else f"fma({x[1]}, {lit(at['alpha'])}, {x[0]})")

_binary("sub", _sub, "SubBackward0",
        lambda F, g, s, at, need: (g, _scaled(F, g, -at.get("alpha", 1))),
        (Save("alpha", "attr:alpha", freed=False),),
        lambda x, at: (f"({x[0]} - {x[1]})" if at.get("alpha", 1) == 1
                       else f"fma({x[1]}, {_negated(at['alpha'])}, {x[0]})"))

_binary("mul", lambda a, b, out=None: np.multiply(a, b, out=out), "MulBackward0",
        lambda F, g, s, at, need: (g * s["other"] if need[0] else None, g * s["self"] if need[1] else None),
        (Save("self", 0, when=(1,)), Save("other", 1, when=(0,))),
        lambda x, at: f"({x[0]} * {x[1]})")


def _div_backward(F, g, s, at, need):
    other = s["other"]
    grad_self = g / other if need[0] else None
    grad_other = -g * s["self"] / (other * other) if need[1] else None
    return grad_self, grad_other


_binary("div", lambda a, b, out=None: np.true_divide(a, b, out=out), "DivBackward0", _div_backward,
        (Save("self", 0, when=(1,)), Save("other", 1, when=(0, 1))),
        lambda x, at: f"({x[0]} / {x[1]})", dtype_rule="float")


def _pow_backward(F, g, s, at, need):
    # PyTorch's zeros: no gradient to the base where the exponent is 0 (not 0 * 0**-1 = nan), and none to
    # the exponent where the base is 0 and the exponent >= 0 (not 0 * log(0) = nan).
    base, exponent = s["self"], s["exponent"]
    grad_base = grad_exp = None
    if need[0]:
        grad_base = g * exponent * base ** (exponent - 1)
        grad_base = F.where(F.eq_scalar(exponent, other=0), F.zeros_like(grad_base), grad_base)
    if need[1]:
        grad_exp = g * s["result"] * F.log(base)
        at_zero = F.logical_and(F.eq_scalar(base, other=0), F.ge_scalar(exponent, other=0))
        grad_exp = F.where(at_zero, F.zeros_like(grad_exp), grad_exp)
    return grad_base, grad_exp


_binary("pow", lambda a, b, out=None: np.power(a, b, out=out), "PowBackward1", _pow_backward,
        (Save("self", 0), Save("exponent", 1), Save("result", "result", when=(1,))),
        lambda x, at: None)


def _extreme_backward(winner: str, loser: str):
    """Gradient of maximum/minimum: to the winning input, split evenly where the two tie."""
    def backward(F, g, s, at, need):
        a, b = s["self"], s["other"]
        half = F.mul_scalar(F.to_dtype(F.eq(a, b), dtype=g.dtype), other=0.5)
        grad_a = F.mul(g, F.add(F.to_dtype(getattr(F, winner)(a, b), dtype=g.dtype), half)) if need[0] else None
        grad_b = F.mul(g, F.add(F.to_dtype(getattr(F, loser)(a, b), dtype=g.dtype), half)) if need[1] else None
        return grad_a, grad_b
    return backward


_binary("maximum", lambda a, b, out=None: np.maximum(a, b, out=out), "MaximumBackward0", _extreme_backward("gt", "lt"),
        (Save("self", 0), Save("other", 1)), lambda x, at: None)
_binary("minimum", lambda a, b, out=None: np.minimum(a, b, out=out), "MinimumBackward0", _extreme_backward("lt", "gt"),
        (Save("self", 0), Save("other", 1)), lambda x, at: None)


# ---- tensor (+) Python scalar: the scalar is an attribute, as PyTorch wraps it -------------------

def _add_scalar(a, out=None, other=0, alpha=1):
    if a.dtype == np.bool_ and isinstance(other, (bool, np.bool_)):   # bool + bool stays bool: a logical or
        return np.logical_or(a, bool(other) and bool(alpha), out=out)
    return np.add(a, other * alpha, out=out)


_binary("add_scalar", _add_scalar, "AddBackward0",
        lambda F, g, s, at, need: (g,), (Save("alpha", "attr:alpha", freed=False),),
        lambda x, at: f"({x[0]} + {lit(at['other'])})" if at.get("alpha", 1) == 1 else None)

_binary("sub_scalar", lambda a, out=None, other=0, alpha=1: np.subtract(a, other * alpha, out=out), "SubBackward0",
        lambda F, g, s, at, need: (g,), (Save("alpha", "attr:alpha", freed=False),),
        lambda x, at: f"({x[0]} - {lit(at['other'])})" if at.get("alpha", 1) == 1 else None)

_binary("rsub_scalar",
        lambda a, out=None, other=0, alpha=1: np.subtract(other, np.multiply(a, alpha) if alpha != 1 else a, out=out),
        "RsubBackward1", lambda F, g, s, at, need: (_scaled(F, F.neg(g), at.get("alpha", 1)),),
        (Save("alpha", "attr:alpha", freed=False),),
        lambda x, at: f"({lit(at['other'])} - {x[0]})" if at.get("alpha", 1) == 1 else None)

_binary("mul_scalar", lambda a, out=None, other=1: np.multiply(a, other, out=out), "MulBackward0",
        lambda F, g, s, at, need: (F.mul_scalar(g, other=s["other"]),), (Save("other", "attr:other"),),
        lambda x, at: f"({x[0]} * {lit(at['other'])})")

_binary("div_scalar", lambda a, out=None, other=1: np.true_divide(a, other, out=out), "DivBackward0",
        lambda F, g, s, at, need: (F.div_scalar(g, other=s["other"]),), (Save("other", "attr:other"),),
        lambda x, at: f"({x[0]} / {lit(at['other'])})", dtype_rule="float")


for _name in ("add_scalar", "sub_scalar", "mul_scalar", "div_scalar"):
    amend(_name, wrapped_scalar=True)


def _pow_scalar_forward(a, out=None, exponent=1):
    if exponent == 2:
        return np.multiply(a, a, out=out)
    if exponent == 0.5:
        return np.sqrt(a, out=out)
    return np.power(a, exponent, out=out)


def _pow_scalar_backward(F, g, s, at, need):
    exponent = s["exponent"]
    if exponent == 0:
        return (F.zeros_like(g),)
    if exponent == 2:
        return (g * F.mul_scalar(s["self"], other=2.0),)
    return (g * F.mul_scalar(F.pow_scalar(s["self"], exponent=exponent - 1), other=exponent),)


_binary("pow_scalar", _pow_scalar_forward, "PowBackward0", _pow_scalar_backward,
        (Save("self", 0), Save("exponent", "attr:exponent", freed=False)),
        lambda x, at: (f"({x[0]} * {x[0]})" if at["exponent"] == 2
                       else f"sqrt({x[0]})" if at["exponent"] == 0.5 else None))

def _rpow_scalar_backward(F, g, s, at, need):
    base = s["self"]
    if base != 0:
        with np.errstate(invalid="ignore"):  # a negative base: log is nan, as PyTorch's gradient is, silently
            log_base = float(np.log(base))
        return (g * F.mul_scalar(s["result"], other=log_base),)
    # base 0: PyTorch's zero where the exponent is >= 0, which is where 0 ** exponent is finite (0 or 1)
    local = F.mul_scalar(s["result"], other=-np.inf)
    return (g * F.where(F.isfinite(s["result"]), F.zeros_like(local), local),)


_binary("rpow_scalar", lambda a, out=None, base=1: np.power(base, a, out=out), "PowBackward2",
        _rpow_scalar_backward,
        (Save("self", "attr:base", freed=False), Save("result", "result")),
        lambda x, at: None, dtype_rule="float")


# ---- unary -----------------------------------------------------------------------------------

_unary("neg", lambda a, out=None: np.negative(a, out=out), "NegBackward0",
       lambda F, g, s, at, need: (F.neg(g),), (), lambda x, at: f"(-{x[0]})", dtype_rule="same")

_unary("exp", lambda a, out=None: np.exp(a, out=out), "ExpBackward0",
       lambda F, g, s, at, need: (g * s["result"],), (Save("result", "result"),), lambda x, at: None)

_unary("log", lambda a, out=None: np.log(a, out=out), "LogBackward0",
       lambda F, g, s, at, need: (g / s["self"],), (Save("self", 0),), lambda x, at: None)

_unary("tanh", lambda a, out=None: np.tanh(a, out=out), "TanhBackward0",
       lambda F, g, s, at, need: (F.tanh_backward(g, s["result"]),), (Save("result", "result"),),
       lambda x, at: None)


def _sigmoid(a, out=None):
    t = as_array(np.negative(a))
    np.exp(t, out=t)
    np.add(t, 1, out=t)
    return np.reciprocal(t, out=out)


_unary("sigmoid", _sigmoid, "SigmoidBackward0",
       lambda F, g, s, at, need: (F.sigmoid_backward(g, s["result"]),), (Save("result", "result"),),
       lambda x, at: None)

_unary("relu", lambda a, out=None: np.maximum(a, 0, out=out), "ReluBackward0",
       lambda F, g, s, at, need: (F.threshold_backward(g, s["result"], threshold=0),), (Save("result", "result"),),
       lambda x, at: f"(T(0.0) if {x[0]} <= T(0.0) else {x[0]})",  # NumPy's maximum: -0.0 -> 0.0, NaN stays
       dtype_rule="same")

_unary("sqrt", lambda a, out=None: np.sqrt(a, out=out), "SqrtBackward0",
       lambda F, g, s, at, need: (g / F.mul_scalar(s["result"], other=2.0),), (Save("result", "result"),),
       lambda x, at: f"sqrt({x[0]})")

_unary("reciprocal",
       lambda a, out=None: np.reciprocal(a, out=out) if a.dtype.kind == "f" else np.true_divide(1.0, a, out=out),
       "ReciprocalBackward0",
       lambda F, g, s, at, need: (F.neg(g) * (s["result"] * s["result"]),), (Save("result", "result"),),
       lambda x, at: f"(T(1.0) / {x[0]})")

def _rsqrt(a, out=None):
    t = np.sqrt(a)
    return np.reciprocal(t, out=out) if t.dtype.kind == "f" else np.true_divide(1.0, t, out=out)


_unary("rsqrt", _rsqrt, "RsqrtBackward0",
       lambda F, g, s, at, need: (F.mul_scalar(g * s["result"] * s["result"] * s["result"], other=-0.5),),
       (Save("result", "result"),), lambda x, at: f"(T(1.0) / sqrt({x[0]}))")

_unary("abs", lambda a, out=None: np.abs(a, out=out), "AbsBackward0",
       lambda F, g, s, at, need: (g * F.sign(s["self"]),), (Save("self", 0),),
       lambda x, at: f"abs({x[0]})", dtype_rule="same")

_unary("sign", lambda a, out=None: np.sign(a, out=out), "SignBackward0",
       lambda F, g, s, at, need: (F.zeros_like(g),), (), lambda x, at: None, dtype_rule="same")


# The C++ names PyTorch's messages give integer types.
C_TYPE_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t"}


def integer_bound(value, dtype: np.dtype):
    """A Python number bound of an integer array, converted as PyTorch converts it: out of the
    type's range is an error, except that negatives down to -max wrap on unsigned types (two's
    complement, so clamp(uint8, min=-1) clamps at 255)."""
    value = int(value)
    info = np.iinfo(dtype)
    lowest = -int(info.max) if dtype.kind == "u" else int(info.min)
    if value > info.max or value < lowest:
        raise RuntimeError(f"value cannot be converted to type {C_TYPE_NAMES[dtype.name]} without overflow")
    return np.array(value).astype(dtype)[()]


def _clamp(a, out=None, min=None, max=None):
    """np.clip/maximum/minimum in the promoted dtype (dispatch casts ``a`` to it first)."""
    kind = a.dtype.kind
    if kind == "b":
        kernel = "clamp_scalar_cpu" if min is not None and max is not None else \
            "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    if kind in "iu":
        min = None if min is None else integer_bound(min, a.dtype)
        max = None if max is None else integer_bound(max, a.dtype)
    if min is not None and max is not None:
        return np.clip(a, min, max, out=out)
    if min is not None:
        return np.maximum(a, min, out=out)
    return np.minimum(a, max, out=out)


def _clamp_backward(F, g, s, at, need):
    x = s["self"]
    lo, hi = at.get("min"), at.get("max")
    mask = None
    if lo is not None:
        mask = F.ge_scalar(x, other=lo)
    if hi is not None:
        upper = F.le_scalar(x, other=hi)
        mask = upper if mask is None else F.logical_and(mask, upper)
    return (g * F.to_dtype(mask, dtype=g.dtype),)


_unary("clamp", _clamp, "ClampBackward1", _clamp_backward,
       (Save("self", 0), Save("min", "attr:min", freed=False), Save("max", "attr:max", freed=False)),
       lambda x, at: None, dtype_rule="promote")


# ---- dedicated backward ops (differentiable again, for create_graph) ------------------------

def _tanh_backward(g, y, out=None):
    t = as_array(np.multiply(y, y))
    np.subtract(1, t, out=t)
    return np.multiply(g, t, out=out)


register(OpDef(
    "tanh_backward", _tanh_backward, "elementwise", "TanhBackwardBackward0",
    lambda F, gg, s, at, need: (
        F.tanh_backward(gg, s["output"]) if need[0] else None,
        F.mul_scalar(gg * s["grad_output"] * s["output"], other=-2.0) if need[1] else None),
    (Save("grad_output", 0, when=(1,)), Save("output", 1)), "promote",
    lambda x, at: f"({x[0]} * (T(1.0) - ({x[1]} * {x[1]})))"))


def _sigmoid_backward(g, y, out=None):
    t = as_array(np.subtract(1, y))
    np.multiply(t, y, out=t)
    return np.multiply(g, t, out=out)


register(OpDef(
    "sigmoid_backward", _sigmoid_backward, "elementwise", "SigmoidBackwardBackward0",
    lambda F, gg, s, at, need: (
        F.sigmoid_backward(gg, s["output"]) if need[0] else None,
        gg * s["grad_output"] * F.rsub_scalar(F.mul_scalar(s["output"], other=2.0), other=1.0) if need[1] else None),
    (Save("grad_output", 0, when=(1,)), Save("output", 1)), "promote",
    lambda x, at: f"({x[0]} * ((T(1.0) - {x[1]}) * {x[1]}))"))


def _threshold_backward(g, x, out=None, threshold=0):
    """0 where x <= threshold, else g (so NaN in x lets g through, as in PyTorch), in one pass of a
    Numba loop: np.where's three-operand loop costs ~3.5 ns an element (0.73 ms at 32x8x28x28;
    the mask itself 0.01 ms)."""
    (flat_g, flat_x), shape, dtype, work = loop_operands(g, x)
    if work.kind != "f":
        return loop_result(np.where(flat_x <= threshold, work.type(0), flat_g), shape, dtype, out)
    flat = loop_output(flat_g.size, work, out, (g, x))
    jit_loops().threshold_backward(flat_g, flat_x, work.type(threshold), work.type(0), flat)
    return loop_result(flat, shape, dtype, out)


register(OpDef(
    "threshold_backward", _threshold_backward, "elementwise", "ThresholdBackwardBackward0",
    lambda F, gg, s, at, need: (F.threshold_backward(gg, s["self"], threshold=at["threshold"]) if need[0] else None,
                                F.zeros_like(gg) if need[1] else None),  # piecewise: PyTorch sends zeros to x
    (Save("self", 1), Save("threshold", "attr:threshold", freed=False)), "promote",
    lambda x, at: f"(T(0.0) if {x[1]} <= {lit(at['threshold'])} else {x[0]})"))


# ---- copies and casts --------------------------------------------------------------------------

def _clone(a, out=None):
    if out is None:
        return np.array(a, copy=True, order="C")
    np.copyto(out, a)
    return out


_unary("clone", _clone, "CloneBackward0", lambda F, g, s, at, need: (g,), (), lambda x, at: f"{x[0]}",
       dtype_rule="same")


def _to_dtype(a, out=None, dtype=None, self_dtype=None):
    if out is None:
        return a.astype(dtype)
    np.copyto(out, a, casting="unsafe")
    return out


_unary("to_dtype", _to_dtype, "ToCopyBackward0",
       lambda F, g, s, at, need: (F.to_dtype(g, dtype=s["self_dtype"]),),
       (Save("self_dtype", "attr:self_dtype", freed=False),), lambda x, at: None, dtype_rule="attr")


def _copy(dst, src, out=None):
    if out is None:
        out = np.empty_like(dst)
    np.copyto(out, src, casting="unsafe")
    return out


register(OpDef("copy", _copy, "elementwise", "CopyBackwards",
               lambda F, g, s, at, need: (F.zeros_like(g) if need[0] else None, g if need[1] else None),
               (), "same", lambda x, at: f"{x[1]}", broadcast_error))


def _fill(a, out=None, value=0.0, node_name=None):
    """``value`` everywhere; ``node_name`` (fill_'s FillBackward2, zero_'s ZeroBackward0) names the
    autograd node only."""
    if out is None:
        out = np.empty_like(a)
    out.fill(value)
    return out


register(OpDef("fill", _fill, "elementwise",
               lambda at: at.get("node_name") or ("ZeroBackward0" if at["value"] == 0 else "FillBackward0"),
               lambda F, g, s, at, need: (F.zeros_like(g),), (), "same", lambda x, at: lit(at["value"])))


# ---- comparisons and selection (not differentiable through the mask) ---------------------------

for _name, _ufunc in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                      ("gt", np.greater), ("ge", np.greater_equal)):
    register(OpDef(_name, (lambda u: lambda a, b, out=None: u(a, b, out=out))(_ufunc), "elementwise",
                   dtype_rule="bool", explain=broadcast_error))
    register(OpDef(_name + "_scalar", (lambda u: lambda a, out=None, other=0: u(a, other, out=out))(_ufunc),
                   "elementwise", dtype_rule="bool"))

register(OpDef("logical_and", lambda a, b, out=None: np.logical_and(a, b, out=out), "elementwise",
               dtype_rule="bool", explain=broadcast_error))
register(OpDef("logical_not", lambda a, out=None: np.logical_not(a, out=out), "elementwise",
               dtype_rule="bool"))


def _where(cond, a, b, out=None):
    result = np.where(cond, a, b)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _where_backward(F, g, s, at, need):
    cond = s["condition"]
    zero = F.zeros_like(g)
    return (None,
            F.where(cond, g, zero) if need[1] else None,
            F.where(cond, zero, g) if need[2] else None)


register(OpDef("where", _where, "elementwise", "WhereBackward0", _where_backward,
               (Save("condition", 0),), "promote",
               lambda x, at: f"({x[1]} if {x[0]} else {x[2]})", grad_inputs=(1, 2)))


# ---- direct NumPy calls for generated replay code ---------------------------------------------

def _ufunc_emit(ufunc: str, arity: int = 1):
    def emit(ins, out, at, shapes):
        return f"np.{ufunc}({', '.join(ins[:arity])}, out={out})"
    return emit


def _scalar_emit(ufunc: str, expression):
    def emit(ins, out, at, shapes):
        return f"np.{ufunc}({ins[0]}, {expression(at)}, out={out})"
    return emit


def _alpha_emit(ufunc: str):
    def emit(ins, out, at, shapes):
        if at.get("alpha", 1) == 1:
            return f"np.{ufunc}({ins[0]}, {ins[1]}, out={out})"
        return None   # the op's forward: its fused multiply-add
    return emit


for _name, _ufunc in (("neg", "negative"), ("exp", "exp"), ("log", "log"), ("tanh", "tanh"), ("sqrt", "sqrt"),
                      ("abs", "absolute"), ("sign", "sign")):
    with_emit(_name, _ufunc_emit(_ufunc))
for _name, _ufunc in (("mul", "multiply"), ("maximum", "maximum"), ("minimum", "minimum")):
    with_emit(_name, _ufunc_emit(_ufunc, 2))
with_emit("div", _ufunc_emit("true_divide", 2))
with_emit("add", _alpha_emit("add"))
with_emit("sub", _alpha_emit("subtract"))
with_emit("relu", lambda ins, out, at, shapes: f"np.maximum({ins[0]}, 0, out={out})")
with_emit("mul_scalar", _scalar_emit("multiply", lambda at: repr(at["other"])))
with_emit("div_scalar", _scalar_emit("true_divide", lambda at: repr(at["other"])))
with_emit("add_scalar", lambda ins, out, at, shapes: (
    f"np.add({ins[0]}, {at['other']!r}, out={out})" if at.get("alpha", 1) == 1
    else f"np.add({ins[0]}, {at['other']!r} * {at['alpha']!r}, out={out})"))
with_emit("sub_scalar", lambda ins, out, at, shapes: (
    f"np.subtract({ins[0]}, {at['other']!r}, out={out})" if at.get("alpha", 1) == 1
    else f"np.subtract({ins[0]}, {at['other']!r} * {at['alpha']!r}, out={out})"))
with_emit("clone", lambda ins, out, at, shapes: f"np.copyto({out}, {ins[0]})")
with_emit("fill", lambda ins, out, at, shapes: f"{out}.fill({at['value']!r})")
with_emit("tanh_backward", lambda ins, out, at, shapes: (
    f"np.multiply({ins[1]}, {ins[1]}, out={out}); np.subtract(1, {out}, out={out}); "
    f"np.multiply({ins[0]}, {out}, out={out})"))
with_emit("sigmoid_backward", lambda ins, out, at, shapes: (
    f"np.subtract(1, {ins[1]}, out={out}); np.multiply({out}, {ins[1]}, out={out}); "
    f"np.multiply({ins[0]}, {out}, out={out})"))
