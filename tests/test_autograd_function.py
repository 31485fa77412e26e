"""torch.autograd.Function against PyTorch: values, gradients, double backward, node names, the ctx
(saved tensors freed by backward and checked for in-place changes, needs_input_grad, materialized or
None gradients, non-differentiable and dirty outputs, setup_context), PyTorch's errors, and a compiled
training step using one replaying eager's bits."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, torch


def functions(lib):
    """The same Function classes written for ``lib``."""
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            ctx.save_for_backward(a)
            ctx.k = k
            return a * a * k

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g * ctx.k, None

    class ExpSavedOutput(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            out = a.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return g * out

    class MulAdd(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b, a + b

        @staticmethod
        def backward(ctx, g_mul, g_add):
            a, b = ctx.saved_tensors
            return g_mul * b + g_add, g_mul * a + g_add

    class NoMaterialize(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g2, g3):
            total = 0
            if g2 is not None:
                total = total + 2 * g2
            if g3 is not None:
                total = total + 3 * g3
            return total

    class MaxWithIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            values, index = a.max(dim=1)
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            ctx.shape = a.shape
            return values, index

        @staticmethod
        def backward(ctx, g, _g_index):
            (index,) = ctx.saved_tensors
            grad = lib.zeros(ctx.shape, dtype=g.dtype)
            return grad.scatter(1, index.unsqueeze(1), g.unsqueeze(1))

    class ScaleSetup(lib.autograd.Function):
        @staticmethod
        def forward(a, scale):
            return a * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.scale = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None

    class Identity(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class GradReverse(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, alpha):
            ctx.alpha = alpha
            return a.view_as(a)

        @staticmethod
        def backward(ctx, g):
            return g.neg() * ctx.alpha, None

    return {"Square": Square, "ExpSavedOutput": ExpSavedOutput, "MulAdd": MulAdd, "NoMaterialize": NoMaterialize,
            "MaxWithIndex": MaxWithIndex, "ScaleSetup": ScaleSetup, "Identity": Identity, "GradReverse": GradReverse}


FNS = {"torch": functions(torch), "staticgrad": functions(sg)}


def fn_of(lib, name):
    return FNS[lib.__name__][name]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = [
    ("square", lambda lib, x: fn_of(lib, "Square").apply(x, 3.0), [rand(3, 4)], True),
    ("exp_saved_output", lambda lib, x: fn_of(lib, "ExpSavedOutput").apply(x), [rand(3, 4)], True),
    ("two_outputs", lambda lib, x, y: fn_of(lib, "MulAdd").apply(x, y), [rand(3), rand(3, seed=1)], True),
    ("one_output_used", lambda lib, x, y: fn_of(lib, "MulAdd").apply(x, y)[1] * 2, [rand(3), rand(3, seed=1)], True),
    ("no_materialize", lambda lib, x: fn_of(lib, "NoMaterialize").apply(x)[0], [rand(3)], False),
    ("non_differentiable_index", lambda lib, x: fn_of(lib, "MaxWithIndex").apply(x), [rand(3, 4)], False),
    ("setup_context", lambda lib, x: fn_of(lib, "ScaleSetup").apply(x, 2.5), [rand(3)], True),
    ("identity_returns_input", lambda lib, x: fn_of(lib, "Identity").apply(x), [rand(3)], False),
    ("grad_reverse", lambda lib, x: fn_of(lib, "GradReverse").apply(x * 2, 0.5).sum(), [rand(3)], False),
]


@pytest.mark.parametrize("name,fn,arrays,double", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, arrays, double):
    compare(fn, arrays, atol=1e-12, double=double)


def test_gradients_match_finite_differences():
    finite_difference_check(lambda x, y: fn_of(sg, "MulAdd").apply(x, y)[0], [rand(3), rand(3, seed=1)])


def test_node_and_ctx_as_torch():
    seen = []
    for lib in (torch, sg):
        a = lib.ones(2, requires_grad=True)
        out = fn_of(lib, "Square").apply(a, 2.0)
        assert out.grad_fn.name() == "SquareBackward" and out.requires_grad
        class Probe(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, k):
                seen.append(ctx.needs_input_grad)
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g, g, None

        Probe.apply(a, lib.ones(2), 3)
        assert seen[-1] == (True, False, False)
        with lib.no_grad():
            assert fn_of(lib, "Square").apply(a, 2.0).grad_fn is None
        assert fn_of(lib, "Square").apply(lib.ones(2), 2.0).grad_fn is None
        values, index = fn_of(lib, "MaxWithIndex").apply(lib.ones(2, 3, requires_grad=True))
        assert values.requires_grad and not index.requires_grad and index.grad_fn is None


def test_saved_tensors_are_freed_and_checked_as_torch():
    for lib in (torch, sg):
        a = lib.ones(2, requires_grad=True)
        out = fn_of(lib, "Square").apply(a * 1, 2.0)
        out.sum().backward(retain_graph=True)
        out.sum().backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            out.sum().backward()
        b = a * 1
        out = fn_of(lib, "Square").apply(b, 2.0)
        with lib.no_grad():
            b.add_(1)
        with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                               "modified by an inplace operation"):
            out.sum().backward()


def test_errors_as_torch():
    for lib in (torch, sg):
        class TooFew(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(RuntimeError, match=r"function TooFewBackward returned an incorrect number of gradients "
                                               r"\(expected 2, got 1\)"):
            TooFew.apply(lib.ones(2, requires_grad=True), lib.ones(2)).sum().backward()

        class SaveNumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a, 3)
                return a

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type "
                                            "int"):
            SaveNumber.apply(lib.ones(2, requires_grad=True))


def test_mark_dirty_in_place_forward_as_torch():
    for lib in (torch, sg):
        class AddOneInPlace(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                a.add_(1)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 3

        leaf = lib.ones(2, requires_grad=True)
        x = leaf * 2
        y = AddOneInPlace.apply(x)
        assert y is x and x.grad_fn.name() == "AddOneInPlaceBackward"
        y.sum().backward()
        assert leaf.grad.tolist() == [6.0, 6.0] and x.tolist() == [3.0, 3.0]


def test_variable_is_the_tensor_type_as_torch():
    for lib in (torch, sg):
        x = lib.ones(2)
        v = lib.autograd.Variable(x, requires_grad=True)
        assert v is not x and v.requires_grad and not x.requires_grad and v.grad_fn is None
        assert isinstance(x, lib.autograd.Variable) and not isinstance(2, lib.autograd.Variable)
        v.data.fill_(3)
        assert x.tolist() == [3.0, 3.0]


def test_once_differentiable_runs_backward_without_a_graph():
    class Cube(sg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        @sg.autograd.function.once_differentiable
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a * a * g

    a = sg.tensor([1.0, 2.0], requires_grad=True)
    (grad,) = sg.autograd.grad(Cube.apply(a).sum(), a, create_graph=True)
    assert grad.tolist() == [3.0, 12.0] and grad.grad_fn is None


def test_compiled_step_with_a_function_replays_eager():
    reverse = fn_of(sg, "GradReverse")
    square = fn_of(sg, "Square")

    def make():
        w = sg.tensor(rand(4, 3, seed=3), requires_grad=True)
        v = sg.tensor(rand(3, seed=4), requires_grad=True)

        def step(x):
            h = reverse.apply(x @ w, 0.5)
            out = square.apply(h * v, 1.5)
            loss = out.sum()
            loss.backward()
            return loss
        return step, (w, v)

    (eager, eager_params), (compiled, compiled_params) = make(), make()
    compiled = sg.compile(compiled)
    for seed in range(4):
        x = sg.tensor(rand(2, 4, seed=10 + seed))
        for p in eager_params + compiled_params:
            p.grad = None
        le, lc = eager(x), compiled(x)
        assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
        for a, b in zip(eager_params, compiled_params):
            assert b.grad.numpy().tobytes() == a.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2
