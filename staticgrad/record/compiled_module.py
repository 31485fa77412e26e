"""``staticgrad.compile(module)``: the module itself, with its calls compiled.

It shares the module's registries, so ``parameters()``, ``named_parameters()``, ``state_dict()``
and ``load_state_dict()`` use the original keys (no ``_orig_mod.`` prefix), and ``train()``,
``eval()``, ``to()``, ``zero_grad()`` act on the module. Attributes read or set on it are the
module's; ``.plans`` and ``.stats`` are those of its compiled call.
"""

from __future__ import annotations

from staticgrad.nn.module import Module

_SHARED = ("_parameters", "_buffers", "_modules", "_non_persistent", "_forward_hooks", "_forward_pre_hooks")


class CompiledModule(Module):
    def __init__(self, module: Module, compiled_call):
        object.__setattr__(self, "_orig_module", module)
        object.__setattr__(self, "_compiled_call", compiled_call)
        for name in _SHARED:
            object.__setattr__(self, name, getattr(module, name))

    @property
    def training(self) -> bool:
        return self._orig_module.training

    @training.setter
    def training(self, mode: bool) -> None:
        self._orig_module.training = mode

    def __call__(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    forward = __call__

    @property
    def plans(self) -> list:
        return self._compiled_call.plans

    @property
    def stats(self):
        return self._compiled_call.stats

    @property
    def plan(self):
        return self._compiled_call.plan

    def __getattr__(self, name):
        return getattr(self._orig_module, name)

    def __setattr__(self, name, value):
        setattr(self._orig_module, name, value)

    def __delattr__(self, name):
        delattr(self._orig_module, name)

    # containers (Sequential, ModuleList, ModuleDict) keep their indexing and length
    def __getitem__(self, index):
        return self._orig_module[index]

    def __len__(self) -> int:
        return len(self._orig_module)

    def __iter__(self):
        return iter(self._orig_module)

    def __repr__(self) -> str:
        return f"staticgrad.compile({self._orig_module!r})"
