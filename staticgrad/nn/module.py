"""nn.Module: parameters, buffers and submodules registered by attribute, as in PyTorch."""

from __future__ import annotations

from collections import OrderedDict, namedtuple

from staticgrad._eager.creation import tensor
from staticgrad._eager.functions import to_dtype
from staticgrad._eager.grad_mode import no_grad
from staticgrad._eager.tensor import Tensor
from staticgrad._state import EpochMapping, Tracing, bump_epoch, note_stored_number
from staticgrad.errors import TraceError
from staticgrad.nn.parameter import Parameter
from staticgrad.ops.dtypes import float16, float32, float64

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _Registry(EpochMapping, OrderedDict):
    """A module's parameters, buffers or submodules by name: any change, even made straight to
    ``module._parameters``, bumps the state epoch so compiled plans re-check what they captured."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        bump_epoch()


class Module:
    """Base class for models. Reassigning a parameter or submodule, or switching train/eval,
    bumps the state epoch so compiled plans re-check what they captured."""

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", _Registry())
        object.__setattr__(self, "_buffers", _Registry())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", _Registry())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    # ---- attribute registry -----------------------------------------------------------------

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._discard(name, keep=params)
            params[name] = value  # in place when it was a parameter already: the order stays
            bump_epoch()
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._discard(name, keep=self._modules)
            self._modules[name] = value
            bump_epoch()
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
            bump_epoch()
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            self._modules[name] = None
            bump_epoch()
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            self._buffers[name] = value
            bump_epoch()
        else:
            note_stored_number(value)
            object.__setattr__(self, name, value)

    def _discard(self, name, keep=None):
        """Forget ``name`` in every registry but ``keep`` (where it is about to be reassigned)."""
        for registry in (self.__dict__, self._parameters, self._buffers, self._modules):
            if registry is not keep:
                registry.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            table = d.get(registry)
            if table is not None and name in table:
                tracer = Tracing.tracer
                if tracer is not None:
                    # a replay reads what this module held when traced: guard that it still holds it
                    tracer.add_module_guard(self)
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _holdings(self) -> tuple:
        """(names, objects) of every parameter, buffer and submodule held now: what compiled plans
        that used this module guard by identity."""
        d = self.__dict__
        names, objects = [], []
        for registry in (d["_parameters"], d["_buffers"], d["_modules"]):
            names.extend(registry)
            objects.extend(registry.values())
        return tuple(names), tuple(objects)

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                bump_epoch()
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        self._discard(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)
        bump_epoch()

    def add_module(self, name: str, module) -> None:
        if module is None:
            self._modules[name] = None
        else:
            setattr(self, name, module)

    register_module = add_module

    # ---- calling ------------------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        tracer = Tracing.tracer
        if tracer is not None:
            # Any module may branch on its mode (its own code or F.dropout(x, p, self.training)):
            # a plan recorded in one mode must not replay in the other.
            tracer.add_module_guard(self)
        for hook in self._forward_pre_hooks.values():
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_hook(self, hook):
        return _add_hook(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return _add_hook(self._forward_pre_hooks, hook)

    # ---- traversal ----------------------------------------------------------------------------

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if remove_duplicate and self in memo:
            return
        memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ------------------------------------------------------------------

    def train(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            if module.training != mode:
                object.__setattr__(module, "training", mode)
                bump_epoch()
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    # ---- dtype and device -----------------------------------------------------------------------

    def cuda(self, device=None):
        raise AssertionError("Torch not compiled with CUDA enabled")

    def to(self, *args, **kwargs):
        dtype = kwargs.get("dtype")
        for a in args:
            if not isinstance(a, (str, type(None))) and not hasattr(a, "type"):
                dtype = a
            elif str(a) != "cpu":
                raise RuntimeError(f"staticgrad runs on the CPU only; cannot move a module to {a!r}")
        if dtype is not None:
            self._convert(dtype)
        return self

    def _convert(self, dtype) -> None:
        if Tracing.tracer is not None:
            raise TraceError("changing a module's dtype inside a compiled function cannot be replayed")
        for module in self.modules():
            for p in module._parameters.values():
                if p is not None and p.is_floating_point():
                    p._data = to_dtype(p.detach(), dtype)._data
                    p._version_counter[0] += 1
            for b in module._buffers.values():
                if b is not None and b.is_floating_point():
                    b._data = to_dtype(b.detach(), dtype)._data
        bump_epoch()

    def double(self):
        return self.to(float64)

    def float(self):
        return self.to(float32)

    def half(self):
        return self.to(float16)

    def cpu(self):
        return self

    # ---- state ----------------------------------------------------------------------------------

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            source = state_dict[key]
            source_shape = tuple(source.shape)
            if source_shape != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"staticgrad.Size({list(source_shape)}) from checkpoint, the shape in current model is "
                              f"staticgrad.Size({list(target.shape)}).")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, target in own.items():
                if key in state_dict:
                    source = state_dict[key]
                    if not isinstance(source, Tensor):
                        source = tensor(source)
                    target.copy_(source)
        return IncompatibleKeys(missing, unexpected)

    # ---- printing -------------------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        if not lines:
            return f"{self._get_name()}()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)


class _HookHandle:
    def __init__(self, table, key):
        self._table, self._key = table, key

    def remove(self):
        self._table.pop(self._key, None)


_hook_ids = iter(range(1 << 62))


def _add_hook(table, hook):
    key = next(_hook_ids)
    table[key] = hook
    return _HookHandle(table, key)
