"""``staticgrad bench``: eager vs replay (vs PyTorch) on the bench models of every family, and on
the user's own training step (``compare``, ``staticgrad bench --step file.py:make_step``)."""

from staticgrad.bench.compare_step import compare
from staticgrad.bench.report import Report, table
from staticgrad.bench.user_step import BenchStep, StepError, load_step

__all__ = ["BenchStep", "Report", "StepError", "compare", "load_step", "table"]
