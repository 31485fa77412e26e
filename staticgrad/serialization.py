"""``save`` and ``load`` in a safe format: a zip holding one ``.npy`` file per tensor and a JSON
description of the structure around them (dicts, lists, tuples, numbers, strings, None).
Loading reads arrays with ``allow_pickle=False`` and parses JSON: it never unpickles and never
runs code from the file (what PyTorch's ``weights_only=True`` promises)."""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections import OrderedDict

import numpy as np

from staticgrad._eager.tensor import Tensor
from staticgrad.nn.parameter import Parameter

FORMAT = "staticgrad.save/1"
_STRUCTURE = "structure.json"


def _encode_number(value: float):
    """A float as JSON can hold it: finite values as themselves, inf and nan as tagged strings."""
    return value if math.isfinite(value) else {"t": "float", "v": repr(value)}


class _Writer:
    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self._index: dict[int, int] = {}

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
        raise TypeError(f"staticgrad.save stores tensors, numbers, strings, None and dicts, lists and tuples of them "
                        f"(a safe format: nothing is pickled); got an object of type {type(obj).__name__}")

    def _tensor(self, t: Tensor) -> dict:
        index = self._index.get(id(t))
        if index is None:
            index = self._index[id(t)] = len(self.arrays)
            self.arrays.append(t._data.copy(order="C"))  # (ascontiguousarray would make a 0-dim array 1-dim)
        return {"t": "tensor", "i": index, "requires_grad": bool(t.requires_grad),
                "parameter": isinstance(t, Parameter)}


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Write ``obj`` (tensors, numbers, strings and containers of them) to a path or a binary file object."""
    writer = _Writer()
    structure = {"format": FORMAT, "root": writer.encode(obj), "arrays": len(writer.arrays)}
    target = os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(_STRUCTURE, json.dumps(structure))
        for i, array in enumerate(writer.arrays):
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            archive.writestr(f"arrays/{i}.npy", buffer.getvalue())


class _Reader:
    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive
        self._tensors: dict[int, Tensor] = {}

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
        raise RuntimeError(f"staticgrad.load: unknown entry kind {kind!r} in the file's structure")

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


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Read what ``save`` wrote. ``weights_only`` is accepted (loading is always weights-only: the
    format holds no code); tensors load on the CPU."""
    _check_map_location(map_location)
    source = os.fspath(f) if isinstance(f, (str, os.PathLike)) else f
    try:
        archive = zipfile.ZipFile(source, "r")
    except zipfile.BadZipFile as error:
        raise RuntimeError("staticgrad.load reads files written by staticgrad.save (a zip of .npy arrays and a JSON "
                           "structure); this file is not one. staticgrad never unpickles, so a pickled PyTorch "
                           "checkpoint must be converted (load it in PyTorch, save tensors as NumPy arrays)") from error
    with archive:
        if _STRUCTURE not in archive.namelist():
            raise RuntimeError("staticgrad.load: this zip has no structure.json: it was not written by "
                               "staticgrad.save (a PyTorch checkpoint is a pickle, which staticgrad never loads)")
        structure = json.loads(archive.read(_STRUCTURE).decode())
        if structure.get("format") != FORMAT:
            raise RuntimeError(f"staticgrad.load: unknown format {structure.get('format')!r} (expected {FORMAT})")
        return _Reader(archive).decode(structure["root"])
