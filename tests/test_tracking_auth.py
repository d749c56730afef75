"""Sweeps on a real authenticated MLflow server (``mlflow server --app-name basic-auth`` on
127.0.0.1, its own port, store and user database: ``browser.mlflow_server``), issue 73: a user
with EDIT on the experiment records every run; a READ user, a wrong password and no
credentials each get one line and exit 2 before any trial or run; the READ user reads the sweep
(``report``, ``ui``); no password reaches a file, the store or the console; a local Ray starts
without the driver's credentials."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import write_spec

pytestmark = pytest.mark.slow

USERNAME, PASSWORD = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
# MLflow's auth app takes passwords of 12 characters or more; each one distinct, to grep for
PASSWORDS = {"admin": "adm-9f3c1e7b2a", "writer": "wrt-4d8a2c6e1f", "reader": "rdr-7b1e5a9c3d", "wrong": "bad-2e6c8a4f0b"}
SWEEP = "guarded"


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    """The server, with users ``writer`` (EDIT on the experiment ``tests``) and ``reader`` (READ:
    the server's default), made by its admin; yields ``(server, experiment_id)``."""
    from browser import mlflow_server
    from mlflow.server import get_app_client
    from mlflow.tracking import MlflowClient

    with mlflow_server(tmp_path_factory.mktemp("auth") / "server", proxy_artifacts=True,
                       admin_password=PASSWORDS["admin"]) as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(USERNAME, "admin")
        patch.setenv(PASSWORD, PASSWORDS["admin"])
        auth = get_app_client("basic-auth", tracking_uri=server.uri)
        auth.create_user("writer", PASSWORDS["writer"])
        auth.create_user("reader", PASSWORDS["reader"])
        experiment = MlflowClient(server.uri).create_experiment("tests")
        auth.grant_user_permission("writer", "experiment", experiment, "EDIT")
        patch.undo()
        yield server, experiment


def _as(monkeypatch, user: str | None, password: str | None = None) -> None:
    for key in (USERNAME, PASSWORD, "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    if user is not None:
        monkeypatch.setenv(USERNAME, user)
        monkeypatch.setenv(PASSWORD, password or PASSWORDS[user])


def _admin_runs(uri: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    from contrasweep.tracking.store import search_all

    os.environ[USERNAME], os.environ[PASSWORD] = "admin", PASSWORDS["admin"]
    try:
        return search_all(MlflowClient(uri), [experiment])
    finally:
        del os.environ[USERNAME], os.environ[PASSWORD]


def test_only_a_user_with_edit_runs_a_sweep_and_no_password_is_kept(
        ray_session, tiny_model_dir, tmp_path, cache_dir, auth_server, monkeypatch, capfd):
    from contrasweep.cli import main

    server, experiment = auth_server
    spec = write_spec(tmp_path / "spec.yaml", tiny_model_dir, data={"k": 2}, grid={"lr": [1.0e-3]},
                      fixed={"epochs": 2}, sweep={"seeds": [0], "scheduler": "none"})
    root = tmp_path / "sweeps"
    run = ["--root", str(root), "run", str(spec), "--name", SWEEP, "--tracking-uri", server.uri, "--no-tsne"]
    refused = {  # who -> what the one line says
        ("reader", None): "user 'reader' has no EDIT permission on MLflow experiment 'tests'",
        ("writer", PASSWORDS["wrong"]): "refused user 'writer' (HTTP 401",
        (None, None): f"asks who you are (HTTP 401) and {PASSWORD} is not set",
    }
    console = []
    for (user, password), says in refused.items():
        _as(monkeypatch, user, password)
        assert main(run) == 2
        out, err = capfd.readouterr()
        console.append(out + err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("contrasweep: error: ") and says in lines[0], err
        assert not (root / SWEEP).exists()  # before any folder, trial or run
        assert _admin_runs(server.uri, experiment) == []
    _as(monkeypatch, "writer")
    userinfo = server.uri.replace("http://", f"http://writer:{PASSWORDS['writer']}@")
    assert main([*run[:-3], "--tracking-uri", userinfo]) == 2
    out, err = capfd.readouterr()
    console.append(out + err)
    assert "holds a user name or password" in err and PASSWORDS["writer"] not in err and len(err.splitlines()) == 1

    assert main(run) == 0
    out, err = capfd.readouterr()
    console.append(out + err)
    runs = _admin_runs(server.uri, experiment)
    trials = [r for r in runs if r.data.tags.get("contrasweep.kind") == "trial"]
    assert len(trials) == 1 and all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
    assert trials[0].data.metrics["epoch"] == 2

    # the READ user reads it: the report (written here, not logged to the run it may not write) and the UI's link
    _as(monkeypatch, "reader")
    assert main(["--root", str(root), "report", SWEEP, "--no-tsne"]) == 0
    out, err = capfd.readouterr()
    console.append(out + err)
    assert "not logged to the sweep run" in out and (root / SWEEP / "report" / "report.html").is_file(), out + err
    assert main(["--root", str(root), "ui", SWEEP]) == 0
    out, err = capfd.readouterr()
    console.append(out + err)
    assert f"{server.uri}/#/experiments/{experiment}" in out, out + err

    # no password anywhere the sweep wrote: its folder (sweep.json, tracking.json, driver.log, the report),
    # the server's store (params, tags, metrics) and artifacts, and every line the commands printed
    secrets = [p.encode() for p in PASSWORDS.values()]
    files = [p for p in (root / SWEEP).rglob("*") if p.is_file()] + [server.artifacts.parent / "mlflow.db"]
    files += [p for p in server.artifacts.rglob("*") if p.is_file()]
    assert (root / SWEEP / "driver.log") in files and len(files) > 20
    for path in files:
        data = path.read_bytes()
        assert not [s for s in secrets if s in data], path
    text = "\n".join(console)
    assert "[contrasweep] sweep" in text and not [p for p in PASSWORDS.values() if p in text]


def test_a_local_ray_starts_without_the_drivers_mlflow_credentials(tmp_path):
    """The raylet and every trial worker copy the environment a local Ray starts in; trials never
    write MLflow, so the driver's credentials stay out of it (and in the driver, for its writer)."""
    script = (
        "import os, ray\n"
        "from contrasweep.runner.ray_start import init_ray\n"
        "init_ray(None, num_cpus=1, dashboard=False)\n"
        "seen = ray.get(ray.remote(lambda: [os.environ.get(k) for k in ('MLFLOW_TRACKING_USERNAME', "
        "'MLFLOW_TRACKING_PASSWORD', 'MLFLOW_TRACKING_TOKEN')]).remote())\n"
        "print('worker', seen)\n"
        "print('driver', os.environ['MLFLOW_TRACKING_PASSWORD'], os.environ['MLFLOW_TRACKING_TOKEN'])\n"
        "ray.shutdown()\n")
    env = {**os.environ, USERNAME: "writer", PASSWORD: PASSWORDS["writer"], "MLFLOW_TRACKING_TOKEN": "tok-5a1c9e"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "worker [None, None, None]" in done.stdout, done.stdout
    assert f"driver {PASSWORDS['writer']} tok-5a1c9e" in done.stdout
