"""A sweep record that exists but cannot be read is never read as "nothing ran" (issue 69,
point 6): ``contrasweep.tracking.ledger`` used to return no trials for it, so a resume took
every repeat for unfinished and trained the finished ones again. Now every reader of the
ledger stops with one line naming the file and what to do, and ``contrasweep resume`` says
so before Ray starts: exit 2, nothing trained, nothing new in MLflow. Moving the file aside,
as the line says, is a missing record, which the tracker rebuilds from MLflow
(``contrasweep.tracking.reattach``). No Ray."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

from contrasweep.errors import UserError
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking import ledger
from contrasweep.tracking.tracker import MlflowTracker

from conftest import write_spec

DAMAGED = {
    "torn": b'{"parent_run_id":"p","trials":{"t0":{"config_key":"k","stat',  # a disk that lost its end
    "not UTF-8": b'{"trials": {"t0": "\xe9"}}',
    "no object": b"[]",
    "trials no object": b'{"parent_run_id": "p", "trials": []}',
    "empty": b"",
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_the_ledger_refuses_a_record_it_cannot_read(tmp_path, damage):
    path = tmp_path / "swp" / "tracking.json"
    path.parent.mkdir()
    path.write_bytes(DAMAGED[damage])
    for read in (ledger.finished, ledger.started, ledger.check_readable):
        with pytest.raises(UserError) as raised:
            read(path)
        message = str(raised.value)
        assert "\n" not in message and f"sweep 'swp': its record {path} cannot be read (" in message, message
        assert f"allowed: the record contrasweep wrote (restore it), or move it aside (`mv {path} {path}.unreadable`)" \
               " and `contrasweep resume swp` rebuilds it from the sweep's runs in MLflow" in message, message
    assert path.read_bytes() == DAMAGED[damage]  # left as it was


def test_the_ledger_refuses_a_record_that_is_not_a_file(tmp_path):
    path = tmp_path / "swp" / "tracking.json"
    path.mkdir(parents=True)
    with pytest.raises(UserError, match=r"cannot be read \(Is a directory\)"):
        ledger.finished(path)


def test_a_missing_record_is_still_nothing_recorded(tmp_path):
    assert ledger.finished(tmp_path / "tracking.json") == {} and ledger.started(None) == {}
    ledger.check_readable(tmp_path / "tracking.json")


class Trial:  # a stand-in Tune trial (as tests/test_tracking_resume.py's)
    run_metadata = None

    def __init__(self, trial_id, lr):
        self.trial_id, self.config, self.status = trial_id, {"hp": {"lr": lr}}, "RUNNING"

    def __str__(self):
        return f"trial_{self.trial_id}"


def interrupted_sweep(tmp_path):
    """A sweep folder as an interrupted driver leaves it: sweep.json (interrupted, no driver
    alive), spec.yaml, and the record and MLflow runs its tracker wrote for two repeats, one
    finished ("done"), one cut mid-way. Returns the root, the store and the tracker Tune would
    restore."""
    from contrasweep.folder import sweeps

    root, uri = tmp_path / "sweeps", f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = write_spec(tmp_path / "s.yaml", str(tmp_path / "no-model"), sweep={"seeds": [0], "scheduler": "none"})
    import yaml

    folder = sweeps.create(root, "cut", yaml.safe_load(spec.read_text()), {"tracking_uri": uri})
    (folder.path / "driver.json").unlink()  # the driver has ended
    folder.update_meta(status="interrupted")
    tracker = MlflowTracker(folder.path, uri, "tests", "cut", {"method": "ce"}, {"method": "ce"}, "val/accuracy",
                            "max", static=SweepStatic(method="ce"))
    restored = pickle.loads(pickle.dumps(tracker))
    done, cut = Trial("done", 1e-3), Trial("cut", 2e-3)
    trials = [done, cut]
    tracker.setup()
    for trial in trials:
        tracker.on_trial_start(0, trials, trial)
        tracker.on_trial_result(0, trials, trial, {"epoch": 1, "val/accuracy": 0.5, "timestamp": 1_700_000_001})
    done.status = "TERMINATED"
    tracker.on_trial_complete(0, trials, done)
    cut.status = "PAUSED"
    tracker.on_experiment_end(trials)
    return root, uri, folder, restored, done


def runs_in(uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return sorted((r.info.run_id, r.info.status, r.info.end_time) for e in client.search_experiments()
                  for r in client.search_runs([e.experiment_id]))


def test_resume_stops_on_an_unreadable_record_before_anything_starts(tmp_path):
    root, uri, folder, restored, done = interrupted_sweep(tmp_path)
    record = folder.path / "tracking.json"
    assert ledger.key(done.config) in ledger.finished(record)  # what the damage would hide
    good = record.read_bytes()
    record.write_bytes(good[: len(good) // 2])  # torn
    before = {"runs": runs_in(uri), "meta": folder.meta(), "files": sorted(p.name for p in folder.path.iterdir())}

    proc = subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(root), "resume", "cut", "--no-tsne"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith(f"contrasweep: error: sweep 'cut': its record {record} cannot be read (not JSON: "), lines
    assert f"`mv {record} {record}.unreadable`) and `contrasweep resume cut` rebuilds it" in lines[0], lines
    # nothing trained, nothing in MLflow changed, the folder as it was (no Tune experiment, no driver)
    after = {"runs": runs_in(uri), "meta": folder.meta(), "files": sorted(p.name for p in folder.path.iterdir())}
    assert after == before and after["meta"]["status"] == "interrupted"
    assert record.read_bytes() == good[: len(good) // 2]

    # what the line says to do: moved aside, the record is missing, and the resumed tracker
    # (Tune's restored copy, as `resume` sets it up) rebuilds it from MLflow: "done" finished
    record.rename(record.with_name("tracking.json.unreadable"))
    ledger.check_readable(record)
    restored.setup()
    assert ledger.key(done.config) in ledger.finished(record)
    assert json.loads(record.read_text())["parent_run_id"] == restored.state.data["parent_run_id"]
    restored.on_experiment_end([])


def test_the_sweeps_count_is_one_per_repeat_whichever_driver_ran_it(tmp_path):
    """``sweep.json``'s trials and errors (``runner.tune.fit``) come from the record (issue 69, point
    9): a repeat a resumed searcher issued again under another trial id, settled at once, counts
    once; a failed repeat retried to its end is not an error; one still failed is."""
    trials = {"t0": {"config_key": "k0", "status": "FINISHED"}, "t0-again": {"config_key": "k0", "status": "FINISHED"},
              "t1": {"config_key": "k1", "status": "FAILED"}, "t1-retry": {"config_key": "k1", "status": "FINISHED"},
              "t2": {"config_key": "k2", "status": "FAILED"}, "t3": {"config_key": "k3"}}  # t3: running when killed
    path = tmp_path / "tracking.json"
    path.write_text(json.dumps({"parent_run_id": "p", "trials": trials}))
    assert ledger.ended(path) == {"k0": "FINISHED", "k1": "FINISHED", "k2": "FAILED"}
