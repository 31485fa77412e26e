"""`staticgrad bench`: the main job runs, prints its table and writes every number."""

from __future__ import annotations

import json

from staticgrad.cli import main


def test_bench_tiny_writes_table_and_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "--size", "tiny", "--steps", "25", "--json", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "replay ms" in out and "graph+dispatch" in out
    report = json.loads(path.read_text())
    (result,) = report["results"]
    assert {"eager", "replay", "kernels"} <= set(result["ms"])
    assert result["replay_speedup"] > 0 and 0 <= result["graph_and_dispatch_share"] <= 1
    memory = result["memory_bytes"]
    assert memory["replay_arena"] >= memory["arena_lower_bound"] > 0
    assert memory["eager_step_peak"] > 0
    assert result["recorded_ops"] > result["replayed_ops"] > 0
