"""CyclicLR: the cyclical learning-rate policy (Smith, "Cyclical Learning Rates for Training Neural
Networks") with PyTorch's formulas, so the same floats: the lr climbs from ``base_lr`` to ``max_lr``
over ``step_size_up`` steps and back down over ``step_size_down``, the height scaled per cycle
(triangular2: halved each cycle), per iteration (exp_range: gamma ** iteration) or by ``scale_fn``;
momentum (or Adam's beta1) cycles the other way. Like every scheduler here it only writes numbers
into the parameter groups, which a compiled step re-reads on each replay."""

from __future__ import annotations

import math
import types
from functools import partial

from staticgrad.optim.optimizer import Optimizer
from staticgrad.optim.scheduler_base import LRScheduler, _per_group


class CyclicLR(LRScheduler):
    """Cycle each group's lr between ``base_lr`` and ``max_lr`` (``step()`` after every batch)."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000, step_size_down=None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups,
                                              strict=True):
                    self._set_momentum(group, top)
                    group["max_momentum"] = top
                    group["base_momentum"] = bottom
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        """The built-in scaling of ``mode`` (and the scale_mode it implies), unless scale_fn was given."""
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref, self.scale_mode = self._triangular_scale_fn, "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref, self.scale_mode = self._triangular2_scale_fn, "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref, self.scale_mode = partial(self._exp_range_scale_fn, self.gamma), "iterations"

    def scale_fn(self, x) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma ** x

    def _set_momentum(self, group: dict, value) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale_factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * scale_factor * scale for base, top in zip(self.base_lrs, self.max_lrs,
                                                                               strict=True)]
        if self.cycle_momentum:
            for group, bottom, top in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums,
                                          strict=True):
                self._set_momentum(group, top - (top - bottom) * scale_factor * scale)
        return lrs

    def state_dict(self) -> dict:
        """The scheduler's state; a scale_fn is kept only as a callable object's attributes (a function
        or lambda cannot be saved), as in PyTorch."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        custom = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if custom is not None and not isinstance(custom, types.FunctionType):
            state["_scale_fn_custom"] = custom.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        custom = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if custom is not None:
            self._scale_fn_custom.__dict__.update(custom)
        self._init_scale_fn()
