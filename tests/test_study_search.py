"""The resume rule's parts, each against a Tune state older than the sweep's own record
(docs/architecture.md, "Resume"): the searcher (``contrasweep.search.study_search``: a real Optuna
study in sqlite, Tune's save/restore of the searcher done as Tune does it) and the schedulers'
``settle`` (``contrasweep.search.group_asha.MovableFIFO``, ``contrasweep.tracking.ledger``)."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
from optuna.trial import TrialState
from ray.tune.experiment import Trial
from ray.tune.search import Searcher

from contrasweep.search import live_trials
from contrasweep.search.group_asha import MovableFIFO
from contrasweep.search.study_search import StudySearcher, distributions
from contrasweep.spec.domains import Choice, LogRange
from contrasweep.spec.identity import key_of

METRIC = "val/accuracy"


def make(tmp_path, repeats=2, num_samples=2, max_concurrent=4, metrics=(METRIC,), reported=None, seed=0):
    space = distributions({"lr": LogRange(1.0e-5, 1.0e-2), "heads": Choice((1, 2))})
    sampler = optuna.samplers.RandomSampler(seed=seed)
    return StudySearcher(space, list(metrics), ["max"] * len(metrics), sampler, "s", f"sqlite:///{tmp_path / 'optuna.db'}",
                         repeats=repeats, num_samples=num_samples, max_concurrent=max_concurrent, reported=reported,
                         epochs=3)


def study(tmp_path):
    return optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'optuna.db'}")


def done(value, epoch=3):
    return {"epoch": epoch, METRIC: value}


def snapshot(searcher, tmp_path, name="snap.pkl"):
    """What Tune keeps of the searcher: the object in tuner.pkl, its state in the experiment state."""
    searcher.save(str(tmp_path / name))
    return pickle.dumps(searcher)


def restored(pickled, tmp_path, name="snap.pkl"):
    searcher = pickle.loads(pickled)
    searcher.restore(str(tmp_path / name))
    return searcher


def test_a_suggestion_runs_once_per_repeat_and_is_told_the_mean_once(tmp_path):
    s = make(tmp_path, reported={"lr": 1.0e-3, "heads": 2})
    a, b = s.suggest("a"), s.suggest("b")
    assert (a["__suggestion__"], a["__trial_index__"]) == (0, 0) and (b["__suggestion__"], b["__trial_index__"]) == (0, 1)
    assert a["lr"] == b["lr"] == 1.0e-3 and a["heads"] == 2  # the paper's point first, for every repeat
    s.on_trial_complete("a", done(0.5))
    assert study(tmp_path).trials[0].state == TrialState.RUNNING  # waits for its other repeat
    s.on_trial_complete("b", done(0.7))
    s.on_trial_complete("b", done(0.1))  # a replay changes nothing
    first = study(tmp_path).trials[0]
    assert first.state == TrialState.COMPLETE and first.value == pytest.approx(0.6)
    assert first.user_attrs["repeat.1"] == {"outcome": "complete", "epoch": 3, "values": [0.7], "selection": 0.7}
    c, d = s.suggest("c"), s.suggest("d")
    assert c["__suggestion__"] == d["__suggestion__"] == 1 and c["lr"] != a["lr"]
    assert s.suggest("e") == Searcher.FINISHED  # num_samples suggestions made


def test_the_budget_is_counted_in_the_study_once_per_driver_not_per_suggestion(tmp_path, monkeypatch):
    """``asked`` reads every study trial once (then counts its own asks), and after the study's
    first read no ask, record or tell reads SQL again (``SoleWriterStorage``: this driver alone
    writes the study): the searcher's cost per trial does not grow with the sweep. The study file
    keeps SQLite's write-ahead log on a local disk (``study_storage.write_ahead``), a restored
    copy's connections too, and the rollback journal on a network file system."""
    s = make(tmp_path, repeats=1, num_samples=5)
    reads, sql_reads = [], []
    study_type, backend = type(s.study), s.storage.backend
    real_get = study_type.get_trials
    study_type.get_trials = lambda self, *a, **k: reads.append(1) or real_get(self, *a, **k)
    for name in ("get_trial", "get_trial_id_from_study_id_trial_number", "get_all_trials"):  # RDBStorage public reads
        real = getattr(backend, name)
        setattr(backend, name, lambda *a, _real=real, _name=name, **k: sql_reads.append(_name) or _real(*a, **k))
    try:
        first = None
        for i in range(5):
            assert s.suggest(f"t{i}")["__suggestion__"] == i
            s.on_trial_complete(f"t{i}", done(0.1 * i))
            first = first or len(reads)
            first_sql = first_sql if i else len(sql_reads)
        assert s.suggest("t5") == Searcher.FINISHED
    finally:
        study_type.get_trials = real_get
    assert len(reads) == first <= 3  # read when the driver starts, not per trial
    assert first_sql <= 1 and len(sql_reads) == first_sql, sql_reads  # SQL read once, then only written
    stored = study(tmp_path).trials
    assert [t.state for t in stored] == [TrialState.COMPLETE] * 5
    in_memory = s.study.get_trials(deepcopy=False)  # what this driver reads is what SQL holds
    for ours, theirs in zip(in_memory, stored):
        assert (ours.params, ours.distributions, ours.values, ours.user_attrs, ours.system_attrs, ours.state) == \
            (theirs.params, theirs.distributions, theirs.values, theirs.user_attrs, theirs.system_attrs, theirs.state)
        assert abs((ours.datetime_complete - theirs.datetime_complete).total_seconds()) < 1
    again = restored(snapshot(s, tmp_path), tmp_path)  # a new driver counts the study again
    assert again.asked() == 5 and again.suggest("t6") == Searcher.FINISHED
    import sqlite3

    from contrasweep.folder import sweep_storage
    from contrasweep.search.study_storage import StudyStorage

    def modes(storage):
        with storage.engine.connect() as conn:
            return conn.exec_driver_sql("PRAGMA journal_mode").scalar(), conn.exec_driver_sql("PRAGMA synchronous").scalar()

    assert modes(s.storage.backend) == modes(again.storage.backend) == ("wal", 1)  # 1: NORMAL
    with sqlite3.connect(s.storage.backend.url[len("sqlite:///"):]) as db:  # another process's reader: the file's mode
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    monkeypatch.setattr(sweep_storage, "shared_path", lambda path: True)  # e.g. an NFS mount
    assert modes(StudyStorage(f"sqlite:///{tmp_path / 'nfs.db'}")) == ("delete", 2)  # 2: FULL, SQLite's default


def test_concurrency_counts_live_trials(tmp_path):
    s = make(tmp_path, max_concurrent=2)
    assert s.suggest("a") and s.suggest("b") and s.suggest("c") is None
    s.on_trial_complete("a", done(0.5))
    assert s.suggest("c")["__suggestion__"] == 1


def test_restored_from_an_older_copy_nothing_is_replayed_redrawn_or_told_twice(tmp_path):
    """Tune's copy was saved when suggestion 0's two repeats were live; after it, both ended
    (the study was told), suggestion 1 was drawn and its first repeat started; then the driver
    died. The restored searcher re-issues suggestion 1's repeats with the same values (never a
    new draw), ignores suggestion 0's repeats that Tune replays, and tells each suggestion once."""
    s = make(tmp_path)
    s.suggest("a"), s.suggest("b")
    pickled = snapshot(s, tmp_path)
    s.on_trial_complete("a", done(0.4))
    s.on_trial_complete("b", done(0.6))
    lost = s.suggest("c")
    del s  # SIGKILL
    r = restored(pickled, tmp_path)
    again = [r.suggest("c2"), r.suggest("d2")]
    assert [(c["__suggestion__"], c["__trial_index__"]) for c in again] == [(1, 0), (1, 1)]
    assert again[0]["lr"] == lost["lr"]  # kept, not drawn again
    r.on_trial_complete("a", done(0.9))  # Tune restored suggestion 0's repeats and ran them again
    r.on_trial_complete("b", done(0.9))
    r.on_trial_complete("c2", done(0.2))
    r.on_trial_complete("d2", done(0.4))
    trials = study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert trials[0].value == pytest.approx(0.5) and trials[1].value == pytest.approx(0.3)
    assert r.suggest("e") == Searcher.FINISHED


def test_a_suggestion_whose_repeats_all_ended_before_the_kill_is_told_on_restore(tmp_path):
    s = make(tmp_path)
    s.suggest("a"), s.suggest("b")
    pickled = snapshot(s, tmp_path)
    s.on_trial_complete("a", done(0.4))
    number = study(tmp_path).trials[0].number
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")  # b's record written, the tell not
    storage.set_trial_user_attr(study(tmp_path).trials[0]._trial_id, "repeat.1",
                                {"outcome": "complete", "epoch": 3, "values": [0.8]})
    r = restored(pickled, tmp_path)
    r.suggest("c")
    first = study(tmp_path).trials[number]
    assert first.state == TrialState.COMPLETE and first.value == pytest.approx(0.6)


def test_stopped_repeats_prune_and_failed_ones_fail(tmp_path):
    s = make(tmp_path, max_concurrent=4)
    for tid in "abcd":
        s.suggest(tid)
    s.on_trial_complete("a", done(0.5, epoch=1))  # group ASHA stopped it at the first rung
    s.on_trial_complete("b")  # stopped while paused at the rung: no result
    s.on_trial_complete("c", done(0.5))
    s.on_trial_complete("d", error=True)
    pruned, failed = study(tmp_path).trials
    assert pruned.state == TrialState.PRUNED and pruned.intermediate_values == {1: 0.5}
    assert failed.state == TrialState.FAIL


def test_several_metrics_are_told_their_means(tmp_path):
    s = make(tmp_path, metrics=(METRIC, "val/macro_f1"), repeats=2, num_samples=1)
    s.suggest("a"), s.suggest("b")
    s.on_trial_complete("a", {"epoch": 3, METRIC: 0.5, "val/macro_f1": 0.2})
    s.on_trial_complete("b", {"epoch": 3, METRIC: 0.7, "val/macro_f1": math.nan})
    (trial,) = study(tmp_path).trials
    assert trial.values == pytest.approx([0.6, 0.2]) and len(study(tmp_path).directions) == 2


def test_the_study_is_told_what_the_selection_ranks_by_the_best_epochs_mean(tmp_path):
    """Issue 69: a noisy validation set's last epoch is not its best; the selection ranks by the
    best epoch's value (``best/val/...``), so TPE is told that mean, each metric's for several
    objectives, and a stopped suggestion's intermediate value is that mean too. A record written
    by an older version (no best value) is told its last epoch's value; a told study is not re-told."""
    s = make(tmp_path, metrics=(METRIC, "val/macro_f1"), repeats=2, num_samples=3, max_concurrent=6)
    for tid in "abcdef":
        s.suggest(tid)
    s.on_trial_complete("a", {"epoch": 3, METRIC: 0.5, "best/val/accuracy": 0.7, "val/macro_f1": 0.2,
                              "best/val/macro_f1": 0.4})
    s.on_trial_complete("b", {"epoch": 3, METRIC: 0.6, "best/val/accuracy": 0.9, "val/macro_f1": 0.3,
                              "best/val/macro_f1": 0.6})
    s.on_trial_complete("b", {"epoch": 3, METRIC: 0.1, "best/val/accuracy": 0.1})  # a replay changes nothing
    first = study(tmp_path).trials[0]
    assert first.state == TrialState.COMPLETE and first.values == pytest.approx([0.8, 0.5])  # not [0.55, 0.25]
    assert first.user_attrs["repeat.1"]["selections"] == [0.9, 0.6] and first.user_attrs["repeat.1"]["values"] == [0.6, 0.3]
    # resumed over an older driver's record (no best value): that repeat is told its last epoch's
    older = make(tmp_path / "older", repeats=2, num_samples=1)
    (tmp_path / "older").mkdir()
    older.suggest("a"), older.suggest("b")
    pickled = snapshot(older, tmp_path)
    older.on_trial_complete("a", {"epoch": 3, METRIC: 0.2, "best/val/accuracy": 0.4})
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'older' / 'optuna.db'}")  # b's record, the tell not
    older_study = study(tmp_path / "older")  # Optuna's public ids: the study's by name, its trial 0's
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(older_study.study_name), 0)
    storage.set_trial_user_attr(trial_id, "repeat.1",
                                {"outcome": "complete", "epoch": 3, "values": [0.8]})
    restored(pickled, tmp_path).suggest("c")
    assert study(tmp_path / "older").trials[0].value == pytest.approx(0.6)  # (0.4 + 0.8) / 2
    # group ASHA stopped a suggestion: pruned at the best epoch's mean reached
    single = make(tmp_path / "one", repeats=2, num_samples=1)
    (tmp_path / "one").mkdir()
    single.suggest("a"), single.suggest("b")
    single.on_trial_complete("a", {"epoch": 1, METRIC: 0.4, "best/val/accuracy": 0.6})
    single.on_trial_complete("b", {"epoch": 1, METRIC: 0.2, "best/val/accuracy": 0.8})
    (pruned,) = study(tmp_path / "one").trials
    assert pruned.state == TrialState.PRUNED and pruned.intermediate_values == pytest.approx({1: 0.7})


def test_the_reported_point_is_enqueued_once(tmp_path):
    s = make(tmp_path, reported={"lr": 1.0e-3, "heads": 1}, num_samples=3, repeats=1)
    s.suggest("a")
    pickled = snapshot(s, tmp_path)
    r = restored(pickled, tmp_path)
    r.on_trial_complete("a", done(0.5))
    second = r.suggest("b")
    assert second["__suggestion__"] == 1 and second["lr"] != 1.0e-3
    assert [t.params["lr"] == 1.0e-3 for t in study(tmp_path).trials] == [True, False]


# -- the schedulers' settle: Tune's copy older than the sweep's record -----------------------

class FakeTrial:
    def __init__(self, trial_id, config, status=Trial.PENDING):
        self.trial_id, self.config, self.status = trial_id, config, status
        self.last_result = {}
        self.relative_logdir, self.storage = None, SimpleNamespace(storage_fs_path=str(Path.cwd()))

    def init_local_path(self):  # Tune's naming of the trial's folder: a name once given is kept
        self.relative_logdir = self.relative_logdir or f"trial_{self.trial_id}"

    def update_last_result(self, result):
        self.last_result = result


class FakeController:
    """Tune's controller as a scheduler sees it (with the wrapper's ``_tune_controller``)."""

    def __init__(self, trials):
        self.trials, self.stopped, self.saves, self.marked = trials, [], 0, []
        self._tune_controller = self

    def _mark_trial_to_checkpoint(self, trial):
        self.marked.append(trial.trial_id)

    def get_trials(self):
        return self.trials

    def stop_trial(self, trial):
        self.stopped.append(trial.trial_id)
        trial.status = Trial.TERMINATED

    def checkpoint(self, force=False):
        assert force
        self.saves += 1


def test_settle_ends_trials_the_record_says_finished_and_saves_new_trials(tmp_path):
    """Tune's copy calls trials 0 and 1 PENDING (restored), but the sweep's record says 0 ended
    FINISHED (with its final result) and 1 FAILED: 0 is ended with that result, never run; 1
    runs again (resume retries failures); a new trial is saved before anything starts, once,
    with its folder's name when it is the trial chosen to start."""
    configs = [{"hp": {"lr": 1.0e-3, "seed": s}} for s in (0, 1, 2, 3)]
    record = {"trials": {
        "old0": {"config_key": key_of(configs[0]), "status": "FINISHED", "final": {"epoch": 3, METRIC: 0.75}},
        "old1": {"config_key": key_of(configs[1]), "status": "FAILED"}}}
    (tmp_path / "tracking.json").write_text(json.dumps(record))
    scheduler = pickle.loads(pickle.dumps(MovableFIFO(tmp_path / "tracking.json")))  # as restored from tuner.pkl
    t0, t1 = FakeTrial("t0", configs[0]), FakeTrial("t1", configs[1])
    ctl = FakeController([t0, t1])
    for trial in (t0, t1):
        scheduler.on_trial_add(ctl, trial)
    assert scheduler.choose_trial_to_run(ctl) is t1
    assert ctl.stopped == ["t0"] and t0.last_result[METRIC] == 0.75 and t0.last_result["config"] == configs[0]
    # Tune's saved state learns t0 ended (stop_trial alone marks live trials only) and t1's folder;
    # t0, never scheduled, is named too (Tune's last progress report reads every trial's folder)
    assert ctl.marked == ["t0", "t1"] and t1.relative_logdir == "trial_t1" and t0.relative_logdir == "trial_t0"
    assert t1.status == Trial.PENDING and ctl.saves == 1  # one save: t1 added and named
    assert scheduler.choose_trial_to_run(ctl) is t1 and ctl.saves == 1  # nothing new since
    t2 = FakeTrial("t2", configs[2])
    ctl.trials.append(t2)
    scheduler.on_trial_add(ctl, t2)
    assert scheduler.choose_trial_to_run(ctl) is t1  # t2 waits: saved as added, not yet named
    assert ctl.saves == 2 and ctl.stopped == ["t0"] and t2.relative_logdir is None
    t2.init_local_path()  # Tune names a trial it schedules by itself: saved before the next start
    scheduler.choose_trial_to_run(ctl)
    assert ctl.saves == 3 and ctl.marked[-1] == "t2"
    t1.status = Trial.RUNNING
    t3 = FakeTrial("t3", configs[3])
    ctl.trials.append(t3)
    scheduler.on_trial_add(ctl, t3)
    assert scheduler.choose_trial_to_run(ctl) is t2 and scheduler.choose_trial_to_run(ctl) is t2
    assert ctl.saves == 4  # t3 added: saved once; t2 already named


def test_a_recorded_end_leaves_tunes_saved_state_and_the_schedulers_loops(tmp_path):
    """search.live_trials: a trial that ended FINISHED and whose end the record holds (an earlier
    driver's, by configuration key, or this process's, ledger.note_ended) leaves the state Tune
    saves next, so that a save (forced before each new trial) holds the live trials, not every
    trial so far; a failed one stays (resume retries it), so does one the record does not hold
    (it never started), and so does the last entry (Tune's restore reads the first trial)."""
    from contrasweep.tracking import ledger

    configs = [{"hp": {"lr": 1.0e-3, "seed": s}} for s in range(5)]
    record = {"trials": {"old0": {"config_key": key_of(configs[0]), "status": "FINISHED", "final": {"epoch": 3}}}}
    (tmp_path / "tracking.json").write_text(json.dumps(record))
    scheduler = MovableFIFO(tmp_path / "tracking.json")
    trials = [FakeTrial(f"forget-t{i}", c) for i, c in enumerate(configs)]
    staging = tmp_path / "staging"  # Tune's driver staging folder: a folder per trial, made as it starts
    for trial in trials:
        trial.storage.trial_driver_staging_path = str(staging / trial.trial_id)
        (staging / trial.trial_id).mkdir(parents=True)
    ctl = FakeController(list(trials))
    ctl._trial_metadata = {t.trial_id: "{}" for t in trials}  # Ray 2.60's: every trial's JSON, as last saved
    ctl._trials_to_cache = set()
    for trial in trials:
        scheduler.on_trial_add(ctl, trial)
    assert scheduler.choose_trial_to_run(ctl) is trials[1]  # t0 ended from the record
    trials[1].status = trials[2].status = Trial.TERMINATED  # t1 recorded here, t2 never started (no record)
    ledger.note_ended("forget-t1")
    trials[3].status = Trial.ERROR
    assert scheduler.choose_trial_to_run(ctl) is trials[4]
    assert set(ctl._trial_metadata) == {"forget-t2", "forget-t3", "forget-t4"}
    assert [t.trial_id for t in scheduler._live] == ["forget-t4"]  # what its loops go over
    # the staging folder keeps the live and the unforgotten trials' folders only (save_now lists it)
    assert sorted(p.name for p in staging.iterdir()) == ["forget-t2", "forget-t3", "forget-t4"]
    (staging / "forget-t4" / "kept.txt").write_text("x")
    live_trials.drop_staging(trials[4])
    live_trials.drop_staging(FakeTrial("forget-unnamed", configs[0]))  # no staging folder: nothing to do
    assert (staging / "forget-t4" / "kept.txt").exists()  # a folder with anything in it stays
    # the last entry stays: Tune's restore needs one trial
    lone = FakeTrial("forget-lone", {"hp": {"lr": 1.0, "seed": 9}})
    ctl._trial_metadata = {"forget-lone": "{}"}
    ledger.note_ended("forget-lone")
    assert not live_trials.forget(ctl, lone) and set(ctl._trial_metadata) == {"forget-lone"}
    ctl._trials_to_cache.add(trials[4])  # another trial in the next save: now it can go
    assert live_trials.forget(ctl, lone) and set(ctl._trial_metadata) == set()


def test_the_record_is_rebuilt_from_mlflow_with_final_results(tmp_path):
    """When tracking.json is lost, its rebuild from MLflow's tags (contrasweep.tracking.reattach) keeps
    what settle needs: the configuration key, the status and the final values."""
    from mlflow.tracking import MlflowClient

    from contrasweep.tracking import ledger
    from contrasweep.tracking.reattach import rebuild
    from contrasweep.tracking.store import CONFIG_KEY_TAG, KIND_TAG, PARENT_TAG

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.create_experiment("e", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sw", tags={KIND_TAG: "sweep", "contrasweep.sweep": "sw"}).info.run_id
    run = client.create_run(exp, tags={KIND_TAG: "trial", PARENT_TAG: parent, "contrasweep.sweep": "sw",
                                       "contrasweep.trial_id": "t0", CONFIG_KEY_TAG: "k0",
                                       "contrasweep.outcome": "complete"}).info.run_id
    for epoch, value in ((1, 0.5), (2, 0.75)):
        client.log_metric(run, METRIC, value, step=epoch)
        client.log_metric(run, "epoch", epoch, step=epoch)
    client.set_terminated(run, "FINISHED")
    data = rebuild(client, exp, "sw", None, METRIC, "max")
    (tmp_path / "tracking.json").write_text(json.dumps(data))
    assert ledger.finished(tmp_path / "tracking.json") == {"k0": {METRIC: 0.75, "epoch": 2.0}}
