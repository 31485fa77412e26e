"""More of torch.nn against PyTorch: threshold, hardshrink, softshrink, tanhshrink, softmin, prelu and
their modules, Softmax2d, channel dropout in 1 and 3 dims, the padding modules, Unflatten,
ParameterList/ParameterDict, Embedding.from_pretrained, the remaining nn.init fills, and nn.utils'
norms, parameter vectors and pad_sequence; replayed bit for bit where they record ops."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare, finite_difference_check, same_error, torch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def F(lib):
    return lib.nn.functional


CASES = [
    ("threshold", lambda lib, x: F(lib).threshold(x, 0.1, 20.0), [rand(3, 4)]),
    ("threshold_inplace", lambda lib, x: F(lib).threshold(x * 1, -0.2, 0.5, inplace=True), [rand(3, 4)]),
    ("Threshold", lambda lib, x: lib.nn.Threshold(0.3, -1.0)(x), [rand(3, 4)]),
    ("hardshrink", lambda lib, x: F(lib).hardshrink(x), [rand(3, 4)]),
    ("hardshrink_lambd", lambda lib, x: lib.nn.Hardshrink(0.2)(x), [rand(3, 4)]),
    ("softshrink", lambda lib, x: F(lib).softshrink(x, 0.3), [rand(3, 4)]),
    ("Softshrink", lambda lib, x: lib.nn.Softshrink()(x), [rand(3, 4)]),
    ("tanhshrink", lambda lib, x: F(lib).tanhshrink(x), [rand(3, 4)]),
    ("Tanhshrink", lambda lib, x: lib.nn.Tanhshrink()(x), [rand(3, 4)]),
    ("softmin", lambda lib, x: F(lib).softmin(x, dim=1), [rand(3, 4)]),
    ("Softmin", lambda lib, x: lib.nn.Softmin(dim=-1)(x), [rand(3, 4)]),
    ("Softmax2d", lambda lib, x: lib.nn.Softmax2d()(x), [rand(2, 3, 2, 2)]),
    ("Softmax2d_3d", lambda lib, x: lib.nn.Softmax2d()(x), [rand(3, 2, 2)]),
    ("prelu_shared", lambda lib, x, w: F(lib).prelu(x, w), [rand(2, 3, 4), np.array([0.25])]),
    ("prelu_channels", lambda lib, x, w: F(lib).prelu(x, w), [rand(2, 3, 2, 2), np.array([0.1, -0.5, 2.0])]),
    ("prelu_1d_input", lambda lib, x, w: F(lib).prelu(x, w), [rand(5), np.array([0.3])]),
    ("prelu_0dim_weight", lambda lib, x, w: F(lib).prelu(x, w), [rand(2, 3), np.array(0.3)]),
    ("PReLU", lambda lib, x: lib.nn.PReLU(3, init=0.1).to(x.dtype)(x), [rand(2, 3, 4)]),
    ("ZeroPad2d", lambda lib, x: lib.nn.ZeroPad2d((1, 0, 2, 1))(x), [rand(1, 2, 3, 3)]),
    ("ZeroPad1d", lambda lib, x: lib.nn.ZeroPad1d(2)(x), [rand(2, 3)]),
    ("ConstantPad3d", lambda lib, x: lib.nn.ConstantPad3d(1, 0.5)(x), [rand(1, 2, 2, 2)]),
    ("ReflectionPad1d", lambda lib, x: lib.nn.ReflectionPad1d((2, 1))(x), [rand(2, 3, 4)]),
    ("ReflectionPad2d", lambda lib, x: lib.nn.ReflectionPad2d(1)(x), [rand(1, 2, 3, 3)]),
    ("ReplicationPad2d", lambda lib, x: lib.nn.ReplicationPad2d((1, 2, 0, 1))(x), [rand(1, 2, 3, 3)]),
    ("ReplicationPad3d", lambda lib, x: lib.nn.ReplicationPad3d(1)(x), [rand(1, 1, 2, 2, 2)]),
    ("CircularPad1d", lambda lib, x: lib.nn.CircularPad1d(1)(x), [rand(2, 3, 4)]),
    ("CircularPad2d", lambda lib, x: lib.nn.CircularPad2d((1, 1, 2, 0))(x), [rand(1, 2, 3, 3)]),
    ("Unflatten", lambda lib, x: lib.nn.Unflatten(1, (2, 3))(x), [rand(4, 6)]),
    ("Unflatten_neg", lambda lib, x: lib.nn.Unflatten(-1, (3, -1))(x), [rand(4, 6)]),
    ("rms_norm", lambda lib, x: F(lib).rms_norm(x, (4,)), [rand(2, 3, 4)]),
    ("rms_norm_weight_eps", lambda lib, x, w: F(lib).rms_norm(x, [3, 4], w, eps=1e-3), [rand(2, 3, 4), rand(3, 4)]),
    ("RMSNorm", lambda lib, x: lib.nn.RMSNorm(4).to(x.dtype)(x), [rand(2, 3, 4)]),
    ("RMSNorm_no_affine", lambda lib, x: lib.nn.RMSNorm([3, 4], eps=1e-5, elementwise_affine=False)(x),
     [rand(2, 3, 4)]),
]

# PyTorch's reflection/replication pad backward nodes say their gradient requires grad yet have no graph
# and its shrink backward nodes have no graph for a second derivative at all
_NO_DOUBLE = ("ReflectionPad", "ReplicationPad", "PReLU", "prelu", "hardshrink", "softshrink", "Softshrink")


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64(name, fn, arrays):
    compare(fn, arrays, atol=1e-12, rtol=1e-10, double=not name.startswith(_NO_DOUBLE))


@pytest.mark.parametrize("name,fn,arrays", CASES, ids=[c[0] for c in CASES])
def test_float32_matches_torch(name, fn, arrays):
    compare(fn, [a.astype(np.float32) for a in arrays], atol=1e-5, rtol=1e-5)


FD_CASES = [c for c in CASES if c[0] in ("threshold", "hardshrink", "softshrink", "tanhshrink", "softmin",
                                         "prelu_channels", "prelu_shared", "CircularPad2d")]


@pytest.mark.parametrize("name,fn,arrays", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_gradients_match_finite_differences(name, fn, arrays):
    finite_difference_check(lambda *xs: fn(sg, *xs), arrays)


def test_rms_norm_in_float16_computes_in_float32_as_torch():
    x = rand(3, 8).astype(np.float16)
    t = torch.nn.functional.rms_norm(torch.tensor(x), (8,))
    s = sg.nn.functional.rms_norm(sg.tensor(x), (8,))
    assert s.dtype == sg.float16
    np.testing.assert_array_equal(s.numpy(), t.numpy())


def test_prelu_double_backward_matches_torch():
    # (PyTorch's prelu has a second derivative; the module case above builds its weight in float32)
    compare(lambda lib, x, w: F(lib).prelu(x, w), [rand(2, 3, 2), np.array([0.1, -0.5, 2.0])], double=True,
            atol=1e-12)


def test_softmin_without_dim_warns_and_picks_torchs_dim():
    for lib in (torch, sg):
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmin has been deprecated"):
            out = F(lib).softmin(lib.tensor(rand(2, 3)))
        np.testing.assert_allclose(out.numpy(), torch.nn.functional.softmin(torch.tensor(rand(2, 3)), 1).numpy())
    compare(lambda lib, x: F(lib).softmin(x, 0, dtype=lib.float32), [rand(3, 4)], atol=1e-7, rtol=1e-6)


MODULES = [
    lambda lib: lib.nn.ZeroPad2d(1), lambda lib: lib.nn.ZeroPad1d((1, 2)),
    lambda lib: lib.nn.ConstantPad1d((1, 2), 0.5), lambda lib: lib.nn.ConstantPad2d(1, 2.0),
    lambda lib: lib.nn.ReflectionPad2d(1), lambda lib: lib.nn.ReplicationPad1d(2),
    lambda lib: lib.nn.CircularPad3d(1), lambda lib: lib.nn.Unflatten(1, (2, 3)), lambda lib: lib.nn.Softmin(1),
    lambda lib: lib.nn.Softmax2d(), lambda lib: lib.nn.Threshold(0.1, 20.0), lambda lib: lib.nn.Hardshrink(),
    lambda lib: lib.nn.Softshrink(0.3), lambda lib: lib.nn.Tanhshrink(), lambda lib: lib.nn.PReLU(),
    lambda lib: lib.nn.PReLU(4), lambda lib: lib.nn.Dropout1d(), lambda lib: lib.nn.Dropout3d(0.2),
    lambda lib: lib.nn.RMSNorm(4), lambda lib: lib.nn.RMSNorm([3, 4], eps=1e-5, elementwise_affine=False),
]


@pytest.mark.parametrize("build", MODULES)
def test_module_reprs_match_torch(build):
    assert repr(build(sg)) == repr(build(torch))


def test_prelu_module_holds_torchs_parameter():
    for lib in (torch, sg):
        m = lib.nn.PReLU(3, init=0.1)
        assert [n for n, _ in m.named_parameters()] == ["weight"] and tuple(m.weight.shape) == (3,)
        assert np.allclose(m.weight.detach().numpy(), 0.1)


ERRORS = [
    lambda lib: F(lib).softshrink(lib.ones(2), -1.0),
    lambda lib: F(lib).hardshrink(lib.ones(2, dtype=lib.int64)),
    lambda lib: F(lib).prelu(lib.ones(2, 2), lib.ones(3)),
    lambda lib: F(lib).prelu(lib.ones(2, 2), lib.ones(2, 1)),
    lambda lib: F(lib).prelu(lib.ones(2), lib.ones(2)),
    lambda lib: lib.nn.Softmax2d()(lib.ones(3, 3)),
    lambda lib: F(lib).dropout1d(lib.ones(2, 3, 4, 5)),
    lambda lib: lib.nn.ZeroPad2d(1)(lib.ones(3)),
    lambda lib: lib.nn.Embedding.from_pretrained(lib.ones(3)),
    lambda lib: F(lib).rms_norm(lib.ones(2, 3), (4,)),
    lambda lib: F(lib).rms_norm(lib.ones(2, 4), (4,), lib.ones(3)),
]


@pytest.mark.parametrize("fn", ERRORS)
def test_errors_match_torch(fn):
    same_error(fn)


# ---- channel dropout -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,shape,channels", [("dropout1d", (40, 50, 6), (40, 50)), ("dropout1d", (50, 6), (50,)),
                                               ("dropout3d", (20, 30, 2, 2, 2), (20, 30)),
                                               ("dropout3d", (30, 2, 2, 2), (30,))])
def test_channel_dropout_drops_whole_channels(fn, shape, channels):
    x = sg.ones(*shape)
    out = getattr(F(sg), fn)(x, 0.4).numpy()
    per_channel = out.reshape(channels + (-1,))
    assert np.all((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.6).all(-1))
    assert 0.3 < float((per_channel == 0).all(-1).mean()) < 0.5
    compare(lambda lib, t: getattr(F(lib), fn)(t, 0.4, training=False), [rand(*shape)])


# ---- containers -------------------------------------------------------------------------------------------

def test_parameter_list_and_dict_register_their_parameters_as_torch():
    for lib in (torch, sg):
        plist = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)), lib.zeros(3)])
        plist.append(lib.ones(1))
        plist += [lib.nn.Parameter(lib.ones(4))]
        assert len(plist) == 4 and all(isinstance(p, lib.nn.Parameter) for p in plist)
        assert [n for n, _ in plist.named_parameters()] == ["0", "1", "2", "3"]
        assert tuple(plist[-1].shape) == (4,) and len(plist[1:3]) == 2
        pdict = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2)), "b": lib.zeros(3)})
        pdict["c"] = lib.ones(1)
        assert list(pdict.keys()) == ["a", "b", "c"] and "b" in pdict and isinstance(pdict["b"], lib.nn.Parameter)
        assert list(pdict.state_dict().keys()) == ["a", "b", "c"]
        del pdict["a"]
        assert list(pdict.keys()) == ["b", "c"] and len(list(pdict.parameters())) == 2
        model = lib.nn.Module()
        model.weights = plist
        assert len(list(model.parameters())) == 4


def test_parameter_containers_repr_as_torch():
    for build in (lambda lib: lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, 3))]),
                  lambda lib: lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2))})):
        assert repr(build(sg)).replace("staticgrad.", "torch.") == repr(build(torch))


def test_embedding_from_pretrained_as_torch():
    table = rand(5, 3)
    for lib in (torch, sg):
        frozen = lib.nn.Embedding.from_pretrained(lib.tensor(table))
        assert not frozen.weight.requires_grad and frozen.num_embeddings == 5 and frozen.embedding_dim == 3
        out = frozen(lib.tensor([[0, 4], [2, 2]]))
        np.testing.assert_array_equal(out.numpy(), table[[[0, 4], [2, 2]]])
        tuned = lib.nn.Embedding.from_pretrained(lib.tensor(table), freeze=False, padding_idx=1)
        assert tuned.weight.requires_grad and tuned.padding_idx == 1


# ---- nn.init --------------------------------------------------------------------------------------------

def test_init_fills_have_torchs_properties():
    sg.manual_seed(0)
    w = sg.nn.init.trunc_normal_(sg.empty(200, 50), mean=0.5, std=2.0, a=-1.0, b=3.0)
    values = w.numpy()
    assert values.min() >= -1.0 and values.max() <= 3.0 and 0.7 < values.mean() < 1.3
    q = sg.nn.init.orthogonal_(sg.empty(6, 4), gain=2.0).numpy().astype(np.float64)
    np.testing.assert_allclose(q.T @ q, 4.0 * np.eye(4), atol=1e-5)
    wide = sg.nn.init.orthogonal_(sg.empty(3, 2, 4)).numpy().reshape(3, 8).astype(np.float64)
    np.testing.assert_allclose(wide @ wide.T, np.eye(3), atol=1e-5)
    np.testing.assert_array_equal(sg.nn.init.eye_(sg.empty(3, 4)).numpy(), torch.nn.init.eye_(torch.empty(3, 4)))
    for shape, groups in (((4, 2, 3), 2), ((3, 3, 3, 3), 1), ((2, 2, 3, 3, 3), 1)):
        np.testing.assert_array_equal(sg.nn.init.dirac_(sg.empty(*shape), groups).numpy(),
                                      torch.nn.init.dirac_(torch.empty(*shape), groups).numpy())
    sparse = sg.nn.init.sparse_(sg.empty(10, 6), sparsity=0.3).numpy()
    assert ((sparse == 0).sum(0) == math.ceil(0.3 * 10)).all()
    for fn, bad in ((lambda lib, t: lib.nn.init.eye_(t), (2, 2, 2)), (lambda lib, t: lib.nn.init.orthogonal_(t), (2,)),
                    (lambda lib, t: lib.nn.init.dirac_(t), (2, 2)), (lambda lib, t: lib.nn.init.sparse_(t, 0.1), (2,))):
        same_error(lambda lib, f=fn, s=bad: f(lib, lib.empty(*s)))


# ---- nn.utils ---------------------------------------------------------------------------------------------

def test_norm_helpers_and_parameter_vectors_match_torch():
    for norm_type in (2.0, 1, math.inf, 3.0):
        tensors = [rand(3), rand(2, 2, seed=1)]
        t = torch.nn.utils.get_total_norm([torch.tensor(a) for a in tensors], norm_type)
        s = sg.nn.utils.get_total_norm([sg.tensor(a) for a in tensors], norm_type)
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-12)
    grads = {}
    for lib in (torch, sg):
        params = [lib.nn.Parameter(lib.tensor(rand(3))), lib.nn.Parameter(lib.tensor(rand(2, 2, seed=1)))]
        for p in params:
            p.grad = p.detach() * 3
        total = lib.nn.utils.get_total_norm([p.grad for p in params])
        lib.nn.utils.clip_grads_with_norm_(params, 1.0, total)
        with pytest.warns(FutureWarning, match="`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "):
            lib.nn.utils.clip_grad_norm(params, 0.5)
        vector = lib.nn.utils.parameters_to_vector(params)
        lib.nn.utils.vector_to_parameters(lib.arange(7, dtype=lib.float64), params)
        grads[lib.__name__] = ([p.grad.numpy() for p in params], vector.detach().numpy(),
                               [p.detach().numpy() for p in params], vector.grad_fn.name())
    for t, s in zip(grads["torch"], grads["staticgrad"]):
        if isinstance(t, str):
            assert s == t
        else:
            for a, b in zip(t if isinstance(t, list) else [t], s if isinstance(s, list) else [s]):
                np.testing.assert_allclose(b, a, rtol=1e-12)


@pytest.mark.parametrize("batch_first,side", [(False, "right"), (True, "right"), (True, "left")])
def test_pad_sequence_matches_torch(batch_first, side):
    seqs = [rand(2, 3), rand(4, 3, seed=1), rand(1, 3, seed=2)]
    compare(lambda lib, a, b, c: lib.nn.utils.rnn.pad_sequence([a, b, c], batch_first=batch_first, padding_value=-1.5,
                                                               padding_side=side), seqs, atol=1e-12)


# ---- replay ----------------------------------------------------------------------------------------------

REPLAY = [c for c in CASES if c[0] not in ("PReLU", "RMSNorm")]  # (these build their module inside the step)


@pytest.mark.parametrize("name,fn,arrays", REPLAY, ids=[c[0] for c in REPLAY])
def test_replayed_step_equals_eager(name, fn, arrays):
    def make():
        weights = [sg.tensor(rand(*a.shape, seed=5 + i), requires_grad=True) for i, a in enumerate(arrays)]

        def step(*xs):
            out = fn(sg, *[x * w for x, w in zip(xs, weights)])
            loss = (out * out).sum()
            loss.backward()
            return loss
        return step, weights

    (eager, w_eager), (compiled, w_comp) = make(), make()
    compiled = sg.compile(compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(4):
            data = [sg.tensor(rand(*a.shape, seed=10 + seed)) for a in arrays]
            for w in w_eager + w_comp:
                w.grad = None
            le, lc = eager(*data), compiled(*data)
            assert lc.detach().numpy().tobytes() == le.detach().numpy().tobytes()
            for a, b in zip(w_eager, w_comp):
                assert b.grad.numpy().tobytes() == a.grad.numpy().tobytes()
    assert compiled.stats.replays >= 2
