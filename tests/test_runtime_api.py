"""The small faces PyTorch scripts touch: devices (CPU only), thread counts, onnx."""

from __future__ import annotations

import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def test_no_accelerators_are_reported():
    assert sg.cuda.is_available() is False and sg.cuda.device_count() == 0
    assert sg.accelerator.is_available() is False
    assert sg.backends.mps.is_available() is False and sg.backends.mps.is_built() is False
    device = "cuda" if sg.cuda.is_available() else "cpu"
    assert sg.ones(2).to(device).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="no CUDA device"):
        sg.cuda.get_device_name(0)


def test_thread_count_is_set_and_read_back():
    import numba
    before = sg.get_num_threads()
    try:
        sg.set_num_threads(1)
        assert sg.get_num_threads() == 1 and numba.get_num_threads() == 1
    finally:
        sg.set_num_threads(before)
    with pytest.raises(RuntimeError):
        sg.set_num_threads(0)


def test_onnx_is_importable_and_export_names_what_is_missing():
    import staticgrad.onnx as onnx
    assert onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="no ONNX exporter"):
        onnx.export(sg.nn.Linear(2, 2), (sg.ones(1, 2),), "model.onnx")
