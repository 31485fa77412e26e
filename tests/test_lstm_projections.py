"""nn.LSTM with projections (proj_size > 0) against PyTorch from identical weights: parameter names
and shapes (weight_hr_l{k}), outputs, final states (h_n of size proj_size, c_n of hidden_size),
gradients of inputs, states and every parameter, over stacked, bidirectional, batch_first and
unbatched inputs; errors; finite differences; a compiled training step replays eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import finite_difference_check, same_error, torch
from tests.test_rnn import check_module, randn

# PyTorch's own note that its oneDNN path has no projections (it falls back to its native code)
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

CASES = [
    ("one_layer", lambda lib: lib.nn.LSTM(3, 5, proj_size=2), lambda m, x: m(x), [randn(4, 2, 3)]),
    ("two_layers_with_state", lambda lib: lib.nn.LSTM(3, 5, num_layers=2, proj_size=3),
     lambda m, x, h, c: m(x, (h, c)), [randn(4, 2, 3), randn(2, 2, 3), randn(2, 2, 5, seed=1)]),
    ("bidirectional_two_layers", lambda lib: lib.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2),
     lambda m, x, h, c: m(x, (h, c)), [randn(5, 2, 3), randn(4, 2, 2), randn(4, 2, 4, seed=1)]),
    ("batch_first_no_bias", lambda lib: lib.nn.LSTM(3, 4, bias=False, batch_first=True, proj_size=1),
     lambda m, x: m(x), [randn(2, 5, 3)]),
    ("unbatched_with_state", lambda lib: lib.nn.LSTM(3, 4, proj_size=2, bidirectional=True),
     lambda m, x, h, c: m(x, (h, c)), [randn(5, 3), randn(2, 2), randn(2, 4, seed=1)]),
    ("dropout_eval", lambda lib: lib.nn.LSTM(3, 4, num_layers=3, dropout=0.5, proj_size=2).eval(),
     lambda m, x: m(x), [randn(3, 2, 3)]),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case, dtype):
    _, build, call, arrays = case
    torch.manual_seed(0)
    check_module(build(torch), build(sg), arrays, call, dtype)


def test_parameters_repr_and_all_weights_follow_torch():
    for kwargs in (dict(num_layers=2, bidirectional=True, proj_size=3), dict(proj_size=1, bias=False)):
        s, t = sg.nn.LSTM(2, 4, **kwargs), torch.nn.LSTM(2, 4, **kwargs)
        assert [(n, tuple(p.shape)) for n, p in s.named_parameters()] == \
               [(n, tuple(p.shape)) for n, p in t.named_parameters()]
        assert repr(s) == repr(t)
        assert [[tuple(w.shape) for w in layer] for layer in s.all_weights] == \
               [[tuple(w.shape) for w in layer] for layer in t.all_weights]
        assert s.proj_size == t.proj_size
        s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})


def test_output_node_names_match_torch():
    names = []
    for lib in (torch, sg):
        out, (h, c) = lib.nn.LSTM(2, 4, proj_size=3)(lib.randn(5, 2, 2))
        bi, _ = lib.nn.LSTM(2, 4, proj_size=3, bidirectional=True)(lib.randn(5, 2, 2))
        names.append([t.grad_fn.name() if lib is sg else type(t.grad_fn).__name__ for t in (out, h, c, bi)])
    assert names[0] == names[1]


ERRORS = [
    ("negative", lambda lib: lib.nn.LSTM(3, 4, proj_size=-1)),
    ("not_smaller", lambda lib: lib.nn.LSTM(3, 4, proj_size=4)),
    ("hidden_size", lambda lib: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3), (lib.zeros(1, 2, 4),
                                                                                   lib.zeros(1, 2, 4)))),
    ("cell_size", lambda lib: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3), (lib.zeros(1, 2, 2),
                                                                                 lib.zeros(1, 2, 2)))),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_match_torch(case):
    same_error(case[1])


def test_gradient_matches_finite_differences():
    sg.manual_seed(0)
    lstm = sg.nn.LSTM(2, 3, proj_size=2, bidirectional=True).double()

    def run(x, h):
        out, (h_n, c_n) = lstm(x, (h, sg.zeros(2, 2, 3, dtype=sg.float64)))
        return out.sum(-1) + h_n.sum() + c_n.sum()
    finite_difference_check(run, [randn(3, 2, 2), randn(2, 2, 2)])


def test_compiled_training_step_replays_eager():
    def make():
        sg.manual_seed(0)
        model = sg.nn.ModuleDict({"lstm": sg.nn.LSTM(3, 6, num_layers=2, proj_size=2), "head": sg.nn.Linear(2, 1)})
        opt = sg.optim.Adam(model.parameters(), lr=0.01)

        def step(x):
            opt.zero_grad()
            out, (_h, c) = model["lstm"](x)
            loss = model["head"](out).pow(2).mean() + c.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = sg.tensor(rng.standard_normal((4, 2, 3)).astype(np.float32))
        np.testing.assert_array_equal(compiled(x).detach().numpy(), eager(x).detach().numpy())
    assert compiled.stats.replays >= 2
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)
