"""An op's working memory in the arena: conv2d and its gradients take their temporaries (the padded
input, im2col columns) from planned bytes live during the op only, and max_pool2d writes its values
and indices into planned buffers. Replays stay eager's bits; the replay itself allocates almost
nothing; the interpreter (the oracle) agrees."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from staticgrad.bench.measure import peak_bytes
from staticgrad.bench.models import training_step
from staticgrad.compiler.planner import plan_program
from staticgrad.ops import OPS
from staticgrad.ops.scratch import Scratch, scratch_bytes
from staticgrad.runtime.interpreter import Interpreter
from staticgrad.runtime.program import MULTI


def _twin_steps(stride, padding, pool, shape):
    """(eager model, eager step, compiled model, compiled step) of one CNN from the same weights."""
    def make():
        sg.manual_seed(0)
        features = sg.nn.Sequential(
            sg.nn.Conv2d(2, 6, 3, stride=stride, padding=padding), sg.nn.ReLU(), sg.nn.MaxPool2d(pool),
            sg.nn.Conv2d(6, 4, 3, padding=padding), sg.nn.ReLU(), sg.nn.Flatten())
        width = features(sg.zeros(1, *shape[1:])).shape[1]
        model = sg.nn.Sequential(features, sg.nn.Linear(width, 3))
        return model, training_step(sg, model, sg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    (eager_model, eager), (compiled_model, step) = make(), make()
    return eager_model, eager, compiled_model, sg.compile(step)


@pytest.mark.parametrize("stride,padding,pool,shape", [(1, 1, 2, (16, 2, 13, 12)), (2, 0, 2, (16, 2, 17, 16)),
                                                       (1, (2, 1), 3, (16, 2, 13, 12))],
                         ids=["pad1", "stride2-nopad", "rect-pad-pool3"])
def test_a_cnn_step_replays_eager_bits_with_its_temporaries_in_the_arena(stride, padding, pool, shape):
    eager_model, eager, compiled_model, step = _twin_steps(stride, padding, pool, shape)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = sg.tensor(rng.standard_normal(shape).astype(np.float32))
        y = sg.tensor(rng.standard_normal((shape[0], 3)).astype(np.float32))
        assert eager(x, y).item() == step(x, y).item()
    for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
        assert pe.detach().numpy().tobytes() == pc.detach().numpy().tobytes()
    assert step.stats.replays >= 3
    plan = next(p for p in step.plans if p.replayable)
    program = plan.program
    working = {s.op: s.scratch for s in program.steps if s.scratch}
    assert set(working) >= {"conv2d", "conv2d_weight_grad", "conv2d_input_grad"}, working
    for s in program.steps:   # each within the arena; pooled values and indices have planned buffers
        if s.scratch:
            assert s.scratch[0] + s.scratch[1] <= program.arena_bytes
        if s.op == "max_pool2d":
            assert s.mode == MULTI and all(spec.offset is not None for spec in program.buffers
                                          if spec.slot in s.outputs)
    assert program.lower_bound <= program.arena_bytes
    largest = max(s.scratch[1] for s in program.steps if s.scratch)
    x = sg.tensor(rng.standard_normal(shape).astype(np.float32))
    y = sg.tensor(rng.standard_normal((shape[0], 3)).astype(np.float32))
    allocated = peak_bytes(lambda: step(x, y))
    assert allocated < largest / 2, f"the replay allocated {allocated} bytes: its temporaries ({largest}) itself?"


def test_the_interpreter_gives_the_generated_replays_bits():
    _, _, _, step = _twin_steps(1, 1, 2, (4, 2, 10, 10))
    rng = np.random.default_rng(1)
    data = [tuple(sg.tensor(rng.standard_normal(shape).astype(np.float32)) for shape in ((4, 2, 10, 10), (4, 3)))
            for _ in range(3)]
    for x, y in data:
        step(x, y)
    plan = next(p for p in step.plans if p.replayable)
    x, y = data[0]
    bound = plan.bind([x, y], copy=True)
    interpreted = Interpreter(plan_program(plan.record.graph)).run(bound.inputs, bound.captured, bound.scalars)
    bound = plan.bind([x, y], copy=True)
    generated = plan.compiled_replay.run(bound.inputs, bound.captured, bound.scalars)
    for a, b in zip(interpreted, generated):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("op,args,attrs", [
    ("conv2d", [(3, 2, 9, 8), (4, 2, 3, 3), (4,)], {"stride": (2, 1), "padding": (1, 2)}),
    ("conv2d", [(3, 2, 9, 8), (4, 2, 3, 3)], {"stride": (1, 1), "padding": (0, 0)}),
    ("conv2d_input_grad", [(3, 4, 5, 8), (4, 2, 3, 3)], {"input_size": (9, 8), "stride": (2, 1), "padding": (1, 1)}),
    ("conv2d_weight_grad", [(3, 4, 5, 8), (3, 2, 9, 8)], {"kernel_size": (3, 3), "stride": (2, 1),
                                                          "padding": (1, 1)}),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_conv_op_computes_the_same_bits_in_working_memory_of_the_declared_size(op, args, attrs, dtype):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in args]
    opdef = OPS[op]
    expected = opdef.forward(*arrays, **attrs)
    size = opdef.scratch([a.shape for a in arrays], [a.dtype for a in arrays], attrs)
    assert size > 0
    memory = np.full(size, 0xAB, np.uint8)   # garbage the op must not read
    out = np.full(expected.shape, np.nan, dtype)
    assert opdef.forward(*arrays, out=out, scratch=memory, **attrs) is out
    assert out.tobytes() == expected.tobytes()
    with pytest.raises(ValueError, match="too small"):
        opdef.forward(*arrays, out=out, scratch=memory[:size // 2], **attrs)


def test_scratch_hands_out_aligned_temporaries_and_allocates_without_memory():
    listed = [((3, 5), np.float32), ((7,), np.float64)]
    memory = np.zeros(scratch_bytes(listed), np.uint8)
    assert scratch_bytes(listed) == 64 + 64
    carver = Scratch(memory)
    first, second = (carver.take(shape, dtype) for shape, dtype in listed)
    assert np.shares_memory(first, memory) and np.shares_memory(second, memory)
    assert not np.shares_memory(first, second) and second.ctypes.data - first.ctypes.data == 64
    free = Scratch(None).take((3, 5), np.float32)
    assert free.shape == (3, 5) and not np.shares_memory(free, memory)


def test_max_pool2d_fills_the_outputs_it_is_handed_in_every_dtype():
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64, np.float16):
        x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
        attrs = {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 0)}
        values, indices = OPS["max_pool2d"].forward(x, **attrs)
        out = (np.empty_like(values), np.empty_like(indices))
        result = OPS["max_pool2d"].forward(x, out=out, **attrs)
        assert result[0] is out[0] and result[1] is out[1]
        assert out[0].tobytes() == values.tobytes() and out[1].tobytes() == indices.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_layer_norm_and_its_backward_fill_the_outputs_they_are_handed(dtype):
    rng = np.random.default_rng(4)
    x, g = (rng.standard_normal((3, 4, 6)).astype(dtype) for _ in range(2))
    weight, bias = (rng.standard_normal(6).astype(dtype) for _ in range(2))
    attrs = {"normalized_shape": (6,), "eps": 1e-5}
    expected = OPS["layer_norm_affine"].forward(x, weight, bias, **attrs)
    out = tuple(np.full_like(a, np.nan) for a in expected)
    result = OPS["layer_norm_affine"].forward(x, weight, bias, out=out, **attrs)
    assert all(r is o and r.tobytes() == e.tobytes() for r, o, e in zip(result, out, expected))
    _, mean, rstd = expected
    grads = OPS["layer_norm_backward_affine"].forward(g, x, mean, rstd, weight, normalized_shape=(6,))
    out = tuple(np.full_like(a, np.nan) for a in grads)
    result = OPS["layer_norm_backward_affine"].forward(g, x, mean, rstd, weight, out=out, normalized_shape=(6,))
    assert all(r is o and r.tobytes() == e.tobytes() for r, o, e in zip(result, out, grads))


def test_a_layer_norm_step_replays_eager_bits_with_its_outputs_planned():
    def make():
        sg.manual_seed(0)
        model = sg.nn.Sequential(sg.nn.Linear(8, 16), sg.nn.LayerNorm(16), sg.nn.Tanh(), sg.nn.Linear(16, 2))
        return model, training_step(sg, model, sg.optim.Adam(model.parameters(), lr=0.01))
    (eager_model, eager), (compiled_model, step) = make(), make()
    step = sg.compile(step)
    rng = np.random.default_rng(5)
    for _ in range(5):
        x, y = (sg.tensor(rng.standard_normal(shape).astype(np.float32)) for shape in ((6, 8), (6, 2)))
        assert eager(x, y).item() == step(x, y).item()
    for pe, pc in zip(eager_model.parameters(), compiled_model.parameters()):
        assert pe.detach().numpy().tobytes() == pc.detach().numpy().tobytes()
    program = next(p for p in step.plans if p.replayable).program
    buffered = {spec.slot for spec in program.buffers}   # in the arena, or a result's own array
    norms = [s for s in program.steps if s.op.startswith("layer_norm")]
    assert len(norms) == 2 and all(set(s.outputs) <= buffered for s in norms)
    assert any(spec.offset is not None for spec in program.buffers if spec.slot in norms[0].outputs)
