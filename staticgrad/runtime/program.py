"""A plan as the runtime executes it: steps over numbered slots, and where each slot's buffer
lives (an arena offset, a fresh array per call, a bound input, a constant).

Plain data: the runtime needs nothing from the compiler or the model's code to run it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# How a step produces its output(s).
OUT = "out"      # writes into the slot's preallocated buffer (kernel called with out=)
VIEW = "view"    # returns a view of its first input (no buffer of its own)
MULTI = "multi"  # returns several fresh arrays
KERNEL = "kernel"  # a generated fused kernel writing into its outputs' preallocated buffers


@dataclass(frozen=True, slots=True)
class Step:
    op: str
    inputs: tuple
    outputs: tuple
    attrs: tuple            # static (name, value) pairs passed to the kernel
    dynamic: tuple = ()     # (attr name, scalar index) read from the call's scalars
    mode: str = OUT
    scratch: tuple = ()     # (arena offset, bytes): the op's working memory during this step (scratch=)


@dataclass(frozen=True, slots=True)
class BufferSpec:
    slot: int
    shape: tuple
    dtype: np.dtype
    offset: int | None      # None: allocated fresh on every call (results)
    first: int = 0          # the steps that define and last read it (both inclusive; the step count:
    last: int = 0           # "until the call ends")
    block: int | None = None   # a gradient an all-reduce reads: its element offset in the call's gradient block

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass
class Program:
    n_slots: int
    steps: list
    input_slots: list
    captured_slots: list
    constants: dict
    buffers: list                  # BufferSpec for every op output that owns memory
    arena_bytes: int
    result_slots: list
    writebacks: list               # (source slot, input or captured slot to overwrite in place)
    n_scalars: int = 0
    kernels: dict = field(default_factory=dict)   # kernel name -> source (fused groups)
    aliases: dict = field(default_factory=dict)   # slot -> input/captured slot whose storage it is written into
    alignment: int = 64
    lower_bound: int = 0                          # the most arena bytes live at one step
    shapes: dict = field(default_factory=dict)    # slot -> shape, for every value of the graph
    kernel_calls: list = field(default_factory=list)   # the fused kernel each KERNEL step calls, in order
    # The replay takes its inputs over: it empties the list it is given and drops each array once
    # no later step reads it (a compiled model's backward frees saved values as it goes).
    consumes_inputs: bool = False
    # Input and captured slots whose arrays are C-contiguous on every replay (their layout is guarded):
    # a fused kernel may take them reshaped (compiler/coalesce.py)
    contiguous: frozenset = frozenset()
