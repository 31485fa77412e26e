"""PyTorch behaviours staticgrad once lacked: node classes named as PyTorch's (``type(t.grad_fn)``),
Python bools as indices, cat skipping legacy empty 1-D tensors, and the unsigned dtypes uint16/32/64.
Each compares staticgrad with PyTorch."""

from __future__ import annotations

import copy
import pickle
import re

import pytest

import staticgrad as sg
from tests.oracle import same_error, torch

# ---- node classes ------------------------------------------------------------------------------

NODE_MAKERS = {
    "add": lambda lib, x: x + 1,
    "mul": lambda lib, x: x * x,
    "sum": lambda lib, x: x.sum(),
    "matmul": lambda lib, x: x.reshape(2, 3) @ lib.ones(3, 2),
    "copy_slices": lambda lib, x: _set_first(x * 1),
    "unbind": lambda lib, x: x.unbind(0)[1],
    "index": lambda lib, x: x[[0, 2]],
}


def _set_first(y):
    y[0] = 5.0
    return y


@pytest.mark.parametrize("name", NODE_MAKERS)
def test_a_nodes_class_is_named_as_pytorchs(name):
    got = []
    for lib in (torch, sg):
        fn = NODE_MAKERS[name](lib, lib.arange(6.0, requires_grad=True)).grad_fn
        got.append((type(fn).__name__, str(type(fn)), re.sub(r"0x[0-9a-f]+", "ADDR", repr(fn)),
                    re.sub(r"0x[0-9a-f]+", "ADDR", str(fn))))
    assert got[1] == got[0]


def test_a_leafs_accumulate_grad_class_prints_as_pytorchs():
    got = []
    for lib in (torch, sg):
        acc = (lib.ones(2, requires_grad=True) * 2).grad_fn.next_functions[0][0]
        got.append((type(acc).__name__, str(type(acc))))
    assert got[1] == got[0] == ("AccumulateGrad", "<class 'AccumulateGrad'>")


def test_node_classes_are_shared_per_name_and_are_nodes():
    x = sg.ones(3, requires_grad=True)
    a, b, c = (x * 2).grad_fn, (x * x).grad_fn, (x + x).grad_fn
    assert type(a) is type(b) and type(a) is not type(c)
    assert isinstance(a, sg.autograd.graph.Node) and isinstance(c, sg.autograd.Node)
    assert a.name() == type(a).__name__ == "MulBackward0"


def test_a_custom_functions_node_class_lives_in_the_function_module():
    got = []
    for lib in (torch, sg):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        fn = Double.apply(lib.ones(2, requires_grad=True)).grad_fn
        got.append((type(fn).__name__, str(type(fn)).replace("torch.", "staticgrad."),
                    re.sub(r"0x[0-9a-f]+", "ADDR", repr(fn)).replace("torch.", "staticgrad."), fn.name()))
    assert got[1] == got[0]


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_node_refuses_copying_and_pickling_as_pytorchs(how):
    for make in (lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn,
                 lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn.next_functions[0][0]):
        same_error(lambda lib, make=make: how(make(lib)))


def test_a_missing_attribute_names_the_node_class():
    same_error(lambda lib: (lib.ones(2, requires_grad=True) * 2).grad_fn.no_such_thing)


def test_a_replayed_output_has_the_eager_nodes_class():
    lin = sg.nn.Linear(3, 1)

    @sg.compile
    def step(x):
        lin.zero_grad()
        loss = lin(x).pow(2).mean()
        loss.backward()
        return loss

    x = sg.randn(4, 3)
    names = []
    for _ in range(3):
        replays = step.stats.replays
        loss = step(x)
        names.append((type(loss.grad_fn).__name__, re.sub(r"0x[0-9a-f]+", "ADDR", repr(loss.grad_fn))))
    assert step.stats.replays == replays + 1, "the last call replayed"
    assert names == [("MeanBackward0", "<MeanBackward0 object at ADDR>")] * 3
    assert isinstance(loss.grad_fn, sg.autograd.graph.Node)
