"""staticgrad: a PyTorch-style autograd engine on NumPy whose graphs are recorded once and replayed.

``import staticgrad as torch`` runs PyTorch code in the supported subset eagerly;
``@staticgrad.compile`` records a function (or a whole training step) on its first call and
replays the recorded program on later calls, with no graph rebuilding.
"""

from staticgrad._eager import methods as _methods
from staticgrad._eager.tensor import Size, Tensor
from staticgrad import autograd, functional
from staticgrad.autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from staticgrad._eager.creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                                 manual_seed, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                                 tensor, zeros, zeros_like)
from staticgrad._eager.functions import (abs, add, addmm, amax, amin, argmax, argmin, bmm, cat, chunk,
                                   clone, concat, concatenate, detach, div, divide, dot, eq, exp, expand, flatten,
                                   gather, ge, gt, le, log, log_softmax, logical_and, logical_not,
                                   logsumexp, lt,
                                   matmul, max, maximum, mean, min, minimum, mm, mul, multiply, mv, narrow, ne,
                                   neg, negative, permute, pow, reciprocal, relu, reshape, rsqrt, sigmoid, sign,
                                   softmax, split, sqrt, square, squeeze, stack, sub, subtract, sum, swapaxes,
                                   t, tanh, transpose, tril, triu, true_divide, unbind, unsqueeze)
from staticgrad._eager.movement import (argsort, diag, diag_embed, diagonal, flip, fliplr, flipud, index_select,
                                       linspace, masked_select, nonzero, repeat_interleave, roll, sort, tile, topk,
                                       unflatten)
from staticgrad._eager.einsum import einsum
from staticgrad.ops.dtypes import (bool_ as bool, float16, float32, float64, int8, int16, int32, int64,
                                   uint8, uint16, uint32, uint64, DType as dtype)
from staticgrad._eager.tensor import Device as device
from staticgrad._eager.casts import floor_divide, fmod, remainder
from staticgrad._eager.reductions_more import (all, allclose, any, cummax, cummin, cumprod, cumsum, isclose,
                                               isfinite, isinf, isnan, isneginf, isposinf, logcumsumexp, prod,
                                               std, std_mean, var, var_mean)
from staticgrad._eager.creation import seed_of as _seed_of
from staticgrad import inspect, nn, optim
from staticgrad.errors import TraceError
from staticgrad.record.compiled import compile

float = float32
double = float64
half = float16
long = int64
int = int32
__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


def initial_seed() -> int:
    return _seed_of()

# The training-script API: random generators, data loading (staticgrad.utils.data).
from staticgrad._eager.creation import randint_like, randperm
from staticgrad._eager.generator import Generator, default_generator, get_rng_state, seed, set_rng_state
from staticgrad import utils

# The training-script API: serialization, threads, devices, onnx.
from staticgrad import onnx
from staticgrad.devices import accelerator, backends, cuda, get_num_threads, set_num_threads
from staticgrad.serialization import load, save

# Elementwise math, clamp with tensor bounds, norm; torch.special (staticgrad._eager.math_functions).
from staticgrad import special
from staticgrad._eager.math_functions import (
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    copysign,
    cos,
    cosh,
    erf,
    exp2,
    expm1,
    fix,
    floor,
    lerp,
    log1p,
    log2,
    log10,
    logaddexp,
    norm,
    round,
    sin,
    sinh,
    tan,
    trunc,
)
# Data-parallel training on MPI (torch.distributed, torch.nn.parallel); mpi4py is imported only when a group starts.
from staticgrad import distributed
# More random draws (staticgrad._eager.random_more).
from staticgrad._eager.random_more import bernoulli, multinomial
# The float32 matmul precision setting (kept and reported; numerically a no-op on the CPU).
from staticgrad.precision import get_float32_matmul_precision, set_float32_matmul_precision
# The default float dtype (staticgrad._eager.default_dtype).
from staticgrad._eager.default_dtype import get_default_dtype, set_default_dtype
# The legacy tensor types (LongTensor(3), isinstance(t, FloatTensor)) of old scripts.
from staticgrad._eager.legacy_types import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,
                                            HalfTensor, IntTensor, LongTensor, ShortTensor)
# Bitwise and logical functions (the operators & | ^ ~ << >> are Tensor methods).
from staticgrad._eager.bitwise import (bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or,
                                       bitwise_right_shift, bitwise_xor, logical_or, logical_xor)
# Indexed writes: scatter, scatter_add, scatter_reduce, index_add/copy/fill, masked_fill with a tensor value.
from staticgrad._eager.scatter import (index_add, index_copy, index_fill, masked_fill, scatter, scatter_add,
                                       scatter_reduce)
# Functions PyTorch composes from other ops, composed the same way (movedim, meshgrid, hstack...).
from staticgrad._eager.composites import (atleast_1d, atleast_2d, atleast_3d, broadcast_shapes, broadcast_tensors,
                                          broadcast_to, cartesian_prod, column_stack, count_nonzero, diff, dsplit,
                                          dstack, equal, float_power, ger, hsplit, hstack, is_floating_point,
                                          logspace, matrix_power, meshgrid, moveaxis, movedim, msort, nan_to_num,
                                          outer,
                                          positive, ravel, row_stack, select, signbit, swapdims, take_along_dim,
                                          tensor_split, tensordot, tril_indices, triu_indices, vander, vsplit,
                                          vstack, where)
# Mixed precision (torch.amp) and the small device/determinism switches scripts call.
from staticgrad import amp
from staticgrad.amp import autocast, cpu
from staticgrad.devices import are_deterministic_algorithms_enabled, use_deterministic_algorithms

cuda.amp = amp.cuda_amp
# dtype facts (finfo, iinfo, promotion), torch.linalg's norms.
from staticgrad import linalg
from staticgrad._eager.type_info import can_cast, finfo, iinfo, promote_types, result_type
# Special functions and more elementwise arithmetic (staticgrad._eager.special_functions).
from staticgrad._eager.special_functions import (addcdiv, addcmul, deg2rad, digamma, erfc, erfinv, fmax, fmin, frac,
                                                 heaviside, hypot, i0, lgamma, logit, mvlgamma, nextafter,
                                                 polygamma,
                                                 rad2deg, sgn, sinc, xlogy)
# Order statistics, NaN-aware reductions, quantiles and distances (staticgrad._eager.order_functions).
from staticgrad._eager.order_functions import (aminmax, cdist, dist, kthvalue, median, mode, nanmean, nanmedian,
                                               nanquantile, nansum, pdist, quantile, renorm)
# Counting and locating values: unique, bincount, histc, searchsorted (staticgrad._eager.counting_functions).
from staticgrad._eager.counting_functions import (bincount, bucketize, histc, searchsorted, unique,
                                                  unique_consecutive)
# Matrix products, indexed reads and writes, more math, statistics and integrals (staticgrad._eager.linalg_more,
# indexing_more, math_extra, integrals).
from staticgrad._eager.linalg_more import (addbmm, addmv, addmv_, addr, baddbmm, block_diag, cross, det, diagflat,
                                           inner, inverse, kron, rot90, trace, vdot)
from staticgrad._eager.indexing_more import argwhere, masked_scatter, take
from staticgrad._eager.linalg_decomp import cholesky_inverse, cholesky_solve, logdet, pinverse, triangular_solve
from staticgrad._eager.linalg_decomp import torch_cholesky as cholesky
from staticgrad._eager.linalg_decomp import torch_qr as qr
from staticgrad._eager.linalg_decomp import torch_slogdet as slogdet
from staticgrad._eager.linalg_decomp import torch_svd as svd
from staticgrad._eager.math_extra import frexp, gcd, gcd_, isin, lcm, lcm_, ldexp, ldexp_, logaddexp2, normal
from staticgrad._eager.integrals import corrcoef, cov, cumulative_trapezoid, trapezoid, trapz

# NumPy's keyword names (axis=, keepdims=) on the functions PyTorch binds natively.
from staticgrad._eager.arguments import install_numpy_keyword_names as _install_numpy_keyword_names

_install_numpy_keyword_names(globals())

# PyTorch's out= keyword on the functions that take it (staticgrad._eager.out_arg).
from staticgrad._eager.out_arg import install as _install_out_keyword

_install_out_keyword(globals())
