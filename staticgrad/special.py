"""torch.special: the special functions staticgrad has, under PyTorch's names."""

from staticgrad._eager.functions import logsumexp
from staticgrad._eager.functions import sigmoid as expit
from staticgrad._eager.math_functions import erf, exp2, expm1, log1p, round

__all__ = ["erf", "exp2", "expit", "expm1", "log1p", "logsumexp", "round"]
