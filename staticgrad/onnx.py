"""``staticgrad.onnx``: importable, as PyTorch scripts expect; exporting is not built yet."""

from __future__ import annotations


def export(model, args=None, f=None, *rest, **kwargs):
    """Not built: raises, naming what is missing."""
    raise NotImplementedError(
        "staticgrad.onnx.export is not built: staticgrad has no ONNX exporter yet (it would translate a compiled "
        "forward plan's ops into ONNX nodes with the `onnx` package). Save the weights with staticgrad.save, or "
        "export the same model from PyTorch.")


def is_in_onnx_export() -> bool:
    return False
