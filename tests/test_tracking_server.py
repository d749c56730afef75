"""A sweep tracked on a real MLflow tracking server (``--tracking-uri http://...``), started
by the test on 127.0.0.1 with its own sqlite store and proxied artifact folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import write_spec
from dashboards.trials import parent_runs, trial_runs

pytestmark = pytest.mark.slow


@pytest.fixture()
def mlflow_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
           "--artifacts-destination", str(tmp_path / "server-artifacts"), "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "mlflow server did not start"
                time.sleep(1)
        yield uri, tmp_path / "server-artifacts"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_sweep_logs_to_a_tracking_server(ray_session, mlflow_server, tiny_model_dir, cache_dir, tmp_path):
    from contrasweep import spec, sweeps, tune

    uri, artifacts = mlflow_server
    spec_path = write_spec(tmp_path / "s.yaml", tiny_model_dir, fixed={"epochs": 2}, grid={"lr": [1.0e-3]},
                           sweep={"seeds": [0], "scheduler": "none"})
    results = tune.run(spec.load_spec(spec_path), "srv", sweeps.sweeps_root(str(tmp_path / "sw")), uri, None)
    assert not results[0].error
    parents = parent_runs(uri, "tests", "srv")
    assert len(parents) == 1
    runs = trial_runs(uri, parents[0].info.run_id)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["epoch"] == 2
    # the checkpoint went through the server into its artifact destination
    assert list(artifacts.rglob("model.pt"))
    assert not (tmp_path / "mlflow.db").exists()  # nothing fell back to a local store
