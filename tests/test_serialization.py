"""staticgrad.save / load: tensors, state dicts and nested containers round-trip exactly; loading
never unpickles (a pickle in the file is refused, not run); PyTorch's arguments are accepted."""

from __future__ import annotations

import io
import math
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    sg.save(obj, buffer)
    buffer.seek(0)
    return sg.load(buffer, **load_kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "uint8", "float16"])
def test_tensors_round_trip_bit_for_bit_with_dtype_and_shape(dtype):
    array = (np.random.default_rng(0).standard_normal((3, 4)) * 5).astype(dtype)
    loaded = round_trip(sg.tensor(array))
    assert str(loaded.dtype) == str(sg.tensor(array).dtype) and loaded.shape == (3, 4)
    assert np.array_equal(loaded.numpy(), array)


def test_nested_structures_keep_types_keys_and_shared_tensors():
    shared = sg.arange(3)
    obj = {"a": [1, 2.5, True, None, "text", (shared, shared)], 3: {"inf": math.inf, "nan": math.nan},
           (1, 2): OrderedDict(x=sg.zeros(2, requires_grad=True)), "empty": sg.zeros(0, 2)}
    loaded = round_trip(obj)
    assert loaded["a"][:5] == [1, 2.5, True, None, "text"] and type(loaded["a"][5]) is tuple
    assert loaded["a"][5][0] is loaded["a"][5][1]
    assert loaded[3]["inf"] == math.inf and math.isnan(loaded[3]["nan"])
    assert type(loaded[(1, 2)]) is OrderedDict and loaded[(1, 2)]["x"].requires_grad
    assert tuple(loaded["empty"].shape) == (0, 2)
    assert tuple(round_trip(sg.tensor(5)).shape) == ()


def test_model_and_optimizer_checkpoint_resumes_training_identically(tmp_path):
    def make():
        sg.manual_seed(0)
        model = sg.nn.Sequential(sg.nn.Linear(4, 5), sg.nn.BatchNorm1d(5), sg.nn.Tanh(), sg.nn.Linear(5, 1))
        return model, sg.optim.Adam(model.parameters(), lr=0.01)

    def train(model, opt, steps, seed):
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            x, y = sg.tensor(rng.standard_normal((6, 4)).astype(np.float32)), sg.zeros(6, 1)
            opt.zero_grad()
            sg.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    model, opt = make()
    train(model, opt, 3, 1)
    path = tmp_path / "checkpoint.pt"
    sg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
    resumed, resumed_opt = make()
    checkpoint = sg.load(path, map_location="cpu", weights_only=True)
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert checkpoint["epoch"] == 3
    train(model, opt, 2, 2)
    train(resumed, resumed_opt, 2, 2)
    for a, b in zip(model.state_dict().values(), resumed.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())


def test_parameters_load_as_parameters():
    loaded = round_trip([sg.nn.Parameter(sg.ones(2)), sg.ones(2)])
    assert isinstance(loaded[0], sg.nn.Parameter) and loaded[0].requires_grad
    assert not isinstance(loaded[1], sg.nn.Parameter) and not loaded[1].requires_grad


def test_objects_the_safe_format_cannot_hold_load_only_with_weights_only_false():
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        round_trip({"x": object()})
    loaded = round_trip({"x": range(3)}, weights_only=False)  # (tests/test_save_module.py: whole modules)
    assert loaded == {"x": range(3)}


class Exploit:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.STATICGRAD_PWNED = True",))


def test_loading_never_unpickles(tmp_path):
    import builtins
    pickled = tmp_path / "pickle.pt"
    pickled.write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(RuntimeError, match="never unpickles"):
        sg.load(pickled)
    torch_file = tmp_path / "torch.pt"
    torch.save({"w": torch.ones(2)}, torch_file)
    with pytest.raises(RuntimeError, match=r"was not written by staticgrad\.save"):
        sg.load(torch_file)
    # A staticgrad file whose array member holds a pickled object array: refused by allow_pickle=False.
    crafted = tmp_path / "crafted.pt"
    sg.save({"w": sg.ones(2)}, crafted)
    members = {}
    with zipfile.ZipFile(crafted) as archive:
        for name in archive.namelist():
            members[name] = archive.read(name)
    payload = io.BytesIO()
    np.save(payload, np.array([Exploit()], dtype=object), allow_pickle=True)
    members["arrays/0.npy"] = payload.getvalue()
    with zipfile.ZipFile(crafted, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match="allow_pickle=False"):
        sg.load(crafted)
    assert not getattr(builtins, "STATICGRAD_PWNED", False)


def test_map_location_to_another_device_is_refused_clearly():
    with pytest.raises(RuntimeError, match="names a device staticgrad does not have"):
        round_trip(sg.ones(1), map_location="cuda:0")
    assert round_trip(sg.ones(1), map_location=lambda storage, loc: storage).tolist() == [1.0]
