"""Ops with no tensor data inputs: constant factories (folded by the compiler) and random draws
(re-sampled on every replay, from the one generator that ``manual_seed`` seeds)."""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from staticgrad.ops.registry import OpDef, register

DEFAULT_SEED = 67280421310721


class _GeneratorHolder:
    """The process-wide random generator, read at every draw (never captured by a plan)."""

    generator = np.random.default_rng(DEFAULT_SEED)
    seed = DEFAULT_SEED


def manual_seed(seed: int) -> None:
    _GeneratorHolder.seed = int(seed)
    _GeneratorHolder.generator = np.random.default_rng(int(seed))


# The generators draws name by number (``generator=g`` becomes the attribute ``source=<number>``,
# which replay code can print); held weakly: a generator nobody holds is gone.
_SOURCES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_SOURCE_NUMBERS = itertools.count(1)


def source_number(holder) -> int:
    """The number draws use to name ``holder`` (an object with ``numpy_generator()``)."""
    number = getattr(holder, "_source_number", None)
    if number is None:
        number = holder._source_number = next(_SOURCE_NUMBERS)
        _SOURCES[number] = holder
    return number


def generator(source=None) -> np.random.Generator:
    """The NumPy generator a draw reads: the ``staticgrad.Generator`` numbered ``source`` (passed as
    ``generator=``), or the process-wide one."""
    if source is None:
        return _GeneratorHolder.generator
    holder = _SOURCES.get(source)
    if holder is None:
        raise RuntimeError(f"a random draw reads staticgrad.Generator number {source}, which no longer exists: "
                           "keep the Generator alive as long as the compiled function that draws from it")
    return holder.numpy_generator()


def _into(result, out):
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _full(out=None, shape=(), value=0.0, dtype=None):
    if out is None:
        return np.full(shape, value, dtype=dtype)
    out.fill(value)
    return out


register(OpDef("full", _full, "factory", dtype_rule="attr"))


def _zeros_like(a, out=None):
    if out is None:
        return np.zeros_like(a)
    out.fill(0)
    return out


# zeros_like reads only its input's shape and dtype; the compiler folds it to a constant.
register(OpDef("zeros_like", _zeros_like, "factory", dtype_rule="same"))

register(OpDef("arange", lambda out=None, start=0, end=0, step=1, dtype=None:
               _into(np.arange(start, end, step, dtype=dtype), out), "factory", dtype_rule="attr"))

register(OpDef("eye", lambda out=None, n=0, m=0, dtype=None: _into(np.eye(n, m, dtype=dtype), out),
               "factory", dtype_rule="attr"))

_FLOAT16 = np.dtype(np.float16)
_FLOAT16_DIGITS = 11  # float16's significand bits: k / 2**11 for k < 2**11 are exact float16 values below 1


def _randn(out=None, shape=(), dtype=None, source=None):
    """Standard normal draws; NumPy draws no float16, so float16 rounds float32 draws."""
    if np.dtype(dtype) == _FLOAT16:
        return _into(generator(source).standard_normal(shape, dtype=np.float32).astype(_FLOAT16), out)
    return _into(generator(source).standard_normal(shape, dtype=dtype), out)


def _rand(out=None, shape=(), dtype=None, source=None):
    """Uniform draws in [0, 1); float16 takes k / 2**11 for a uniform integer k, so that no draw
    rounds up to 1 (NumPy draws no float16)."""
    if np.dtype(dtype) == _FLOAT16:
        steps = generator(source).integers(0, 2 ** _FLOAT16_DIGITS, size=shape)
        return _into((steps * 2.0 ** -_FLOAT16_DIGITS).astype(_FLOAT16), out)
    return _into(generator(source).random(shape, dtype=dtype), out)


register(OpDef("randn", _randn, "random", dtype_rule="attr"))
register(OpDef("rand", _rand, "random", dtype_rule="attr"))


def _uniform(out=None, shape=(), low=0.0, high=1.0, dtype=None, source=None):
    draw = generator(source).random(shape, dtype=np.float64)
    result = (low + (high - low) * draw).astype(dtype, copy=False)
    return _into(result, out)


register(OpDef("uniform", _uniform, "random", dtype_rule="attr"))


def _normal(out=None, shape=(), mean=0.0, std=1.0, dtype=None, source=None):
    result = (mean + std * generator(source).standard_normal(shape)).astype(dtype, copy=False)
    return _into(result, out)


register(OpDef("normal", _normal, "random", dtype_rule="attr"))


def _randint(out=None, shape=(), low=0, high=1, dtype=None, source=None):
    """Integers in [low, high), drawn as int64 and cast for a float or bool dtype (as PyTorch allows)."""
    dtype = np.dtype(dtype if dtype is not None else np.int64)
    drawn = generator(source).integers(low, high, size=shape, dtype=dtype if dtype.kind in "iu" else np.int64)
    return _into(drawn.astype(dtype, copy=False), out)


register(OpDef("randint", _randint, "random", dtype_rule="attr"))


def _dropout_mask(out=None, shape=(), p=0.5, dtype=None):
    """Keep each element with probability 1-p, scaled by 1/(1-p) (zero everywhere when p == 1)."""
    keep = generator().random(shape, dtype=np.float32) >= p
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    return np.multiply(keep, np.asarray(scale, dtype=dtype), out=out, dtype=dtype)


register(OpDef("dropout_mask", _dropout_mask, "random", dtype_rule="attr"))


def _randperm(out=None, n=0, dtype=None, source=None):
    """A random permutation of ``0..n-1``."""
    return _into(generator(source).permutation(n).astype(dtype, copy=False), out)


register(OpDef("randperm", _randperm, "random", dtype_rule="attr"))
