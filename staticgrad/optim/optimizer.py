"""Optimizer base: param_groups and per-parameter state as in PyTorch.

Under ``@staticgrad.compile`` an optimizer step is recorded like any other ops. Its
hyperparameters are read through ``hyper()``, so a replay re-reads them from ``param_groups``
(changing ``lr`` between calls takes effect); the branches it takes (momentum or not, which
state buffers exist) are guards, so a change there makes the plan retrace.
"""

from __future__ import annotations

import functools
from collections import defaultdict

from staticgrad._eager.creation import zeros
from staticgrad._eager.grad_mode import enable_grad, no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad._state import EpochMapping, Tracing, bump_epoch, guard, note_stored_number, phase, replay_scalar
from staticgrad.ops import dtypes as _dtypes

_MISSING = object()


def _branch_class(value):
    """What a recorded step's branches can depend on: a flag, whether a number is zero, an object."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return id(value)


class WatchedList(list):
    """A list whose changes bump the state epoch: ``optimizer.param_groups`` and each group's
    ``params``, so that compiled plans re-check which tensors they update."""

    def _changed(name):
        def method(self, *args):
            bump_epoch()
            return getattr(list, name)(self, *args)
        method.__name__ = name
        return method

    for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop",
                  "remove", "clear", "sort", "reverse"):
        locals()[_name] = _changed(_name)
    del _changed, _name


class ParamGroup(EpochMapping, dict):
    """A parameter group. Changing a value in a way that flips a branch of the update rule
    (momentum to 0, nesterov on, new params) bumps the state epoch so compiled plans re-check
    their guards; changing it within a branch (a new lr) does not need to."""

    def __setitem__(self, key, value):
        note_stored_number(value)
        old = self.get(key, _MISSING)
        if key == "params" and isinstance(value, list) and not isinstance(value, WatchedList):
            value = WatchedList(value)
        super().__setitem__(key, value)
        if old is _MISSING or _branch_class(old) != _branch_class(value):
            bump_epoch()


class EpochDict(EpochMapping, dict):
    """Per-parameter optimizer state: adding, replacing or removing entries bumps the state epoch."""

    def __setitem__(self, key, value):
        note_stored_number(value)
        if key not in self or self[key] is not value:
            bump_epoch()
        super().__setitem__(key, value)


class OptimizerState(EpochMapping, defaultdict):
    """``optimizer.state``: a defaultdict of EpochDicts that bumps the epoch on changes."""

    def __init__(self, *args):
        super().__init__(EpochDict, *args)

    def __missing__(self, key):
        bump_epoch()
        return super().__missing__(key)

    def __setitem__(self, key, value):
        bump_epoch()
        super().__setitem__(key, value if isinstance(value, EpochDict) else EpochDict(value))

    def __reduce__(self):
        """Copy and pickle as an OptimizerState of the same entries (``copy.deepcopy(optimizer)``)."""
        return type(self), (), None, None, iter(self.items())


def _in_optimizer_phase(step):
    @functools.wraps(step)
    def run(self, *args, **kwargs):
        with phase("optimizer"):
            return step(self, *args, **kwargs)
    return run


def hyper(group: dict, key: str):
    """``group[key]``; while tracing, a number a replay re-reads from the group."""
    # The key identifies this group's entry: two groups' lrs are two replay-time scalars.
    return replay_scalar(group[key], lambda: group[key], ("param_group", id(group), key))


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        """A subclass's own ``step`` records its ops as the "optimizer" phase too (for plan inspection)."""
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None:
            cls.step = _in_optimizer_phase(step)

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state = OptimizerState()
        self.param_groups = WatchedList()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __setattr__(self, name, value):
        if name in ("state", "param_groups"):
            bump_epoch()
            if name == "param_groups" and isinstance(value, list) and not isinstance(value, WatchedList):
                value = WatchedList(value)
        object.__setattr__(self, name, value)

    def add_param_group(self, group: dict) -> None:
        group = ParamGroup(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def step(self, closure=None):
        """One update of every parameter group (``closure`` re-evaluates the loss first)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._guard_structure()
        with no_grad(), phase("optimizer"):
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _update_group(group)")

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    with no_grad():
                        p.grad.zero_()

    def structure(self) -> tuple:
        """What the recorded ops of a step depend on besides tensor values: the parameters,
        the branches the hyperparameters select, and which state buffers exist."""
        rows = []
        for group in self.param_groups:
            flags = tuple((k, v) for k, v in sorted(group.items()) if k != "params" and isinstance(v, bool))
            branches = tuple((k, group[k] != 0) for k in self._branch_keys if k in group)
            params = tuple((id(p), tuple(sorted(self.state[p])) if p in self.state else ()) for p in group["params"])
            rows.append((flags, branches, params))
        return tuple(rows)

    _branch_keys = ()

    def _holdings(self) -> tuple:
        """(keys, objects): the state dict, every group and its parameters, every state entry and
        state tensor, as they are now; a compiled step guards that they stay the same objects
        (a checkpoint load or a new buffer put in ``state[p]`` makes it retrace)."""
        keys, objects = [], [self.state, self.param_groups]
        for i, group in enumerate(self.param_groups):
            params = group["params"]
            keys.append(("group", i, len(params)))
            objects += [group, params]
            for j, p in enumerate(params):
                entry = dict.get(self.state, p)
                objects += [p, entry]
                if entry:
                    names = tuple(k for k, v in entry.items() if isinstance(v, Tensor))
                    keys.append(("state", i, j, names))
                    objects += [entry[k] for k in names]
        return tuple(keys), tuple(objects)

    def _guard_structure(self) -> None:
        if Tracing.tracer is not None:
            name = type(self).__name__
            guard(self.structure, f"{name} state and branches")
            guard(self._holdings, f"the parameters and state tensors of a {name}", identity=True)

    def state_dict(self) -> dict:
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (v.detach().clone() if isinstance(v, Tensor) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = [p for g in self.param_groups for p in g["params"]]
        for group, saved in zip(self.param_groups, groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
            for k, v in saved.items():
                if k != "params":
                    group[k] = v
        self.state = OptimizerState()
        for i, entry in state_dict["state"].items():
            self.state[params[int(i)]] = {k: (v.detach().clone() if isinstance(v, Tensor) else v)
                                          for k, v in entry.items()}

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


def step_counter() -> Tensor:
    """A new 0-dim ``state["step"]``: float64 under the float64 default dtype, else float32, as
    PyTorch's optimizers make it."""
    return zeros((), dtype=_dtypes.float64 if _dtypes.default_float() is _dtypes.float64 else _dtypes.float32)
