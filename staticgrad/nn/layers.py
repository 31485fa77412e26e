"""The modules for an MLP: Linear, activations, containers, losses."""

from __future__ import annotations

from collections import OrderedDict

from staticgrad._eager import functions as fn
from staticgrad.nn import functional, init
from staticgrad.nn.module import Module
from staticgrad.nn.reduction import _Loss


class Linear(Module):
    """y = x W^T + b, initialised as PyTorch does (Kaiming-uniform weight, uniform bias)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None, device=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        init.make_weight_and_bias(self, (out_features, in_features), bias, dtype)

    def reset_parameters(self) -> None:
        init.reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        return functional.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear that MultiheadAttention holds as ``out_proj``: a plain Linear under the name PyTorch
    gives it (its repr, and the global a pickled attention module names)."""


class Identity(Module):
    def forward(self, input):
        return input


class _Activation(Module):
    function = None

    def forward(self, input):
        return type(self).function(input)


class Tanh(_Activation):
    function = staticmethod(fn.tanh)


class ReLU(_Activation):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return fn.relu_(input) if self.inplace else fn.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(_Activation):
    function = staticmethod(fn.sigmoid)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return fn.softmax(input, self.dim if self.dim is not None else -1)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return fn.log_softmax(input, self.dim if self.dim is not None else -1)


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return fn.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """One dim of the input split into ``unflattened_size`` (a view)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Sequential(Module):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*modules[index])
        return modules[index]

    def _key_at(self, index: int) -> str:
        keys = list(self._modules)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"Sequential indices must be integers or slices, not {type(index).__name__}")
        if not -len(keys) <= index < len(keys):
            raise IndexError(f"index {index} is out of range")
        return keys[index]

    def __setitem__(self, index: int, module) -> None:
        """Replace the module at ``index`` (its name stays); compiled plans that called it retrace."""
        setattr(self, self._key_at(index), module)

    def __delitem__(self, index) -> None:
        """Remove the module(s) at ``index`` and renumber the rest from 0, as PyTorch does."""
        keys = list(self._modules)
        doomed = keys[index] if isinstance(index, slice) else [self._key_at(index)]
        for key in doomed:
            delattr(self, key)
        kept = list(self._modules.items())
        self._modules.clear()
        for i, (name, module) in enumerate(kept):
            self._modules[str(i) if name.isdigit() else name] = module

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        for module in modules or ():
            self.append(module)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(modules[index])
        return modules[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for name, module in (modules or {}).items():
            self.add_module(name, module)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


class MSELoss(_Loss):
    def forward(self, input, target):
        return functional.mse_loss(input, target, reduction=self.reduction)
