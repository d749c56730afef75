"""MlflowTracker across a restore, on a real sqlite MLflow store, with stand-in Tune trials:
a resumed sweep re-attaches runs by trial id, re-attaches the run of a trial the restored
experiment lost (same config, new id), never logs an epoch twice, and deletes runs that were
never re-attached."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.tracker import MlflowTracker
from dashboards.trials import history, parent_runs, trial_runs


@dataclass
class FakeTrial:
    trial_id: str
    config: dict
    status: str = "RUNNING"
    run_metadata: object = None  # no Tune checkpoint manager: no checkpoint to log

    def __str__(self):
        return f"trial_{self.trial_id}"


def result(epoch: int, value: float) -> dict:
    return {"epoch": epoch, "val/accuracy": value, "timestamp": 1_700_000_000 + epoch}


def make(tmp_path):
    return MlflowTracker(tmp_path / "sweep", f"sqlite:///{tmp_path / 'mlflow.db'}", "tests", "swp", {"method": "ce"},
                         {"method": "ce"}, "val/accuracy", "max", static=SweepStatic(method="ce"))


def done_and_cut(tmp_path):
    """Two trials, "done" and "cut", each through its first epoch on a tracker (``first``), and
    the copy of that tracker Tune would restore (``restored``)."""
    (tmp_path / "sweep").mkdir()
    done, cut = FakeTrial("done", {"hp": {"lr": 1e-3}}), FakeTrial("cut", {"hp": {"lr": 2e-3}})
    trials = [done, cut]
    first = make(tmp_path)
    restored = pickle.loads(pickle.dumps(first))
    first.setup()
    for t in trials:
        first.on_trial_start(0, trials, t)
        first.on_trial_result(0, trials, t, result(1, 0.5))
    return first, restored, done, cut, trials


def test_restore_reattaches_and_cleans_up(tmp_path):
    (tmp_path / "sweep").mkdir()
    a = FakeTrial("a", {"hp": {"lr": 1e-3}})
    lost = FakeTrial("lost", {"hp": {"lr": 2e-3}})
    gone = FakeTrial("gone", {"hp": {"lr": 3e-3}})
    first = make(tmp_path)
    restored_copy = pickle.loads(pickle.dumps(first))  # what Tune keeps in tuner.pkl
    first.setup()
    for t in (a, lost, gone):
        first.on_trial_start(0, [a, lost, gone], t)
        first.on_trial_result(0, [a, lost, gone], t, result(1, 0.5))
    # --- the driver dies; Tune restores trial "a", regenerates "lost" as "lost2", forgets "gone"
    lost2 = FakeTrial("lost2", {"hp": {"lr": 2e-3}})
    trials = [a, lost2]
    restored_copy.setup()
    restored_copy.on_trial_start(0, trials, a)
    restored_copy.on_trial_start(0, trials, lost2)
    for t in trials:
        restored_copy.on_trial_result(0, trials, t, result(1, 0.9))  # replayed epoch: skipped
        restored_copy.on_trial_result(0, trials, t, result(2, 0.7))
        t.status = "TERMINATED"
        restored_copy.on_trial_complete(0, trials, t)
    restored_copy.on_experiment_end(trials)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parents = parent_runs(uri, "tests", "swp")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    listed = trial_runs(uri, parents[0].info.run_id)
    assert len(listed) == 2
    runs = {r.data.params["hp.lr"]: r for r in listed}
    assert set(runs) == {"0.001", "0.002"}  # "gone" was deleted, "lost2" reused lost's run
    for run in runs.values():
        assert run.info.status == "FINISHED"
        assert history(uri, run.info.run_id, "val/accuracy") == [(1, 0.5), (2, 0.7)]
    assert runs["0.002"].data.tags["contrasweep.trial_id"] == "lost2"
    assert runs["0.001"].data.params["hp.warmup_ratio"] == "0.06"  # defaults logged too


def test_sqlite_store_keeps_artifacts_next_to_its_file(tmp_path):
    # MLflow's own default is ./mlruns of the current directory (it once filled the checkout)
    assert make(tmp_path).artifact_root == (tmp_path.resolve() / "mlartifacts").as_uri()
    server = MlflowTracker(tmp_path, "http://127.0.0.1:5000", "e", "s", {}, {}, "m", "max")
    assert server.artifact_root is None  # a tracking server decides


def test_an_interrupted_sweep_leaves_nothing_running_and_resume_goes_on(tmp_path):
    """Ctrl-C: Tune ends the experiment with trials unfinished. The parent, the unfinished
    trial runs and their open configuration runs all end KILLED (the parent used to be the
    only one); a finished trial stays FINISHED. Resume sets them RUNNING again, and the
    finished sweep ends with every run FINISHED."""
    from mlflow.tracking import MlflowClient

    first, restored, done, cut, trials = done_and_cut(tmp_path)
    done.status = "TERMINATED"
    first.on_trial_result(0, trials, done, result(2, 0.6))
    first.on_trial_complete(0, trials, done)
    cut.status = "PAUSED"  # what Tune leaves after SIGINT
    first.on_experiment_end(trials)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    every = client.search_runs([first.state.data["experiment_id"]])
    by_kind: dict[str, list] = {}
    for r in every:
        by_kind.setdefault(r.data.tags.get("contrasweep.kind"), []).append(
            (r.data.tags.get("contrasweep.trial_id", ""), r.info.status))
    assert sorted(by_kind["trial"]) == [("cut", "KILLED"), ("done", "FINISHED")], by_kind
    assert sorted(s for _, s in by_kind["configuration"]) == ["FINISHED", "KILLED"], by_kind
    assert [s for _, s in by_kind["sweep"]] == ["KILLED"], by_kind

    # resume: the unfinished runs are RUNNING again while the trial goes on, then all FINISHED
    restored.setup()
    assert client.get_run(first.state.trials["cut"]["run_id"]).info.status == "RUNNING"
    cut.status = "RUNNING"
    restored.on_trial_start(0, trials, cut)
    restored.on_trial_result(0, trials, cut, result(2, 0.7))
    cut.status = "TERMINATED"
    restored.on_trial_complete(0, trials, cut)
    restored.on_experiment_end(trials)
    assert {r.info.status for r in client.search_runs([first.state.data["experiment_id"]])} == {"FINISHED"}


def test_provenance_goes_once_on_the_sweep_run_and_a_resume_by_other_code_marks_its_new_runs(tmp_path, monkeypatch):
    """Which code made the runs is tagged on the sweep run; configuration and trial runs carry
    the UI's user and source columns only, unless a resume runs other code (another commit): the
    runs it opens carry the tags that differ from the sweep run's."""
    from mlflow.tracking import MlflowClient

    import contrasweep.tracking.tracker as tracker_module

    commit = {"mlflow.source.git.commit": "a" * 40}
    real = tracker_module.provenance_tags
    monkeypatch.setattr(tracker_module, "provenance_tags", lambda spec, *rest: {**real(spec, *rest), **commit})
    first, restored, done, cut, trials = done_and_cut(tmp_path)
    first.on_experiment_end(trials)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = client.get_run(first.parent_run_id).data.tags
    assert parent["mlflow.source.git.commit"] == "a" * 40 and "contrasweep.host" in parent
    trial = client.get_run(first.state.trials["done"]["run_id"]).data.tags
    assert trial["mlflow.user"] == parent["mlflow.user"] and "contrasweep.host" not in trial
    assert "mlflow.source.git.commit" not in trial
    commit["mlflow.source.git.commit"] = "b" * 40  # the resume runs another commit
    restored.setup()
    late = FakeTrial("late", {"hp": {"lr": 3e-3}})
    restored.on_trial_start(0, [*trials, late], late)
    # asked of the tracker's client: answered once the writer has made the run (tracking.writer)
    tags = restored.client.get_run(restored.state.trials["late"]["run_id"]).data.tags
    assert tags["mlflow.source.git.commit"] == "b" * 40 and "contrasweep.host" not in tags
    assert client.get_run(first.parent_run_id).data.tags["mlflow.source.git.commit"] == "a" * 40
