"""instance_norm and InstanceNorm1d/2d/3d: normalize each channel of each sample over its trailing
dims. As PyTorch does, the (N, C, *) input is viewed as one sample of N * C channels and batch-
normalized (ViewBackward0 over NativeBatchNormBackward0); running statistics, when given, are
updated per channel with the mean over the samples."""

from __future__ import annotations

import math
import warnings

from staticgrad._eager.creation import full
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.movement import repeat
from staticgrad._eager.tensor import Tensor
from staticgrad._state import guard, replay_scalar
from staticgrad.nn.batchnorm import _BatchNorm
from staticgrad.nn.group_norm import check_dtypes
from staticgrad.ops import OPS
from staticgrad.ops.dtypes import float16


def _verify_spatial_size(input) -> None:
    if math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")


def _repeat(t: Tensor, times: int) -> Tensor:
    """``t`` (C,) repeated ``times`` times end to end: ``t.repeat(times)``, as PyTorch's instance norm
    does (RepeatBackward0; a new tensor, never a view of ``t``, which the running statistics' write-back
    changes in place)."""
    return repeat(t, times)


def _check_arguments(input, running_mean, running_var, weight, bias, use_input_stats) -> None:
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if not use_input_stats and running_mean is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    if input.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if input.dim() == 1:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    samples, channels = input.shape[0], input.shape[1]
    for t in (weight, bias, running_mean, running_var):
        if t is not None and t.dim() > 1:
            _repeat(t, samples)  # PyTorch's repeat error
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {samples * channels} elements not {t.numel() * samples}")
    check_dtypes(input, (weight, bias), "batch_norm", "instance_norm")


def _update_running(running: Tensor, repeated: Tensor, batch_value: Tensor, momentum, samples: int) -> None:
    """running = mean over the samples of (momentum * batch_value + (1 - momentum) * running)."""
    if running.dtype == float16:  # each repeated value updated in float32 and rounded, then averaged in float32
        updated = (batch_value.float() * momentum + repeated.float() * (1 - momentum)).to(float16).float()
    else:
        updated = batch_value * momentum + repeated * (1 - momentum)
    running.copy_(updated.view(samples, running.numel()).mean(0))


def _empty_instance_norm(x, shape: tuple, running_mean, running_var, weight, bias):
    """An empty input, as PyTorch's batch_norm takes one: a copy of the input, times the first
    repeated weight and plus the first repeated bias when given (which raises for a batch of 0,
    as PyTorch's select does); the running statistics become the mean over the samples of their
    repeated copies (NaN for a batch of 0)."""
    samples, channels = shape[0], shape[1]
    if samples == 0 and (weight is not None or bias is not None):
        raise IndexError("select(): index 0 out of range for tensor of size [0] at dimension 0")
    y = x.clone()
    if weight is not None:
        y = y * _repeat(weight, samples)[0]
    if bias is not None:
        y = y + _repeat(bias, samples)[0]
    if running_mean is not None:
        with no_grad():
            for running in (running_mean, running_var):
                running.copy_(_repeat(running, samples).view(samples, channels).mean(0))
    return y.view(*shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats: bool = True,
                  momentum=0.1, eps: float = 1e-5):
    """Normalize each channel of each sample over its trailing dims, by its own statistics
    (``use_input_stats``, updating ``running_mean``/``running_var`` in place when given) or by the
    running statistics; then scale and shift per channel."""
    if use_input_stats:
        _verify_spatial_size(input)
    _check_arguments(input, running_mean, running_var, weight, bias, use_input_stats)
    shape = tuple(input.shape)
    samples, channels = shape[0], shape[1]
    width = samples * channels
    x = input.contiguous().view(1, width, *shape[2:])
    if input.numel() == 0:
        return _empty_instance_norm(x, shape, running_mean, running_var, weight, bias)
    weight_ = _repeat(weight, samples) if weight is not None else full((width,), 1.0, dtype=input.dtype)
    bias_ = _repeat(bias, samples) if bias is not None else full((width,), 0.0, dtype=input.dtype)
    eps = float(eps)
    if use_input_stats:
        y, mean, _, var = dispatch(OPS["batch_norm_train"], (x, weight_, bias_), {"eps": eps})
        if running_mean is not None:
            count = math.prod(shape[2:])
            with no_grad():
                if input.dtype == float16:  # PyTorch updates from the float32 statistics, before rounding
                    ones_, zeros_ = full((width,), 1.0), full((width,), 0.0)
                    _, mean, _, var = dispatch(OPS["batch_norm_train"], (x.float(), ones_, zeros_), {"eps": eps})
                _update_running(running_mean, _repeat(running_mean, samples), mean, momentum, samples)
                _update_running(running_var, _repeat(running_var, samples), var * (count / (count - 1)), momentum,
                                samples)
    else:
        with no_grad():
            mean_, var_ = _repeat(running_mean, samples), _repeat(running_var, samples)
        stats = (mean_.to(input.dtype), var_.to(input.dtype))
        y = dispatch(OPS["batch_norm_eval"], (x, weight_, bias_) + stats, {"eps": eps})
        with no_grad():  # PyTorch writes back the mean of the repeated statistics
            running_mean.copy_(mean_.view(samples, channels).mean(0))
            running_var.copy_(var_.view(samples, channels).mean(0))
    return y.view(*shape)


class _InstanceNorm(_BatchNorm):
    """Instance normalization layers: no learnable parameters and no running statistics by default."""

    _no_batch_dim = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if affine and not bias:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def _apply_instance_norm(self, input):
        training = guard(lambda: self.training, f"{type(self).__name__}.training")
        momentum = replay_scalar(self.momentum if self.momentum is not None else 0.0,
                                 lambda: self.momentum if self.momentum is not None else 0.0,
                                 ("instance_norm", id(self), "momentum"))
        return instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                             training or not self.track_running_stats, momentum, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _expected_dims = (2, 3)
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    _expected_dims = (3, 4)
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    _expected_dims = (4, 5)
    _no_batch_dim = 4
