"""``staticgrad.Generator``: a seedable source of random draws (``randn(..., generator=g)``,
``randperm``, a DataLoader's shuffling), and ``default_generator``, the process-wide one that
``manual_seed`` seeds. Draws come from NumPy's PCG64, so the numbers differ from PyTorch's; the
API (seeding, state save and restore) is PyTorch's."""

from __future__ import annotations

import json
import secrets

import numpy as np

from staticgrad._eager.tensor import Device, Tensor
from staticgrad.ops.factory import DEFAULT_SEED, _GeneratorHolder, source_number
from staticgrad.ops.factory import manual_seed as _seed_default


class Generator:
    """A random generator with its own state (PyTorch's ``torch.Generator``, CPU only)."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"staticgrad runs on the CPU only: a Generator for device {device!r} is not available")
        self._initial_seed = DEFAULT_SEED
        self._rng = np.random.default_rng(DEFAULT_SEED)

    @property
    def device(self):
        return Device("cpu")

    def numpy_generator(self) -> np.random.Generator:
        """The NumPy generator the draws read (read anew at each draw, replays included)."""
        return self._rng

    def manual_seed(self, seed) -> Generator:
        seed = int(seed)
        if seed < -(2 ** 63) or seed >= 2 ** 64:
            raise RuntimeError(f"Overflow when unpacking long long: seed {seed} does not fit in 64 bits")
        self._reseed(seed % 2 ** 64)
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        seed = secrets.randbits(63)
        self._reseed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._initial_seed

    def _reseed(self, seed: int) -> None:
        self._initial_seed = seed
        self._rng = np.random.default_rng(seed)

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor (JSON of the seed and NumPy's bit-generator state)."""
        state = {"seed": self.initial_seed(), "bit_generator": self.numpy_generator().bit_generator.state}
        return Tensor._make(np.frombuffer(json.dumps(state).encode(), dtype=np.uint8).copy(), False, None)

    def set_state(self, new_state) -> Generator:
        if not isinstance(new_state, Tensor) or new_state.dtype.np != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        try:
            state = json.loads(new_state._data.tobytes().decode())
            rng = np.random.default_rng()
            rng.bit_generator.state = state["bit_generator"]
            seed = int(state["seed"])
        except (ValueError, KeyError, TypeError) as error:
            raise RuntimeError("Invalid RNG state: not a state from Generator.get_state()") from error
        self._set(seed, rng)
        return self

    def _set(self, seed: int, rng: np.random.Generator) -> None:
        self._initial_seed, self._rng = seed, rng

    def __repr__(self) -> str:
        return f"<staticgrad.Generator object at {id(self):#x}>"


class DefaultGenerator(Generator):
    """The process-wide generator: its state is the one ``staticgrad.manual_seed`` seeds and every
    draw without ``generator=`` reads."""

    def __init__(self):
        pass

    def numpy_generator(self) -> np.random.Generator:
        return _GeneratorHolder.generator

    def initial_seed(self) -> int:
        return _GeneratorHolder.seed

    def _reseed(self, seed: int) -> None:
        _seed_default(seed)

    def _set(self, seed: int, rng: np.random.Generator) -> None:
        _GeneratorHolder.seed, _GeneratorHolder.generator = seed, rng


default_generator = DefaultGenerator()


def draw_source(generator):
    """The ``source`` attribute a random op gets for ``generator=``: None for the default one, else
    the generator's number (which generated replay code can print)."""
    if generator is None or isinstance(generator, DefaultGenerator):
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a staticgrad.Generator, not {type(generator).__name__}")
    return source_number(generator)


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)
