"""A sweep budget in slot-hours (``sweep.budget``, issue 43): the spec's one-line errors, the
gate's arithmetic on a made-up clock and made-up Tune trials (what it admits, what it ends,
which groups it cuts, a larger budget opening it again), the plan's count of the trials that
fit, and what ``extend`` lets grow. The budget on real Ray and MLflow: tests/test_budget_sweep.py."""

from __future__ import annotations

import pytest
from ray.tune.experiment import Trial

from contrasweep.errors import SpecError, UserError
from contrasweep.folder import budget_record
from contrasweep.search.budget_gate import BudgetGate
from contrasweep.search.registry import validate

BASE = {"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4}, "grid": {"lr": [1e-3, 1e-4]},
        "fixed": {"epochs": 1}}


def _spec(sweep: dict) -> dict:
    return {**BASE, "sweep": sweep}


@pytest.mark.parametrize("budget, message", [
    (40, "sweep.budget=40 must be a mapping such as {slot_hours: 40}; allowed keys: sweep.budget.slot_hours"),
    ({"hours": 4}, "unknown key sweep.budget.hours; allowed: sweep.budget.slot_hours"),
    ({}, "sweep.budget needs slot_hours"),
    ({"slot_hours": 0}, "sweep.budget.slot_hours=0 is not allowed; allowed: a number in (0, inf)"),
    ({"slot_hours": -2.5}, "sweep.budget.slot_hours=-2.5 is not allowed; allowed: a number in (0, inf)"),
    ({"slot_hours": "ten"}, "sweep.budget.slot_hours='ten' is not allowed"),
])
def test_a_malformed_budget_is_one_line(budget, message):
    with pytest.raises(SpecError) as err:
        validate(_spec({"seeds": [0, 1], "budget": budget}))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_budget_reads_as_slot_hours_and_is_absent_by_default():
    assert validate(_spec({"budget": {"slot_hours": 1.5}})).budget.slot_seconds == 5400.0
    assert validate(_spec({})).budget is None


class FakeTrial:
    def __init__(self, trial_id: str, group: str, seed: int):
        self.trial_id, self.config, self.status = trial_id, {"group": group, "seed": seed}, Trial.PENDING
        self.relative_logdir = ""

    def init_local_path(self):
        self.relative_logdir = f"run_trial_{self.trial_id}"


class FakeSearcher:
    def __init__(self):
        self.forgotten: list[str] = []

    def forget(self, trial_id):
        self.forgotten.append(trial_id)


class FakeSearch:
    finished = False

    def __init__(self):
        self.searcher = FakeSearcher()

    def set_finished(self):
        self.finished = True


class FakeController:
    """What the gate asks of Tune's controller (the scheduler's view of it)."""

    def __init__(self, trials, budget_file):
        self.trials, self.live, self.search_alg = trials, set(trials), FakeSearch()
        self.budget_file = budget_file
        self.stopped: list[tuple[str, bool, bool]] = []  # (trial, named in budget.json, forgotten) when stopped

    def get_trials(self):
        return self.trials

    def get_live_trials(self):
        return self.live

    def stop_trial(self, trial):  # Tune's: callbacks and searcher hear of it, then it is TERMINATED
        named = trial.relative_logdir in budget_record.not_run(self.budget_file)
        self.stopped.append((trial.trial_id, named, trial.trial_id in self.search_alg.searcher.forgotten))
        trial.status = Trial.TERMINATED
        self.live.discard(trial)


def _gate(tmp_path, slot_hours: float, slots: float = 2.0, sizes=3) -> BudgetGate:
    return BudgetGate(tmp_path / budget_record.BUDGET_FILE, slot_hours, slots, lambda c: c["group"], sizes,
                      tmp_path / "tracking.json")


def test_the_gate_admits_a_trial_while_spent_plus_the_running_ones_plus_one_more_fit(tmp_path):
    gate = _gate(tmp_path, slot_hours=100 / 3600)  # 100 slot-seconds; each trial holds 2 CPUs
    a, b, c = FakeTrial("a", "g", 0), FakeTrial("b", "g", 1), FakeTrial("c", "g", 2)
    assert gate.admits(now=0.0)  # nothing spent, nothing to expect yet
    gate.running(a, now=0.0)
    gate.result(a, holds=True, now=10.0)  # 10 s × 2 slots
    assert gate.journal["spent_s"] == pytest.approx(20.0)
    gate.trial_ended(a, now=15.0)
    assert (gate.journal["ended_n"], gate.journal["ended_s"], gate.journal["spent_s"]) == (1, pytest.approx(30.0),
                                                                                         pytest.approx(30.0))
    # b runs for 5 s: spent 40, b still needs 30 − 10 = 20, one more needs 30: 90 <= 100
    gate.running(b, now=20.0)
    assert gate.admits(now=25.0)
    # at 30 s: spent 50, b needs 10, one more 30: 90 <= 100; at 40 s: 70 + 0 + 30 <= 100
    assert gate.admits(now=30.0) and gate.admits(now=40.0)
    assert not gate.admits(now=46.0)  # 82 + 0 + 30 > 100
    gate.running(c, now=20.0)  # two running: each is expected to need the rest of its 30
    assert not gate.admits(now=25.0)  # 50 + 20 + 20 + 30 > 100
    # the journal keeps what was counted; a restored gate reads it back
    again = _gate(tmp_path, slot_hours=100 / 3600)
    assert again.journal["spent_s"] == pytest.approx(30.0) and again.journal["ended_n"] == 1


def test_before_any_trial_ended_the_gate_expects_the_longest_running_one(tmp_path):
    gate = _gate(tmp_path, slot_hours=60 / 3600, slots=1.0)
    gate.running(FakeTrial("a", "g", 0), now=0.0)
    assert gate.admits(now=20.0)  # spent 20, expected 20 (a lower bound): 20 + 0 + 20 <= 60
    assert not gate.admits(now=31.0)  # 31 + 0 + 31 > 60


def test_ending_the_budget_ends_the_trials_that_never_started_and_cuts_their_groups(tmp_path):
    gate = _gate(tmp_path, slot_hours=1 / 3600, sizes={"g": 3, "h": 3})
    trials = [FakeTrial("a", "g", 0), FakeTrial("b", "g", 1), FakeTrial("c", "g", 2), FakeTrial("d", "h", 0)]
    controller = FakeController(trials, tmp_path / budget_record.BUDGET_FILE)
    gate.running(trials[0], now=0.0)
    trials[0].status = Trial.RUNNING
    gate.running(trials[1], now=0.0)
    trials[1].status = Trial.PAUSED  # started, waiting at a rung: it is not ended
    gone = gate.end(controller, now=5.0)
    assert [t.trial_id for t in gone] == ["c", "d"]
    assert all(t.status == Trial.TERMINATED and t.relative_logdir for t in gone)
    assert controller.search_alg.finished and not {"c", "d"} & {t.trial_id for t in controller.live}
    # Tune's public stop_trial, each after budget.json names it (the tracker makes no run for it)
    # and after the searcher forgot it (no repeat recorded: a larger budget runs it)
    assert controller.stopped == [("c", True, True), ("d", True, True)]
    assert trials[0].status == Trial.RUNNING and trials[1].status == Trial.PAUSED
    assert gate.cut_sizes() == {"g": 2}  # h never started: no configuration run to close
    journal = budget_record.read(tmp_path / budget_record.BUDGET_FILE)
    assert journal["ended"]["not_run"] == ["run_trial_c", "run_trial_d"]
    assert budget_record.cut_groups(tmp_path / budget_record.BUDGET_FILE) == {"g": 2}
    assert not gate.admits(now=5.0)
    # a larger budget (an extension) opens the gate again, with what was spent
    grown = _gate(tmp_path, slot_hours=2.0, sizes={"g": 3, "h": 3})
    assert not grown.ended and grown.admits(now=0.0) and grown.journal["spent_s"] == journal["spent_s"]


def test_plan_counts_the_trials_that_fit_in_the_budget():
    from contrasweep.runner.plan_lines import describe
    from contrasweep.runner.sweep_plan import SweepPlan, TrialCost, fit_in_budget, trial_slot_seconds

    sweep = validate(_spec({"seeds": [0, 1], "budget": {"slot_hours": 0.01}, "resources": {"cpu": 2}}))
    costs = [TrialCost(0, 1, 1, 5.0, 1) for _ in range(4)]
    slot = trial_slot_seconds(sweep, costs, slots=1, worker_start=2.0)
    assert slot == [14.0, 10.0, 10.0, 10.0]  # (5 s, the first also waits 2 s for its process) × 2 CPUs
    assert fit_in_budget(sweep, slot) == 3  # 36 s: 14 + 10 + 10
    calibration = {"weights_bytes": 1, "resume_bytes": 1, "measured_s": 1.0, "steps": 3, "train_row_s": 0.01,
                   "eval_row_s": 0.01, "eval_fixed_s": 0.1, "setup_s": 1.0}
    found = SweepPlan(trials=4, configurations=2, settings=1, repeats=2, epochs_total=4, steps_total=4, disk_bytes=1,
                      kept_bytes=1, estimated_seconds=60.0, concurrency=1, calibration=calibration, budget_trials=3,
                      slot_seconds=sum(slot))
    assert describe(sweep, found, {"CPU": 2.0}, "this machine")[1] == (
        "budget: 0.01 CPU-hours (sweep.budget); all the trials would take 0.0122 CPU-hours: about 3 of the 4 trials fit; "
        "the sweep then stops launching trials")
    assert found.as_json()["budget_trials"] == 3


def test_extend_grows_a_budget_and_refuses_to_shrink_or_add_one():
    from contrasweep.runner.extend import check_growth

    ran = validate(_spec({"seeds": [0, 1], "budget": {"slot_hours": 1}}))
    assert check_growth(ran, validate(_spec({"seeds": [0, 1], "budget": {"slot_hours": 2}}))) == ["sweep.budget"]
    assert check_growth(ran, validate(_spec({"seeds": [0, 1]}))) == ["sweep.budget"]  # no limit any more
    with pytest.raises(UserError, match=r"sweep.budget can only grow \(1.0 slot-hours -> 0.5\)"):
        check_growth(ran, validate(_spec({"seeds": [0, 1], "budget": {"slot_hours": 0.5}})))
    with pytest.raises(UserError, match=r"sweep.budget can only grow \(unset slot-hours -> 1.0\)"):
        check_growth(validate(_spec({"seeds": [0, 1]})), ran)


def test_the_scheduler_judges_every_trial_handed_out_before_tune_starts_their_actors(tmp_path):
    """Tune keeps several trials pending (``runner.tune.pending_trials``) and starts their actors
    unasked, after the scheduler's choice in the same step: the budget judges every trial handed
    out since the last step (``LiveFIFO.admit``). With the budget ended by an earlier driver, a
    never-started trial ends unrun at once, while the unfinished repeats an earlier driver started
    (before and after it in the batch) run, their slot time counted."""
    import json

    from contrasweep.search.fifo import LiveFIFO
    from contrasweep.tracking.ledger import key

    u, f, v = FakeTrial("u", "g", 0), FakeTrial("f", "g", 1), FakeTrial("v", "h", 0)
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": {
        "1": {"config_key": key(u.config), "group": "g"}, "2": {"config_key": key(v.config), "group": "h"}}}))
    budget_file = tmp_path / budget_record.BUDGET_FILE
    _gate(tmp_path, slot_hours=1 / 3600).end(FakeController([], budget_file))  # an earlier driver's end
    gate = _gate(tmp_path, slot_hours=1 / 3600)
    controller = FakeController([u, f, v], budget_file)
    scheduler = LiveFIFO(gate)
    for trial in (u, f, v):
        scheduler.on_trial_add(controller, trial)
    assert scheduler.choose_trial_to_run(controller) is u
    assert [s[0] for s in controller.stopped] == ["f"] and u.status == v.status == Trial.PENDING
    for trial in (u, v):
        trial.status = Trial.RUNNING
        gate.trial_ended(trial)
    assert gate.journal["ended_n"] == 2  # both were counted from their start
