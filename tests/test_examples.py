"""The example training scripts in examples/ run unchanged with ``torch`` bound to staticgrad (through
examples/run_with_staticgrad.py) and their training loss goes down; the slow cases also run each
script under PyTorch with its default arguments and check that both libraries train."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RUNNER = EXAMPLES / "run_with_staticgrad.py"

# Lines the scripts print once per epoch (or every few batches): "epoch 3 train_loss 0.123456".
LOSS_LINE = re.compile(r"^(?:epoch|batch) \d+ train_loss (\S+)$", re.MULTILINE)

# script, small arguments for the quick staticgrad run, least relative drop of the loss
# (last logged value against the first) expected from a run with the default arguments.
SCRIPTS = {
    "mnist_cnn.py": (["--epochs", "2", "--train-size", "128", "--test-size", "50", "--save-model"], 0.5),
    "mnist_rnn.py": (["--epochs", "2", "--train-size", "128"], 0.5),
    "vae.py": (["--epochs", "2", "--train-size", "256"], 0.3),
    "word_language_model.py": (["--epochs", "2", "--train-lines", "300", "--nlayers", "1", "--dropout", "0"], 0.2),
    "transformer_language_model.py": (["--epochs", "2", "--train-tokens", "2000"], 0.4),
    "polynomial_regression.py": (["--batches", "200"], 0.8),
}


def run(command: list[str], cwd: Path) -> str:
    """Run a script in a fresh interpreter (worktree first on the path, one BLAS/OpenMP thread);
    return its stdout, failing the test with stderr if it exits non-zero."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{command} exited with {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def losses(stdout: str) -> list[float]:
    values = [float(v) for v in LOSS_LINE.findall(stdout)]
    assert len(values) >= 2, f"expected at least two 'train_loss' lines, got:\n{stdout[-2000:]}"
    return values


def with_staticgrad(script: str, args: list[str], cwd: Path) -> str:
    return run([str(RUNNER), str(EXAMPLES / script), *args], cwd)


def test_runner_binds_torch_and_its_submodules_to_staticgrad(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "import torch.utils.data\n"
        "from torch.optim.lr_scheduler import StepLR\n"
        "from torch.nn.utils import clip_grad_norm_\n"
        "import sys\n"
        "print(torch.__name__, F.__name__, torch.utils.data.__name__, StepLR.__module__,\n"
        "      clip_grad_norm_.__module__, 'torch._C' in sys.modules, sys.argv[1:])\n")
    out = with_staticgrad(str(probe), ["--flag", "1"], tmp_path).split()
    assert out[:3] == ["staticgrad", "staticgrad.nn.functional", "staticgrad.utils.data"]
    assert out[3].startswith("staticgrad.optim") and out[4].startswith("staticgrad.nn.utils")
    assert out[5] == "False" and "--flag" in " ".join(out[6:])


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_trains_with_staticgrad(script, tmp_path):
    args, _ = SCRIPTS[script]
    values = losses(with_staticgrad(script, args, tmp_path))
    assert values[-1] < values[0], values
    if script == "mnist_cnn.py":
        assert (tmp_path / "mnist_cnn.pt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_trains_with_both_staticgrad_and_torch(script, tmp_path):
    """Default arguments; the random draws differ between the libraries, so each run is checked to
    train (its loss falls by the script's expected fraction), not to match the other's numbers."""
    pytest.importorskip("torch")
    _, least_drop = SCRIPTS[script]
    runs = {"staticgrad": with_staticgrad(script, [], tmp_path),
            "torch": run([str(EXAMPLES / script)], tmp_path)}
    for library, stdout in runs.items():
        values = losses(stdout)
        assert values[-1] < (1 - least_drop) * values[0], (library, values)
