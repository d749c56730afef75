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


def test_the_groups_the_selection_takes_from_the_record_are_those_mlflow_holds(tmp_path):
    """At the sweep's end the selection takes its repeat groups from the record and the final
    metrics the tracker closed each group with (``RunTree.closed_groups``), not by reading every
    trial run back: they must equal what ``aggregate.groups_of`` reads from MLflow, field by
    field (two settings, repeats, a failed repeat, a trial with a data seed), and the selection
    onto the sweep run must be the one MLflow's read gives. A record with a group not closed in
    this process (an earlier driver's) gives none: then the selection reads MLflow."""
    from contrasweep.spec.static import VariantStatic
    from contrasweep.spec.trial import DATA_KEY
    from contrasweep.tracking.aggregate import groups_of, select
    from contrasweep.tracking.store import trial_runs

    (tmp_path / "sweep").mkdir()
    static = SweepStatic(method="ce", seeds=(0, 1), variants=(
        VariantStatic(index=0, label="k=4", data={"k": 4, "seed": 3}, setting={"k": 4}),
        VariantStatic(index=1, label="k=8", data={"k": 8, "seed": 3}, setting={"k": 8})))
    tracker = MlflowTracker(tmp_path / "sweep", f"sqlite:///{tmp_path / 'mlflow.db'}", "tests", "swp",
                            {"method": "ce"}, {"method": "ce"}, "val/accuracy", "max", static=static, group_sizes=2)
    trials = [FakeTrial(f"t{i}", {"hp": {"lr": lr, "seed": seed, DATA_KEY: v}})
              for i, (lr, v, seed) in enumerate((lr, v, s) for lr in (1e-3, 2e-3) for v in (0, 1) for s in (0, 1))]
    tracker.setup()
    for n, t in enumerate(trials):
        tracker.on_trial_start(0, trials, t)
        tracker.on_trial_result(0, trials, t, {**result(1, 0.4 + n / 100), "train/loss": 1.0 - n / 50})
        if t.trial_id == "t5":  # lr 2e-3, k=4, seed 1: fails, so its group is not complete
            t.status = "ERROR"
            tracker.on_trial_error(0, trials, t)
            continue
        tracker.on_trial_result(0, trials, t, {**result(2, 0.5 + n / 100), "train/loss": 0.5 - n / 50})
        t.status = "TERMINATED"
        tracker.on_trial_complete(0, trials, t)
    tracker._remap()  # as the sweep's end does before it selects: the record's runs by their MLflow ids
    from_record = tracker.runs.closed_groups()
    from_mlflow = groups_of(trial_runs(tracker.client, tracker.parent_run_id))

    def fields(groups):
        return sorted((g.group, g.setting, g.config, g.hp, g.size, g.info, g.outcomes,
                       sorted((r["run_id"], r["seed"], r["data_seed"], r["split_seed"], r["outcome"],
                               sorted(r["metrics"].items())) for r in g.repeats)) for g in groups)

    assert from_record is not None and len(from_record) == 4 and fields(from_record) == fields(from_mlflow)
    assert {g.setting for g in from_record} == {"k=4", "k=8"} and from_record[0].hp["lr"] == "0.001"
    assert {g.outcomes.get("failed", 0) for g in from_record} == {0, 1}
    chosen = select(from_record, "best/val/accuracy")
    assert {s: g.group for s, g in chosen.items()} == {s: g.group for s, g in select(from_mlflow, "best/val/accuracy").items()}
    tracker.on_experiment_end(trials)
    from mlflow.tracking import MlflowClient

    from contrasweep.tracking.rows import slug

    parent = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(tracker.parent_run_id)
    for setting, group in chosen.items():
        assert parent.data.tags[f"contrasweep.best_config.{slug(setting)}"] == tracker.state.data["configs"][group.group]

    # an earlier driver's groups: the next driver closed none of them, so it reads MLflow
    again = MlflowTracker(tmp_path / "sweep", f"sqlite:///{tmp_path / 'mlflow.db'}", "tests", "swp",
                          {"method": "ce"}, {"method": "ce"}, "val/accuracy", "max", static=static, group_sizes=2)
    again.setup()
    try:
        assert again.runs.closed_groups() is None
    finally:
        again.close_writer()


def test_a_resume_after_mlflow_wal_ids_was_deleted_finds_the_runs_by_their_placeholder_tag(tmp_path):
    """The record names runs by the driver's placeholders until the writer has made them
    (``folder.placeholders``); ``mlflow_wal/ids`` maps them. A user who deleted that file
    (or all of ``mlflow_wal/``) after a kill: the next driver finds each run by its
    ``contrasweep.placeholder`` tag, writes the map again, and the sweep goes on in the same runs."""
    import shutil

    from mlflow.tracking import MlflowClient

    from contrasweep.folder.placeholders import ids_path
    from contrasweep.folder.placeholders import load as load_ids

    first, restored, done, cut, trials = done_and_cut(tmp_path)
    first.close_writer()  # the driver dies: no end, the record still names the runs by placeholders
    sweep = tmp_path / "sweep"
    made = load_ids(ids_path(sweep))
    named = {first.state.trials[t]["run_id"] for t in ("done", "cut")} | {first.parent_run_id}
    assert named <= set(made)  # placeholders, each with its MLflow id
    shutil.rmtree(sweep / "mlflow_wal")
    restored.setup()
    try:
        assert load_ids(ids_path(sweep)) == made  # found again by tag
        assert restored.parent_run_id == made[first.parent_run_id]
        for t in trials:
            t.status = "TERMINATED"
            restored.on_trial_result(0, trials, t, result(2, 0.7))
            restored.on_trial_complete(0, trials, t)
        restored.on_experiment_end(trials)
    finally:
        restored.close_writer()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    listed = client.search_runs([restored.state.data["experiment_id"]])
    assert len(listed) == 1 + 2 + 2 and {r.info.status for r in listed} == {"FINISHED"}  # the same runs, all ended
    for t in trials:
        assert history(f"sqlite:///{tmp_path / 'mlflow.db'}", made[first.state.trials[t.trial_id]["run_id"]],
                       "val/accuracy") == [(1, 0.5), (2, 0.7)]
