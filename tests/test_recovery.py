"""One state kept true after faults, without Ray (the real-process faults are in
test_searcher_resume.py and test_store_faults.py): who drives a sweep and whether it is alive,
tracking.json rebuilt from MLflow, an MLflow failure journaled and caught up on resume, paths
pickled by Tune following a moved sweep folder, and the CLI's answers about a dead or a live
driver."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time

import pytest
from test_tracking_resume import FakeTrial, done_and_cut, make, result

from contrasweep.folder import driver, relocation
from contrasweep.folder.record import read as read_record


def _record(folder, **values) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / driver.FILE).write_text(json.dumps({**driver.record(), **values}))


def test_driver_state_tells_a_live_driver_from_a_dead_one(tmp_path):
    _record(tmp_path / "me")
    assert driver.state(tmp_path / "me")[0] == "alive"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(tmp_path / "gone", pid=gone.pid, started="1")
    assert driver.state(tmp_path / "gone")[0] == "dead"
    _record(tmp_path / "reused", started="1")  # this pid, but another process's start time
    assert driver.state(tmp_path / "reused")[0] == "dead"
    _record(tmp_path / "rebooted", boot_id="another-boot")
    assert driver.state(tmp_path / "rebooted")[0] == "dead"
    _record(tmp_path / "remote", host=socket.gethostname() + "-other", heartbeat=time.time() - 5)
    assert driver.state(tmp_path / "remote")[0] == "alive"  # another host: only the heartbeat tells
    _record(tmp_path / "silent", host=socket.gethostname() + "-other", heartbeat=time.time() - driver.STALE_S - 1)
    assert driver.state(tmp_path / "silent")[0] == "dead"
    assert driver.state(tmp_path / "none")[0] == "none"


def test_heartbeat_names_the_driver_while_it_runs_and_leaves_no_file(tmp_path):
    with driver.Heartbeat(tmp_path, every_s=0.05):
        first = driver.read(tmp_path)["heartbeat"]
        time.sleep(0.3)
        assert driver.read(tmp_path)["heartbeat"] > first
        assert driver.state(tmp_path)[0] == "alive"
    assert not (tmp_path / driver.FILE).exists()


def test_lost_tracking_json_is_rebuilt_from_mlflow(tmp_path):
    """tracking.json deleted mid-sweep: resume finds the same parent, trial and configuration
    runs by their tags (one parent, one run per trial), with the last epoch logged, the best
    value and how finished trials ended; the unfinished runs it closed are reopened."""
    first, restored, done, cut, trials = done_and_cut(tmp_path)
    for t in trials:
        first.on_trial_result(0, trials, t, result(2, 0.8 if t is done else 0.4))
    done.status = "TERMINATED"
    first.on_trial_complete(0, trials, done)
    cut.status = "PAUSED"
    first.on_experiment_end(trials)  # stopped: the cut trial's runs end KILLED
    before = dict(first.state.data)
    (tmp_path / "sweep" / "tracking.json").unlink()

    restored.setup()
    data = restored.state.data
    assert data["parent_run_id"] == before["parent_run_id"]
    assert data["configs"] == before["configs"]
    assert {t: e["run_id"] for t, e in data["trials"].items()} == {t: e["run_id"] for t, e in before["trials"].items()}
    assert data["trials"]["done"]["status"] == "FINISHED" and "status" not in data["trials"]["cut"]
    assert data["trials"]["cut"]["last_epoch"] == 2 and data["trials"]["done"]["best_value"] == 0.8
    client = restored.client
    assert client.get_run(data["trials"]["cut"]["run_id"]).info.status == "RUNNING"  # reopened
    cut.status = "RUNNING"
    restored.on_trial_start(0, trials, cut)
    restored.on_trial_result(0, trials, cut, result(2, 0.9))  # replayed: logged already
    restored.on_trial_result(0, trials, cut, result(3, 0.6))
    cut.status = "TERMINATED"
    restored.on_trial_complete(0, trials, cut)
    restored.on_experiment_end(trials)
    runs = client.search_runs([data["experiment_id"]])
    assert sorted(r.data.tags["contrasweep.kind"] for r in runs) == ["configuration"] * 2 + ["sweep"] + ["trial"] * 2
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert [m.step for m in client.get_metric_history(data["trials"]["cut"]["run_id"], "val/accuracy")] == [1, 2, 3]


def test_store_failure_is_journaled_and_caught_up_on_resume(tmp_path, monkeypatch):
    """MLflow stops taking writes mid-trial: the tracker records the error once, keeps the
    epochs and the trial's end in tracking.json, and a resumed tracker logs them."""
    from mlflow.exceptions import MlflowException

    (tmp_path / "sweep").mkdir()
    trial = FakeTrial("a", {"hp": {"lr": 1e-3}})
    first = make(tmp_path)
    restored = pickle.loads(pickle.dumps(first))
    first.setup()
    first.on_trial_start(0, [trial], trial)
    first.on_trial_result(0, [trial], trial, result(1, 0.5))

    def broken(*args, **kwargs):
        raise MlflowException("(sqlite3.OperationalError) attempt to write a readonly database")

    for name in ("log_batch", "set_tag", "set_terminated"):
        monkeypatch.setattr(first.client, name, broken)
    first.on_trial_result(0, [trial], trial, result(2, 0.6))  # the failure: recorded, nothing raised
    first.on_trial_result(0, [trial], trial, result(3, 0.7))
    trial.status = "TERMINATED"
    first.on_trial_complete(0, [trial], trial)
    first.on_experiment_end([trial])
    saved = read_record(tmp_path / "sweep" / "tracking.json")
    assert "readonly database" in saved["store_error"]
    assert sorted({row[3] for row in saved["trials"]["a"]["unlogged"]}) == [2, 3]
    assert "pending" in saved["trials"]["a"]

    restored.setup()
    restored.on_experiment_end([trial])
    run_id = saved["trials"]["a"]["run_id"]
    assert [(m.step, m.value) for m in restored.client.get_metric_history(run_id, "val/accuracy")] == [(1, 0.5), (2, 0.6), (3, 0.7)]
    assert restored.client.get_run(run_id).info.status == "FINISHED"
    assert restored.client.get_run(saved["parent_run_id"]).info.status == "FINISHED"
    assert "store_error" not in read_record(tmp_path / "sweep" / "tracking.json")


def test_pickled_paths_follow_a_moved_sweep_folder(tmp_path):
    from contrasweep.search.group_asha import GroupASHA
    from contrasweep.search.study_storage import StudyStorage

    old, new = tmp_path / "old" / "s", tmp_path / "new" / "s"
    old.mkdir(parents=True)
    storage = StudyStorage(f"sqlite:///{old / 'optuna.db'}")
    scheduler = GroupASHA("m", "max", 4, 1, 2, group_of=str, group_sizes=1, max_running=1, state_path=old / "group_asha.json")
    tracker = make(tmp_path)
    tracker.sweep_dir = old
    pickles = pickle.dumps((storage, scheduler, tracker))
    del storage
    new.parent.mkdir()
    os.rename(old, new)
    relocation.moved(old, new)
    try:
        storage, scheduler, tracker = pickle.loads(pickles)  # used to fail: sqlite could not open the old path
    finally:
        relocation._MOVED.clear()
    assert storage.url == f"sqlite:///{new / 'optuna.db'}"
    assert scheduler.state_path == str(new / "group_asha.json")
    assert tracker.sweep_dir == new
    assert relocation.here(str(old) + "-other") == str(old) + "-other"  # a sibling is not inside


def test_a_folder_moved_twice_maps_every_folder_it_ran_in(tmp_path):
    """Tune's tuner.pkl names the first folder (written once), its saved state the last one:
    a sweep made in A, resumed in B, then moved to C maps both to C; resumed in C again,
    nothing more is recorded."""
    a, b, c = (str(tmp_path / x / "s") for x in "abc")
    try:
        assert relocation.arrived(a, a, []) is None and not relocation._MOVED
        assert relocation.arrived(b, a, []) == [a]
        relocation._MOVED.clear()  # a new driver process
        assert relocation.arrived(c, b, [a]) == [a, b]
        assert relocation.here(a + "/tuner.pkl") == c + "/tuner.pkl"
        assert relocation.here(b + "/group_asha.json") == c + "/group_asha.json"
        relocation._MOVED.clear()
        assert relocation.arrived(c, c, [a, b]) == [a, b]  # resumed in C once more: still mapped
        assert relocation.here(a) == c
    finally:
        relocation._MOVED.clear()


def _cli(tmp_path, *args):
    env = {**os.environ, "CONTRASWEEP_HOME": str(tmp_path / "sweeps")}
    return subprocess.run([sys.executable, "-m", "contrasweep", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def _sweep(tmp_path, name: str, **driver_values):
    folder = tmp_path / "sweeps" / name
    _record(folder, **driver_values)
    (folder / "spec.yaml").write_text("method: ce\ntracking: {experiment: tests}\n")
    (folder / "sweep.json").write_text(json.dumps({"name": name, "created": "2026-11-25T00:00:00", "status": "running",
                                                   "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}))
    return folder


def test_list_and_resume_see_whether_the_driver_lives(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = _sweep(tmp_path, "dead", pid=gone.pid, started="1")
    _sweep(tmp_path, "live")  # this test's own process drives it
    listed = _cli(tmp_path, "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:]}
    assert rows == {"dead": "interrupted", "live": "running"}
    assert "dead: its driver is gone" in listed.stderr
    assert json.loads((dead / "sweep.json").read_text())["status"] == "interrupted"  # recorded, not only shown

    refused = _cli(tmp_path, "resume", "live")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"contrasweep: error: sweep 'live' is still running (pid {os.getpid()} on {socket.gethostname()}, "
        f"heartbeat {refused.stderr.split('heartbeat ')[1].split(' s ago')[0]} s ago); allowed: resume it once that "
        "process has ended"]


def test_tunes_automatic_loggers_stay_off_and_its_pending_trials_fill_the_slots_while_a_sweep_runs(tmp_path,
                                                                                                     monkeypatch):
    """A sweep names result.json and progress.csv in its pickled run config, and Tune's
    automatic loggers (TensorBoard's imports torch into the driver) stay off while it runs; Tune
    keeps as many trials pending as run at once; the variables are put back."""
    from contrasweep.folder import sweeps
    from contrasweep.runner.tune import fit

    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)
    monkeypatch.delenv("TUNE_MAX_PENDING_TRIALS_PG", raising=False)
    seen = []

    class Tuner:
        def fit(self):
            seen.append((os.environ.get("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"), os.environ.get("TUNE_MAX_PENDING_TRIALS_PG")))
            raise KeyboardInterrupt  # fit records the sweep interrupted and re-raises

    sweep_dir = sweeps.create(tmp_path, "now", {"method": "ce"}, {})
    with pytest.raises(KeyboardInterrupt):
        fit(Tuner(), sweep_dir, slots=16)
    assert sweep_dir.meta()["status"] == "interrupted"
    # as many trials pending (actors booting) as run at once: Tune's default for a searcher is one
    assert seen == [("1", "16")]
    assert "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS" not in os.environ and "TUNE_MAX_PENDING_TRIALS_PG" not in os.environ
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "3")  # the user's own value is kept
    with pytest.raises(KeyboardInterrupt):
        fit(Tuner(), sweep_dir, slots=16)
    assert seen[-1] == ("1", "3")


def test_a_trial_killed_for_memory_ends_the_driver_in_one_line():
    """Ray's memory monitor killed a trial's process; Tune's controller re-raises the
    ``OutOfMemoryError`` as a RuntimeError (measured: SupCL-Seq's batch of 480, two trials at once
    on 24 GB). The sweep is interrupted and the line says what to change; other errors pass."""
    from ray.exceptions import OutOfMemoryError

    from contrasweep.errors import UserError
    from contrasweep.runner.recovery import out_of_memory
    from contrasweep.runner.tune import fit

    class Tuner:
        def fit(self):
            try:
                raise OutOfMemoryError("1 worker(s) were killed due to the node running low on memory.\nmore lines")
            except OutOfMemoryError as cause:
                raise RuntimeError(f"Caught unexpected exception: {cause}") from cause

    class Folder:
        name, meta = "big-batch", {}

        def update_meta(self, **kw):
            self.meta.update(kw)

    folder = Folder()
    with pytest.raises(UserError) as caught:
        fit(Tuner(), folder)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("sweep 'big-batch' stopped: Ray killed a trial's process")
    assert "sweep.max_concurrent=1" in line and "batch_size" in line and folder.meta == {"status": "interrupted"}
    assert out_of_memory(RuntimeError("another failure"), "x") is None
