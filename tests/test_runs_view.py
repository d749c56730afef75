"""The experiment's runs view for the MLflow UI (contrasweep.tracking.runs_view) on a real sqlite MLflow
store, and the address ``contrasweep ui`` gives for it. The browser test
(test_mlflow_ui_browser.py) checks that the UI opens on it with the sweep run's numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from contrasweep.tracking.runs_view import (EXPERIMENT_KIND_TAG, MAX_COLUMNS, TRAINING_KIND, VIEW_ID, VIEW_NAME,
                                            VIEW_PREFIX, metric_columns, publish, runs_url)
from contrasweep.tracking.store import get_client


@pytest.fixture
def store(tmp_path):
    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return client, client.create_experiment("view", artifact_location=(tmp_path / "art").as_uri())


def view_of(client, experiment_id) -> tuple[dict, dict]:
    envelope = json.loads(client.get_experiment(experiment_id).tags[VIEW_PREFIX + VIEW_ID])
    return envelope, json.loads(envelope["state"])


def test_columns_of_a_validation_objective_cover_each_level():
    assert metric_columns("val/accuracy") == [
        "trials/ended", "best_trial/val/accuracy", "best_config/mean/best/val/accuracy", "best_config/mean/test/accuracy",
        "mean/best/val/accuracy", "std/best/val/accuracy", "mean/test/accuracy",
        "best/val/accuracy", "test/accuracy"]
    # an objective that is not a validation metric has no test counterpart and is its own key
    assert metric_columns("cost/train_s") == ["trials/ended", "best_trial/cost/train_s", "best_config/mean/cost/train_s",
                                              "mean/cost/train_s", "std/cost/train_s", "cost/train_s"]


def test_publish_marks_the_experiment_as_training_and_writes_a_view_the_ui_reads(store):
    client, exp = store
    publish(client, exp, metric_columns("val/macro_f1"))
    assert client.get_experiment(exp).tags[EXPERIMENT_KIND_TAG] == TRAINING_KIND
    envelope, state = view_of(client, exp)
    # the UI's saved-view envelope: string name, number createdAt, the state as a JSON string
    assert envelope["name"] == VIEW_NAME and isinstance(envelope["createdAt"], int) and isinstance(envelope["state"], str)
    assert state["orderByKey"] == "attributes.start_time" and state["orderByAsc"] is False
    selected = state["selectedColumns"]
    assert selected[0] == "attributes.`Duration`"
    assert "params.`method`" in selected and "metrics.`best_config/mean/test/macro_f1`" in selected
    assert "metrics.`trials/ended`" in selected and len(selected) == len(set(selected))
    # in this order (the grid would sort by name), each metric column as wide as its key
    assert state["columnOrder"] == selected
    assert state["columnWidths"]["metrics.`trials/ended`"] == 7 * len("metrics.`trials/ended`")


def test_publish_adds_columns_and_keeps_what_is_there(store):
    client, exp = store
    client.set_experiment_tag(exp, EXPERIMENT_KIND_TAG, "genai_development")  # the user's choice
    publish(client, exp, metric_columns("val/accuracy"))
    first, state = view_of(client, exp)
    publish(client, exp, metric_columns("val/accuracy"))  # nothing new: not rewritten
    assert view_of(client, exp)[0] == first
    publish(client, exp, ["best_config/k_4/mean/best/val/accuracy"])  # another setting's keys, at the end
    again, state2 = view_of(client, exp)
    assert state2["selectedColumns"] == state["selectedColumns"] + ["metrics.`best_config/k_4/mean/best/val/accuracy`"]
    assert again["createdAt"] == first["createdAt"] and again["updatedAt"] >= first["updatedAt"]
    assert client.get_experiment(exp).tags[EXPERIMENT_KIND_TAG] == "genai_development"
    publish(client, exp, [f"m{i}" for i in range(100)])
    assert len(view_of(client, exp)[1]["selectedColumns"]) == MAX_COLUMNS


def test_a_view_saved_over_in_the_ui_is_left_alone(store):
    client, exp = store
    saved = json.dumps({"name": "mine", "createdAt": 1, "state": "deflate:eJzLSM3JyVcozy/KSQEAGgQEXQ=="})
    client.set_experiment_tag(exp, VIEW_PREFIX + VIEW_ID, saved)
    publish(client, exp, metric_columns("val/accuracy"))
    assert client.get_experiment(exp).tags[VIEW_PREFIX + VIEW_ID] == saved


def test_ui_gives_the_runs_table_of_the_newest_sweep_in_the_store(tmp_path):
    """Two sweeps of the store served (sweep.json and tracking.json as a sweep leaves them):
    ``ui`` names the newer one's experiment; a named sweep is shown instead."""
    from contrasweep.runner.preflight import free_port
    from contrasweep.tracking.store import default_tracking_uri

    uri = default_tracking_uri(tmp_path)
    for name, created, experiment in (("old", "2026-01-01T00:00:00", "3"), ("new", "2026-02-01T00:00:00", "7")):
        folder = tmp_path / "sweeps" / name
        folder.mkdir(parents=True)
        (folder / "sweep.json").write_text(json.dumps({"tracking_uri": uri, "created": created, "status": "finished"}))
        (folder / "tracking.json").write_text(json.dumps({"experiment_id": experiment, "trials": {}}))
    for extra, experiment, name in (([], "7", "new"), (["old"], "3", "old")):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "ui", *extra,
                                 "--port", str(port)], cwd=tmp_path, env=os.environ.copy(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            lines = [proc.stderr.readline(), proc.stderr.readline()]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        assert lines[0].startswith(f"[contrasweep] MLflow UI on http://127.0.0.1:{port} ({uri})"), lines
        assert lines[1].strip() == (f"[contrasweep] runs of {name!r} and the other sweeps of its experiment: "
                                    f"{runs_url(f'http://127.0.0.1:{port}', experiment)}"), lines


def test_the_sweep_runs_live_numbers_are_one_point_per_trial_written_together():
    """``trials/ended`` and ``best_trial/<metric>`` get one point per ended trial (step: trials
    ended), but one MLflow write per ``PROGRESS_EVERY_S`` and one at the sweep's end, not one per trial."""
    from contrasweep.tracking.epochs import EpochLog

    class Client:
        def __init__(self):
            self.batches = []

        def log_batch(self, run_id, metrics=()):
            self.batches.append((run_id, [(m.key, m.value, m.step) for m in metrics]))

    client = Client()
    log = EpochLog(client, None, "val/accuracy", "max", lambda: False, lambda exc: None)
    log.sweep_progress("parent", 1, 0.5)  # the first is written at once
    log.sweep_progress("parent", 2, None)
    log.sweep_progress("parent", 3, 0.75)
    assert len(client.batches) == 1
    log.flush_progress("parent")
    log.flush_progress("parent")  # nothing pending: no write
    assert client.batches == [("parent", [("trials/ended", 1, 1), ("best_trial/val/accuracy", 0.5, 1)]),
                              ("parent", [("trials/ended", 2, 2), ("trials/ended", 3, 3),
                                          ("best_trial/val/accuracy", 0.75, 3)])]

    # resumed after a kill that lost points still waiting: the record's count is written once,
    # and not again where the sweep run already has it
    client.get_metric_history = lambda run_id, key: [type("M", (), {"step": step})() for _, b in client.batches
                                                     for k, _, step in b if k == key]
    killed = EpochLog(client, None, "val/accuracy", "max", lambda: False, lambda exc: None)
    killed.sweep_progress("parent", 4, 0.75)  # the first of a driver's points: written at once
    killed.sweep_progress("parent", 5, 0.9)  # waiting when the driver is killed
    resumed = EpochLog(client, None, "val/accuracy", "max", lambda: False, lambda exc: None)
    resumed.resume_progress("parent", 5, 0.9)
    resumed.resume_progress("parent", 5, 0.9)
    assert client.batches[2:] == [("parent", [("trials/ended", 4, 4), ("best_trial/val/accuracy", 0.75, 4)]),
                                  ("parent", [("trials/ended", 5, 5), ("best_trial/val/accuracy", 0.9, 5)])]
