"""GRUCell, GRU, RNNCell, RNN against PyTorch from identical weights (state_dicts loaded from torch):
outputs, gradients of inputs, h0 and every parameter, in float64; errors; a GRU model's compiled
training step replays eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error
from tests.test_rnn import check_module, randn

torch = pytest.importorskip("torch")


MODULES = [
    ("GRUCell", lambda lib: lib.nn.GRUCell(3, 4), lambda m, x, h: m(x, h), [randn(2, 3), randn(2, 4)]),
    ("GRUCell_no_h", lambda lib: lib.nn.GRUCell(3, 4, bias=False), lambda m, x: m(x), [randn(2, 3)]),
    ("GRUCell_unbatched", lambda lib: lib.nn.GRUCell(3, 4), lambda m, x, h: m(x, h), [randn(3), randn(4)]),
    ("RNNCell_tanh", lambda lib: lib.nn.RNNCell(3, 4), lambda m, x, h: m(x, h), [randn(2, 3), randn(2, 4)]),
    ("RNNCell_relu", lambda lib: lib.nn.RNNCell(3, 4, nonlinearity="relu"), lambda m, x: m(x), [randn(5, 3)]),
    ("GRU", lambda lib: lib.nn.GRU(3, 4), lambda m, x, h: m(x, h), [randn(5, 2, 3), randn(1, 2, 4)]),
    ("GRU_2_layers_batch_first", lambda lib: lib.nn.GRU(3, 4, num_layers=2, batch_first=True),
     lambda m, x: m(x), [randn(2, 5, 3)]),
    ("GRU_bidirectional", lambda lib: lib.nn.GRU(3, 4, num_layers=2, bidirectional=True),
     lambda m, x, h: m(x, h), [randn(4, 2, 3), randn(4, 2, 4)]),
    ("GRU_unbatched_no_bias", lambda lib: lib.nn.GRU(3, 4, bias=False), lambda m, x: m(x), [randn(5, 3)]),
    ("RNN_tanh_2_layers", lambda lib: lib.nn.RNN(3, 4, 2), lambda m, x, h: m(x, h), [randn(5, 2, 3), randn(2, 2, 4)]),
    ("RNN_relu_bidirectional_batch_first",
     lambda lib: lib.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True, batch_first=True),
     lambda m, x: m(x), [randn(2, 5, 3)]),
    ("GRU_dropout_eval", lambda lib: lib.nn.GRU(3, 4, num_layers=2, dropout=0.5).eval(), lambda m, x: m(x),
     [randn(4, 2, 3)]),
]


@pytest.mark.parametrize("case", MODULES, ids=[c[0] for c in MODULES])
def test_matches_torch(case):
    _, build, call, arrays = case
    torch.manual_seed(0)
    check_module(build(torch), build(sg), arrays, call, "float64")


def test_float32_gru():
    check_module(torch.nn.GRU(3, 4, 2), sg.nn.GRU(3, 4, 2), [randn(5, 2, 3)], lambda m, x: m(x), "float32")


def test_parameter_names_shapes_and_reprs_match_torch():
    for build in (lambda lib: lib.nn.GRU(3, 4, num_layers=2, bidirectional=True, dropout=0.25),
                  lambda lib: lib.nn.RNN(3, 4, nonlinearity="relu", bias=False, batch_first=True),
                  lambda lib: lib.nn.GRUCell(3, 4), lambda lib: lib.nn.RNNCell(3, 4, nonlinearity="relu")):
        t_module, s_module = build(torch), build(sg)
        assert [(n, tuple(p.shape)) for n, p in s_module.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in t_module.named_parameters()]
        assert repr(s_module) == repr(t_module)


def test_dropout_between_layers_in_training():
    sg.manual_seed(0)
    gru = sg.nn.GRU(3, 4, num_layers=2, dropout=0.5).to(sg.float64)
    x = sg.tensor(randn(6, 2, 3))
    first, second = gru(x)[0], gru(x)[0]
    assert not np.allclose(first.detach().numpy(), second.detach().numpy())
    gru.eval()
    np.testing.assert_array_equal(gru(x)[0].detach().numpy(), gru(x)[0].detach().numpy())


ERRORS = {
    "input_rank": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(2, 3, 4, 5)),
    "input_size": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(5, 2, 2)),
    "hidden_shape": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(5, 2, 3), lib.zeros(2, 2, 4)),
    "hidden_rank": lambda lib: lib.nn.RNN(3, 4)(lib.zeros(5, 2, 3), lib.zeros(2, 4)),
    "nonlinearity": lambda lib: lib.nn.RNN(3, 4, nonlinearity="sigmoid"),
    "dropout": lambda lib: lib.nn.GRU(3, 4, dropout=1.5),
    "cell_input_rank": lambda lib: lib.nn.GRUCell(3, 4)(lib.zeros(1, 2, 3)),
    "cell_input_size": lambda lib: lib.nn.RNNCell(3, 4)(lib.zeros(2, 2)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    same_error(ERRORS[name])


def test_compiled_gru_training_step_replays_eager():
    def make():
        sg.manual_seed(0)
        model = sg.nn.ModuleDict({"gru": sg.nn.GRU(3, 5, num_layers=2, batch_first=True),
                                  "head": sg.nn.Linear(5, 2)}).to(sg.float64)
        opt = sg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            out, h = model["gru"](x)
            loss = sg.nn.functional.mse_loss(model["head"](out[:, -1]), y) + h.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x, y = sg.tensor(rng.standard_normal((2, 4, 3))), sg.tensor(rng.standard_normal((2, 2)))
        np.testing.assert_array_equal(compiled(x, y).detach().numpy(), eager(x, y).detach().numpy())
    assert compiled.stats.replays >= 2
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)
        np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy(), err_msg=name)
