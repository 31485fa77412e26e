"""``save`` and ``load`` in a safe format: a zip holding one ``.npy`` file per tensor and a JSON
description of the structure around them (dicts, lists, tuples, numbers, strings, None).
Loading reads arrays with ``allow_pickle=False`` and parses JSON: it never unpickles and never
runs code from the file (what PyTorch's ``weights_only=True`` promises).

Other objects (a whole ``nn.Module``, an optimizer, any Python object) are pickled, as PyTorch's
``save`` pickles anything; their tensors still go to ``.npy`` arrays. Such a file loads with
``load(f, weights_only=False)``, which unpickles and so can run code from the file, or, with the
default ``weights_only=True``, when every global its pickle names is allowlisted (``add_safe_globals``,
``safe_globals``; see ``staticgrad.weights_only``). Otherwise the default load refuses it with
PyTorch's ``UnpicklingError``: before reading the pickle when nothing is allowlisted, at the first
global that is not allowed otherwise."""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from staticgrad._eager.tensor import Tensor
from staticgrad.nn.parameter import Parameter
from staticgrad.weights_only import (
    WeightsUnpickler,
    add_safe_globals,
    allowed_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
    unsupported_global,
    user_allowed,
)

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals", "save"]

FORMAT = "staticgrad.save/1"
_STRUCTURE = "structure.json"
_OBJECTS = "objects.pkl"  # the pickled objects the safe format cannot hold, one list


def _encode_number(value: float):
    """A float as JSON can hold it: finite values as themselves, inf and nan as tagged strings."""
    return value if math.isfinite(value) else {"t": "float", "v": repr(value)}


class _Writer:
    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self._index: dict[int, int] = {}
        self._held: list[Tensor] = []  # keeps each written tensor alive, so that its id stays its own
        self.objects: list = []

    def encode(self, obj):
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if obj is None or isinstance(obj, (bool, str)):
            return {"t": "value", "v": obj}
        if isinstance(obj, int):
            return {"t": "value", "v": int(obj)}
        if isinstance(obj, float):
            return {"t": "value", "v": _encode_number(float(obj))}
        if isinstance(obj, dict):
            kind = "ordered_dict" if isinstance(obj, OrderedDict) else "dict"
            return {"t": kind, "items": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if isinstance(obj, (list, tuple)):
            return {"t": "list" if isinstance(obj, list) else "tuple", "v": [self.encode(v) for v in obj]}
        return self._object(obj)

    def _object(self, obj) -> dict:
        """An object the safe format cannot hold: pickled (with the others, in one list) at the end."""
        self.objects.append(obj)
        kind = type(obj)
        return {"t": "pickle", "i": len(self.objects) - 1, "type": f"{kind.__module__}.{kind.__qualname__}"}

    def pickled_objects(self, pickle_module, protocol) -> bytes | None:
        """The objects as one pickle whose tensors are references to the ``.npy`` arrays (None if none)."""
        if not self.objects:
            return None
        buffer = io.BytesIO()
        pickler = pickle_module.Pickler(buffer, protocol=protocol)
        pickler.persistent_id = lambda value: self._tensor(value) if isinstance(value, Tensor) else None
        pickler.dump(self.objects)
        return buffer.getvalue()

    def _tensor(self, t: Tensor) -> dict:
        index = self._index.get(id(t))
        if index is None:
            index = self._index[id(t)] = len(self.arrays)
            self._held.append(t)
            self.arrays.append(t._data.copy(order="C"))  # (ascontiguousarray would make a 0-dim array 1-dim)
        return {"t": "tensor", "i": index, "requires_grad": bool(t.requires_grad),
                "parameter": isinstance(t, Parameter)}


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Write ``obj`` to a path or a binary file object: tensors, numbers, strings and containers of
    them in the safe format; any other object (a whole module...) pickled, its tensors as arrays."""
    writer = _Writer()
    root = writer.encode(obj)
    objects = writer.pickled_objects(pickle_module or pickle, pickle_protocol)
    structure = {"format": FORMAT, "root": root, "arrays": len(writer.arrays), "pickled": objects is not None}
    target = os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(_STRUCTURE, json.dumps(structure))
        if objects is not None:
            archive.writestr(_OBJECTS, objects)
        for i, array in enumerate(writer.arrays):
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            archive.writestr(f"arrays/{i}.npy", buffer.getvalue())


class _Reader:
    def __init__(self, archive: zipfile.ZipFile, structure: dict, unpickle: bool = False, pickle_module=None,
                 pickle_load_args=None, allowed: dict | None = None):
        self.archive = archive
        self.structure = structure
        self.unpickle = unpickle  # load(weights_only=False), or a weights-only load with an allowlist, reads a pickle
        self.allowed = allowed  # the globals a weights-only load may resolve (None: any, weights_only=False)
        self._tensors: dict[int, Tensor] = {}
        self._pickle_module = pickle_module or pickle
        self._pickle_load_args = pickle_load_args or {}
        self._objects = None

    def decode(self, node):
        kind = node["t"]
        if kind == "value":
            value = node["v"]
            return self.decode(value) if isinstance(value, dict) else value
        if kind == "float":
            return float(node["v"])
        if kind == "tensor":
            return self._tensor(node)
        if kind in ("dict", "ordered_dict"):
            items = [(self._key(k), self.decode(v)) for k, v in node["items"]]
            return OrderedDict(items) if kind == "ordered_dict" else dict(items)
        if kind == "list":
            return [self.decode(v) for v in node["v"]]
        if kind == "tuple":
            return tuple(self.decode(v) for v in node["v"])
        if kind == "pickle":
            return self._unpickled()[int(node["i"])]
        raise RuntimeError(f"staticgrad.load: unknown entry kind {kind!r} in the file's structure")

    def _unpickled(self) -> list:
        """The file's pickled objects, tensors from the arrays: any global with ``weights_only=False``,
        only allowlisted ones in a weights-only load."""
        if not self.unpickle:
            raise _weights_only_refusal(self.structure)
        if self._objects is None:
            data = io.BytesIO(self.archive.read(_OBJECTS))
            if self.allowed is None:
                unpickler = self._pickle_module.Unpickler(data, **self._pickle_load_args)
            else:
                unpickler = WeightsUnpickler(data, self.allowed, **self._pickle_load_args)
            unpickler.persistent_load = self._tensor
            self._objects = unpickler.load()
        return self._objects

    def _key(self, node):
        key = self.decode(node)
        return tuple(key) if isinstance(key, list) else key

    def _tensor(self, node) -> Tensor:
        index = int(node["i"])
        t = self._tensors.get(index)
        if t is None:
            with self.archive.open(f"arrays/{index}.npy") as member:
                array = np.load(io.BytesIO(member.read()), allow_pickle=False)
            if node.get("parameter"):
                        t = Parameter(Tensor._make(array, False, None), requires_grad=bool(node["requires_grad"]))
            else:
                t = Tensor._make(array, False, None)
                if node.get("requires_grad"):
                    t.requires_grad_(True)
            self._tensors[index] = t
        return t


def _check_map_location(map_location) -> None:
    """Everything lives on the CPU: a map_location naming another device cannot be honoured."""
    if map_location is None or callable(map_location) or isinstance(map_location, dict):
        return
    if str(map_location).split(":")[0] != "cpu":
        raise RuntimeError(f"staticgrad.load: map_location={map_location!r} names a device staticgrad does not have; "
                           "tensors load on the CPU (pass map_location='cpu' or leave it out)")


def _pickled_types(node) -> list:
    """The type names ``save`` noted for a structure's pickled objects (to name them in an error)."""
    if isinstance(node, dict):
        found = [node["type"]] if node.get("t") == "pickle" and "type" in node else []
        return found + [name for value in node.values() for name in _pickled_types(value)]
    if isinstance(node, list):
        return [name for value in node for name in _pickled_types(value)]
    return []


def _weights_only_refusal(structure) -> pickle.UnpicklingError:
    """The refusal of a weights-only load with nothing allowlisted, naming the first pickled type."""
    kinds = list(dict.fromkeys(_pickled_types(structure["root"])))
    return unsupported_global(kinds[0] if kinds else "(a pickled object)")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Read what ``save`` wrote; tensors load on the CPU. A file holding pickled objects (a whole
    module...) loads with ``weights_only=False``, or with the default (True, as in PyTorch) when every
    global its pickle names is allowlisted (``safe_globals``); otherwise the default refuses it."""
    _check_map_location(map_location)
    if weights_only is None:
        weights_only = True
    source = os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
    try:
        archive = zipfile.ZipFile(source, "r")
    except zipfile.BadZipFile as error:
        raise RuntimeError("staticgrad.load reads files written by staticgrad.save (a zip of .npy arrays and a JSON "
                           "structure); this file is not one. staticgrad never unpickles a file staticgrad.save did "
                           "not write, so a pickled PyTorch checkpoint must be converted (load it in PyTorch, save "
                           "tensors as NumPy arrays)") from error
    with archive:
        if _STRUCTURE not in archive.namelist():
            raise RuntimeError("staticgrad.load: this zip has no structure.json: it was not written by "
                               "staticgrad.save (a PyTorch checkpoint is a pickle, which staticgrad never loads)")
        structure = json.loads(archive.read(_STRUCTURE).decode())
        if structure.get("format") != FORMAT:
            raise RuntimeError(f"staticgrad.load: unknown format {structure.get('format')!r} (expected {FORMAT})")
        pickled = structure.get("pickled") or _OBJECTS in archive.namelist()
        if weights_only and pickled and not user_allowed():
            raise _weights_only_refusal(structure)
        reader = _Reader(archive, structure, not weights_only or bool(pickled), pickle_module, pickle_load_args,
                         allowed_globals() if weights_only else None)
        return reader.decode(structure["root"])
