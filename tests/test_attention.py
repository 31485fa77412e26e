"""scaled_dot_product_attention, MultiheadAttention, TransformerEncoderLayer and TransformerEncoder
against PyTorch in float64 (modules from PyTorch's state_dicts): outputs, gradients of inputs and of
every parameter; errors; compiled training steps through attention models replay eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error

torch = pytest.importorskip("torch")

TOL = dict(rtol=1e-9, atol=1e-11)


def randn(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def _flat(out):
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flat(o)]
    return [] if out is None else [out]


def check(call, arrays, t_module=None, s_module=None, tol=TOL):
    """``call(lib, module, *tensors)`` in both libraries; outputs, then the gradients of every float
    input and every parameter for sum(w * output), agree. Non-float arrays (masks) pass as they are."""
    if t_module is not None:
        t_module = t_module.to(torch.float64)
        s_module = s_module.to(sg.float64)
        s_module.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()})
    t_in = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    s_in = [sg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    t_out, s_out = _flat(call(torch, t_module, *t_in)), _flat(call(sg, s_module, *s_in))
    assert len(t_out) == len(s_out)
    rng = np.random.default_rng(1)
    t_loss = s_loss = 0
    for t, s in zip(t_out, s_out):
        assert tuple(s.shape) == tuple(t.shape)
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), **tol)
        w = rng.standard_normal(tuple(t.shape))
        t_loss, s_loss = t_loss + (t * torch.tensor(w)).sum(), s_loss + (s * sg.tensor(w)).sum()
    t_loss.backward()
    s_loss.backward()
    for i, (t, s) in enumerate(zip(t_in, s_in)):
        if t.grad is None:
            assert s.grad is None, f"input {i}: staticgrad has a gradient, torch has none"
        else:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), err_msg=f"gradient of input {i}", **tol)
    if t_module is not None:
        t_params = dict(t_module.named_parameters())
        s_params = dict(s_module.named_parameters())
        assert list(s_params) == list(t_params)
        for name, t in t_params.items():
            np.testing.assert_allclose(s_params[name].grad.numpy(), t.grad.numpy(), err_msg=name, **tol)


def sdpa(lib, _module, *args, **kwargs):
    return lib.nn.functional.scaled_dot_product_attention(*args, **kwargs)


BOOL_MASK = np.random.default_rng(4).uniform(size=(5, 6)) > 0.3
BOOL_MASK[:, 0] = True  # every query attends to some key

SDPA_CASES = [
    ("plain", lambda lib, m, q, k, v: sdpa(lib, m, q, k, v), [randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 4)]),
    ("three_dims_value_width", lambda lib, m, q, k, v: sdpa(lib, m, q, k, v),
     [randn(3, 5, 4), randn(3, 6, 4), randn(3, 6, 7)]),
    ("causal", lambda lib, m, q, k, v: sdpa(lib, m, q, k, v, is_causal=True),
     [randn(2, 2, 5, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 4)]),
    ("causal_scale", lambda lib, m, q, k, v: sdpa(lib, m, q, k, v, is_causal=True, scale=0.3),
     [randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 3)]),
    ("bool_mask", lambda lib, m, q, k, v, mask: sdpa(lib, m, q, k, v, attn_mask=mask),
     [randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 4), BOOL_MASK]),
    ("float_mask", lambda lib, m, q, k, v, mask: sdpa(lib, m, q, k, v, attn_mask=mask.detach()),
     [randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 4), randn(2, 1, 5, 6)]),
    ("grouped_query_heads", lambda lib, m, q, k, v: sdpa(lib, m, q, k, v, enable_gqa=True),
     [randn(2, 4, 5, 4), randn(2, 2, 6, 4), randn(2, 2, 6, 4)]),
]


@pytest.mark.parametrize("case", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_sdpa_matches_torch(case):
    _, call, arrays = case
    check(call, arrays)


def test_sdpa_fully_masked_row_is_zero_and_float32():
    mask = np.ones((3, 4), bool)
    mask[1] = False
    out = sdpa(sg, None, sg.randn(3, 2), sg.randn(4, 2), sg.randn(4, 2), attn_mask=sg.tensor(mask))
    np.testing.assert_array_equal(out.numpy()[1], 0.0)
    q, k, v = (randn(2, 3, 4).astype(np.float32) for _ in range(3))
    t = sdpa(torch, None, *(torch.tensor(a) for a in (q, k, v)))
    s = sdpa(sg, None, *(sg.tensor(a) for a in (q, k, v)))
    assert s.dtype == sg.float32
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


def test_sdpa_dropout_zeroes_weights_and_rescales():
    sg.manual_seed(0)
    q, k = sg.zeros(1, 400, 4), sg.zeros(1, 8, 4)  # uniform weights 1/8 on every key
    v = sg.ones(1, 8, 1)
    out = sdpa(sg, None, q, k, v, dropout_p=0.5).numpy().ravel()
    kept = out * 8 / 2  # each kept weight is 1/8 scaled by 2: out = 2 * kept / 8
    np.testing.assert_allclose(kept, np.round(kept))
    assert 0.35 < kept.mean() / 8 < 0.65


SDPA_ERRORS = {
    "causal_and_mask": lambda lib: sdpa(lib, None, lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3),
                                        attn_mask=lib.ones(2, 2), is_causal=True),
    "dtypes": lambda lib: sdpa(lib, None, lib.zeros(2, 3), lib.zeros(2, 3, dtype=lib.float64), lib.zeros(2, 3)),
}


@pytest.mark.parametrize("name", list(SDPA_ERRORS))
def test_sdpa_errors_match_torch(name):
    same_error(SDPA_ERRORS[name])


# ---- MultiheadAttention -------------------------------------------------------------------------------

PADDING = np.array([[False] * 5 + [True], [False] * 6])
CAUSAL = np.triu(np.ones((5, 5), bool), 1)


def mha(**kwargs):
    def build(lib):
        torch.manual_seed(0)
        return lib.nn.MultiheadAttention(8, 2, **kwargs)
    return build


MHA_CASES = [
    ("self_weights", mha(), lambda lib, m, x: m(x, x, x), [randn(5, 2, 8)]),
    ("self_no_weights", mha(), lambda lib, m, x: m(x, x, x, need_weights=False), [randn(5, 2, 8)]),
    ("per_head_weights", mha(), lambda lib, m, q, k: m(q, k, k, average_attn_weights=False),
     [randn(5, 2, 8), randn(6, 2, 8)]),
    ("batch_first_no_bias", mha(bias=False, batch_first=True), lambda lib, m, q, k, v: m(q, k, v),
     [randn(2, 5, 8), randn(2, 6, 8), randn(2, 6, 8)]),
    ("kdim_vdim", mha(kdim=3, vdim=5), lambda lib, m, q, k, v: m(q, k, v),
     [randn(5, 2, 8), randn(6, 2, 3), randn(6, 2, 5)]),
    ("key_padding_mask", mha(), lambda lib, m, q, k, pad: m(q, k, k, key_padding_mask=pad),
     [randn(5, 2, 8), randn(6, 2, 8), PADDING]),
    ("key_padding_mask_no_weights", mha(),
     lambda lib, m, q, k, pad: m(q, k, k, key_padding_mask=pad, need_weights=False),
     [randn(5, 2, 8), randn(6, 2, 8), PADDING]),
    ("bool_attn_mask", mha(), lambda lib, m, x, mask: m(x, x, x, attn_mask=mask), [randn(5, 2, 8), CAUSAL]),
    ("causal_hint_no_weights", mha(), lambda lib, m, x, mask: m(x, x, x, attn_mask=mask, need_weights=False,
                                                               is_causal=True), [randn(5, 2, 8), CAUSAL]),
    ("float_3d_attn_mask", mha(), lambda lib, m, x, mask: m(x, x, x, attn_mask=mask.detach(), need_weights=False),
     [randn(5, 2, 8), randn(4, 5, 5)]),
    ("unbatched", mha(), lambda lib, m, x: m(x, x, x), [randn(5, 8)]),
]


@pytest.mark.parametrize("case", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_matches_torch(case):
    _, build, call, arrays = case
    check(call, arrays, build(torch), build(sg))


def test_parameter_names_match_torch():
    for build in (mha(), mha(kdim=3, vdim=5, bias=False),
                  lambda lib: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(8, 2, 16), 2,
                                                        lib.nn.LayerNorm(8), enable_nested_tensor=False)):
        t_module, s_module = build(torch), build(sg)
        assert [(n, tuple(p.shape)) for n, p in s_module.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in t_module.named_parameters()]
        assert list(s_module.state_dict()) == list(t_module.state_dict())


MHA_ERRORS = {
    "causal_without_mask": lambda lib: mha()(lib)(lib.zeros(2, 1, 8), lib.zeros(2, 1, 8), lib.zeros(2, 1, 8),
                                                  is_causal=True),
    "activation": lambda lib: lib.nn.TransformerEncoderLayer(8, 2, activation="tanh"),
}


@pytest.mark.parametrize("name", list(MHA_ERRORS))
def test_module_errors_match_torch(name):
    same_error(MHA_ERRORS[name])


# ---- TransformerEncoderLayer / TransformerEncoder -------------------------------------------------------

def layer(**kwargs):
    def build(lib):
        torch.manual_seed(0)
        return lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kwargs)
    return build


ENCODER_CASES = [
    ("relu", layer(), lambda lib, m, x: m(x), [randn(5, 2, 8)]),
    ("gelu_norm_first_batch_first", layer(activation="gelu", norm_first=True, batch_first=True),
     lambda lib, m, x: m(x), [randn(2, 5, 8)]),
    ("masks", layer(), lambda lib, m, x, mask, pad: m(x, src_mask=mask, src_key_padding_mask=pad),
     [randn(6, 2, 8), np.triu(np.ones((6, 6), bool), 1), PADDING]),
    ("encoder_two_layers_norm",
     lambda lib: lib.nn.TransformerEncoder(layer()(lib), 2, norm=lib.nn.LayerNorm(8), enable_nested_tensor=False),
     lambda lib, m, x: m(x), [randn(5, 2, 8)]),
]


@pytest.mark.parametrize("case", ENCODER_CASES, ids=[c[0] for c in ENCODER_CASES])
def test_transformer_encoder_matches_torch(case):
    _, build, call, arrays = case
    check(call, arrays, build(torch), build(sg))


def test_dropout_layer_in_eval_matches_torch():
    build = lambda lib: lib.nn.TransformerEncoderLayer(8, 2, 16).eval()  # default dropout 0.1
    check(lambda lib, m, x: m(x), [randn(5, 2, 8)], build(torch), build(sg))


# ---- compiled training steps ---------------------------------------------------------------------------

def attention_model(dropout: float):
    sg.manual_seed(0)
    return sg.nn.ModuleDict({
        "encoder": sg.nn.TransformerEncoderLayer(8, 2, 16, dropout=dropout, batch_first=True),
        "attn": sg.nn.MultiheadAttention(8, 2, dropout=dropout, batch_first=True),
        "head": sg.nn.Linear(8, 3),
    }).to(sg.float64)


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_compiled_attention_training_step_replays_eager(dropout):
    def make():
        model = attention_model(dropout)
        opt = sg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            h = model["encoder"](x)
            out, weights = model["attn"](h, h, h)
            loss = sg.nn.functional.mse_loss(model["head"](out[:, -1]), y) + weights.mean()
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(2)
    batches = [(sg.tensor(rng.standard_normal((2, 5, 8))), sg.tensor(rng.standard_normal((2, 3)))) for _ in range(4)]
    sg.manual_seed(7)
    eager_losses = [eager(x, y).item() for x, y in batches]
    sg.manual_seed(7)
    compiled_losses = [compiled(x, y).item() for x, y in batches]
    assert compiled.stats.replays >= 2
    assert compiled_losses == eager_losses
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy(), err_msg=name)


def test_compiled_sdpa_forward_replays_eager():
    run = sg.compile(lambda q, k, v, mask: sdpa(sg, None, q, k, v, attn_mask=mask) * 2)
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, k, v = (sg.tensor(rng.standard_normal((2, 3, 4))) for _ in range(3))
        mask = sg.tensor(rng.uniform(size=(3, 3)) > 0.5)
        np.testing.assert_array_equal(run(q, k, v, mask).numpy(), (sdpa(sg, None, q, k, v, attn_mask=mask) * 2).numpy())
    assert run.stats.replays >= 1
