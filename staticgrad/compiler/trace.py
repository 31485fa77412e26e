"""The tape: what a traced call did, as plain data (op names, value ids, shapes, dtypes).

The front end's tracer drives a Tape while a compiled function runs eagerly; the compiler
never sees a Tensor or an autograd node, only these records.
"""

from __future__ import annotations

import numpy as np

from staticgrad.compiler.ir import Graph, Op, ScalarSlot, Value, freeze_attrs, frozen_constant

_DTYPE_NAMES: dict = {}  # dtype -> its name (np.dtype(...).name costs microseconds; a trace asks per value)


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


class Tape:
    def __init__(self):
        self.graph = Graph()
        self._next_id = 0

    def _value(self, shape, dtype, kind: str, phase: str = "forward") -> int:
        vid = self._next_id
        self._next_id = vid + 1
        name = _DTYPE_NAMES.get(dtype) or _dtype_name(dtype)
        # an array's shape is already a tuple of ints
        self.graph.values[vid] = Value(vid, shape if type(shape) is tuple else tuple(map(int, shape)), name, kind,
                                       phase)
        return vid

    def input(self, shape, dtype) -> int:
        vid = self._value(shape, dtype, "input")
        self.graph.inputs.append(vid)
        return vid

    def captured(self, shape, dtype) -> int:
        vid = self._value(shape, dtype, "captured")
        self.graph.captured.append(vid)
        return vid

    def constant(self, array: np.ndarray) -> int:
        vid = self._value(array.shape, array.dtype, "constant")
        self.graph.constants[vid] = frozen_constant(array)
        return vid

    def scalar(self) -> ScalarSlot:
        slot = ScalarSlot(self.graph.n_scalars)
        self.graph.n_scalars += 1
        return slot

    def op(self, name: str, inputs, attrs: dict, outputs, phase: str = "forward") -> tuple:
        """Record one op; ``outputs`` are (shape, dtype) pairs. Returns the new value ids."""
        if len(outputs) == 1:
            out_ids = (self._value(outputs[0][0], outputs[0][1], "op", phase),)
        else:
            out_ids = tuple([self._value(shape, dtype, "op", phase) for shape, dtype in outputs])
        self.graph.ops.append(Op(name, tuple(inputs), out_ids, freeze_attrs(attrs) if attrs else ()))
        return out_ids

    def finish(self, results, writebacks) -> Graph:
        self.graph.results = list(results)
        self.graph.writebacks = list(writebacks)
        return self.graph
