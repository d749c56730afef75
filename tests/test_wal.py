"""The MLflow writer's write-ahead log (contrasweep.tracking.wal, .writer) on real MLflow stores:
sessions replayed in the order they were written whatever their pids, a replay applied twice
doubling no metric row on the file store either, a replay that failed part-way going on where it
stopped, and recovery that stops with one line rather than replay beside a writer still holding
the log's lock (issue 69, points 2-4)."""

from __future__ import annotations

import fcntl
import os
import pickle
import signal
import time
import uuid

import pytest
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from contrasweep.tracking import writer
from contrasweep.tracking.frames import FRAME, send
from contrasweep.tracking.run_ids import Ids
from contrasweep.tracking.store import StoreWriteError
from contrasweep.tracking.writer import WAL_DIR, QueuedClient, replay_log


def log_session(wal, name: str, calls: list, done: int = 0):
    """A session folder as a killed writer leaves it: its calls logged, ``done`` applied."""
    session = wal / name
    session.mkdir(parents=True)
    with open(session / "000000.wal", "wb") as out:
        for seq, (call, args, kwargs) in enumerate(calls, 1):
            frame = pickle.dumps((seq, call, args, kwargs))
            out.write(FRAME.pack(len(frame)) + frame)
    (session / "done").write_bytes(b"%020d" % done)
    return session


def made(experiment: str, run_id: str):
    return ("create_run", (experiment,), {"start_time": 1, "tags": None, "run_name": "r", "run_id": run_id})


def folders(wal) -> list:
    return sorted(p.name for p in wal.iterdir() if p.is_dir())


def test_two_unapplied_sessions_are_replayed_in_the_order_written_not_by_their_pids_as_text(tmp_path):
    """Pid 99999's session, then pid 100123's (named ``<pid>-<ns>``, as writers did before): as
    text 100123 comes first, and its writes would reach a run not made yet."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    direct = MlflowClient(uri)
    experiment = direct.create_experiment("tests")
    run_id, wal, ns = uuid.uuid4().hex, tmp_path / "sweep" / WAL_DIR, time.time_ns()
    log_session(wal, f"99999-{ns}", [made(experiment, run_id),
                                     ("log_batch", (run_id,), {"metrics": [Metric("m", 1.0, 1, 1)], "tags": [RunTag("t", "old")]}),
                                     ("set_terminated", (run_id,), {"status": "KILLED"})])
    log_session(wal, f"100123-{ns + 1000}", [("log_batch", (run_id,), {"metrics": [Metric("m", 2.0, 2, 2)], "tags": [RunTag("t", "new")]}),
                                             ("set_terminated", (run_id,), {"status": "FINISHED"})])
    assert replay_log(direct, tmp_path / "sweep") == 5
    run = direct.get_run(Ids(wal).map[run_id])
    assert (run.info.status, run.data.tags["t"]) == ("FINISHED", "new")  # the later session's last
    assert [m.step for m in direct.get_metric_history(Ids(wal).map[run_id], "m")] == [1, 2]
    assert folders(wal) == []


def test_a_writers_session_is_replayed_after_an_old_style_one_written_before_it(tmp_path):
    """A session left by a writer before (``<pid>-<ns>``, a pid that sorts after any as text)
    and one a writer of now left (it waited for the lock, was sent calls, was killed)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    direct = MlflowClient(uri)
    experiment = direct.create_experiment("tests")
    run_id, wal = uuid.uuid4().hex, tmp_path / "sweep" / WAL_DIR
    log_session(wal, f"9999999-{time.time_ns()}", [made(experiment, run_id),
                                                   ("set_tag", (run_id, "t", "old"), {})])
    held = os.open(wal / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_EX)  # the new writer waits: it replays nothing, applies nothing
    client = QueuedClient(uri, tmp_path / "sweep")
    client.set_tag(run_id, "t", "new")
    client.set_terminated(run_id, status="FINISHED")
    os.kill(client.pid, signal.SIGKILL)
    client._proc.wait()
    client.close()  # the writer is gone: its session stays for the next one
    os.close(held)
    assert len(folders(wal)) == 2

    assert replay_log(direct, tmp_path / "sweep") == 4
    run = direct.get_run(Ids(wal).map[run_id])
    assert (run.info.status, run.data.tags["t"]) == ("FINISHED", "new")
    assert folders(wal) == []


def test_a_replay_applied_twice_doubles_no_metric_row_on_the_file_store(tmp_path, monkeypatch):
    """MLflow's file store (opened where ``MLFLOW_ALLOW_FILE_STORE`` is set) appends a metric row
    logged again, where its SQL store skips it: the replay drops the rows the run already has,
    NaN ones too."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.17 refuses the file store otherwise
    uri = (tmp_path / "mlruns").as_uri()
    (tmp_path / "sweep").mkdir()
    client = QueuedClient(uri, tmp_path / "sweep")
    assert client.queued_runs  # the file store's runs are made queued, under the driver's placeholders too
    experiment = client.create_experiment("tests")
    run_id = client.create_run(experiment).info.run_id
    client.log_batch(run_id, metrics=[Metric("m", 0.0, 0, 0)])
    client.get_run(run_id)
    os.kill(client.pid, signal.SIGSTOP)  # what it is sent from here on is never applied
    for step in range(1, 21):
        client.log_batch(run_id, metrics=[Metric("m", float(step), 0, step), Metric("n", float("nan"), 0, step)])
    client.set_terminated(run_id, status="FINISHED")
    os.kill(client.pid, signal.SIGKILL)
    client._proc.wait()
    wal = tmp_path / "sweep" / WAL_DIR
    (session,) = (p for p in wal.iterdir() if p.is_dir())
    logged = {p.name: p.read_bytes() for p in session.iterdir()}
    direct = MlflowClient(uri)
    rid = Ids(wal).map[run_id]  # the file store's own id for the driver's placeholder

    assert replay_log(direct, tmp_path / "sweep") == 21
    assert [m.step for m in direct.get_metric_history(rid, "m")] == list(range(21))
    session.mkdir()  # replayed again from its start, as after a kill between applying and noting it
    for name, data in logged.items():
        (session / name).write_bytes(data if name != "done" else b"0")
    assert replay_log(direct, tmp_path / "sweep") == 23  # the run's creation among them
    assert sorted(m.step for m in direct.get_metric_history(rid, "m")) == list(range(21))  # no row twice
    assert sorted(m.step for m in direct.get_metric_history(rid, "n")) == list(range(1, 21))
    assert direct.get_run(rid).info.status == "FINISHED" and len(direct.search_runs([experiment])) == 1


def test_a_replay_that_failed_part_way_goes_on_where_it_stopped(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    direct = MlflowClient(uri)
    experiment = direct.create_experiment("tests")
    first, second = (direct.create_run(experiment).info.run_id for _ in range(2))
    direct.delete_run(second)  # MLflow refuses writes to a deleted run
    wal = tmp_path / "sweep" / WAL_DIR
    session = log_session(wal, f"{time.time_ns():020d}-1", [("log_batch", (first,), {"metrics": [Metric("m", 1.0, 1, 1)]}),
                                                            ("log_batch", (second,), {"metrics": [Metric("m", 1.0, 1, 1)]})])
    with pytest.raises(Exception, match="deleted|active"):
        replay_log(direct, tmp_path / "sweep")
    assert int((session / "done").read_bytes()) == 1  # the call applied is noted as it is applied

    direct.restore_run(second)  # the store is fixed
    assert replay_log(direct, tmp_path / "sweep") == 1
    assert [len(direct.get_metric_history(r, "m")) for r in (first, second)] == [1, 1]
    assert folders(wal) == []


def test_recovery_stops_with_one_line_while_a_writer_still_holds_the_lock(tmp_path):
    """A writer stuck on its store (stopped here) holds the sweep's log, a call it logged not yet
    applied: recovery waits for it ``timeout_s`` and then says who holds what, replaying nothing
    beside it (before, it went on after the wait and replayed the writer's own calls)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    direct = MlflowClient(uri)
    experiment = direct.create_experiment("tests")
    run_id, wal = uuid.uuid4().hex, tmp_path / "sweep" / WAL_DIR
    stuck = writer._spawn(uri)  # a writer of the sweep, as a driver starts one
    left = log_session(wal, f"{time.time_ns():020d}-{stuck.pid}", [made(experiment, run_id)])  # logged, not yet applied
    send(stuck.stdin.fileno(), pickle.dumps((str(wal), str(left))))
    deadline = time.monotonic() + 60
    while not (wal / "lock").exists() or not (wal / "lock").read_bytes().startswith(b"%d " % stuck.pid):
        assert time.monotonic() < deadline and stuck.poll() is None
        time.sleep(0.05)
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreWriteError) as caught:
            replay_log(direct, tmp_path / "sweep", timeout_s=0.5)
        assert 0.5 <= time.monotonic() - started < 10
        line = str(caught.value)
        assert "\n" not in line and str(wal / "lock") in line and f"pid {stuck.pid} on " in line
        assert "allowed: " in line
        assert left.is_dir() and direct.search_runs([experiment]) == []  # nothing replayed beside it
    finally:
        os.kill(stuck.pid, signal.SIGKILL)
        stuck.wait()
        stuck.stdin.close()
        stuck.stdout.close()
    assert replay_log(direct, tmp_path / "sweep") == 1  # once it has gone, recovery replays
    assert direct.get_run(Ids(wal).map[run_id]).info.run_name == "r"
