"""What the public example scripts reach beyond the ops: PyTorch's ``torch.nn.modules.*`` class paths,
weights-only loading of allowlisted modules (``serialization.safe_globals``), the losses' legacy
``size_average``/``reduce`` arguments and the legacy tensor types (``LongTensor(n)``), each against PyTorch."""

from __future__ import annotations

import builtins
import io
import pickle
import warnings
import zipfile

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import compare

torch = pytest.importorskip("torch")


# ---- torch.nn.modules.* ------------------------------------------------------------------------

@pytest.mark.parametrize("module", sorted(m for m in dir(sg.nn.modules)
                                          if not m.startswith("_") and isinstance(getattr(sg.nn.modules, m), type(sg))))
def test_each_class_sits_where_torch_puts_it(module):
    import importlib
    ours = importlib.import_module(f"staticgrad.nn.modules.{module}")
    theirs = importlib.import_module(f"torch.nn.modules.{module}")
    assert ours.__all__
    for name in ours.__all__:
        assert hasattr(theirs, name), f"torch.nn.modules.{module} has no {name}"
        if hasattr(sg.nn, name):
            assert getattr(ours, name) is getattr(sg.nn, name)


def test_attention_out_proj_is_the_non_quantizable_linear_torch_names():
    for lib in (torch, sg):
        lib.manual_seed(0)
        out_proj = lib.nn.MultiheadAttention(4, 2).out_proj
        assert type(out_proj).__name__ == "NonDynamicallyQuantizableLinear"
        assert isinstance(out_proj, lib.nn.modules.linear.Linear)
    assert repr(sg.nn.MultiheadAttention(4, 2).out_proj) == repr(torch.nn.MultiheadAttention(4, 2).out_proj)


# ---- weights-only load with allowlisted globals -----------------------------------------------

class Net(sg.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = sg.nn.Linear(3, 4)
        self.layer = sg.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0)
        self.rnn = sg.nn.LSTM(4, 3)
        self.norm = sg.nn.BatchNorm1d(3)
        self.register_buffer("steps", sg.zeros(2, dtype=sg.int64))

    def forward(self, x):
        h = self.layer(self.fc(x))
        return self.norm(self.rnn(h)[0][:, 0])


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    sg.save(obj, buffer)
    buffer.seek(0)
    return buffer


NET_GLOBALS = [Net, sg.nn.modules.linear.Linear, sg.nn.modules.linear.NonDynamicallyQuantizableLinear,
               sg.nn.modules.transformer.TransformerEncoderLayer, sg.nn.modules.activation.MultiheadAttention,
               sg.nn.modules.normalization.LayerNorm, sg.nn.modules.dropout.Dropout, sg.nn.modules.rnn.LSTM,
               sg.nn.modules.batchnorm.BatchNorm1d, sg.nn.functional.relu]


def test_an_allowlisted_module_loads_with_the_default_weights_only():
    model = Net().eval()
    x = sg.randn(5, 2, 3)
    with sg.serialization.safe_globals(NET_GLOBALS):
        loaded = sg.load(_saved(model))
    assert type(loaded) is Net and loaded is not model
    assert np.array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    assert loaded.steps.dtype == sg.int64 and all(isinstance(p, sg.nn.Parameter) for p in loaded.parameters())
    with pytest.raises(pickle.UnpicklingError):  # the block has closed
        sg.load(_saved(model))


def test_a_global_left_out_is_refused_with_torchs_error_naming_it():
    buffer = _saved(Net())
    for lib, model, allowed, missing in ((torch, torch.nn.Sequential(torch.nn.Linear(2, 2)), [torch.nn.Sequential],
                                          "torch.nn.modules.linear.Linear"),
                                         (sg, None, [Net], "staticgrad.nn.layers.Linear")):
        if model is not None:
            buffer_t = io.BytesIO()
            lib.save(model, buffer_t)
            buffer_t.seek(0)
        with lib.serialization.safe_globals(allowed), pytest.raises(pickle.UnpicklingError) as info:
            lib.load(buffer_t if model is not None else buffer)
        message = str(info.value)
        assert message.startswith("Weights only load failed. This file can still be loaded, to do so you have two "
                                  "options, \x1b[1mdo those steps only if you trust the source of the checkpoint")
        library = lib.__name__
        assert (f"WeightsUnpickler error: Unsupported global: GLOBAL {missing} was not an allowed global by default. "
                f"Please use `{library}.serialization.add_safe_globals([{missing}])` or the "
                f"`{library}.serialization.safe_globals([{missing}])` context manager") in message


def test_nothing_allowlisted_refuses_before_reading_the_pickle_naming_the_first_class():
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL tests\.test_script_compat\.Net was not an allowed"):
        sg.load(_saved(Net()))


def test_add_safe_globals_lasts_until_cleared_as_in_torch():
    sg.serialization.clear_safe_globals()
    try:
        sg.serialization.add_safe_globals(NET_GLOBALS)
        assert sg.serialization.get_safe_globals() == NET_GLOBALS
        assert type(sg.load(_saved(Net()))) is Net
    finally:
        sg.serialization.clear_safe_globals()
    assert sg.serialization.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        sg.load(_saved(Net()))
    for lib in (torch, sg):
        with pytest.raises(TypeError, match="'int' object is not iterable"):
            lib.serialization.add_safe_globals(1)


class Exploit:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.STATICGRAD_SAFE_GLOBALS_PWNED = True",))


def test_a_malicious_pickle_stays_refused_while_globals_are_allowlisted():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("structure.json", '{"format": "staticgrad.save/1", "root": {"t": "pickle", "i": 0}, '
                                           '"arrays": 0, "pickled": true}')
        archive.writestr("objects.pkl", pickle.dumps([Exploit()], protocol=2))
    buffer.seek(0)
    with sg.serialization.safe_globals(NET_GLOBALS), pytest.raises(pickle.UnpicklingError,
                                                                   match=r"GLOBAL builtins\.exec was not an allowed"):
        sg.load(buffer)
    assert not getattr(builtins, "STATICGRAD_SAFE_GLOBALS_PWNED", False)


# ---- the losses' legacy size_average / reduce ----------------------------------------------------

LEGACY = [dict(size_average=False), dict(size_average=True), dict(reduce=False), dict(reduce=True),
          dict(size_average=False, reduce=True), dict(size_average=True, reduce=False), dict(size_average=None)]


def _legacy_cases():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 5))
    probs = rng.uniform(0.05, 0.95, (4, 5))
    classes = rng.integers(0, 5, 4)
    return {
        "nll_loss": (lambda lib, x, t, **kw: lib.nn.functional.nll_loss(x, t, **kw), [logits, classes]),
        "cross_entropy": (lambda lib, x, t, **kw: lib.nn.functional.cross_entropy(x, t, **kw), [logits, classes]),
        "mse_loss": (lambda lib, x, t, **kw: lib.nn.functional.mse_loss(x, t, **kw), [logits, probs]),
        "l1_loss": (lambda lib, x, t, **kw: lib.nn.functional.l1_loss(x, t, **kw), [logits, probs]),
        "smooth_l1_loss": (lambda lib, x, t, **kw: lib.nn.functional.smooth_l1_loss(x, t, **kw), [logits, probs]),
        "binary_cross_entropy": (lambda lib, x, t, **kw: lib.nn.functional.binary_cross_entropy(x, t, **kw),
                                 [probs, probs[::-1].copy()]),
        "binary_cross_entropy_with_logits": (
            lambda lib, x, t, **kw: lib.nn.functional.binary_cross_entropy_with_logits(x, t, **kw), [logits, probs]),
        "kl_div": (lambda lib, x, t, **kw: lib.nn.functional.kl_div(x, t, **kw), [logits, probs]),
        "NLLLoss": (lambda lib, x, t, **kw: lib.nn.NLLLoss(**kw)(x, t), [logits, classes]),
        "CrossEntropyLoss": (lambda lib, x, t, **kw: lib.nn.CrossEntropyLoss(**kw)(x, t), [logits, classes]),
        "MSELoss": (lambda lib, x, t, **kw: lib.nn.MSELoss(**kw)(x, t), [logits, probs]),
        "L1Loss": (lambda lib, x, t, **kw: lib.nn.L1Loss(**kw)(x, t), [logits, probs]),
        "SmoothL1Loss": (lambda lib, x, t, **kw: lib.nn.SmoothL1Loss(**kw)(x, t), [logits, probs]),
        "BCELoss": (lambda lib, x, t, **kw: lib.nn.BCELoss(**kw)(x, t), [probs, probs[::-1].copy()]),
        "BCEWithLogitsLoss": (lambda lib, x, t, **kw: lib.nn.BCEWithLogitsLoss(**kw)(x, t), [logits, probs]),
        "KLDivLoss": (lambda lib, x, t, **kw: lib.nn.KLDivLoss(**kw)(x, t), [logits, probs]),
    }


LEGACY_CASES = _legacy_cases()


@pytest.mark.parametrize("legacy", range(len(LEGACY)), ids=[str(k) for k in LEGACY])
@pytest.mark.parametrize("loss", LEGACY_CASES)
def test_legacy_size_average_and_reduce_pick_torchs_reduction_and_warn(loss, legacy):
    fn, arrays = LEGACY_CASES[loss]
    kwargs = LEGACY[legacy]
    with warnings.catch_warnings(record=True) as t_seen:
        warnings.simplefilter("always")
        fn(torch, *(torch.tensor(a) for a in arrays), **kwargs)
    with warnings.catch_warnings(record=True) as s_seen:
        warnings.simplefilter("always")
        compare(lambda lib, x, t: fn(lib, x, t, **kwargs), arrays, requires_grad=[True, False], atol=1e-12)
    t_msgs = {str(w.message) for w in t_seen if "size_average" in str(w.message)}
    s_msgs = {str(w.message) for w in s_seen if "size_average" in str(w.message)}
    assert s_msgs == t_msgs


# ---- legacy tensor types --------------------------------------------------------------------------

TYPE_CALLS = {
    "size": lambda lib: lib.LongTensor(3).zero_(),
    "sizes": lambda lib: lib.FloatTensor(2, 3).zero_(),
    "Size": lambda lib: lib.DoubleTensor(lib.Size([2])).zero_(),
    "data": lambda lib: lib.LongTensor([1, 2]),
    "float data": lambda lib: lib.FloatTensor([[1.5, -2.0]]),
    "bool data": lambda lib: lib.BoolTensor([1, 0]),
    "empty": lambda lib: lib.IntTensor(),
    "same dtype tensor": lambda lib: lib.FloatTensor(lib.ones(2)),
    "script idiom": lambda lib: lib.LongTensor(6).zero_().view(-1, 2),
}


@pytest.mark.parametrize("call", TYPE_CALLS)
def test_legacy_tensor_types_build_what_torch_builds(call):
    t, s = TYPE_CALLS[call](torch), TYPE_CALLS[call](sg)
    assert tuple(s.shape) == tuple(t.shape) and str(s.dtype)[len("staticgrad."):] == str(t.dtype)[len("torch."):]
    assert np.array_equal(s.numpy(), t.numpy())
    assert s.type() == t.type()


def test_legacy_types_check_dtype_in_isinstance_and_refuse_other_data():
    for lib in (torch, sg):
        x = lib.ones(2)
        assert isinstance(x, lib.FloatTensor) and not isinstance(x, lib.LongTensor)
        assert isinstance(lib.ones(2, dtype=lib.int64), lib.LongTensor)
        with pytest.raises(TypeError):
            lib.FloatTensor(lib.ones(2, dtype=lib.int64))
        with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
            lib.FloatTensor(2.5)


# ---- small fidelity points scripts meet ------------------------------------------------------------------

def test_iterating_a_tensor_unbinds_it_as_torch():
    for lib in (torch, sg):
        x = lib.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
        rows = list(x)
        assert len(rows) == 3 and rows[0].grad_fn.name() == "UnbindBackward0"
        sum(r.sum() * (k + 1) for k, r in enumerate(rows)).backward()
        assert x.grad.tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
        with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
            iter(x.sum())


def test_a_zero_dim_integer_tensor_indexes_as_an_int():
    for lib in (torch, sg):
        x = lib.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
        row = x[lib.tensor(1)]
        assert row.grad_fn.name() == "SelectBackward0" and row.tolist() == [2.0, 3.0]


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([1, 2]).requires_grad_(),
    lambda lib: lib.tensor([1, 2], requires_grad=True),
    lambda lib: lib.ones(2, dtype=lib.int64, requires_grad=True),
    lambda lib: setattr(lib.tensor([1, 2]), "requires_grad", True),
    lambda lib: lib.tensor([lib.ones(2), lib.ones(2)]),
    lambda lib: -lib.tensor([True, False]),
    lambda lib: lib.neg(lib.tensor([True])),
    lambda lib: lib.ones(0).max(),
    lambda lib: lib.ones(0, 3).min(0),
    lambda lib: lib.ones(2).cuda(),
    lambda lib: lib.nn.Linear(2, 2).cuda(),
], ids=["requires_grad_", "tensor", "factory", "setter", "tensor-of-tensors", "neg-bool", "torch.neg-bool",
        "max-empty", "min-empty-dim", "tensor.cuda", "module.cuda"])
def test_errors_take_the_path_specific_wording_of_torch(make):
    from tests.oracle import same_error
    same_error(make)


def test_a_list_of_one_element_tensors_makes_a_tensor():
    for lib in (torch, sg):
        assert lib.tensor([lib.tensor(1.5), lib.tensor([2.5])]).tolist() == [1.5, 2.5]


def test_manual_seed_returns_the_default_generator():
    generator = sg.manual_seed(7)
    assert isinstance(generator, sg.Generator) and generator.initial_seed() == 7
    assert isinstance(torch.manual_seed(7), torch.Generator)


def test_deterministic_switch_is_kept():
    for lib in (torch, sg):
        lib.use_deterministic_algorithms(True)
        assert lib.are_deterministic_algorithms_enabled()
        lib.use_deterministic_algorithms(False)
        assert not lib.are_deterministic_algorithms_enabled()


# ---- torch.amp ------------------------------------------------------------------------------------------

def _scaled_steps(lib, grads_scale: list):
    """SGD steps through a CPU GradScaler; a huge multiplier makes one step's gradients inf."""
    lib.manual_seed(0)
    w = lib.nn.Parameter(lib.tensor([0.5, -1.0, 2.0]))
    opt = lib.optim.SGD([w], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    history = []
    for factor in grads_scale:
        opt.zero_grad()
        loss = (w * w).sum() * factor
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        history.append((scaler.get_scale(), w.detach().numpy().copy()))
    return history, scaler.state_dict()


def test_cpu_grad_scaler_scales_skips_and_grows_as_torch():
    factors = [1.0, 1.0, 1e38, 1.0, 1.0, 1.0]
    (t_hist, t_state), (s_hist, s_state) = _scaled_steps(torch, factors), _scaled_steps(sg, factors)
    assert s_state == t_state
    for (t_scale, t_w), (s_scale, s_w) in zip(t_hist, s_hist):
        assert s_scale == t_scale
        np.testing.assert_array_equal(s_w, t_w)


def test_cuda_grad_scaler_and_autocast_are_disabled_as_on_a_cpu_only_torch():
    for lib in (torch, sg):
        with pytest.warns(UserWarning, match="torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                                             "Disabling."):
            scaler = lib.amp.GradScaler()
        loss = lib.ones(2, requires_grad=True).sum()
        assert not scaler.is_enabled() and scaler.scale(loss) is loss and scaler.get_scale() == 1.0
        assert scaler.state_dict() == {}
        with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported. Disabling autocast."), \
                lib.autocast("cuda"):
            pass
        with lib.autocast("cpu", enabled=False):
            assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float32


def test_cpu_autocast_says_bfloat16_is_missing():
    with pytest.raises(NotImplementedError, match="bfloat16"), sg.autocast("cpu"):
        pass

    @sg.autocast("cpu", enabled=False)
    def decorated(x):
        return x * 2
    assert decorated(sg.ones(1)).tolist() == [2.0]
