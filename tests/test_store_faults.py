"""The MLflow store fails under a running sweep (real processes, real sqlite store): its
artifact folder is removed after the first trial, then its database stops taking writes
(made immutable, or read-only where the test does not run as root). The sweep stops with one
line, exit 2 and sweep.json 'interrupted'; once the store is writable, `resume` finishes it
with every run FINISHED, every epoch logged once and the lost artifacts logged again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

from conftest import write_spec

pytestmark = pytest.mark.slow


def _lock(path) -> callable:
    """Make ``path`` unwritable for this process's user; returns the undo."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
        return lambda: os.chmod(path, 0o644)
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:  # root ignores file modes; only the immutable flag stops it
        pytest.skip(f"cannot make {path} unwritable as root here: {done.stderr.strip()}")
    return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)


def _runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def _trials(state_file) -> dict:
    try:
        from contrasweep.folder.record import read

        return read(state_file).get("trials", {})
    except (OSError, ValueError):
        return {}


def test_read_only_database_and_removed_artifacts_mid_sweep(ray_address, tiny_model_dir, cache_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    spec_path = write_spec(tmp_path / "spec.yaml", tiny_model_dir, data={"k": 12}, fixed={"epochs": 8},
                           sweep={"max_concurrent": 1, "scheduler": "none"}, encoder={"max_length": 128})
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    run = subprocess.Popen([sys.executable, "-m", "contrasweep", "run", str(spec_path), "--name", "store",
                            "--address", ray_address], cwd=tmp_path,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    state_file, db = tmp_path / "sweeps" / "store" / "tracking.json", tmp_path / "mlflow.db"
    removed = locked = None
    deadline = time.time() + 300
    while time.time() < deadline and run.poll() is None and locked is None:
        time.sleep(0.2)
        trials = _trials(state_file)
        # once the first trial has ended in MLflow too (its checkpoint logged, nothing "pending"):
        # removed while it was being logged, the store fails there instead (a FileNotFoundError)
        if removed is None and any(e.get("status") == "FINISHED" and "pending" not in e for e in trials.values()):
            subprocess.run(["rm", "-rf", str(tmp_path / "mlartifacts")], check=True)  # its checkpoint artifact goes
            removed = time.time()
        if removed and any("status" not in e and e.get("last_epoch", 0) >= 2 for e in trials.values()):
            locked = _lock(db)
    try:
        out, _ = run.communicate(timeout=300)
        assert locked is not None, "the sweep ended before the store could be locked:\n" + out[-3000:]
        assert run.returncode == 2, out[-3000:]
        assert "Traceback" not in out, out[-5000:]
        errors = [line for line in out.splitlines() if line.startswith("contrasweep: error:")]
        assert len(errors) == 1 and "the MLflow store failed" in errors[0] and "contrasweep resume store" in errors[0], out[-3000:]
        assert json.loads((tmp_path / "sweeps" / "store" / "sweep.json").read_text())["status"] == "interrupted"
    finally:
        if locked is not None:
            locked()
    uri = f"sqlite:///{db}"
    at_stop = Counter((r.data.tags.get("contrasweep.kind"), r.info.status) for r in _runs(uri))  # as the store was locked

    resumed = subprocess.run([sys.executable, "-m", "contrasweep", "resume", "store", "--no-tsne", "--address", ray_address],
                             cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "lost MLflow artifacts" in resumed.stderr
    runs = _runs(uri)
    after = Counter((r.data.tags.get("contrasweep.kind"), r.info.status) for r in runs)
    assert after == {("sweep", "FINISHED"): 1, ("configuration", "FINISHED"): 2, ("trial", "FINISHED"): 4}, after
    client = MlflowClient(uri)
    for r in runs:
        if r.data.tags["contrasweep.kind"] == "trial":
            steps = [m.step for m in client.get_metric_history(r.info.run_id, "val/accuracy")]
            assert steps == list(range(1, 9)), steps  # none lost while the store was read-only, none twice
            files = {os.path.basename(a.path) for a in client.list_artifacts(r.info.run_id, "model/artifacts/checkpoint")}
            assert "model.safetensors" in files, r.data.tags["contrasweep.trial_id"]  # its MLflow model, re-logged
        if r.data.tags["contrasweep.kind"] == "sweep":
            assert {"spec.yaml", "data_stats.json"} <= {a.path for a in client.list_artifacts(r.info.run_id)}
    print(f"\n[store faults] run output {len(out.splitlines())} lines; MLflow runs at the stop {dict(at_stop)}, "
          f"after resume {dict(after)}")
