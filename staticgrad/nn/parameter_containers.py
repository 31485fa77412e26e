"""ParameterList and ParameterDict: parameters held in a list or a dict, registered on the module
under their index or key (so ``parameters()``, ``state_dict()`` and optimizers see them). A tensor
that is not a Parameter is made one, as PyTorch does."""

from __future__ import annotations

from staticgrad._eager.tensor import Tensor
from staticgrad.nn.module import Module
from staticgrad.nn.parameter import Parameter


def _as_parameter(value):
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


def _describe(value, type_name) -> str:
    if isinstance(value, Tensor):
        size = "x".join(str(n) for n in value.shape)
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        return f"{kind} containing: [{type_name(value)} of size {size}]"
    return f"Object of type: {type(value).__name__}"


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def _index(self, idx: int) -> str:
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, self._index(idx))

    def __setitem__(self, idx: int, value) -> None:
        setattr(self, self._index(idx), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value) -> ParameterList:
        object.__setattr__(self, "_size", self._size + 1)
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p, lambda t: t.dtype)}" for k, p in enumerate(self))


class ParameterDict(Module):
    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", {})
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key: str, default=None):
        return self[key] if key in self._keys else default

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p, lambda t: t.type())}" for k, p in self.items())
