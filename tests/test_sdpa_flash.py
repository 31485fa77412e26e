"""scaled_dot_product_attention's fused CPU path (ScaledDotProductFlashAttentionForCpuBackward0):
chosen exactly where PyTorch chooses it, with PyTorch's values, gradients, saved values and
double-backward error; finite differences; compiled steps and models replay eager bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch
from tests.replay_check import same_bits


def randn(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed + 7 * sum(shape)).standard_normal(shape).astype(dtype)


def sdpa(lib, *args, **kwargs):
    return lib.nn.functional.scaled_dot_product_attention(*args, **kwargs)


def _transposed_last(lib, q, k, v):
    """An innermost dim that is not contiguous: PyTorch takes its math path."""
    return sdpa(lib, q.transpose(-1, -2).transpose(-1, -2).contiguous()[..., ::2], k[..., ::2], v[..., ::2])


# (name, call, arrays): each runs in both libraries; the node under the output must be PyTorch's.
CHOICES = [
    ("four_dims", lambda lib, q, k, v: sdpa(lib, q, k, v), [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("three_dims", lambda lib, q, k, v: sdpa(lib, q, k, v), [randn(3, 4, 8), randn(3, 6, 8), randn(3, 6, 8)]),
    ("five_dims", lambda lib, q, k, v: sdpa(lib, q, k, v),
     [randn(2, 2, 3, 4, 8), randn(2, 2, 3, 6, 8), randn(2, 2, 3, 6, 8)]),
    ("value_width_differs", lambda lib, q, k, v: sdpa(lib, q, k, v),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 5)]),
    ("dropout_zero", lambda lib, q, k, v: sdpa(lib, q, k, v, dropout_p=0.0),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("causal_longer_keys", lambda lib, q, k, v: sdpa(lib, q, k, v, is_causal=True, scale=0.4),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("grouped_query_heads", lambda lib, q, k, v: sdpa(lib, q, k, v, enable_gqa=True),
     [randn(2, 4, 4, 8), randn(2, 2, 6, 8), randn(2, 2, 6, 8)]),
    ("broadcast_batch", lambda lib, q, k, v: sdpa(lib, q, k, v),
     [randn(2, 3, 4, 8), randn(1, 3, 6, 8), randn(1, 3, 6, 8)]),
    ("broadcast_heads", lambda lib, q, k, v: sdpa(lib, q, k, v),
     [randn(2, 3, 4, 8), randn(2, 1, 6, 8), randn(2, 1, 6, 8)]),
    ("mask_2d_bool", lambda lib, q, k, v: sdpa(lib, q, k, v, attn_mask=lib.ones(4, 6, dtype=lib.bool).tril(1)),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("mask_3d", lambda lib, q, k, v: sdpa(lib, q, k, v, attn_mask=lib.ones(3, 4, 6, dtype=lib.bool).tril(1)),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("mask_4d_broadcast", lambda lib, q, k, v: sdpa(lib, q, k, v, attn_mask=lib.ones(2, 1, 4, 6, dtype=lib.bool)),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]),
    ("mask_column", lambda lib, q, k, v, m: sdpa(lib, q, k, v, attn_mask=m.detach()),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8), randn(4, 1)]),
    ("mask_needs_grad", lambda lib, q, k, v, m: sdpa(lib, q, k, v, attn_mask=m),
     [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8), randn(4, 6)]),
    ("innermost_strided", _transposed_last, [randn(2, 3, 4, 16), randn(2, 3, 6, 16), randn(2, 3, 6, 16)]),
    ("head_size_one", lambda lib, q, k, v: sdpa(lib, q, k, v),
     [randn(1, 2, 3, 1), randn(1, 2, 5, 1), randn(1, 2, 5, 1)]),
    ("one_key", lambda lib, q, k, v: sdpa(lib, q, k, v), [randn(1, 2, 3, 4), randn(1, 2, 1, 4), randn(1, 2, 1, 4)]),
]


@pytest.mark.parametrize("case", CHOICES, ids=[c[0] for c in CHOICES])
def test_path_node_values_and_gradients_match_torch(case):
    _, call, arrays = case
    compare(call, arrays, atol=1e-12, rtol=1e-10)


def test_a_row_with_every_key_masked_gives_zeros_and_zero_logsumexp():
    mask = np.ones((4, 6), bool)
    mask[1] = False
    arrays = [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]
    out = compare(lambda lib, q, k, v: sdpa(lib, q, k, v, attn_mask=lib.tensor(mask)), arrays, atol=1e-12, rtol=1e-10)
    assert out.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    np.testing.assert_array_equal(out.detach().numpy()[:, :, 1], 0.0)
    fresh = sdpa(sg, *(sg.tensor(a, requires_grad=True) for a in arrays), attn_mask=sg.tensor(mask))
    np.testing.assert_array_equal(fresh.grad_fn._saved_logsumexp.detach().numpy()[:, :, 1], 0.0)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float16, 2e-3)])
def test_lower_precision_matches_torch(dtype, tol):
    arrays = [randn(2, 3, 5, 8, dtype=dtype), randn(2, 3, 7, 8, dtype=dtype), randn(2, 3, 7, 8, dtype=dtype)]
    mask = np.random.default_rng(3).uniform(size=(5, 7)) > 0.3
    compare(lambda lib, q, k, v: sdpa(lib, q, k, v, attn_mask=lib.tensor(mask)), arrays, atol=tol, rtol=tol)
    out = sdpa(sg, *(sg.tensor(a, requires_grad=True) for a in arrays))
    assert out.dtype == out.grad_fn._saved_output.dtype
    assert out.grad_fn._saved_logsumexp.dtype == (sg.float32 if dtype == np.float16 else out.dtype)


def test_saved_values_match_torch():
    arrays = [randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 8)]
    mask = np.random.default_rng(0).uniform(size=(4, 6)) > 0.4
    mask[:, 0] = True
    nodes = {lib.__name__: sdpa(lib, *(lib.tensor(a, requires_grad=True) for a in arrays), attn_mask=lib.tensor(mask),
                                scale=0.5).grad_fn for lib in (torch, sg)}
    t, s = nodes["torch"], nodes["staticgrad"]
    for name in ("query", "key", "value", "output", "logsumexp", "attn_mask"):
        np.testing.assert_allclose(getattr(s, f"_saved_{name}").detach().numpy(),
                                   getattr(t, f"_saved_{name}").detach().numpy(),
                                   rtol=1e-12, atol=1e-12, err_msg=name)
    assert (s._saved_scale, s._saved_is_causal) == (t._saved_scale, t._saved_is_causal) == (0.5, False)
    unscaled = sdpa(sg, *(sg.tensor(a, requires_grad=True) for a in arrays), is_causal=True).grad_fn
    assert (unscaled._saved_scale, unscaled._saved_is_causal) == (None, True)


def test_gradients_match_finite_differences():
    mask = np.random.default_rng(1).uniform(size=(3, 4)) > 0.3
    mask[:, 0] = True
    finite_difference_check(lambda q, k, v: sdpa(sg, q, k, v, attn_mask=sg.tensor(mask)),
                            [randn(1, 2, 3, 2), randn(1, 2, 4, 2), randn(1, 2, 4, 2)])
    finite_difference_check(lambda q, k, v: sdpa(sg, q, k, v, is_causal=True, enable_gqa=True),
                            [randn(1, 2, 3, 2), randn(1, 1, 3, 2), randn(1, 1, 3, 2)])


def test_a_second_derivative_raises_torch_error():
    def second(lib):
        q = lib.tensor(randn(1, 2, 3, 4), requires_grad=True)
        (g,) = lib.autograd.grad(sdpa(lib, q, q, q).sum(), q, create_graph=True)
        g.sum().backward()
    same_error(second)


def test_first_derivative_under_create_graph_shows_torch_node():
    q = sg.tensor(randn(1, 2, 3, 4), requires_grad=True)
    k = sg.tensor(randn(1, 2, 3, 4), requires_grad=True)
    (g,) = sg.autograd.grad(sdpa(sg, q, k, k).sum(), q, create_graph=True)
    assert g.grad_fn.name() == "torch::autograd::NotImplemented"


def _attention_model(lib):
    lib.manual_seed(0)
    return lib.nn.ModuleDict({"qkv": lib.nn.Linear(8, 24), "out": lib.nn.Linear(8, 3)})


def _attend(model, x, mask=None, causal=False):
    q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in model["qkv"](x).split(8, dim=2))
    h = sdpa(sg, q, k, v, attn_mask=mask, is_causal=causal).transpose(1, 2).reshape(2, 5, 8)
    return model["out"](h)


@pytest.mark.bitexact
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_training_step_replays_eager_bit_for_bit(dtype, causal):
    mask = None if causal else sg.tensor(np.random.default_rng(2).uniform(size=(5, 5)) > 0.3)

    def make():
        model = _attention_model(sg).to(sg.float32 if dtype == np.float32 else sg.float64)
        opt = sg.optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = sg.nn.functional.mse_loss(_attend(model, x, mask, causal), y)
            loss.backward()
            opt.step()
            return loss
        return model, step

    (m_eager, eager), (m_comp, compiled) = make(), make()
    compiled = sg.compile(compiled)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x, y = (sg.tensor(rng.standard_normal(shape).astype(dtype)) for shape in ((2, 5, 8), (2, 5, 3)))
        same_bits(compiled(x, y).detach().numpy(), eager(x, y).detach().numpy(), "loss")
    assert compiled.stats.replays >= 2
    for (name, pe), pc in zip(m_eager.named_parameters(), m_comp.parameters()):
        same_bits(pc.detach().numpy(), pe.detach().numpy(), name)


@pytest.mark.bitexact
def test_compiled_model_backward_replays_eager_bit_for_bit():
    models = [_attention_model(sg) for _ in range(2)]
    compiled = sg.compile(lambda x: _attend(models[1], x, causal=True))
    rng = np.random.default_rng(5)
    for _ in range(4):
        x, y = (sg.tensor(rng.standard_normal(shape).astype(np.float32)) for shape in ((2, 5, 8), (2, 5, 3)))
        for model, run in ((models[0], lambda x: _attend(models[0], x, causal=True)), (models[1], compiled)):
            model.zero_grad()
            sg.nn.functional.mse_loss(run(x), y).backward()
        for (name, pe), pc in zip(models[0].named_parameters(), models[1].parameters()):
            same_bits(pc.grad.numpy(), pe.grad.numpy(), name)
    assert compiled.stats.replays >= 2
