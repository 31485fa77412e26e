"""What PyTorch scripts ask about devices and threads: there is only the CPU, and the thread count
sets the threads of the BLAS library NumPy loaded (through threadpoolctl) and of Numba's kernels."""

from __future__ import annotations

import os
import types

_threads = {"count": None}


def _limit_blas_threads(num: int) -> None:
    """Limit every BLAS library loaded in the process (OpenBLAS, MKL, BLIS) to ``num`` threads."""
    import threadpoolctl  # here, not at the top: only set_num_threads needs it

    threadpoolctl.ThreadpoolController().limit(limits=num, user_api="blas")


def set_num_threads(num: int) -> None:
    """Use ``num`` threads for BLAS calls and Numba's parallel kernels."""
    num = int(num)
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _limit_blas_threads(num)
    try:
        import numba  # loaded on first use, as the kernels load it
        numba.set_num_threads(min(num, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass
    _threads["count"] = num


def get_num_threads() -> int:
    """The thread count ``set_num_threads`` set, else Numba's (the cores it may use)."""
    if _threads["count"] is not None:
        return _threads["count"]
    try:
        import numba  # loaded on first use, as the kernels load it
        return numba.get_num_threads()
    except ImportError:
        return os.cpu_count() or 1


def _module(name: str, doc: str, **functions) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(functions)
    return module


def _false() -> bool:
    return False


def _zero() -> int:
    return 0


def _no_device(*args, **kwargs):
    raise RuntimeError("staticgrad runs on the CPU only: there is no CUDA device (check cuda.is_available() first)")


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Recorded only: every staticgrad kernel is deterministic already."""
    _threads["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return _threads.get("deterministic", False)


cuda = _module("staticgrad.cuda", "No CUDA devices: staticgrad runs on the CPU.", is_available=_false,
               device_count=_zero, current_device=_no_device, get_device_name=_no_device,
               manual_seed=lambda seed: None, manual_seed_all=lambda seed: None, synchronize=lambda device=None: None,
               is_initialized=_false, empty_cache=lambda: None)
accelerator = _module("staticgrad.accelerator", "No accelerators: staticgrad runs on the CPU.", is_available=_false,
                      device_count=_zero, current_accelerator=lambda check_available=False: None)
mps = _module("staticgrad.backends.mps", "No Apple MPS device: staticgrad runs on the CPU.", is_available=_false,
              is_built=_false)
cudnn = _module("staticgrad.backends.cudnn", "No cuDNN: staticgrad runs on the CPU.", is_available=_false,
                enabled=False, benchmark=False, deterministic=False)
backends = _module("staticgrad.backends", "PyTorch's backends flags: only the CPU is present.", mps=mps, cudnn=cudnn)
