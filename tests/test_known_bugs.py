"""Known gaps against PyTorch, each pinned by a test: BLAS threads, clamp's dtype promotion,
double backward through nll_loss, CopySlices' node name, and NumPy's RuntimeWarnings."""

from __future__ import annotations

import pytest

import staticgrad as sg

torch = pytest.importorskip("torch")


def _blas_thread_counts() -> list[int]:
    import threadpoolctl
    return [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]


def test_set_num_threads_limits_the_blas_threads():
    import threadpoolctl
    before = sg.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):  # restores the BLAS limits on exit
        assert _blas_thread_counts() and set(_blas_thread_counts()) == {2}
        try:
            sg.set_num_threads(1)
            assert sg.get_num_threads() == 1
            assert set(_blas_thread_counts()) == {1}
        finally:
            sg.set_num_threads(before)
