"""docs/seeds.md stays true: every ```python block runs (fresh namespace, seed 0) and prints
exactly the ```text block that follows it."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import staticgrad

SEEDS = Path(__file__).resolve().parent.parent / "docs" / "seeds.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def examples(path: Path = SEEDS) -> list:
    """(line number, code, expected output) for each python block and the text block after it."""
    text = path.read_text()
    blocks = [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    pairs = []
    for k, (line, lang, body) in enumerate(blocks):
        if lang != "python":
            continue
        following = blocks[k + 1] if k + 1 < len(blocks) else None
        assert following is not None and following[1] == "text", \
            f"{path.name}:{line}: a python block must be followed by a text block with its output"
        pairs.append((line, body, following[2]))
    return pairs


def run_example(line: int, code: str) -> str:
    """What the block prints; padding with blank lines makes tracebacks name the line in seeds.md."""
    staticgrad.manual_seed(0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile("\n" * line + code, str(SEEDS), "exec"), {"__name__": "__seeds__"})
    return out.getvalue()


EXAMPLES = examples()


def test_seeds_has_an_example_per_question():
    assert len(EXAMPLES) >= 12


@pytest.mark.parametrize("line,code,expected", EXAMPLES, ids=[f"seeds.md:{line}" for line, _, _ in EXAMPLES])
def test_seed_example_prints_its_output(line, code, expected):
    assert run_example(line, code) == expected
