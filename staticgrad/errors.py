"""The exceptions staticgrad raises for users, each saying what went wrong and what to do.

A leaf module: every layer may import it, it imports nothing from staticgrad.
"""

import re

BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


def modified_inplace_message(type_name: str, shape: tuple, version: int, expected: int, output_of=None) -> str:
    """PyTorch's wording for a saved tensor changed by an in-place op before backward read it;
    ``output_of`` is (output number, node name) when the tensor is an op's output."""
    dims = ", ".join(str(d) for d in shape)
    where = ""
    if output_of is not None:
        number, node = output_of
        where = f", which is output {number} of {re.sub(r'Backward[0-9]*$', '', node)},"
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{type_name} [{dims}]]{where} is at version {version}; expected version {expected} "
        "instead. Hint: the tensor was saved for backward and then changed in place; clone it "
        "before the in-place op, or do the in-place op after backward."
    )


class TraceError(RuntimeError):
    """A compiled function did something that a recorded plan cannot replay faithfully.

    Causes: reading a traced value into Python (``.item()``, ``bool()``, ``float()``,
    ``.numpy()``, printing), data-dependent control flow, building a tensor from a NumPy array
    inside the function, keeping a tensor made inside the function in outside state, or an
    in-place change through a view. Fixes: move the Python-side read out of the compiled
    function, pass data in as arguments, return what you want to keep, or compile with
    ``fallback="eager"`` to run such calls eagerly.
    """


class PlanError(RuntimeError):
    """A saved plan cannot run on the inputs it was given (wrong count, shape or dtype)."""


class LinAlgError(RuntimeError):
    """A linear-algebra routine met a matrix it cannot handle (a singular matrix to invert), as
    torch.linalg.LinAlgError; a RuntimeError, so code catching that still catches it."""
