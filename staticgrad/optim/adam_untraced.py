"""Adam/AdamW's update of one parameter when nothing records it: the bias corrections by the very
NumPy calls the traced ops make, once per step count and dtype, and the rest of the update in one
Numba pass (``adam_loop``) with the traced ops' IEEE operations in their order, instead of about
fifteen dispatched ops. Eager and replay keep the same bits; versions move as the ops move them.
"""

from __future__ import annotations

import numpy as np

from staticgrad.ops.quiet import restore, silence
from staticgrad.optim.loop_arrays import fit_one_loop

_LOOP = None


def _adam_loop():
    """``staticgrad.optim.adam_loop``, imported on the first untraced step (it loads Numba)."""
    global _LOOP
    if _LOOP is None:
        from staticgrad.optim import adam_loop  # here, not at the top: it loads Numba

        _LOOP = adam_loop
    return _LOOP


def corrections(step: np.ndarray, beta1, beta2, lr) -> tuple:
    """(-step_size, bias_correction2_sqrt) as 0-dim float64 arrays, made by the NumPy calls the
    traced ops make on the step count (to_dtype, rpow_scalar, rsub_scalar, sqrt, reciprocal,
    mul_scalar, neg)."""
    quiet = silence()  # as the dispatched ops: an overflow gives inf with no warning
    try:
        count = step.astype(np.float64)
        bias_correction1 = np.subtract(1, np.power(beta1, count))
        bias_correction2_sqrt = np.sqrt(np.subtract(1, np.power(beta2, count)))
        step_size = np.multiply(np.reciprocal(bias_correction1), lr)
        return np.asarray(np.negative(step_size)), np.asarray(bias_correction2_sqrt)
    finally:
        restore(quiet)


def adam_step(p, grad, state: dict, group: dict, numbers: tuple, constants: dict) -> bool:
    """Update ``p`` and its ``state`` by one Adam step (``group``'s branches, ``numbers`` =
    (lr, beta1, beta2, eps, weight_decay) as Python numbers); False, touching nothing, when the
    arrays do not suit the loop. ``constants`` keeps the loop's constants per step count and dtype
    for the group's other parameters."""
    step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
    if step._data.ndim != 0 or not fit_one_loop(p._data, grad._data, exp_avg._data, exp_avg_sq._data):
        return False
    count = step._data
    np.add(count, 1, out=count)  # step.add_(1)
    step._version_counter[0] += 1
    dtype = p._data.dtype
    key = (count.item(), count.dtype, dtype)
    values = constants.get(key)
    if values is None:
        values = constants[key] = _constants(count, dtype, group, numbers)
    decoupled = group["weight_decay"] != 0 and group["decoupled_weight_decay"]
    l2 = group["weight_decay"] != 0 and not group["decoupled_weight_decay"]
    _adam_loop().adam_update(p._data.reshape(-1), grad._data.reshape(-1), exp_avg._data.reshape(-1),
                             exp_avg_sq._data.reshape(-1), values, bool(group["maximize"]), decoupled, l2)
    p._version_counter[0] += 2 if decoupled else 1
    exp_avg._version_counter[0] += 1
    exp_avg_sq._version_counter[0] += 2
    return True


def _constants(count: np.ndarray, dtype: np.dtype, group: dict, numbers: tuple) -> np.ndarray:
    """The loop's constants in ``dtype``, each a number or 0-dim float64 array the ops would cast
    to it (see ``adam_loop``'s indices)."""
    lr, beta1, beta2, eps, weight_decay = numbers
    negative_step_size, bias_correction2_sqrt = corrections(count, beta1, beta2, lr)
    decay = 1 - lr * weight_decay if group["decoupled_weight_decay"] else weight_decay
    quiet = silence()
    try:
        return np.array([decay, 1 - beta1, beta2, 1 - beta2, negative_step_size, bias_correction2_sqrt, eps, 1.0, 0.5],
                        dtype=dtype)
    finally:
        restore(quiet)
