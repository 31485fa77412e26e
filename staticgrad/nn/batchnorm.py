"""batch_norm and BatchNorm1d/2d/3d: per-channel normalization over the batch, with running
statistics updated in place in training (exactly the same ops eagerly and in a compiled step's
replay) and used in eval."""

from __future__ import annotations

from staticgrad._eager.creation import full, ones, tensor, zeros
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad._state import guard, replay_scalar
from staticgrad.nn.activation import require_floating
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter
from staticgrad.ops import OPS


def _filled(value: float, like: Tensor, channels: int):
    return full((channels,), value, dtype=like.dtype)


def _update_running(running: Tensor, batch_value: Tensor, momentum) -> None:
    """running = momentum * batch_value + (1 - momentum) * running, in place (PyTorch's update)."""
    with no_grad():
        running.copy_(batch_value * momentum + running * (1 - momentum))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum=0.1, eps: float = 1e-5):
    """Normalize each channel (dim 1) of ``input``: by the batch's statistics in training (updating
    ``running_mean``/``running_var`` in place when given), else by the running statistics."""
    require_floating(input, "batch_norm")
    shape = tuple(input.shape)
    if len(shape) < 2:  # PyTorch's functional form fails reading the channel dim
        raise IndexError("tuple index out of range")
    channels = shape[1]
    weight = weight if weight is not None else _filled(1.0, input, channels)
    bias = bias if bias is not None else _filled(0.0, input, channels)
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        return dispatch(OPS["batch_norm_eval"], (input, weight, bias, running_mean, running_var), {"eps": float(eps)})
    count = input.numel() // channels
    if count <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    y, mean, _, var = dispatch(OPS["batch_norm_train"], (input, weight, bias), {"eps": float(eps)})
    if running_mean is not None:
        _update_running(running_mean, mean, momentum)
    if running_var is not None:
        with no_grad():
            unbiased = var * (count / (count - 1))
        _update_running(running_var, unbiased, momentum)
    return y


class _BatchNorm(Module):
    _expected_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype))
            self.bias = Parameter(zeros(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                self.bias.zero_()

    def _check_input_dim(self, input) -> None:
        if input.dim() not in self._expected_dims:
            dims = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"expected {dims} input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        training = guard(lambda: self.training, f"{type(self).__name__}.training")
        cumulative = guard(lambda: self.momentum is None, f"{type(self).__name__}.momentum is None")
        momentum = 0.0 if cumulative else replay_scalar(self.momentum, lambda: self.momentum,
                                                        ("batch_norm", id(self), "momentum"))
        if training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
                if cumulative:  # 1 / batches seen, kept a tensor: no host read in a compiled step
                    momentum = self.num_batches_tracked.double().reciprocal()
        use_batch_stats = training or (self.running_mean is None and self.running_var is None)
        keep = not training or self.track_running_stats
        return batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                          self.weight, self.bias, use_batch_stats, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _expected_dims = (2, 3)

    def _check_input_dim(self, input) -> None:
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    _expected_dims = (5,)
