"""Racing over repeats (``sweep.racing``, issue 43): the race's rounds on made-up values (a clearly
worse configuration leaves early), its journal, a study's race, and the spec's one-line errors.
The paired test, Holm and the bound they keep: tests/test_racing_statistics.py; the race on real
Ray, MLflow and a killed driver: tests/test_racing_sweep.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from helpers import equal_rounds as _equal_rounds

from contrasweep.errors import SpecError
from contrasweep.tracking.store import ELIMINATED
from contrasweep.search.racing import Entry, Race, holm, judge
from contrasweep.search.registry import validate


def test_a_clearly_worse_configuration_still_leaves_early():
    """Every ordered pair in the family costs power, not the early exit of a configuration far
    below the rest: 0.3 below, seeds' spread 0.03 (a learner against chance)."""
    rng = np.random.default_rng(7)
    for k, repeats, at_least in ((2, 3, 0.95), (2, 4, 0.95), (10, 4, 0.95), (30, 4, 0.85)):
        values = 0.8 + 0.03 * _equal_rounds(k, 200, rng, repeats)
        values[:, -1] -= 0.3
        left = [judge({f"g{i:02d}": list(v) for i, v in enumerate(r)}, +1.0)[1][f"g{k - 1:02d}"] <= 0.05 for r in values]
        assert np.mean(left) >= at_least, (k, repeats)
    # through the race: ten configurations, 7 repeats each; the one at chance leaves by round 4
    values = 0.8 + 0.03 * _equal_rounds(10, 1, rng, 7)[0]
    values[-1] -= 0.3
    by_group = {f"g{i}": list(v) for i, v in enumerate(values)}
    race = Race(_entries({g: "" for g in by_group}, 7), min_repeats=3, alpha=0.05, sign=+1.0)
    _run_round(race, by_group)
    assert race.out()["g9"]["outcome"] == ELIMINATED and race.out()["g9"]["round"] <= 4
    (judged,) = [r for r in race.journal["rounds"][""] if r["eliminated"] == ["g9"]]  # no equal one left
    assert race.out()["g9"]["p_value"] <= 0.05 and race.out()["g9"]["best"] in by_group  # the one it is worse than
    assert len(race.ended("g9")) <= 4 and race.total() - race_ran(race) >= 3


def race_ran(race: Race) -> int:
    return sum(len(race.ended(g)) for groups in race.settings.values() for g in groups)


def _entries(groups: dict[str, str], repeats: int) -> list[Entry]:
    return [Entry(group=g, repeat=f"seed={s}", setting=setting) for g, setting in groups.items() for s in range(repeats)]


def _run_round(race: Race, values: dict[str, list[float]], busy=frozenset()) -> list[tuple[str, str]]:
    """Run what the race asks for next until it waits; each repeat's value from ``values``."""
    ran = []
    while (chosen := race.next(set(busy))) is not None:
        group, repeat = chosen
        race.record(group, repeat, values[group][int(repeat.split("=")[1])], "complete")
        ran.append(chosen)
        race.advance()
    return ran


def test_a_race_drops_the_clearly_worse_configuration_and_runs_the_rest_to_the_end():
    values = {"good": [0.80, 0.82, 0.79, 0.81, 0.80], "near": [0.79, 0.83, 0.78, 0.80, 0.81],
              "chance": [0.20, 0.25, 0.22, 0.21, 0.24]}
    race = Race(_entries({g: "" for g in values}, 5), min_repeats=3, alpha=0.05, sign=+1.0)
    assert race.needed() == 15 and race.total() == 15
    first = []
    while (chosen := race.next(set(first))) is not None:  # the first round: 3 repeats of each, nothing judged yet
        first.append(chosen)
    assert len(first) == 9 and all(int(r.split("=")[1]) < 3 for _, r in first)
    for group, repeat in first:
        race.record(group, repeat, values[group][int(repeat.split("=")[1])], "complete")
    gone = race.advance()
    assert gone == ["chance"]
    out = race.out()["chance"]
    assert out["outcome"] == ELIMINATED and out["round"] == 3 and out["best"] == "good" and out["p_value"] <= 0.05
    # Holm over the round's 3 × 2 ordered pairs (i worse than j), recomputed from the t-tests; a
    # configuration's p-value is its smallest adjusted one
    raw = {f"{i}<{j}": stats.ttest_rel(values[i][:3], values[j][:3], alternative="less").pvalue
           for i in values for j in values if i != j}
    adjusted = holm(raw)
    by_hand = {i: min(adjusted[f"{i}<{j}"] for j in values if j != i) for i in ("near", "chance")}
    assert race.journal["rounds"][""][0]["p_values"] == pytest.approx(by_hand)
    assert out["p_value"] == pytest.approx(adjusted["chance<good"])  # shown worse than the round's best too
    rest = _run_round(race, values)
    assert sorted(rest) == sorted([(g, f"seed={s}") for g in ("good", "near") for s in (3, 4)])
    assert race.needed() == 0 and race.next(set()) is None
    assert len(race.journal["rounds"][""]) == 2  # rounds 3 and 4; the last (5) is selection's
    assert race.total() - len(first) - len(rest) == 2  # trials saved


def test_a_race_resumes_from_its_journal_and_ignores_a_replayed_repeat():
    values = {"a": [0.8, 0.82, 0.81, 0.8], "b": [0.3, 0.31, 0.29, 0.3]}
    entries = _entries({"a": "k=2", "b": "k=2", "c": "k=3"}, 4)
    values["c"] = [0.5] * 4
    race = Race(entries, min_repeats=2, alpha=0.05, sign=+1.0)
    for group in ("a", "b"):
        for s in (0, 1):
            assert race.record(group, f"seed={s}", values[group][s], "complete")
    assert not race.record("a", "seed=0", 0.1, "complete")  # the same repeat again: kept as it was
    assert race.journal["repeats"]["a"]["seed=0"]["value"] == 0.8
    race.advance()
    assert "b" in race.out()
    again = Race(entries, min_repeats=2, alpha=0.05, sign=+1.0, journal=race.journal)
    again.advance()
    assert again.out() == race.out()  # nothing undone
    # the lone survivor of k=2 runs its remaining repeats; k=3 races on its own
    order = []
    while (chosen := again.next(set(order))) is not None:
        order.append(chosen)
    assert ("a", "seed=2") in order and ("a", "seed=3") in order and not any(g == "b" for g, _ in order)
    assert ("c", "seed=0") in order and ("c", "seed=1") in order and ("c", "seed=2") in order  # alone: all its repeats


def test_a_journal_written_before_issue_69_resumes_and_keeps_its_decisions(tmp_path):
    """race.json as the older test wrote it (a round's p-values against its best, no ``than``):
    read back, its elimination stands, and the next round is judged by the new test."""
    from contrasweep.folder import race_record

    values = {"a": [0.80, 0.82, 0.79, 0.81, 0.80], "b": [0.79, 0.83, 0.78, 0.80, 0.81], "c": [0.2] * 5,
              "d": [0.60, 0.63, 0.61, 0.62, 0.60]}
    old = {"repeats": {g: {f"seed={s}": {"value": values[g][s], "outcome": "complete"} for s in range(3)} for g in values},
           "out": {"c": {"outcome": ELIMINATED, "round": 3, "p_value": 0.0, "best": "a"}}, "targets": {"": 4},
           "rounds": {"": [{"round": 3, "best": "a", "p_values": {"b": 0.5, "c": 0.0, "d": 0.06}, "eliminated": ["c"]}]},
           "needed": 6, "total": 20}
    path = tmp_path / race_record.RACE_FILE
    race_record.write(path, old)
    race = Race(_entries({g: "" for g in values}, 5), min_repeats=3, alpha=0.05, sign=+1.0,
                journal=race_record.read(path))
    race.advance()
    assert race.out() == old["out"] and race.next(set()) == ("a", "seed=3")
    _run_round(race, values)
    assert race.out()["c"] == old["out"]["c"]  # nothing undone
    assert race.out()["d"]["outcome"] == ELIMINATED and race.out()["d"]["round"] == 4 and race.out()["d"]["best"] == "a"
    fourth = race.journal["rounds"][""][1]
    assert fourth["round"] == 4 and fourth["than"]["d"] == "a" and "than" not in race.journal["rounds"][""][0]


def test_a_stopped_or_failed_repeat_takes_its_configuration_out_of_the_race():
    race = Race(_entries({"a": "", "b": "", "c": ""}, 4), min_repeats=2, alpha=0.05, sign=+1.0)
    race.record("a", "seed=0", 0.4, "stopped")
    race.record("b", "seed=0", None, "failed")
    assert race.out()["a"]["outcome"] == "stopped" and race.out()["b"]["outcome"] == "failed"
    assert race.needed() == 4  # c's repeats only
    assert race.next(set()) == ("c", "seed=0")


BASE = {"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4}, "grid": {"lr": [1e-3, 1e-4]},
        "fixed": {"epochs": 1}}


def _spec(sweep: dict, data: dict | None = None) -> dict:
    return {**BASE, "data": {**BASE["data"], **(data or {})}, "sweep": sweep}


@pytest.mark.parametrize("racing, seeds, data, message", [
    ([3], [0, 1, 2], None, "sweep.racing=[3] must be a mapping; allowed keys: sweep.racing.min_repeats, sweep.racing.alpha"),
    ({"min": 3}, [0, 1, 2], None, "unknown key sweep.racing.min; allowed"),
    ({"min_repeats": 4}, [0, 1, 2], None, "sweep.racing.min_repeats=4 is above the 3 repeats each configuration runs"),
    ({"min_repeats": 1}, [0, 1, 2], None, "sweep.racing.min_repeats=1 is not allowed; allowed: an integer in [2,"),
    ({"alpha": 0}, [0, 1, 2], None, "sweep.racing.alpha=0 is not allowed; allowed: a number in (0, 0.5]"),
    ({}, [0], None, "sweep.racing needs at least 2 repeats per configuration, and this sweep runs 1"),
    ({"min_repeats": 5}, [0, 1], {"seed": [0, 1], "k": [2, 4]}, "is above the 4 repeats each configuration runs"),
])
def test_a_malformed_racing_section_is_one_line(racing, seeds, data, message):
    with pytest.raises(SpecError) as err:
        validate(_spec({"seeds": seeds, "racing": racing}, data))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_racing_reads_its_defaults_and_counts_repeats_per_setting():
    sweep = validate(_spec({"seeds": [0, 1], "racing": {}}, {"seed": [0, 1], "k": [2, 4]}))
    assert (sweep.racing.min_repeats, sweep.racing.alpha) == (3, 0.05)
    assert sweep.setting_repeats == 4 and sweep.repeats == 8
    assert validate(_spec({"seeds": [0, 1]})).racing is None


def test_the_fewest_trials_a_race_can_run():
    # k=2: three configurations of 5 repeats (first round 3 each, one left runs 5); k=3: one alone runs all 5
    race = Race(_entries({"a": "k=2", "b": "k=2", "c": "k=2", "d": "k=3"}, 5), min_repeats=3, alpha=0.05, sign=+1.0)
    assert race.fewest() == 3 + 3 + 5 + 5 and race.total() == 20


def test_plan_gives_a_racing_grid_its_range():
    from contrasweep.search.registry import fewest_trials, total_trials

    sweep = validate(_spec({"seeds": [0, 1, 2, 3], "racing": {"min_repeats": 2}}))
    assert (fewest_trials(sweep), total_trials(sweep)) == (2 + 4, 8)
    assert fewest_trials(validate(_spec({"seeds": [0, 1, 2, 3]}))) == 8


def test_more_repeats_continue_a_race_whose_repeats_had_run_out():
    values = {"a": [0.80, 0.82, 0.79, 0.81, 0.80, 0.82], "b": [0.70, 0.74, 0.69, 0.71, 0.70, 0.72],
              "c": [0.81, 0.79, 0.80, 0.83, 0.79, 0.81]}
    race = Race(_entries({g: "" for g in values}, 3), min_repeats=2, alpha=0.05, sign=+1.0)
    _run_round(race, values)
    assert race.out() == {} and race.needed() == 0  # nothing significant at round 2; round 3 is the last: not judged
    grown = Race(_entries({g: "" for g in values}, 6), min_repeats=2, alpha=0.05, sign=+1.0, journal=race.journal)
    assert grown.needed() == 9
    grown.advance()  # as the race's searcher does when it opens the journal
    ran = _run_round(grown, values)
    rounds = [r["round"] for r in grown.journal["rounds"][""]]
    assert rounds[:2] == [2, 3] and "b" in grown.out() and grown.out()["b"]["round"] == 3  # judged once repeats came
    assert not any(g == "b" for g, _ in ran)  # the race dropped it before its new repeats


def test_the_race_searcher_never_issues_again_a_repeat_the_scheduler_stopped_while_it_waited(tmp_path):
    """Group ASHA stops a group's waiting repeats before its deciding repeat reports: such a
    repeat ends without a result, and its configuration leaves the race then (issued once)."""
    from contrasweep.folder import race_record
    from contrasweep.search.race_search import build

    sweep = validate(_spec({"seeds": [0, 1, 2], "racing": {"min_repeats": 2}}))

    class Folder:
        path = tmp_path

    searcher = build(sweep, Folder(), live=4)
    issued = {f"t{i}": searcher.suggest(f"t{i}") for i in range(4)}  # the first round: 2 repeats of 2 configurations
    assert all(isinstance(c, dict) for c in issued.values()) and searcher.suggest("t4") is None
    first = issued["t0"]["hp"]
    searcher.on_trial_complete("t0")  # stopped while it waited at a rung
    # its configuration is out, and the one left runs all its repeats: its third, never the stopped one's again
    assert searcher.suggest("t5")["hp"] == {**issued["t2"]["hp"], "seed": 2} != {**first, "seed": 2}
    journal = race_record.read(tmp_path / race_record.RACE_FILE)
    assert list(journal["out"].values()) == [{"outcome": "stopped", "round": 1}]
    # the sweep's 6 trials; still to run: the other configuration's 3 and the stopped one's running repeat
    assert (journal["total"], journal["needed"]) == (6, 4)
    assert first["lr"] == issued["t1"]["hp"]["lr"]  # t1: the same configuration's other repeat
    snapshot = (tmp_path / race_record.RACE_FILE).read_bytes()
    searcher.on_trial_complete("t1", {"epoch": 1, "best/val/accuracy": 0.2})  # its deciding repeat, stopped too
    assert race_record.ran(race_record.read(tmp_path / race_record.RACE_FILE)) == 2
    # a repeat's end is journal lines (its value, needed, total), not the whole file again
    assert (tmp_path / race_record.RACE_FILE).read_bytes() == snapshot
    lines = [json.loads(line) for line in (tmp_path / "race.journal").read_text().splitlines()]
    assert [(line["section"], line["key"] if line["section"] is None else line["key"][1]) for line in lines[-3:]] == [
        ("repeats", "seed=1"), (None, "needed"), (None, "total")]


def test_plan_says_a_race_runs_between_its_fewest_trials_and_all():
    from contrasweep.runner.plan_lines import describe
    from contrasweep.runner.sweep_plan import SweepPlan

    sweep = validate(_spec({"seeds": [0, 1, 2, 3], "racing": {"min_repeats": 2}}))
    calibration = {"weights_bytes": 1, "resume_bytes": 1, "measured_s": 1.0, "steps": 3, "train_row_s": 0.01,
                   "eval_row_s": 0.01, "eval_fixed_s": 0.1, "setup_s": 1.0}
    found = SweepPlan(trials=8, configurations=2, settings=1, repeats=4, epochs_total=8, steps_total=8, disk_bytes=1,
                      kept_bytes=1, estimated_seconds=60.0, concurrency=1, calibration=calibration, fewest_trials=6)
    lines = describe(sweep, found, {"CPU": 2.0}, "this machine")
    assert lines[1].startswith("racing (min_repeats 2, alpha 0.05): between 6 and 8 trials")
    assert "fewest_trials" in found.as_json() and found.as_json()["fewest_trials"] == 6


# -- a study's race (optuna / random: contrasweep.search.study_race) ---------------------------
def _study_racer(tmp_path, num_samples=2, seeds=(0, 1, 2), max_concurrent=2):
    """A real study searcher of an optuna sweep with racing (min_repeats 2), its study in sqlite."""
    from types import SimpleNamespace

    from contrasweep.search.study_build import build

    spec = {**BASE, "grid": {}, "search": {"lr": {"loguniform": [1e-4, 1e-2]}},
            "sweep": {"searcher": "random", "seeds": list(seeds), "num_samples": num_samples,
                      "racing": {"min_repeats": 2}}}
    sweep = validate(spec)
    folder = SimpleNamespace(name="s", path=tmp_path, optuna_uri=f"sqlite:///{tmp_path / 'optuna.db'}", stage="tune")
    import optuna

    return build(sweep, folder, max_concurrent, optuna.samplers.RandomSampler(seed=0)), sweep


def _result(value):
    return {"epoch": 1, "val/accuracy": value, "best/val/accuracy": value}


def test_a_study_races_its_suggestions_asynchronously_and_tells_an_eliminated_one_its_mean(tmp_path):
    import optuna

    from contrasweep.folder import race_record

    searcher, sweep = _study_racer(tmp_path)
    a, b = searcher.suggest("a"), searcher.suggest("b")  # suggestion 0's first round: repeats 0 and 1
    assert [a["__trial_index__"], b["__trial_index__"]] == [0, 1] and searcher.suggest("c") is None  # 2 live
    searcher.on_trial_complete("a", _result(0.8))
    searcher.on_trial_complete("b", _result(0.7))
    # alone at round 2, it stays and runs its third repeat before the next suggestion starts
    c = searcher.suggest("c")
    assert (c["__suggestion__"], c["__trial_index__"]) == (0, 2)
    d = searcher.suggest("d")
    assert (d["__suggestion__"], d["__trial_index__"]) == (1, 0)
    searcher.on_trial_complete("c", _result(0.9))  # suggestion 0 ran all 3: told the mean
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert study.trials[0].state.name == "COMPLETE" and study.trials[0].value == pytest.approx(0.8)
    e = searcher.suggest("e")
    assert (e["__suggestion__"], e["__trial_index__"]) == (1, 1)
    searcher.on_trial_complete("d", _result(0.3))
    searcher.on_trial_complete("e", _result(0.2))  # 0.5 below on both matched repeats: p 0 <= 0.05
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    second = study.trials[1]
    assert second.user_attrs["race."] == {"round": 2, "p_value": 0.0, "best": 0}
    assert second.state.name == "COMPLETE" and second.value == pytest.approx(0.25)  # the mean of what it ran
    assert searcher.suggest("f") == "FINISHED"  # num_samples asked, nothing left to run
    journal = race_record.read(tmp_path / race_record.RACE_FILE)
    (gone,) = journal["out"].values()
    assert gone["outcome"] == "eliminated" and gone["round"] == 2 and gone["best"] in journal["repeats"]
    assert (journal["total"], journal["needed"], race_record.ran(journal)) == (6, 0, 5)


def test_a_study_race_resumes_a_round_the_kill_cut_off(tmp_path):
    """Both repeats of a round recorded in the study, the judgement not: a new searcher (a
    resume) judges it once and issues only what the race asks for."""
    import optuna

    from contrasweep.folder import race_record

    searcher, _ = _study_racer(tmp_path, max_concurrent=4)
    issued = [searcher.suggest(t) for t in "abcd"]  # suggestion 0's round and suggestion 1's
    assert [(c["__suggestion__"], c["__trial_index__"]) for c in issued] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for tid, value in zip("abc", (0.8, 0.7, 0.3)):
        searcher.on_trial_complete(tid, _result(value))
    # the driver is killed after d's outcome is in the study and before its round was judged
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")
    second = optuna.load_study(study_name="s", storage=storage).trials[1]
    storage.set_trial_user_attr(second._trial_id, "repeat.1",
                                {"outcome": "complete", "epoch": 1, "values": [0.2], "selection": 0.2})
    again, _ = _study_racer(tmp_path, max_concurrent=4)  # the next driver's searcher, built anew over the study
    nxt = again.suggest("e")
    assert (nxt["__suggestion__"], nxt["__trial_index__"]) == (0, 2)  # 1 is eliminated at round 2, now
    assert again.suggest("f") is None  # waits for suggestion 0's last repeat, issues nothing twice
    left = optuna.load_study(study_name="s", storage=storage).trials[1]
    assert left.user_attrs["race."]["round"] == 2 and left.state.name == "COMPLETE"
    assert race_record.read(tmp_path / race_record.RACE_FILE)["needed"] == 1


def test_plan_gives_a_racing_study_its_fewest_trials():
    from contrasweep.search.registry import fewest_trials, total_trials

    spec = {**BASE, "grid": {}, "search": {"lr": {"loguniform": [1e-4, 1e-2]}},
            "sweep": {"searcher": "optuna", "seeds": [0, 1, 2, 3], "num_samples": 5, "racing": {"min_repeats": 2}}}
    sweep = validate({**spec, "data": {**BASE["data"], "k": [2, 4]}})
    assert (fewest_trials(sweep), total_trials(sweep)) == (5 * 2 * 2, 5 * 8)
