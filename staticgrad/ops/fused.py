"""The record the compiler's fusion pass puts in place of a group of elementwise ops.

Its kernel is generated from the group (``attrs["kernel"]``) and compiled by the runtime; the
plain interpreter, which runs unfused programs, never meets it.
"""

from __future__ import annotations

from staticgrad.ops.registry import OpDef, register


def _not_interpreted(*args, **kwargs):
    raise RuntimeError("a fused group runs as a generated kernel; the interpreter runs the unfused program")


register(OpDef("fused", _not_interpreted, "fused", dtype_rule="same"))
