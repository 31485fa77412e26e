"""torch.amp on the CPU: GradScaler and autocast.

``GradScaler("cpu")`` scales the loss by a power of two, unscales the gradients before the step,
skips a step whose gradients hold inf or NaN and grows or backs off the scale, as PyTorch's does
(scaling by a power of two is exact, so a float32 run gives the unscaled run's values). Asked for
CUDA, it is disabled with PyTorch's warning, as on a CPU-only PyTorch: ``scale`` returns the loss as
it is and ``step`` just steps. Reading whether gradients are finite is a host read, so ``unscale_``
and ``step`` run outside ``staticgrad.compile`` (a traced step refuses them).

``autocast`` for CUDA is disabled with PyTorch's warning (as on a CPU-only PyTorch); disabled it is a
no-op context manager and decorator. CPU autocast computes in bfloat16, a dtype staticgrad does not
have, so enabling it raises an error that says so."""

from __future__ import annotations

import functools
import math
import types
import warnings

from staticgrad._eager.grad_mode import no_grad


class autocast:
    """``with autocast(device_type, dtype=None, enabled=True):`` (see the module docstring)."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type, self.fast_dtype, self._enabled = device_type, dtype, bool(enabled)
        if self._enabled and device_type == "cuda":
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", UserWarning,
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            raise NotImplementedError(f"staticgrad has no autocast for device_type={device_type!r}: CPU autocast "
                                      "computes in bfloat16, which staticgrad does not have; run in float32 (drop "
                                      "the autocast, or pass enabled=False)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with self:
                return function(*args, **kwargs)
        return wrapped


class GradScaler:
    """Loss scaling for mixed precision, as PyTorch's (see the module docstring)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda":
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            self._enabled = False
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._unscaled = set()
        self._found_inf = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` times the scale (MulBackward0); a list or tuple of them scaled each."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale, once per step, noting any inf or NaN."""
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        inverse = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inverse)
                    found = found or not bool(p.grad.isfinite().all())
        self._unscaled.add(id(optimizer))
        self._found_inf[id(optimizer)] = found

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the unscaled gradients hold inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if not self._found_inf[id(optimizer)]:
            return optimizer.step(*args, **kwargs)
        return None

    def update(self, new_scale=None) -> None:
        """Grow the scale after ``growth_interval`` clean steps, back it off after a skipped one."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(self._found_inf.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                grown = self._scale * self._growth_factor
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
        self._unscaled.clear()
        self._found_inf.clear()

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _namespace(name: str, device: str) -> types.ModuleType:
    """``torch.cuda.amp`` / ``torch.cpu.amp``: autocast and GradScaler for one device type."""
    module = types.ModuleType(name, f"torch.{device}.amp: autocast and GradScaler with device {device!r}.")
    module.autocast = functools.partial(autocast, device)
    module.GradScaler = functools.partial(GradScaler, device)
    return module


cuda_amp = _namespace("staticgrad.cuda.amp", "cuda")
cpu_amp = _namespace("staticgrad.cpu.amp", "cpu")
cpu = types.ModuleType("staticgrad.cpu", "torch.cpu: the CPU, the only device staticgrad has.")
cpu.amp = cpu_amp
cpu.is_available = lambda: True
