"""torch.save of a whole module (or any object the safe format cannot hold) and
torch.load(f, weights_only=False): the module comes back and computes the same; the default load
(weights_only=True, as PyTorch 2.13) refuses such a file with PyTorch's UnpicklingError and never
runs its pickle; tensors and state dicts stay in the safe format and load by default."""

from __future__ import annotations

import builtins
import io
import json
import pickle
import zipfile

import numpy as np
import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    sg.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _model():
    sg.manual_seed(0)
    return sg.nn.Sequential(sg.nn.Conv2d(1, 3, 3), sg.nn.BatchNorm2d(3), sg.nn.ReLU(), sg.nn.Flatten(),
                            sg.nn.Linear(12, 2))


def test_a_whole_module_loads_with_weights_only_false_and_computes_the_same(tmp_path):
    model = _model()
    x = sg.tensor(np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32))
    model(x)  # running statistics move: buffers are saved too
    model.eval()
    path = tmp_path / "model.pt"
    sg.save(model, path)
    loaded = sg.load(path, weights_only=False)
    assert type(loaded) is sg.nn.Sequential and loaded is not model and not loaded.training
    assert np.array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    for (name, a), (other, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert name == other and np.array_equal(a.numpy(), b.numpy()) and a.dtype == b.dtype
    assert all(isinstance(p, sg.nn.Parameter) and p.requires_grad for p in loaded.parameters())
    loss = loaded(x).sum()
    loss.backward()
    assert all(p.grad is not None for p in loaded.parameters())


def test_default_load_refuses_pickled_objects_with_torch_error():
    model = sg.nn.Linear(2, 2)
    for lib, saved in ((torch, torch.nn.Linear(2, 2)), (sg, model)):
        buffer = io.BytesIO()
        lib.save(saved, buffer)
        for kwargs in ({}, {"weights_only": True}):
            buffer.seek(0)
            with pytest.raises(pickle.UnpicklingError) as info:
                lib.load(buffer, **kwargs)
            assert type(info.value).__module__ == "_pickle"
            assert str(info.value).startswith("Weights only load failed. This file can still be loaded, to do so "
                                              "you have two options")
    buffer = _saved(model)
    with pytest.raises(pickle.UnpicklingError, match=r"staticgrad\.nn\.linear\.Linear|Linear"):
        sg.load(buffer)


def test_a_checkpoint_mixing_state_dicts_and_a_module_keeps_shared_tensors():
    model = sg.nn.Linear(3, 2)
    opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(sg.ones(1, 3)).sum().backward()
    opt.step()
    checkpoint = {"model": model, "weight": model.weight, "opt": opt.state_dict(), "epoch": 3}
    loaded = sg.load(_saved(checkpoint), weights_only=False)
    assert loaded["epoch"] == 3 and loaded["weight"] is loaded["model"].weight
    assert np.array_equal(loaded["model"].weight.detach().numpy(), model.weight.detach().numpy())
    fresh = sg.optim.SGD(loaded["model"].parameters(), lr=0.5)
    fresh.load_state_dict(loaded["opt"])
    assert fresh.param_groups[0]["lr"] == 0.1


def test_tensors_and_state_dicts_still_need_no_pickle():
    model = sg.nn.Linear(2, 2)
    buffer = _saved({"state": model.state_dict(), "t": sg.ones(2)})
    with zipfile.ZipFile(buffer) as archive:
        assert "objects.pkl" not in archive.namelist()
    buffer.seek(0)
    loaded = sg.load(buffer)
    assert np.array_equal(loaded["state"]["weight"].numpy(), model.weight.detach().numpy())


def test_other_python_objects_round_trip_with_weights_only_false():
    obj = {"set": {1, 2}, "range": range(2, 9, 3), "complex": 1 + 2j, "array": np.arange(3), "t": sg.ones(2)}
    loaded = sg.load(_saved(obj), weights_only=False)
    assert loaded["set"] == {1, 2} and loaded["range"] == range(2, 9, 3) and loaded["complex"] == 1 + 2j
    assert np.array_equal(loaded["array"], np.arange(3)) and loaded["t"].tolist() == [1.0, 1.0]


class Exploit:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.STATICGRAD_SAVE_PWNED = True",))


def _crafted(root_node: dict, with_pickle: bool, flag: bool) -> io.BytesIO:
    """A staticgrad file whose structure says what an attacker likes, with a malicious pickle."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("structure.json", json.dumps({"format": "staticgrad.save/1", "root": root_node,
                                                       "arrays": 0, "pickled": flag}))
        if with_pickle:
            archive.writestr("objects.pkl", pickle.dumps([Exploit()]))
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("root,flag", [
    ({"t": "pickle", "i": 0}, True),
    ({"t": "pickle", "i": 0}, False),      # a structure that hides that it holds a pickle
    ({"t": "value", "v": 1}, False),       # a pickle member the structure never names
    ({"t": "list", "v": [{"t": "pickle", "i": 0}]}, False),
], ids=["declared", "undeclared", "unreferenced", "nested"])
def test_a_malicious_pickle_is_never_run_by_a_default_load(root, flag):
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        sg.load(_crafted(root, True, flag))
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        sg.load(_crafted(root, False, flag) if root["t"] != "value" else _crafted(root, True, False),
                weights_only=True)
    assert not getattr(builtins, "STATICGRAD_SAVE_PWNED", False)
