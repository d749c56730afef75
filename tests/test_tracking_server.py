"""A sweep tracked on a real MLflow tracking server (``--tracking-uri http://...``): the session's
``server_sweep`` (tests/conftest.py), which ``contrasweep run`` tracked on a server the test
session started on 127.0.0.1, with its own sqlite store and proxied artifact folder."""

from __future__ import annotations

import pytest

from dashboards.trials import parent_runs, trial_runs

pytestmark = pytest.mark.slow


def test_sweep_logs_to_a_tracking_server(server_sweep):
    from conftest import UI_SWEEP

    server, found = server_sweep
    parents = parent_runs(server.uri, "tests", UI_SWEEP)
    assert len(parents) == 1
    runs = trial_runs(server.uri, parents[0].info.run_id)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.metrics["epoch"] == 1 for r in runs)  # the spec's epochs, each logged
    # the checkpoints went through the server into its artifact destination
    assert len(list(server.artifacts.rglob("model.safetensors"))) >= 1
    assert not (found["local"] / "mlflow.db").exists()  # nothing fell back to a local store
    assert not (found["local"] / "mlruns").exists() and not (found["local"] / "mlartifacts").exists()
    # MLflow's two lines per run it ends on a server ("View run … at", "View experiment at"): printed by
    # neither the writer (straight to the terminal, past the console) nor the driver (into driver.log)
    assert "[contrasweep] sweep" in found["driver_log"]
    for text in (found["terminal"], found["driver_log"]):
        assert "View run" not in text and "View experiment" not in text, text[-2000:]
