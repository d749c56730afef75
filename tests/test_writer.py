"""The MLflow writer process (contrasweep.tracking.writer) on a real SQLite store: calls applied in
order, a killed writer's queued calls applied once by the next one, a store error raised at the
driver's next call with the failed call kept for resume."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import time

import pytest
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from contrasweep.folder.placeholders import PLACEHOLDER_TAG
from contrasweep.tracking import writer
from contrasweep.tracking.frames import FRAME
from contrasweep.tracking.run_ids import Ids, queued_runs
from contrasweep.tracking.store import StoreWriteError, store_errors, store_line
from contrasweep.tracking.writer import WAL_DIR, QueuedClient, replay_log


def open_writer(tmp_path):
    client = QueuedClient(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep")
    experiment = client.create_experiment("tests")
    return client, client.create_run(experiment).info.run_id


def real(tmp_path, run_id: str) -> str:
    """The MLflow id of the run the driver named ``run_id`` (a placeholder: ``run_ids``)."""
    return Ids(tmp_path / "sweep" / WAL_DIR).map[run_id]


def sessions(tmp_path) -> list:
    return [p for p in (tmp_path / "sweep" / WAL_DIR).iterdir() if p.is_dir()]


def killed(client, tmp_path):
    """Kill the (stopped) writer; a copy of its one log session, to replay again later."""
    os.kill(client.pid, signal.SIGKILL)
    client._proc.wait()
    (session,) = sessions(tmp_path)
    kept = tmp_path / "kept"
    shutil.copytree(session, kept)
    return kept


def replayed_again(direct, kept, tmp_path) -> int:
    """The kept session replayed from its start, as after a kill between applying and noting it."""
    (kept / "done").write_bytes(b"0")
    shutil.copytree(kept, tmp_path / "sweep" / WAL_DIR / kept.name)
    return replay_log(direct, tmp_path / "sweep")


def test_queued_writes_are_applied_in_order_before_an_answer(tmp_path):
    (tmp_path / "sweep").mkdir()
    writer.prestart(f"sqlite:///{tmp_path / 'mlflow.db'}")  # as run and resume do before Ray starts
    spare = writer._SPARE[f"sqlite:///{tmp_path / 'mlflow.db'}"].pid
    client, run_id = open_writer(tmp_path)
    assert client.pid == spare and f"sqlite:///{tmp_path / 'mlflow.db'}" not in writer._SPARE  # the tracker takes it
    for step in range(1, 51):
        assert client.log_batch(run_id, metrics=[Metric("val/accuracy", step / 100, 0, step)]) is None  # no wait
    client.set_tag(run_id, "contrasweep.outcome", "complete")
    client.set_terminated(run_id, status="FINISHED")
    run = client.get_run(run_id)  # answered after every write before it
    assert run.info.status == "FINISHED" and run.data.tags["contrasweep.outcome"] == "complete"
    assert run.data.metrics["val/accuracy"] == 0.5
    with pytest.raises(Exception, match="not found|does not exist"):  # a call's own error, as MLflow raises it
        client.get_run("0" * 32)
    client.close()
    assert not sessions(tmp_path)  # all applied: the log is gone
    assert len(client.get_metric_history(run_id, "val/accuracy")) == 50  # later calls run in this process


def test_a_killed_writers_queue_is_applied_once_from_its_log(tmp_path):
    (tmp_path / "sweep").mkdir()
    client, run_id = open_writer(tmp_path)
    client.log_batch(run_id, metrics=[Metric("m", 0.0, 0, 0)])
    client.get_run(run_id)
    os.kill(client.pid, signal.SIGSTOP)  # what it was sent from here on is never applied
    for step in range(1, 21):
        client.log_batch(run_id, metrics=[Metric("m", float(step), 0, step)], tags=[RunTag("last", str(step))])
    client.set_terminated(run_id, status="FINISHED")
    kept = killed(client, tmp_path)
    direct = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    rid = real(tmp_path, run_id)
    assert direct.get_run(rid).info.status == "RUNNING"

    assert replay_log(direct, tmp_path / "sweep") == 21
    assert not sessions(tmp_path)
    run = direct.get_run(rid)
    assert run.info.status == "FINISHED" and run.data.tags["last"] == "20"
    assert [m.step for m in direct.get_metric_history(rid, "m")] == list(range(21))

    assert replayed_again(direct, kept, tmp_path) == 23  # the run's creation among them
    assert [m.step for m in direct.get_metric_history(rid, "m")] == list(range(21))  # no row twice
    assert len(direct.search_runs([run.info.experiment_id])) == 1  # nor a run


def test_a_run_is_made_under_the_drivers_placeholder_without_waiting_and_only_once(tmp_path):
    """MLflow's public ``create_run`` (no patch of the store's ``uuid``): the run is tagged with
    the driver's placeholder, which every later call is translated from; a replayed creation
    makes no second run, also when the writer was killed before it noted the run in ids."""
    (tmp_path / "sweep").mkdir()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = QueuedClient(uri, tmp_path / "sweep")
    experiment = client.create_experiment("tests")
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    assert list(client.placeholders()) == [parent]  # answered once the run is made
    os.kill(client.pid, signal.SIGSTOP)  # nothing it is sent from here on is answered or applied
    made = client.create_run(experiment, run_name="trial-1", tags={"contrasweep.kind": "trial",
                                                                   "mlflow.parentRunId": parent})
    run_id = made.info.run_id
    client.log_batch(run_id, metrics=[Metric("m", 1.0, 0, 1)], tags=[RunTag("contrasweep.sweep_run", parent)])
    client.set_terminated(run_id, status="FINISHED")
    kept = killed(client, tmp_path)
    direct = MlflowClient(uri)
    assert [r.info.run_name for r in direct.search_runs([experiment])] == ["sweep"]

    assert replay_log(direct, tmp_path / "sweep") == 3
    rid, parent_id = real(tmp_path, run_id), real(tmp_path, parent)
    assert rid != run_id and parent_id != parent  # the store's own ids
    run = direct.get_run(rid)  # the driver's name, tags and start time
    assert (run.info.run_name, run.info.status, run.info.start_time) == ("trial-1", "FINISHED", made.info.start_time)
    assert run.data.tags["contrasweep.kind"] == "trial" and run.data.metrics == {"m": 1.0}
    assert run.data.tags[PLACEHOLDER_TAG] == run_id
    assert run.data.tags["mlflow.parentRunId"] == run.data.tags["contrasweep.sweep_run"] == parent_id  # translated
    assert replayed_again(direct, kept, tmp_path) == 4  # the sweep run's creation too
    assert len(direct.search_runs([experiment])) == 2 and len(direct.get_metric_history(rid, "m")) == 1
    (tmp_path / "sweep" / WAL_DIR / "ids").write_text(f"{parent} {parent_id}\n")  # killed before it noted the run
    assert replayed_again(direct, kept, tmp_path) == 4  # the sweep run's creation too
    assert len(direct.search_runs([experiment])) == 2 and real(tmp_path, run_id) == rid  # found by its tag

    again = QueuedClient(uri, tmp_path / "sweep")  # a later writer of the sweep: the same translation
    assert again.get_run(run_id).info.run_id == rid and again.placeholders() == {parent: parent_id, run_id: rid}
    children = again.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent}'")  # in a filter too
    assert [r.info.run_id for r in children] == [rid]
    again.close()
    assert again.get_run(run_id).info.run_id == rid  # and in this process once the writer has ended

    # a tracking server's runs too (issue 73); a store that is neither is waited for
    assert queued_runs("http://127.0.0.1:5000") and queued_runs("https://mlflow.internal")
    assert not queued_runs("databricks://profile")


def test_a_replayed_creation_an_earlier_version_logged_finds_its_run_under_that_id(tmp_path):
    """Before issue 71 the writer made a run under the driver's id (a patch of the store's
    ``uuid``): a log such a writer left replays without a second run."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    direct = MlflowClient(uri)
    experiment = direct.create_experiment("tests")
    old = direct.create_run(experiment, run_name="trial-0").info.run_id
    wal = tmp_path / "sweep" / WAL_DIR
    session = wal / f"{time.time_ns():020d}-1"
    session.mkdir(parents=True)
    frames = [(1, "create_run", (experiment,), {"run_name": "trial-0", "start_time": 1, "tags": {}, "run_id": old}),
              (2, "set_terminated", (old,), {"status": "FINISHED"})]
    with open(session / "000000.wal", "wb") as fh:
        for frame in frames:
            data = pickle.dumps(frame)
            fh.write(FRAME.pack(len(data)) + data)
    assert replay_log(direct, tmp_path / "sweep") == 2
    assert [r.info.run_id for r in direct.search_runs([experiment])] == [old]
    assert direct.get_run(old).info.status == "FINISHED" and Ids(wal).map == {old: old}


def test_a_store_error_stops_the_writes_and_resume_applies_them(tmp_path):
    (tmp_path / "sweep").mkdir()
    client, run_id = open_writer(tmp_path)
    client.delete_run(run_id)  # MLflow refuses writes to a deleted run
    client.log_batch(run_id, metrics=[Metric("m", 1.0, 0, 1)])
    with pytest.raises(StoreWriteError) as caught:
        client.get_run(run_id)
    assert isinstance(caught.value, store_errors())
    assert store_line(caught.value).startswith("the MLflow store failed (MlflowException: ")
    with pytest.raises(StoreWriteError):  # and every call after it, queued or not
        client.log_batch(run_id, metrics=[Metric("m", 2.0, 0, 2)])
    client.close()
    assert len(sessions(tmp_path)) == 1  # the failed call stays for resume

    MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").restore_run(real(tmp_path, run_id))  # the store is fixed
    resumed = QueuedClient(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep")
    assert [m.step for m in resumed.get_metric_history(run_id, "m")] == [1]  # replayed before any new call
    resumed.close()
    assert not sessions(tmp_path)


def test_a_second_writer_of_a_sweep_in_one_process_ends_the_first(tmp_path):
    (tmp_path / "sweep").mkdir()
    first, run_id = open_writer(tmp_path)
    first.log_batch(run_id, metrics=[Metric("m", 1.0, 0, 1)])
    second = QueuedClient(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep")  # waits for nothing
    assert first._proc.poll() is not None
    assert [m.step for m in second.get_metric_history(run_id, "m")] == [1]
    second.close()


def test_the_log_stays_bounded_where_no_call_waits_for_an_answer(tmp_path, monkeypatch):
    """A sweep's writes are all queued (its runs named by placeholders): the writer's own notes of
    how far it got let the driver roll and delete applied log segments all the same."""
    monkeypatch.setattr(writer, "SEGMENT_BYTES", 4096)
    (tmp_path / "sweep").mkdir()
    client, run_id = open_writer(tmp_path)
    for step in range(4 * writer.NOTE_EVERY):
        client.log_batch(run_id, tags=[RunTag("step", str(step))])
    (session,) = sessions(tmp_path)
    while int((session / "done").read_bytes() or b"0") < client.seq:  # the writer has applied them all
        time.sleep(0.05)
    client.set_tag(run_id, "last", "yes")  # a queued call reads the writer's notes
    kept = sorted(session.glob("*.wal"))
    assert int(kept[-1].stem) >= 3 and len(kept) <= 2  # a segment rolled at each note, the applied ones gone
    client.close()
    assert MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(real(tmp_path, run_id)).data.tags["step"] == str(4 * writer.NOTE_EVERY - 1)
