"""staticgrad.utils.checkpoint: activation checkpointing. A checkpointed function keeps none of its
intermediate activations for backward; backward runs it again to get them.

``use_reentrant=False`` (what PyTorch recommends): the function runs with grad on under
saved-tensor hooks that keep a placeholder in place of every tensor its nodes save; the graph
and its node names are those of the plain call. Backward's first read of a placeholder runs the
function again under hooks that collect the saved tensors in the order they were saved (stopping
once all are back), with the random state of the first run, so dropout draws the same mask.
``context_fn`` returns two context managers, one around the forward run and one around each
recompute (the same object each time).

``use_reentrant=True`` (PyTorch 2.13's default, with a warning, when ``use_reentrant`` is not
passed): the function runs under no_grad inside one ``CheckpointFunctionBackward`` node, whose
backward runs it again with grad on and calls ``backward`` on its outputs (so it cannot serve
``autograd.grad`` or ``backward(inputs=...)``, as in PyTorch).
"""

from __future__ import annotations

import contextlib
import warnings

from staticgrad._eager.engine import backward as _backward
from staticgrad._eager.engine import is_checkpoint_valid
from staticgrad._eager.generator import default_generator
from staticgrad._eager.grad_mode import enable_grad, is_grad_enabled, no_grad
from staticgrad._eager.saved_hooks import saved_tensors_hooks
from staticgrad._eager.tensor import Tensor
from staticgrad._state import Tracing
from staticgrad.autograd.function import Function
from staticgrad.nn.layers import Sequential

__all__ = ["CheckpointError", "checkpoint", "checkpoint_sequential", "detach_variable", "noop_context_fn",
           "set_checkpoint_early_stop"]

# (PyTorch's messages end with a tip about its debug mode, which staticgrad does not have.)
_DEBUG_TIP = ("\nThe checkpointed function must save the same tensors, in the same order, when backward runs it "
              "again: keep what it does independent of state that changes between the two runs.\n")


class CheckpointError(RuntimeError):
    """The recomputation in backward did not save what the first run saved (a function whose
    work depends on something other than its inputs and the random state)."""


class _EarlyStop:
    """The early_stop that ``set_checkpoint_early_stop`` imposes on checkpoints run inside it (None: each
    call's own)."""

    forced: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Context manager: the non-reentrant checkpoints whose forward runs inside stop their recompute
    early (``True``) or run the whole function again (``False``), whatever their ``early_stop``."""
    previous, _EarlyStop.forced = _EarlyStop.forced, enable
    try:
        yield
    finally:
        _EarlyStop.forced = previous


def noop_context_fn():
    """checkpoint's default context_fn: two context managers that do nothing."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """Each tensor of ``inputs`` detached, with its requires_grad kept (the reentrant recompute's inputs)."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for value in inputs:
        if not isinstance(value, Tensor):
            out.append(value)
            continue
        detached = value.detach()
        detached.requires_grad = value.requires_grad
        out.append(detached)
    return tuple(out)


class _RandomState:
    """The default generator's state at the checkpointed call, put back around a recompute."""

    def __init__(self):
        self.state = default_generator.get_state()

    @contextlib.contextmanager
    def restored(self):
        surrounding = default_generator.get_state()
        default_generator.set_state(self.state)
        try:
            yield
        finally:
            default_generator.set_state(surrounding)


def _draw_position():
    """Where the default generator stands: changes with every draw from it."""
    return default_generator.numpy_generator().bit_generator.state


def _refuse_random_replay(function, before) -> None:
    """While a compiled function is traced: a checkpointed segment that draws random numbers with
    preserve_rng_state cannot be replayed (a replay cannot put the random state back for the recompute)."""
    tracer = Tracing.tracer
    if tracer is not None and _draw_position() != before:
        tracer.fail(f"checkpoint({getattr(function, '__name__', 'function')}) draws random numbers and restores the "
                    "random state to draw them again in backward, which a replay cannot do; keep random ops "
                    "(dropout) outside the checkpointed function, or pass preserve_rng_state=False")


# ---- use_reentrant=False ------------------------------------------------------------------------

class _Placeholder:
    """What a node saves for a tensor inside a checkpointed call: its position in save order."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class _StopRecomputation(Exception):
    pass


class _CheckpointFrame:
    """One checkpointed call: how to run it again, what its first run saved (shape, dtype per
    placeholder), and the tensors a recompute brought back that backward has not read yet."""

    def __init__(self, function, args, kwargs, random_state, early_stop: bool, check: bool,
                 recompute_context):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.random_state, self.early_stop, self.check = random_state, early_stop, check
        self.recompute_context = recompute_context
        self.metadata = []
        self.recomputed = {}

    def pack(self, tensor):
        self.metadata.append((tuple(tensor.shape), tensor.dtype))
        return _Placeholder(len(self.metadata) - 1)

    def unpack(self, placeholder):
        if placeholder.index not in self.recomputed:
            self.recompute()
        return self.recomputed.pop(placeholder.index)

    def recompute(self) -> None:
        collected = []
        expected = len(self.metadata)

        def collect(tensor):
            if len(collected) >= expected:
                raise CheckpointError("staticgrad.utils.checkpoint: trying to save more tensors during recomputation "
                                      "than during the original forward pass.\n" + _DEBUG_TIP)
            collected.append(tensor.detach() if tensor.requires_grad else tensor)
            if self.early_stop and len(collected) == expected:
                raise _StopRecomputation

        def never(_):
            raise CheckpointError("staticgrad.utils.checkpoint: a tensor saved during recomputation was read")

        random = self.random_state.restored() if self.random_state is not None else contextlib.nullcontext()
        # context_fn's second context manager, the same object on every recompute, entered last (the
        # early stop leaves it by the exception that ends the recompute)
        try:
            with random, enable_grad(), saved_tensors_hooks(collect, never), self.recompute_context:
                self.function(*self.args, **self.kwargs)
        except _StopRecomputation:
            pass
        self._check(collected)
        self.recomputed = dict(enumerate(collected))

    def _check(self, collected: list) -> None:
        if len(collected) != len(self.metadata):
            raise CheckpointError("staticgrad.utils.checkpoint: A different number of tensors was saved during the "
                                  "original forward and recomputation.\n"
                                  f"Number of tensors saved during forward: {len(self.metadata)}\n"
                                  f"Number of tensors saved during recomputation: {len(collected)}.\n" + _DEBUG_TIP)
        if not self.check:
            return
        different = ""
        for k, (tensor, (shape, dtype)) in enumerate(zip(collected, self.metadata)):
            if (tuple(tensor.shape), tensor.dtype) != (shape, dtype):
                different += (f"tensor at position {k}:\nsaved metadata: {{'shape': {shape}, 'dtype': {dtype}}}\n"
                              f"recomputed metadata: {{'shape': {tuple(tensor.shape)}, 'dtype': {tensor.dtype}}}\n")
        if different:
            raise CheckpointError("staticgrad.utils.checkpoint: Recomputed values for the following tensors have "
                                  f"different metadata than during the forward pass.\n{different}.\n" + _DEBUG_TIP)


def _checkpoint_without_reentrant(function, preserve: bool, context_fn, determinism_check: str, early_stop: bool,
                                  args, kwargs):
    """``context_fn()`` gives two context managers: the first wraps the forward run (inside the
    saved-tensor hooks), the second each recompute (inside the restored random state and grad mode)."""
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got " + str(determinism_check))
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():   # nothing to recompute: a plain call, outside forward_context too (as PyTorch)
        return function(*args, **kwargs)
    random_state = _RandomState() if preserve else None
    if _EarlyStop.forced is not None:
        early_stop = _EarlyStop.forced
    frame = _CheckpointFrame(function, args, kwargs, random_state, early_stop, determinism_check == "default",
                             recompute_context)
    before = _draw_position() if preserve and Tracing.tracer is not None else None
    completed = False
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        result = function(*args, **kwargs)
        completed = True
    if not completed:
        raise RuntimeError("staticgrad.utils.checkpoint: the forward context provided by context_fn suppressed an "
                           "exception raised during the checkpointed forward. This is not supported because "
                           "checkpoint cannot return a value for a failed forward.")
    if before is not None:
        _refuse_random_replay(function, before)
    return result


# ---- use_reentrant=True -------------------------------------------------------------------------

class CheckpointFunction(Function):
    """The reentrant checkpoint's node (``CheckpointFunctionBackward``): forward under no_grad,
    backward runs the function again and backpropagates through that run."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        if not any(a.requires_grad for a in args if isinstance(a, Tensor)):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=4)
        ctx.run_function = run_function
        ctx.random_state = _RandomState() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        before = _draw_position() if preserve_rng_state and Tracing.tracer is not None else None
        with no_grad():
            outputs = run_function(*args)
        if before is not None:
            _refuse_random_replay(run_function, before)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if not is_checkpoint_valid():
            raise RuntimeError("When use_reentrant=True, staticgrad.utils.checkpoint is incompatible with .grad() or "
                               "passing an `inputs` parameter to .backward(). To resolve this error, you can either "
                               "set use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        inputs = list(ctx.inputs)
        for index, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[index] = tensor
        random = ctx.random_state.restored() if ctx.random_state is not None else contextlib.nullcontext()
        with random:
            detached = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in detached)


# ---- the public functions -----------------------------------------------------------------------

def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its activations for backward (recomputed there)."""
    if use_reentrant is None:
        warnings.warn("staticgrad.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
                      "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check, early_stop, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant: bool | None = None, **kwargs):
    """A sequence of modules or functions in ``segments`` chunks, each but the last checkpointed."""
    if use_reentrant is None:
        warnings.warn("staticgrad.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run(start, end):
        def forward(value):
            for j in range(start, end + 1):
                value = functions[j](value)
            return value
        return forward

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
