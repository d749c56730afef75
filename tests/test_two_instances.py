"""Two sweeps at once on one machine, each with its own local Ray (no ``--address``), each
running distributed trials that ASHA stops. Ray Train frees a stopped run's CPUs through the
State API, which would find "multiple active Ray instances" and ask the wrong one; the next
trial then waited forever for CPUs. ``contrasweep.tune.init_ray`` names its own dashboard to
every process of its instance (``RAY_API_SERVER_ADDRESS``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import write_spec

pytestmark = pytest.mark.slow


def _spec(tmp_path, tiny_model_dir, name):
    return write_spec(
        tmp_path / f"{name}.yaml", tiny_model_dir,
        # ASHA (rf 2) on the training loss stops the 1e-8 trial at epoch 1; the trial after it
        # needs the stopped run's CPUs back
        grid={"lr": [1.0e-3, 1.0e-8, 5.0e-4]}, reported={"lr": 1.0e-3}, fixed={"epochs": 2},
        sweep={"seeds": [0], "max_concurrent": 1, "metric": "train/loss", "mode": "min", "scheduler": "asha",
               "resources": {"cpu": 0.9, "workers": 2}, "asha": {"grace_period": 1, "reduction_factor": 2.0}},
    )


def test_two_distributed_sweeps_at_once_each_on_its_own_ray(tiny_model_dir, cache_dir, tmp_path):
    procs = []
    for name in ("first", "second"):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run",
             str(_spec(tmp_path, tiny_model_dir, name)), "--name", name,
             "--tracking-uri", f"sqlite:///{tmp_path / (name + '.db')}"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=480)[0])
    finally:
        for proc in procs:
            proc.kill()
    for name, proc, out in zip(("first", "second"), procs, outputs):
        assert proc.returncode == 0, (name, out[-3000:])
        meta = json.loads((tmp_path / "sweeps" / name / "sweep.json").read_text())
        assert meta["status"] == "finished" and meta["trials"] == 3, meta
        assert "another Ray instance" not in out
