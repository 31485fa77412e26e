"""docs/supported.md is what the code supports: regenerated from the op table and the public
namespaces, it must equal the committed file (rewrite it with
``python -m staticgrad.supported > docs/supported.md``)."""

from __future__ import annotations

from pathlib import Path

import staticgrad
from staticgrad.ops import OPS
from staticgrad.supported import markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "supported.md"


def test_supported_doc_matches_the_code():
    assert DOC.read_text() == markdown(), "docs/supported.md is stale: python -m staticgrad.supported > " \
                                          "docs/supported.md"


def test_supported_doc_lists_every_op_and_public_name():
    text = markdown()
    assert all(f"| `{name}` |" in text for name in OPS if OPS[name].kind != "fused")
    for name in ("tanh", "compile", "no_grad"):
        assert f"`{name}`" in text and callable(getattr(staticgrad, name))
