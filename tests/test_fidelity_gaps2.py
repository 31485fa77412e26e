"""More PyTorch behaviours staticgrad once lacked: node classes that refuse construction, index
and mask inputs that are no edges of their node, mixed-dtype writes into a tensor that requires
grad, and the refusals around uint16/32/64. Each compares staticgrad with PyTorch."""

from __future__ import annotations

import pytest

import staticgrad as sg
from tests.oracle import same_error

# ---- constructing a node class -----------------------------------------------------------------

NODE_MAKERS = {
    "mul": lambda lib, x: x * 2,
    "add": lambda lib, x: x + 1,
    "sum": lambda lib, x: x.sum(),
    "exp": lambda lib, x: x.exp(),
    "unbind": lambda lib, x: x.unbind(0)[1],
    "index": lambda lib, x: x[lib.tensor([0, 2])],
    "copy_slices": lambda lib, x: _set_first(x * 1),
    "accumulate_grad": lambda lib, x: (x * 2).grad_fn.next_functions[0][0],
}


def _set_first(y):
    y[0] = 5.0
    return y


def _node(lib, name):
    out = NODE_MAKERS[name](lib, lib.arange(3.0, requires_grad=True))
    return out.grad_fn if isinstance(out, lib.Tensor) else out


@pytest.mark.parametrize("args", [(), (1,), ("x", 2)])
@pytest.mark.parametrize("name", NODE_MAKERS)
def test_a_node_class_refuses_construction_as_pytorchs(name, args):
    same_error(lambda lib: type(_node(lib, name))(*args))


def test_a_node_class_refuses_construction_with_keywords_as_pytorchs():
    same_error(lambda lib: type(_node(lib, "mul"))(a=1))
    same_error(lambda lib: type(_node(lib, "accumulate_grad"))(variable=lib.ones(1)))


def test_the_abstract_autograd_node_refuses_construction_as_pytorchs():
    same_error(lambda lib: lib.autograd.graph.Node())
    assert isinstance(_node(sg, "mul"), sg.autograd.graph.Node)
    assert isinstance(_node(sg, "accumulate_grad"), sg.autograd.graph.Node)


def test_a_replayed_outputs_node_class_refuses_construction():
    w = sg.ones(3, requires_grad=True)

    @sg.compile
    def f(x):
        return x * w

    for _ in range(2):
        y = f(sg.ones(3))
    with pytest.raises(TypeError, match=f"cannot create '{type(y.grad_fn).__name__}' instances"):
        type(y.grad_fn)()
