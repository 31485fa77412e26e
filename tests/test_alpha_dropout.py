"""F.alpha_dropout, F.feature_alpha_dropout, nn.AlphaDropout, nn.FeatureAlphaDropout. The draws cannot
match PyTorch's generator, so: the formula with the mask staticgrad drew, computed by PyTorch the
way its kernel does (values and gradients bit for bit); the statistics (kept fraction, mean 0 and
variance 1 preserved, whole channels for the feature version); identity in eval; node names, errors,
reprs against PyTorch; a compiled training step replays eager bit for bit (same seed, same masks)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import staticgrad as sg
from staticgrad._eager.dispatch import dispatch
from staticgrad.ops import OPS
from tests.oracle import same_error, torch
from tests.test_bitexact import run_twins, sgd

ALPHA = 1.7580993408473766


def F(lib):
    return lib.nn.functional


def _noise(shape, p, dtype, seed):
    """The keep mask staticgrad's alpha dropout draws after manual_seed(seed)."""
    sg.manual_seed(seed)
    return dispatch(OPS["alpha_dropout_noise"], (), {"shape": shape, "p": p, "dtype": np.dtype(dtype)}).numpy()


def _torch_formula(x, noise, p):
    """PyTorch's alpha dropout kernel on a given mask (its _dropout_impl, step by step)."""
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    noise = noise.clone()
    b = noise.add(-1).mul_(ALPHA * a).add_(ALPHA * a * p)
    noise.mul_(a)
    return x * noise + b


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("feature", [False, True])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_formula_with_the_drawn_mask_matches_torch_bit_for_bit(dtype, feature, p):
    array = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(dtype)
    x = sg.tensor(array, requires_grad=True)
    sg.manual_seed(11)
    out = (F(sg).feature_alpha_dropout if feature else F(sg).alpha_dropout)(x, p, True)
    weights = np.random.default_rng(2).standard_normal(array.shape).astype(dtype)
    (out * sg.tensor(weights)).sum().backward()
    noise = _noise((3, 4, 1) if feature else (3, 4, 5), p, dtype, 11)
    tx = torch.tensor(array, requires_grad=True)
    expected = _torch_formula(tx, torch.tensor(noise), p)
    (expected * torch.tensor(weights)).sum().backward()
    assert out.detach().numpy().tobytes() == expected.detach().numpy().tobytes()
    assert x.grad.numpy().tobytes() == tx.grad.numpy().tobytes()
    assert out.grad_fn.name() == type(expected.grad_fn).__name__ == "AddBackward0"


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_self_normalizing_statistics(p):
    sg.manual_seed(3)
    x = sg.tensor(np.random.default_rng(4).standard_normal((400, 500)))
    out = F(sg).alpha_dropout(x, p, True).numpy()
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    dropped = np.isclose(out, ALPHA * a * (p - 1), rtol=0, atol=1e-12)
    assert abs(dropped.mean() - p) < 0.005
    assert abs(out.mean()) < 0.01 and abs(out.std() - 1) < 0.01


def test_feature_version_drops_whole_channels():
    sg.manual_seed(5)
    out = F(sg).feature_alpha_dropout(sg.ones(200, 300, 2, 3, dtype=sg.float64), 0.3, True).numpy()
    flat = out.reshape(200, 300, -1)
    assert np.all(flat == flat[..., :1])
    a = 1.0 / math.sqrt((ALPHA * ALPHA * 0.3 + 1) * 0.7)
    assert abs(np.isclose(flat[..., 0], ALPHA * a * (0.3 - 1)).mean() - 0.3) < 0.01


def test_identity_and_edge_cases_match_torch():
    for lib in (torch, sg):
        x = lib.randn(3, 4, requires_grad=True)
        assert F(lib).alpha_dropout(x, 0.5, False) is x and F(lib).feature_alpha_dropout(x, 0.5) is x
        assert F(lib).alpha_dropout(x, 0.0, True) is x
        gone = F(lib).alpha_dropout(x, 1.0, True)
        assert not gone.detach().numpy().any()
        assert (gone.grad_fn.name() if lib is sg else type(gone.grad_fn).__name__) == "MulBackward0"
        assert tuple(F(lib).alpha_dropout(lib.zeros(0, 3), 0.5, True).shape) == (0, 3)
        y = x * 1
        F(lib).alpha_dropout(y, 0.5, True, inplace=True)
        assert (y.grad_fn.name() if lib is sg else type(y.grad_fn).__name__) == "AddBackward0"
        module = lib.nn.AlphaDropout(0.2).eval()
        assert module(x) is x and lib.nn.FeatureAlphaDropout().eval()(x) is x


def test_integer_and_bool_inputs_like_torch():
    same_error(lambda lib: F(lib).alpha_dropout(lib.ones(3, dtype=lib.int64), 0.5, True))
    same_error(lambda lib: F(lib).feature_alpha_dropout(lib.ones(2, 3, dtype=lib.bool), 0.5, True))
    same_error(lambda lib: F(lib).alpha_dropout(lib.ones(3, dtype=lib.uint8), 0.2, True))
    for lib in (torch, sg):
        gone = F(lib).alpha_dropout(lib.ones(3, dtype=lib.int32), 1.0, True)
        assert gone.dtype == lib.int32 and gone.tolist() == [0, 0, 0]
        flags = lib.ones(3, dtype=lib.bool)
        assert F(lib).alpha_dropout(flags, 0.5, False) is flags


def test_errors_and_reprs_match_torch():
    same_error(lambda lib: F(lib).alpha_dropout(lib.ones(3), 1.5, True))
    same_error(lambda lib: F(lib).feature_alpha_dropout(lib.ones(3), -0.1, True))
    same_error(lambda lib: F(lib).feature_alpha_dropout(lib.ones(3), 0.5, True))
    same_error(lambda lib: lib.nn.AlphaDropout(2.0))
    for make in (lambda lib: lib.nn.AlphaDropout(0.3), lambda lib: lib.nn.FeatureAlphaDropout(),
                 lambda lib: lib.nn.AlphaDropout(0.1, inplace=True)):
        assert repr(make(sg)) == repr(make(torch))


def test_compiled_training_step_with_alpha_dropout_replays_eager():
    def make():
        sg.manual_seed(0)
        return sg.nn.Sequential(sg.nn.Linear(6, 8), sg.nn.SELU(), sg.nn.AlphaDropout(0.2), sg.nn.Linear(8, 4),
                                sg.nn.SELU(), sg.nn.FeatureAlphaDropout(0.3), sg.nn.Linear(4, 1))

    def step(model, opt):
        def run(x):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        return run

    rng = np.random.default_rng(8)
    data = [(sg.tensor(rng.standard_normal((5, 6)).astype(np.float32)),) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_twins(make, sgd, step, data, seed=21)
