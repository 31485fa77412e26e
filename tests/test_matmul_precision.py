"""torch.set_float32_matmul_precision / get_float32_matmul_precision: PyTorch's accepted names,
warning and error, and no numerical effect on staticgrad's float32 matmul."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staticgrad as sg
from tests.oracle import same_error

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore_precision():
    before_sg, before_torch = sg.get_float32_matmul_precision(), torch.get_float32_matmul_precision()
    yield
    sg.set_float32_matmul_precision(before_sg)
    torch.set_float32_matmul_precision(before_torch)


def test_default_and_accepted_settings_match_torch():
    assert sg.get_float32_matmul_precision() == "highest"
    for precision in ("high", "medium", "highest"):
        for lib in (torch, sg):
            lib.set_float32_matmul_precision(precision)
        assert sg.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == precision


@pytest.mark.parametrize("name", ["low", "HIGH", ""])
def test_an_unknown_name_warns_and_keeps_the_setting(name):
    messages = []
    for lib in (torch, sg):
        lib.set_float32_matmul_precision("medium")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.set_float32_matmul_precision(name)
        assert lib.get_float32_matmul_precision() == "medium"
        messages.append(str(caught[-1].message).split(" (Triggered")[0])
        assert caught[-1].category is UserWarning
    assert messages[0] == messages[1]


@pytest.mark.parametrize("value", [3, None, 0.5])
def test_a_non_string_raises_torch_error(value):
    same_error(lambda lib: lib.set_float32_matmul_precision(value))


def test_precision_changes_no_result():
    rng = np.random.default_rng(0)
    a, b = (sg.tensor(rng.standard_normal((17, 23)).astype(np.float32)) for _ in range(2))
    expected = (a @ b.T).numpy()
    for precision in ("medium", "high"):
        sg.set_float32_matmul_precision(precision)
        assert (a @ b.T).numpy().tobytes() == expected.tobytes()
