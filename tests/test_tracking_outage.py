"""A tracking server that goes away mid-sweep and comes back (issue 73;
``contrasweep.tracking.outage``): a real ``mlflow server`` on 127.0.0.1 SIGKILLed and started
again on the same port and store. The writer holds the calls meanwhile and says so (one line
when it starts, one when the server is back), applies them in order with every metric row once;
past its bound it stops as a store failure, and the write-ahead log still holds every call."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from mlflow.entities import Metric

from contrasweep.tracking.outage import QUEUE_ENV
from contrasweep.tracking.store import StoreWriteError, get_client
from contrasweep.tracking.writer import QueuedClient, replay_log

AWAY = re.compile(r"^\[contrasweep\] MLflow server (\S+) unreachable since \d\d:\d\d:\d\d \((.+?)\): (\d+) calls? queued, "
                  r"nothing lost", re.MULTILINE)
BACK = re.compile(r"^\[contrasweep\] MLflow server (\S+) back after \d+ s: applying the \d+ calls? queued", re.MULTILINE)


def _kill(server) -> None:
    """SIGKILL the server's process group (reaped as its ``mlflow_server`` context ends)."""
    os.killpg(server.pid, signal.SIGKILL)
    time.sleep(0.5)


def test_only_a_server_that_does_not_answer_is_waited_out(monkeypatch):
    """What counts as the server's absence: its connection refused or reset, no answer in time,
    HTTP 429/5xx after MLflow's retries, as MLflow wraps them; not a refused permission or a
    missing run. And the bound's setting, with a default for a value that is not a size."""
    import requests
    from mlflow.exceptions import MlflowException

    from contrasweep.tracking.outage import QUEUE_MB, queue_mb, unreachable

    def wrapped(inner: BaseException) -> MlflowException:
        try:
            try:
                raise inner
            except Exception as e:  # as rest_utils.http_request raises it: no ``from``, the context kept
                raise MlflowException(f"API request failed with exception {e}")
        except MlflowException as outer:
            return outer

    refused = requests.exceptions.ConnectionError("Max retries exceeded (Caused by NewConnectionError: [Errno 111] "
                                                  "Connection refused)")
    assert unreachable(wrapped(refused)) == "connection refused"
    assert unreachable(wrapped(requests.exceptions.ConnectionError("Connection aborted, RemoteDisconnected"))) == \
        "connection reset"
    assert unreachable(wrapped(requests.exceptions.ReadTimeout("read timed out"))) == "no answer in time"
    from http.client import IncompleteRead

    try:  # the server killed while it sent its answer: as urllib3 and requests wrap it
        try:
            raise IncompleteRead(b"", 2)
        except IncompleteRead as e:
            raise requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead") from e
    except requests.exceptions.ChunkedEncodingError as cut:
        assert unreachable(wrapped(cut)) == "connection cut mid-answer"
    assert unreachable(wrapped(IncompleteRead(b"", 2))) == "connection cut mid-answer"
    assert unreachable(wrapped(requests.exceptions.RetryError("too many 503 error responses"))).startswith(
        "it answered with errors")
    assert unreachable(MlflowException("Permission denied", error_code="PERMISSION_DENIED")) is None
    assert unreachable(MlflowException("Run 'x' not found", error_code="RESOURCE_DOES_NOT_EXIST")) is None
    assert unreachable(ValueError("bad value")) is None
    for raw, mb in (("", QUEUE_MB), ("64", 64.0), ("0.5", 0.5), ("0", QUEUE_MB), ("-3", QUEUE_MB), ("lots", QUEUE_MB)):
        monkeypatch.setenv("CONTRASWEEP_MLFLOW_QUEUE_MB", raw)
        assert queue_mb() == mb, raw


def _epoch(value: float, step: int) -> list:
    return [Metric("val/accuracy", value, 1_700_000_000_000 + step, step)]


def _history(uri: str, run_id: str) -> list:
    return sorted((m.step, m.value) for m in get_client(uri).get_metric_history(run_id, "val/accuracy"))


@pytest.mark.slow
def test_the_writer_holds_its_calls_while_the_server_is_away_and_says_so(tmp_path, capfd):
    from browser import mlflow_server

    store = tmp_path / "server"
    with mlflow_server(store) as server:
        client = QueuedClient(server.uri, tmp_path / "sweep")
        run_id = client.create_run(client.create_experiment("tests")).info.run_id
        client.log_batch(run_id, metrics=_epoch(0.1, 1))
        made = client.get_run(run_id).info.run_id  # an answer comes after every write queued before it
        _kill(server)
        for step in (2, 3, 4):  # the writer finds the server gone on the first; the sweep goes on
            client.log_batch(run_id, metrics=_epoch(step / 10, step))
            time.sleep(1.5)
        client.set_tag(run_id, "after", "away")
        err = capfd.readouterr().err
        away = AWAY.findall(err)
        assert len(away) == 1 and away[0][0] == server.uri and away[0][1] == "connection refused", err
        assert not BACK.search(err)
    with mlflow_server(store, port=int(server.uri.rsplit(":", 1)[1])):
        run = client.get_run(run_id)  # waits for the server, then for what was held
        err = capfd.readouterr().err
        assert len(BACK.findall(err)) == 1 and not AWAY.search(err), err
        assert run.data.tags["after"] == "away"
        assert _history(server.uri, made) == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]  # each once, in order
        client.set_terminated(run_id)
        client.close()
        assert get_client(server.uri).get_run(made).info.status == "FINISHED"
        assert not [p for p in (tmp_path / "sweep" / "mlflow_wal").iterdir() if p.is_dir()]  # every call applied


@pytest.mark.slow
def test_past_its_bound_the_writer_stops_the_sweep_and_resume_applies_the_log(tmp_path, capfd, monkeypatch):
    from browser import mlflow_server

    monkeypatch.setenv(QUEUE_ENV, "0.004")  # 4 KB: a few dozen calls
    store = tmp_path / "server"
    with mlflow_server(store) as server:
        client = QueuedClient(server.uri, tmp_path / "sweep")
        run_id = client.create_run(client.create_experiment("tests")).info.run_id
        made = client.get_run(run_id).info.run_id  # the writer's run for the driver's placeholder
        _kill(server)
        logged, stopped = 0, None
        deadline = time.monotonic() + 60
        while stopped is None and time.monotonic() < deadline:
            try:
                client.log_batch(run_id, metrics=_epoch(logged / 1000, logged))
                logged += 1
            except StoreWriteError as exc:
                stopped = str(exc)
            time.sleep(0.05)
        assert stopped is not None and f"reached the bound of 0.004 MB ({QUEUE_ENV})" in stopped, stopped
        assert "nothing lost: `contrasweep resume` applies them" in stopped and "\n" not in stopped
        client.close()
        assert len(AWAY.findall(capfd.readouterr().err)) == 1
    with mlflow_server(store, port=int(server.uri.rsplit(":", 1)[1])):
        assert replay_log(get_client(server.uri), tmp_path / "sweep") == logged  # what resume does first
        assert _history(server.uri, made) == [(step, step / 1000) for step in range(logged)]


@pytest.mark.slow
def test_a_sweep_whose_server_is_killed_and_started_again_finishes_with_every_epoch_once(
        ray_address, tiny_model_dir, cache_dir, tmp_path):
    """The demo's spec against a real server SIGKILLed once a trial has ended, started again
    6 s later on the same port and store: both lines, every line explained (docs/cli.md), no
    MLflow per-run line, every run FINISHED and every epoch logged once, exit 0."""
    from browser import mlflow_server
    from test_demo_console import ROOT, _wait_for, documented, undocumented

    from contrasweep.tracking.store import KIND_TAG, OUTCOME_TAG, search_all, search_experiments_all

    store = tmp_path / "server"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    console = tmp_path / "run.out"
    with mlflow_server(store, proxy_artifacts=True) as server:
        with console.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "contrasweep", "run", str(ROOT / "search_spaces" / "demo.yaml"), "--name",
                 "demo", "--tracking-uri", server.uri, "--set", f"encoder.name={tiny_model_dir}", "--set",
                 "encoder.max_length=32", "--address", ray_address, "--no-tsne"],
                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            _wait_for(console, "[contrasweep] trials ended 1/4: ", proc)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        _kill(server)
    try:
        time.sleep(6)
        with mlflow_server(store, proxy_artifacts=True, port=int(server.uri.rsplit(":", 1)[1])):
            assert proc.wait(timeout=110) == 0, console.read_text()[-3000:]
            client = get_client(server.uri)
            runs = search_all(client, [e.experiment_id for e in search_experiments_all(client)])
            trials = [r for r in runs if r.data.tags.get(KIND_TAG) == "trial"]
            histories = {r.info.run_id: [m.step for m in client.get_metric_history(r.info.run_id, "val/accuracy")]
                         for r in trials}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    ran = console.read_text()
    assert len(AWAY.findall(ran)) == 1 and len(BACK.findall(ran)) == 1, ran
    assert "[contrasweep] sweep 'demo' finished: 4 trials" in ran and "Traceback" not in ran, ran
    assert "View run" not in ran and "View experiment" not in ran
    assert undocumented(ran, documented()) == [], ran
    assert len(trials) == 4 and len(runs) == 4 + 2 + 1 and all(r.info.status == "FINISHED" for r in runs)
    for trial in trials:  # each epoch once
        steps = histories[trial.info.run_id]
        assert sorted(steps) == list(range(1, int(trial.data.metrics["epoch"]) + 1)), (trial.info.run_name, steps)
        assert trial.data.tags[OUTCOME_TAG] in ("complete", "stopped")
