"""``benchmarks/gpu_suite.py``, every GPU goal in one command: its help, and a CPU dry run of the
mechanics (tiny BERT, 2 steps) that runs every part and writes its JSON and Markdown table with
one row per goal, without importing Ray, MLflow or Optuna. The GPU numbers come from a machine
with a GPU (docs/performance.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_suite.py"


def test_help_names_every_part():
    done = subprocess.run([sys.executable, str(SUITE), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps the lines
    assert "--device" in text and "step, packing, epochs, compile, slot" in text, text


@pytest.mark.slow
def test_a_cpu_dry_run_runs_every_part(tmp_path, cache_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    done = subprocess.run([sys.executable, str(SUITE), "--device", "cpu", "--steps", "2", "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "gpu_suite.json").read_text())
    assert not [name for name, part in record["parts"].items() if "error" in part], record["parts"]
    assert record["imported_orchestration"] == []
    assert [r["method"] for r in record["parts"]["step"]["results"]] == ["ce", "ce_scl"]
    assert {r["arm"] for r in record["parts"]["epochs"]["results"]} >= {"ce", "lacon", "simcse", "abalone/msc"}
    goals = {row["what"].split(" (")[0]: row for row in record["goals"]}
    assert set(goals) == {"TrainStep / hand-written step", "compile / eager TrainStep, batch 32", "2 packed trials / 1"}
    assert all(row["value"] > 0 and row["verdict"] in ("PASS", "MISS") for row in record["goals"])
    for result in record["parts"]["compile"]["results"]:  # compile / eager from paired blocks of one run
        assert len(result["compile_block_ratios"]) == len(result["block_steps"]) and result["compile_ratio"] > 0
    table = (tmp_path / "gpu_suite.md").read_text()
    assert "| compile / eager TrainStep, batch 32 (ce) |" in table and "| abalone/bce |" in table
    (run,) = record["parts"]["slot"]["runs"]  # one trial's slot, split (issue 41): the parts add up to it
    assert run["epochs"] == 1 and run["split_s"]["start"] > 0 and run["split_s"]["train"] > 0
    assert abs(run["unaccounted_s"]) < 0.05 * run["slot_s"], run
    assert "One trial's slot (ce, 1 epochs" in table
