"""The user's own step: ``staticgrad.bench.compare`` times it eager, compiled and against its PyTorch
twin, checks that the compiled step replayed, and ``staticgrad bench|inspect --step file.py:make_step``
do the same from the shell, with clear errors for a step file that is not what they expect."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

import staticgrad as sg
from staticgrad.bench import BenchStep, StepError, compare, load_step
from staticgrad.cli import main

STEP_FILE = '''
import staticgrad
import torch


def make_step():
    staticgrad.manual_seed(0)
    model = staticgrad.nn.Sequential(staticgrad.nn.Linear(8, 16), staticgrad.nn.Tanh(), staticgrad.nn.Linear(16, 3))
    opt = staticgrad.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    twin.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()})
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.01, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = staticgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def torch_step(x, y):
        twin_opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(twin(x), y)
        loss.backward()
        twin_opt.step()
        return loss

    batches = [(staticgrad.randn(4, 8), staticgrad.randint(0, 3, (4,))) for _ in range(2)]
    return {"step": train_step, "batches": batches, "torch_step": torch_step, "name": "tiny-classifier"}
'''


def tiny_step(read_item: bool = False):
    sg.manual_seed(0)
    model = sg.nn.Linear(8, 3)
    opt = sg.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = sg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item() if read_item else loss

    return step, [(sg.randn(4, 8), sg.randn(4, 3)) for _ in range(2)]


def write(tmp_path, text: str, name: str = "my_step.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_compare_times_eager_compiled_and_the_torch_twin(tmp_path):
    spec = load_step(f"{write(tmp_path, STEP_FILE)}:make_step")
    report = compare(spec, steps=6)
    (result,) = report["results"]
    assert result["size"] == "tiny-classifier" and result["family"] == "user step"
    assert set(result["ms"]) == {"eager", "replay", "torch"} and all(ms > 0 for ms in result["ms"].values())
    assert result["speedup_over_eager"]["eager"] == 1.0 and result["steps_per_system"] >= 6
    compiled = result["compiled"]
    assert compiled["replayed"] and compiled["all_replayed"]
    assert compiled["replays"] == compiled["timed_calls"] == result["steps_per_system"]
    assert compiled["traces"] == compiled["fallbacks"] == 0 and compiled["fell_back_because"] is None
    assert result["recorded_ops"] >= result["replayed_ops"] > 0 and result["fused_kernels"] >= 0
    memory = result["memory_bytes"]
    assert memory["replay_arena"] >= memory["arena_lower_bound"] > 0 and memory["eager_step_peak"] > 0
    text = str(report)
    assert "tiny-classifier" in text and "PyTorch eager" in text and "compiled: all" in text
    assert "OpenBLAS core" in text and report["environment"]["cpu"] in text
    json.dumps(report)   # every number can be written out


def test_compare_without_a_twin_and_with_a_single_argument_batch():
    sg.manual_seed(0)
    model = sg.nn.Linear(8, 3)
    opt = sg.optim.SGD(model.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    report = compare(step, [sg.randn(4, 8)], steps=3, name="one-argument")
    (result,) = report["results"]
    assert set(result["ms"]) == {"eager", "replay"} and result["compiled"]["all_replayed"]
    assert "one-argument" in str(report) and "torch ms" not in str(report)


def test_compare_keeps_a_compiled_step_and_times_its_function_eagerly():
    step, batches = tiny_step()
    compiled = sg.compile(step, partition="eager")
    report = compare(compiled, batches, steps=3)
    assert report["results"][0]["compiled"]["all_replayed"] and compiled.stats.replays >= 3
    assert report["results"][0]["size"] == "step"


def test_compare_says_when_the_compiled_step_fell_back_to_eager():
    step, batches = tiny_step(read_item=True)
    report = compare(step, batches, steps=4)
    compiled = report["results"][0]["compiled"]
    assert not compiled["replayed"] and compiled["replays"] == 0
    assert compiled["fallbacks"] == compiled["timed_calls"] and "item()" in compiled["fell_back_because"]
    text = str(report)
    assert "compiled step: FELL BACK TO EAGER, never replayed" in text and "did not replay" in text
    assert "item()" in text


def test_compare_says_when_only_some_timed_calls_replayed():
    """A step compiled to keep one plan replays the batches of its first shape and runs the others eagerly."""
    step, _ = tiny_step()
    batches = [(sg.randn(4, 8), sg.randn(4, 3)), (sg.randn(5, 8), sg.randn(5, 3))]
    with pytest.warns(RuntimeWarning, match="keeps 1 plans"):
        report = compare(sg.compile(step, fallback="eager", max_plans=1), batches, steps=4, block=2)
    compiled = report["results"][0]["compiled"]
    assert compiled["replayed"] and not compiled["all_replayed"]
    assert compiled["replays"] == compiled["fallbacks"] == 2
    assert "partly replayed, partly eager" in str(report) and "only 2 of 4 timed calls" in str(report)


def test_the_step_file_in_the_docs_runs(capsys):
    docs = Path(__file__).resolve().parent.parent / "docs"
    assert main(["bench", "--step", f"{docs / 'bench_step.py'}:make_step", "--steps", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "classifier" in out and "compiled: all" in out and "PyTorch eager" in out


@pytest.mark.parametrize("batches,message", [
    (None, "batches must be a non-empty list"),
    ([], "got an empty list"),
    ((b for b in ()), "got generator"),
    ([(torch.zeros(2),)], "holds a torch.Tensor"),
])
def test_compare_rejects_batches_it_cannot_cycle(batches, message):
    step, _ = tiny_step()
    with pytest.raises(StepError, match=message):
        compare(step, batches)


def test_compare_rejects_a_step_that_is_not_callable_and_twin_batches_without_a_twin():
    _, batches = tiny_step()
    with pytest.raises(StepError, match="step must be callable"):
        compare("train", batches)
    with pytest.raises(StepError, match="torch_batches was given without torch_step"):
        BenchStep(lambda x, y: None, batches, torch_batches=[(torch.zeros(4, 8), torch.zeros(4, 3))])
    with pytest.raises(StepError, match="holds a staticgrad tensor"):
        BenchStep(lambda x, y: None, batches, torch_step=lambda x, y: None, torch_batches=batches)


def test_bench_step_from_the_command_line(tmp_path, capsys):
    path = write(tmp_path, STEP_FILE)
    out_json = tmp_path / "step.json"
    assert main(["bench", "--step", f"{path}:make_step", "--steps", "4", "--quiet", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "tiny-classifier" in out and "compiled step: the whole step replayed" in out and "PyTorch eager" in out
    assert "OpenBLAS core" in out and "FELL BACK" not in out
    (result,) = json.loads(out_json.read_text())["results"]
    assert result["compiled"]["all_replayed"] and set(result["ms"]) == {"eager", "replay", "torch"}
    assert main(["bench", "--step", str(path), "--steps", "2", "--quiet", "--no-torch"]) == 0   # make_step by default
    assert "torch ms" not in capsys.readouterr().out


def test_inspect_step_from_the_command_line(tmp_path, capsys):
    path = write(tmp_path, STEP_FILE)
    picture = tmp_path / "plan.png"
    assert main(["inspect", "--step", f"{path}:make_step", "--out", str(picture)]) == 0
    out = capsys.readouterr().out
    assert "plan of tiny-classifier" in out and "lower bound" in out and "fused kernel" in out
    assert picture.stat().st_size > 0


def test_inspect_step_that_never_replays_says_why(tmp_path, capsys):
    path = write(tmp_path, '''
        import staticgrad as sg

        def make_step():
            x = sg.randn(3, requires_grad=True)
            def step(y):
                return (x * y).sum().item()
            return {"step": step, "batches": [(sg.randn(3),)]}
    ''')
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        assert main(["inspect", "--step", str(path), "--out", str(tmp_path / "p.png")]) == 1
    assert "no plan to inspect" in capsys.readouterr().err


BAD_FILES = {
    "returns an int": ("def make_step():\n    return 3\n", "returned int; expected a staticgrad.bench.BenchStep"),
    "misses batches": ("def make_step():\n    return {'step': print}\n", r"missing key\(s\) 'batches'"),
    "misspells a key": ("def make_step():\n    return {'step': print, 'batches': [(1,)], 'torch': print}\n",
                        r"unknown key\(s\) 'torch'"),
    "empty batches": ("def make_step():\n    return {'step': print, 'batches': []}\n",
                      "make_step\\(\\): batches must be a non-empty list"),
    "not a function": ("make_step = 3\n", "is a int, not a function"),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_step_file_that_is_not_what_bench_expects_is_a_usage_error(tmp_path, capsys, name):
    source, message = BAD_FILES[name]
    path = write(tmp_path, source)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--step", f"{path}:make_step", "--quiet"])
    assert exit_info.value.code == 2
    with pytest.raises(StepError, match=message):
        load_step(f"{path}:make_step")
    assert "staticgrad bench: error:" in capsys.readouterr().err


@pytest.mark.parametrize("spec,message", [
    ("missing.py:make_step", "no file"),
    ("{path}:build", "defines no 'build' \\(it defines make_step\\)"),
    ("{path}:2x", "is not a function name"),
    ("{folder}", "expected path/to/file.py:make_step"),
])
def test_step_specs_that_name_no_function_say_what_was_expected(tmp_path, capsys, spec, message):
    path = write(tmp_path, STEP_FILE)
    spec = spec.format(path=path, folder=tmp_path)
    with pytest.raises(StepError, match=message):
        load_step(spec)
    for command in ("bench", "inspect"):
        with pytest.raises(SystemExit):
            main([command, "--step", spec])
        assert "error: --step" in capsys.readouterr().err


def test_step_and_bench_models_do_not_mix(tmp_path, capsys):
    path = write(tmp_path, STEP_FILE)
    with pytest.raises(SystemExit):
        main(["bench", "--step", str(path), "--model", "cnn"])
    assert "leave out --size and --model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["inspect", "--step", str(path), "--size", "tiny"])
    assert "leave out --size" in capsys.readouterr().err
