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
from staticgrad._eager.functions import (abs, add, addmm, amax, amin, argmax, argmin, bmm, cat, chunk, clamp, clip,
                                   clone, concat, concatenate, detach, div, divide, dot, eq, exp, expand, flatten,
                                   gather, ge, gt, le, log, masked_fill, log_softmax, logical_and, logical_not,
                                   logsumexp, lt,
                                   matmul, max, maximum, mean, min, minimum, mm, mul, multiply, mv, narrow, ne,
                                   neg, negative, permute, pow, reciprocal, relu, reshape, rsqrt, sigmoid, sign,
                                   softmax, split, sqrt, square, squeeze, stack, sub, subtract, sum, swapaxes,
                                   t, tanh, transpose, tril, triu, true_divide, unbind, unsqueeze, where)
from staticgrad.ops.dtypes import (bool_ as bool, float16, float32, float64, int8, int16, int32, int64,
                                   uint8, DType as dtype)
from staticgrad._eager.tensor import Device as device
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


def get_default_dtype():
    return float32


def initial_seed() -> int:
    return _seed_of()

# Data-parallel training on MPI (torch.distributed, torch.nn.parallel); mpi4py is imported only when a group starts.
from staticgrad import distributed
