"""The resume rule's parts (docs/architecture.md, "Resume"): the searcher
(``contrasweep.search.study_search``: a real Optuna study in sqlite; a later driver builds it
anew over the same study, as ``runner.tune`` does, never from Tune's copy) and the schedulers' base
(``contrasweep.search.fifo.LiveFIFO``)."""

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

from contrasweep.search.fifo import LiveFIFO, stop_waiting
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


def snapshot(searcher, tmp_path):
    """What a later driver builds its searcher from: the sweep's spec (here the first driver's
    arguments) and the study; nothing of the first driver's searcher object."""
    return dict(space=searcher.space, metrics=searcher.metrics, modes=searcher.modes, study_name=searcher.study_name,
                storage_url=searcher.storage_url, repeats=searcher.repeats, num_samples=searcher.num_samples,
                max_concurrent=searcher.max_concurrent, reported=searcher.reported, epochs=searcher.epochs)


def restored(spec, tmp_path, first=(), sampler=None):
    """A later driver's searcher over the same study (``first``: what the record calls unfinished)."""
    return StudySearcher(sampler=sampler or optuna.samplers.RandomSampler(seed=1), first=first, **spec)


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


def test_a_later_driver_reissues_open_suggestions_and_never_redraws_or_tells_twice(tmp_path):
    """Suggestion 0's two repeats ended (the study was told), suggestion 1 was drawn and its
    first repeat started; then the driver died. The next driver's searcher re-issues suggestion
    1's repeats with the same values (never a new draw), ignores a word of a trial it never
    handed out, and tells each suggestion once."""
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
    r.on_trial_complete("a", done(0.9))  # not a trial of this driver's: nothing told
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
    again = r.suggest("a2")  # the next driver: the reported point's unfinished repeat again, not enqueued twice
    assert (again["__suggestion__"], again["lr"]) == (0, 1.0e-3)
    r.on_trial_complete("a2", done(0.5))
    second = r.suggest("b")
    assert second["__suggestion__"] == 1 and second["lr"] != 1.0e-3
    assert [t.params["lr"] == 1.0e-3 for t in study(tmp_path).trials] == [True, False]


def test_a_repeat_whose_end_the_study_holds_and_the_record_does_not_is_handed_out_first(tmp_path):
    """A kill between the searcher's write (Tune tells it first) and the tracker's: the study
    holds repeat 1's end, the record calls it unfinished. The next driver hands it out first,
    under a new trial (its loop goes on from its state folder to its end, which the tracker then
    records); its end is not recorded or told twice."""
    s = make(tmp_path, repeats=2, num_samples=1)
    s.suggest("a"), s.suggest("b")
    s.on_trial_complete("a", done(0.4))
    s.on_trial_complete("b", done(0.6))  # recorded and told: the study is done with suggestion 0
    assert study(tmp_path).trials[0].value == pytest.approx(0.5)
    r = restored(snapshot(s, tmp_path), tmp_path, first=[(0, 1)])
    again = r.suggest("b2")
    assert (again["__suggestion__"], again["__trial_index__"]) == (0, 1)
    r.on_trial_complete("b2", done(0.9))
    (trial,) = study(tmp_path).trials
    assert trial.value == pytest.approx(0.5) and trial.user_attrs["repeat.1"]["values"] == [0.6]
    assert r.suggest("c") == Searcher.FINISHED


def test_the_sampler_is_saved_after_each_ask_and_a_later_driver_draws_on_from_it(tmp_path):
    """``sampler_path``: a later driver built with the saved sampler draws what an uninterrupted
    driver would have drawn next (TPE's and the random sampler's state is their RNG)."""
    whole = make(tmp_path / "whole", repeats=1, num_samples=3)
    (tmp_path / "whole").mkdir()
    uninterrupted = [whole.suggest(t)["lr"] for t in "abc"]
    (tmp_path / "cut").mkdir()
    first = make(tmp_path / "cut", repeats=1, num_samples=3)
    first.sampler_path = str(tmp_path / "cut" / "sampler-tune.pkl")
    drawn = [first.suggest(t)["lr"] for t in "ab"]
    for t in "ab":
        first.on_trial_complete(t, done(0.5))
    saved = pickle.loads((tmp_path / "cut" / "sampler-tune.pkl").read_bytes())
    later = restored(snapshot(first, tmp_path), tmp_path, sampler=saved)
    assert drawn + [later.suggest("c")["lr"]] == pytest.approx(uninterrupted)


# -- the schedulers' base: FIFO over the live trials ----------------------------------------

class FakeTrial:
    def __init__(self, trial_id, config, status=Trial.PENDING):
        self.trial_id, self.config, self.status = trial_id, config, status
        self.last_result, self.relative_logdir = {}, None

    def init_local_path(self):  # Tune's naming of the trial's folder: a name once given is kept
        self.relative_logdir = self.relative_logdir or f"trial_{self.trial_id}"


class FakeController:
    """Tune's controller as a scheduler sees it."""

    def __init__(self, trials):
        self.trials, self.stopped = trials, []

    def get_trials(self):
        return self.trials

    def stop_trial(self, trial):
        self.stopped.append(trial.trial_id)
        trial.status = Trial.TERMINATED


def test_the_fifo_goes_over_the_live_trials_pending_before_paused(tmp_path):
    """``LiveFIFO``: the trial to start is the first PENDING, else the first PAUSED, in the order
    Tune added them; an ended trial leaves what its loops go over; ``stop_waiting`` ends a waiting
    trial with Tune's ``stop_trial``; pickled (Tune's tuner.pkl), it keeps no trial."""
    configs = [{"hp": {"lr": 1.0e-3, "seed": s}} for s in range(4)]
    trials = [FakeTrial(f"t{i}", c) for i, c in enumerate(configs)]
    ctl = FakeController(list(trials))
    scheduler = LiveFIFO()
    for trial in trials:
        scheduler.on_trial_add(ctl, trial)
    trials[0].status, trials[1].status = Trial.PAUSED, Trial.RUNNING
    assert scheduler.choose_trial_to_run(ctl) is trials[2]
    trials[2].status, trials[3].status = Trial.TERMINATED, Trial.ERROR
    assert scheduler.choose_trial_to_run(ctl) is trials[0]
    assert [t.trial_id for t in scheduler._live] == ["t0", "t1"]
    trials[0].relative_logdir = None  # never scheduled: named before it ends (Tune's report reads its folder)
    stop_waiting(ctl, trials[0])
    assert ctl.stopped == ["t0"] and trials[0].relative_logdir == "trial_t0" and scheduler.choose_trial_to_run(ctl) is None
    assert [t.trial_id for t in pickle.loads(pickle.dumps(scheduler))._live] == []


def test_the_record_is_rebuilt_from_mlflow_with_final_results(tmp_path):
    """When tracking.json is lost, its rebuild from MLflow's tags (contrasweep.tracking.reattach) keeps
    what the next driver's searchers need: the configuration key, the status and the final values."""
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
