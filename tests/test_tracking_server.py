"""A sweep tracked on a real MLflow tracking server (``--tracking-uri http://...``), started
by the test on 127.0.0.1 with its own sqlite store and proxied artifact folder."""

from __future__ import annotations

import pytest
from browser import mlflow_server as start_mlflow_server
from conftest import write_spec

from dashboards.trials import parent_runs, trial_runs

pytestmark = pytest.mark.slow


@pytest.fixture()
def mlflow_server(tmp_path):
    with start_mlflow_server(tmp_path / "server", proxy_artifacts=True) as server:
        yield server.uri, server.artifacts


def test_sweep_logs_to_a_tracking_server(ray_session, mlflow_server, tiny_model_dir, cache_dir, tmp_path):
    from contrasweep.folder import sweeps
    from contrasweep.run import tune
    from contrasweep.spec import load as spec

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
    assert list(artifacts.rglob("model.safetensors"))
    assert not (tmp_path / "mlflow.db").exists()  # nothing fell back to a local store
