"""ASHA over repeat groups (contrasweep.search.group_asha): a configuration's repeats pause at a rung
until all have reached it, then continue or stop together on their mean."""

from __future__ import annotations

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from contrasweep.search.group_asha import GroupASHA, rungs, survives


class FakeTrial:
    """``repeat``: what the repeat is (its config; by default the trial's id): a later driver's
    trial of the same repeat has another id and the same config."""

    def __init__(self, trial_id, group, repeat=None):
        self.trial_id, self.status = trial_id, Trial.PENDING
        self.config = {"group": group, "repeat": repeat or trial_id}
        self.relative_logdir = None

    def init_local_path(self):  # Tune's naming of the trial's folder
        self.relative_logdir = self.relative_logdir or f"trial_{self.trial_id}"

    def set_status(self, status):
        self.status = status


class FakeController:
    def __init__(self, trials):
        self.trials, self.stopped = trials, []

    def get_trials(self):
        return self.trials

    def stop_trial(self, trial):
        self.stopped.append(trial.trial_id)
        trial.status = Trial.TERMINATED


def make(tmp_path, sizes=2, max_running=2, ctl=None, **kw):
    """The scheduler, told of ``ctl``'s trials as Tune tells it of each trial it adds."""
    scheduler = GroupASHA(metric="val/accuracy", mode=kw.pop("mode", "max"), max_t=4, grace_period=1, reduction_factor=2,
                     group_of=lambda config: config["group"], group_sizes=sizes, max_running=max_running,
                     state_path=tmp_path / "group_asha.json", **kw)
    for trial in ctl.trials if ctl is not None else ():
        scheduler.on_trial_add(ctl, trial)
    return scheduler


def result(epoch, value):
    return {"epoch": epoch, "val/accuracy": value}


def test_rungs_and_cutoff():
    assert rungs(10, 1, 2) == [1, 2, 4, 8] and rungs(4, 1, 2) == [1, 2] and rungs(1, 1, 2) == []
    assert survives(0.5, [0.5], 2, "max")
    assert survives(0.8, [0.2, 0.8], 2, "max") and not survives(0.2, [0.2, 0.8], 2, "max")
    assert survives(0.2, [0.2, 0.8], 2, "min") and not survives(0.8, [0.2, 0.8], 2, "min")


def test_group_waits_then_continues_or_stops_together(tmp_path):
    a1, a2, b1, b2 = FakeTrial("a1", "A"), FakeTrial("a2", "A"), FakeTrial("b1", "B"), FakeTrial("b2", "B")
    ctl = FakeController([a1, a2, b1, b2])
    s = make(tmp_path, ctl=ctl)
    for t in (a1, a2):
        t.status = Trial.RUNNING
    assert s.on_trial_result(ctl, a1, result(1, 0.9)) == TrialScheduler.PAUSE  # a2 has not reached rung 1
    a1.status = Trial.PAUSED
    assert s.waiting(a1) and s.choose_trial_to_run(ctl) is b1  # a1 waits; a free slot goes to a PENDING trial
    assert s.on_trial_result(ctl, a2, result(1, 0.7)) == TrialScheduler.CONTINUE  # A's mean 0.8 passes
    assert not s.waiting(a1)
    b1.status = Trial.RUNNING
    assert s.on_trial_result(ctl, b1, result(1, 0.99)) == TrialScheduler.PAUSE
    b1.status, b2.status = Trial.PAUSED, Trial.RUNNING
    # B's single best repeat (0.99) beats A's, but B's mean (0.545) does not: the group stops whole
    assert s.on_trial_result(ctl, b2, result(1, 0.1)) == TrialScheduler.STOP
    assert ctl.stopped == ["b1"]
    assert s.state["decisions"]["1"] == {"A": "continue", "B": "stop"}
    # A's next rung, and the max_t epoch always continues
    a1.status = Trial.RUNNING
    assert s.on_trial_result(ctl, a1, result(2, 0.9)) == TrialScheduler.PAUSE
    assert s.on_trial_result(ctl, a2, result(2, 0.9)) == TrialScheduler.CONTINUE
    assert s.on_trial_result(ctl, a2, result(4, 0.9)) == TrialScheduler.CONTINUE
    # each value and decision is one line appended to the journal: the snapshot is not rewritten
    snapshot, journal = tmp_path / "group_asha.json", tmp_path / "group_asha.journal"
    before, lines = snapshot.read_bytes(), len(journal.read_text().splitlines())
    c1 = FakeTrial("c1", "C")
    ctl.trials.append(c1)
    s.on_trial_add(ctl, c1)
    c1.status = Trial.RUNNING
    assert s.on_trial_result(ctl, c1, result(1, 0.5)) == TrialScheduler.PAUSE
    assert snapshot.read_bytes() == before and len(journal.read_text().splitlines()) == lines + 1
    # decisions survive a restore (snapshot and journal), and a stopped group's late trial stops at once
    again = make(tmp_path)
    assert again.state["decisions"] == s.state["decisions"] and again.state["values"]["1"] == s.state["values"]["1"]
    late = FakeTrial("b3", "B")
    assert again.on_trial_result(FakeController([late]), late, result(1, 1.0)) == TrialScheduler.STOP
    # the rungs record repeats, not Tune's trials: C's repeat, run again by a later driver under
    # another trial id, waits at the rung it reached (its value counted once) for C's other repeat
    c1_again, c2 = FakeTrial("c1-later", "C", repeat="c1"), FakeTrial("c2", "C")
    ctl2 = FakeController([c1_again, c2])
    later = make(tmp_path, ctl=ctl2)
    c1_again.status = c2.status = Trial.RUNNING
    assert later.on_trial_result(ctl2, c1_again, result(1, 0.9)) == TrialScheduler.PAUSE
    assert list(later.state["values"]["1"]["C"].values()) == [0.5]  # the first driver's value, not 0.9 again
    assert later.on_trial_result(ctl2, c2, result(1, 0.3)) == TrialScheduler.STOP  # C's mean 0.4: below the median


def test_max_running_holds_at_the_hand_out_and_a_paused_trial_waits_for_a_free_slot(tmp_path):
    """Tune starts an actor for every trial the searcher hands out, before the scheduler chooses
    it: ``sweep.max_concurrent`` holds at the hand-out (``may_hand_out``, the searcher's gate),
    over the trials running or pending; a paused one holds no slot, and goes on only while one
    is free."""
    x, y = FakeTrial("x", "X"), FakeTrial("y", "X")
    ctl = FakeController([x])
    s = make(tmp_path, sizes=2, max_running=1, ctl=ctl)
    assert not s.may_hand_out()  # x is pending: it holds the one slot
    x.status = Trial.RUNNING
    assert not s.may_hand_out() and s.choose_trial_to_run(ctl) is None
    assert s.on_trial_result(ctl, x, result(1, 0.9)) == TrialScheduler.PAUSE  # waits for y at rung 1
    x.status = Trial.PAUSED
    assert s.may_hand_out()  # the group's next repeat may start: x holds no slot
    ctl.trials.append(y)
    s.on_trial_add(ctl, y)
    assert not s.may_hand_out() and s.choose_trial_to_run(ctl) is y
    y.status = Trial.RUNNING
    assert s.on_trial_result(ctl, y, result(1, 0.7)) == TrialScheduler.CONTINUE  # the group's mean decides rung 1
    assert s.choose_trial_to_run(ctl) is None  # x may go on, but y holds the slot
    y.status = Trial.TERMINATED
    assert s.choose_trial_to_run(ctl) is x


def test_the_pending_repeats_of_a_stopped_group_end_unrun(tmp_path):
    x, y, z = FakeTrial("x", "X"), FakeTrial("y", "Y"), FakeTrial("z", "Y")
    ctl = FakeController([x, y, z])
    s = make(tmp_path, sizes=1, max_running=3, ctl=ctl)
    x.status = Trial.RUNNING
    s.on_trial_result(ctl, x, result(1, 0.9))
    s.state["decisions"]["1"]["Y"] = "stop"
    x.status = Trial.TERMINATED
    assert s.choose_trial_to_run(ctl) is None and ctl.stopped == ["y", "z"]


def test_an_errored_repeat_releases_its_waiting_group(tmp_path):
    a1, a2 = FakeTrial("a1", "A"), FakeTrial("a2", "A")
    ctl = FakeController([a1, a2])
    s = make(tmp_path, ctl=ctl)
    a1.status = Trial.RUNNING
    assert s.on_trial_result(ctl, a1, result(1, 0.5)) == TrialScheduler.PAUSE
    a1.status, a2.status = Trial.PAUSED, Trial.ERROR
    s.on_trial_error(ctl, a2)
    assert ctl.stopped == ["a1"]  # it would wait forever for a repeat that failed


def test_a_rung_every_repeat_reached_is_decided_after_a_kill_cut_off_its_decision(tmp_path):
    """Kill point: the group's last value at the rung saved, its decision not (between two
    appends to group_asha.journal). A resumed driver's repeats of that group would each wait for
    a decision no result brings (they never start): the first choice decides it."""
    a1, a2, b1, b2, c1, c2 = (FakeTrial(t, t[0].upper()) for t in ("a1", "a2", "b1", "b2", "c1", "c2"))
    ctl = FakeController([a1, a2, b1, b2, c1, c2])
    s = make(tmp_path, max_running=6, ctl=ctl)
    for t, v in ((a1, 0.9), (a2, 0.7)):
        t.status = Trial.RUNNING
        s.on_trial_result(ctl, t, result(1, v))
    assert s.state["decisions"]["1"] == {"A": "continue"}
    for group, pairs in (("B", ((b1, 0.99), (b2, 0.1))), ("C", ((c1, 0.9), (c2, 0.95)))):
        s.state["values"]["1"][group] = {s._key(t): v for t, v in pairs}  # the values saved, then the kill
        s._saved("values", 1, group)
    # the resumed driver: fresh trials of the same repeats, nothing running; the rungs are
    # decided as its first trial comes in (else each would come in paused, waiting at rung 1)
    again = [FakeTrial(f"{t.trial_id}-r1", t.config["group"], repeat=t.trial_id) for t in (b1, b2, c1, c2)]
    ctl2 = FakeController(again)
    later = make(tmp_path, max_running=6, ctl=ctl2)
    assert later.state["decisions"]["1"] == {"A": "continue", "B": "stop", "C": "continue"}
    assert not any(later.waiting(t) for t in again) and all(t.status == Trial.PENDING for t in again)
    chosen = later.choose_trial_to_run(ctl2)
    assert sorted(ctl2.stopped) == ["b1-r1", "b2-r1"] and chosen is again[2]  # B's mean 0.545 stops; C goes on
    assert make(tmp_path).state["decisions"]["1"]["B"] == "stop"  # the decision is in the journal


def test_a_repeat_paused_at_an_undecided_rung_comes_back_paused_until_its_group_decides(tmp_path):
    """Kill point: a1 paused at rung 1 (its value in group_asha.journal), a2 still in epoch 1.
    The resumed driver's trial of a1 comes in PAUSED (Tune starts an actor for every PENDING
    trial unasked, and a1 would train epoch 2 before A's rung is decided), holds no slot, and
    goes on once a2's value decides the rung."""
    a1, a2 = FakeTrial("a1", "A"), FakeTrial("a2", "A")
    ctl = FakeController([a1, a2])
    s = make(tmp_path, ctl=ctl)
    a1.status = a2.status = Trial.RUNNING
    assert s.on_trial_result(ctl, a1, result(1, 0.9)) == TrialScheduler.PAUSE
    # the kill; the later driver hands both repeats out again under new trial ids
    r1, r2 = FakeTrial("a1-r1", "A", repeat="a1"), FakeTrial("a2-r1", "A", repeat="a2")
    ctl2 = FakeController([r1, r2])
    later = make(tmp_path, max_running=2, ctl=ctl2)
    assert r1.status == Trial.PAUSED and r2.status == Trial.PENDING
    assert later.active() == 1 and later.may_hand_out()  # r1 holds no slot
    assert later.choose_trial_to_run(ctl2) is r2
    r2.status = Trial.RUNNING
    assert later.choose_trial_to_run(ctl2) is None  # a slot is free, but r1's rung is open
    assert later.on_trial_result(ctl2, r2, result(1, 0.7)) == TrialScheduler.CONTINUE
    assert later.choose_trial_to_run(ctl2) is r1 and ctl2.stopped == []
    assert list(later.state["values"]["1"]["A"].values()) == [0.9, 0.7]  # a1's value from the first driver


@pytest.mark.parametrize("value", [float("nan")])
def test_nan_never_beats_a_number(value):
    assert not survives(value, [0.3, value], 2, "max") and survives(value, [value], 2, "max")


def test_rungs_and_outcomes_follow_a_max_steps_budgets_epochs(tmp_path):
    """``fixed.max_steps: 200`` at k = 10 and k = 20 (50 and 100 training rows, batch 16: 4 and 7
    steps an epoch): each trial's plan trains 50 and 29 epochs, group ASHA's ``max_t`` is the most
    (50) and its rungs are the pause epochs the loop is given for the same rows; with no rows
    counted a trial is bounded by one step an epoch. A trial is complete at its own epochs, or by
    the 200 steps it reported where its rows are unknown."""
    from dataclasses import replace
    from types import SimpleNamespace

    import yaml

    from contrasweep.search import registry
    from contrasweep.spec.static import SweepStatic
    from contrasweep.spec.trial import plan_of
    from contrasweep.tracking.aggregate import ran_every_epoch
    from contrasweep.tracking.epochs import outcome
    from pathlib import Path

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "search_spaces" / "demo.yaml").read_text())
    raw["data"]["k"], raw["fixed"] = [10, 20], {**raw["fixed"], "batch_size": 16, "max_steps": 200}
    sweep = registry.validate(raw)
    unknown = SweepStatic.of(sweep)
    static = replace(unknown, variants=tuple(replace(v, sizes={"train": 5 * v.data["k"]}) for v in unknown.variants))
    assert static.train_rows == (50, 100) and unknown.train_rows == ()
    plans = [plan_of({"hp": trial}, static) for trial in sweep.grid_trials()]
    assert {(p.variant, p.epochs) for p in plans} == {(0, 50), (1, 29)}
    scheduler = registry.scheduler(sweep, SimpleNamespace(path=tmp_path), static)
    assert scheduler.max_t == 50 and scheduler.rungs == [1, 2, 4, 8, 16, 32] == registry.pause_epochs(sweep, static.train_rows)
    assert registry.pause_epochs(sweep) == rungs(200, 1, 2)  # no rows: at most one step an epoch
    raw["fixed"].pop("max_steps")
    assert registry.pause_epochs(registry.validate(raw), (50, 100)) == [1, 2]  # the demo's 3 epochs, as before

    trial = SimpleNamespace(config={"hp": sweep.grid_trials()[-1]}, last_result={"epoch": 29, "train/steps": 200})
    assert outcome(trial, {"last_epoch": 29}, "FINISHED", static) == "complete"
    assert outcome(trial, {"last_epoch": 16}, "FINISHED", static) == "stopped"  # stopped at a rung
    assert plan_of(trial.config, unknown).epochs is None  # no rows: judged by its steps
    assert outcome(trial, {"last_epoch": 29}, "FINISHED", unknown) == "complete"
    hp = plans[-1].hp
    assert ran_every_epoch(29, hp, steps=200) and not ran_every_epoch(16, hp, steps=112) and not ran_every_epoch(29, hp)
    assert ran_every_epoch(3, {"epochs": 3}) and not ran_every_epoch(2, {"epochs": 3})  # no max_steps: its epochs


@pytest.mark.slow
def test_in_tune_max_running_holds_while_tune_keeps_several_trials_pending(ray_session, tmp_path, monkeypatch):
    """Real Tune on the suite's Ray (2 CPUs, a trial 1): one repeat group of 3 at
    ``max_concurrent`` 1, Tune keeping 2 trials pending (``TUNE_MAX_PENDING_TRIALS_PG``, as
    ``runner.tune.fit`` sets it to the slots). Tune starts an actor for every pending trial without
    asking the scheduler, so only the searcher's gate (``may_hand_out``) keeps the second CPU
    idle: the trials' own clocks never overlap, and the group passes its rung and finishes."""
    import json
    import time

    from ray import tune

    from contrasweep.search.grid_queue import GridQueue

    log = tmp_path / "epochs.jsonl"

    def trial(config):
        for epoch in (1, 2):
            began = time.time()
            time.sleep(0.4)
            with open(log, "a") as fh:
                fh.write(json.dumps({"trial": config["hp"]["repeat"], "began": began, "ended": time.time()}) + "\n")
            tune.report({"epoch": epoch, "val/accuracy": 0.5 + 0.1 * epoch})

    scheduler = GroupASHA(metric="val/accuracy", mode="max", max_t=2, grace_period=1, reduction_factor=2,
                          group_of=lambda config: "G", group_sizes=3, max_running=1,
                          state_path=tmp_path / "group_asha.json")
    searcher = GridQueue([{"repeat": r} for r in "abc"], max_concurrent=3)
    searcher.gate = scheduler.may_hand_out
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "2")
    tuner = tune.Tuner(tune.with_resources(trial, {"cpu": 1}),
                       tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler, num_samples=3),
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "tune"), name="gate", verbose=0))
    results = tuner.fit()
    assert len(results) == 3 and not results.errors
    assert scheduler.state["decisions"]["1"] == {"G": "continue"}
    epochs = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda e: e["began"])
    assert {e["trial"] for e in epochs} == set("abc")
    overlaps = [(a["trial"], b["trial"]) for a, b in zip(epochs, epochs[1:]) if b["began"] < a["ended"]]
    assert not overlaps, overlaps


@pytest.mark.slow
def test_in_tune_a_resumed_repeat_paused_at_an_open_rung_trains_nothing_until_its_group_decides(ray_session, tmp_path,
                                                                                                monkeypatch):
    """Real Tune (2 CPUs, 2 trials pending at once). Kill point: repeat ``a`` of group G paused at
    rung 1 (its value 0.1 in the journal), its sibling ``b`` not yet at the rung; group H passed
    rung 1 with 0.9. The resumed driver hands out ``a`` (its loop would go on at epoch 2) and
    ``b``; ``b``'s 0.1, 3 s later, stops G (mean 0.1 below the rung's median 0.5). ``a`` came in
    PAUSED, so it is stopped without training an epoch: as the uninterrupted sweep, where it
    stayed paused. Before, Tune started it at once and it trained epoch 2 past its rung."""
    import json
    import time

    from ray import tune

    from contrasweep.search.grid_queue import GridQueue

    log = tmp_path / "epochs.jsonl"

    def trial(config):
        for epoch in range(config["hp"]["start"], 3):  # a resumed loop goes on after its last epoch
            time.sleep(config["hp"]["sleep"])
            with open(log, "a") as fh:
                fh.write(json.dumps({"trial": config["hp"]["repeat"], "epoch": epoch}) + "\n")
            tune.report({"epoch": epoch, "val/accuracy": 0.1})

    def scheduler():
        return GroupASHA(metric="val/accuracy", mode="max", max_t=2, grace_period=1, reduction_factor=2,
                         group_of=lambda config: config["hp"]["group"], group_sizes={"G": 2, "H": 1}, max_running=2,
                         state_path=tmp_path / "group_asha.json")

    a, h = ({"hp": {"repeat": r, "group": g, "start": 2, "sleep": 0.2}} for r, g in (("a", "G"), ("h", "H")))
    first, ctl = scheduler(), FakeController([])
    for config, value in ((h, 0.9), (a, 0.1)):  # the first driver, before the kill
        t = FakeTrial(config["hp"]["repeat"], config["hp"]["group"])
        t.config, t.status = config, Trial.RUNNING
        first.on_trial_add(ctl, t)
        first.on_trial_result(ctl, t, result(1, value))
    assert first.state["decisions"]["1"] == {"H": "continue"} and len(first.state["values"]["1"]["G"]) == 1
    again = scheduler()
    b = {"repeat": "b", "group": "G", "start": 1, "sleep": 3.0}  # long enough for ``a`` to train an epoch, if it starts
    searcher = GridQueue([a["hp"], b], max_concurrent=2)
    searcher.gate = again.may_hand_out
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "2")
    tuner = tune.Tuner(tune.with_resources(trial, {"cpu": 1}),
                       tune_config=tune.TuneConfig(search_alg=searcher, scheduler=again, num_samples=2),
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "tune"), name="resumed", verbose=0))
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert again.state["decisions"]["1"] == {"H": "continue", "G": "stop"}
    trained = [json.loads(line) for line in log.read_text().splitlines()]
    assert trained == [{"trial": "b", "epoch": 1}], trained
