"""After a restore a searcher's live trials are those Tune restored (``contrasweep.search.held``):
Tune saves the searcher and its trials as two files, and a driver killed between the two left
them disagreeing. CI of ded29a5: a racing grid's resumed driver waited for ever on a repeat Tune
never saved; a study's suggestion stayed RUNNING in a sweep that ended. Each searcher is saved and
restored as Tune does it (its object pickled, its state through ``save``/``restore``), then Tune
re-adds its trials through the schedulers' view of the controller (``held.hold``)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

from ray.tune.experiment import Trial
from ray.tune.search import Searcher

from contrasweep.search import held
from contrasweep.search.study_search import REPEAT_ATTR
from contrasweep.search.grid_queue import GridQueue
from contrasweep.search.race_search import build as build_race
from contrasweep.search.registry import validate
from test_racing import _spec
from test_study_search import done, make, study


def _saved(searcher, tmp_path):
    searcher.save(str(tmp_path / "state.pkl"))
    return pickle.dumps(searcher)


def _restored(pickled, tmp_path, *trials):
    """The searcher Tune restores, then Tune's re-added trials: (id, config[, status])."""
    searcher = pickle.loads(pickled)
    searcher.restore(str(tmp_path / "state.pkl"))
    view = SimpleNamespace(search_alg=SimpleNamespace(searcher=searcher))  # Tune's SearchGenerator wraps it
    for trial_id, config, *status in trials:
        held.hold(view, SimpleNamespace(trial_id=trial_id, config=config, status=(status or [Trial.PENDING])[0]))
    return searcher


GRID = [{"lr": lr, "seed": 0} for lr in (1e-2, 1e-3, 1e-4, 1e-5)]


def test_a_grid_point_tune_never_saved_is_handed_out_again_before_the_next(tmp_path):
    grid = GridQueue(GRID, max_concurrent=3)
    configs = {t: grid.suggest(t) for t in ("a", "b", "c")}
    pickled = _saved(grid, tmp_path)  # the searcher's file: c handed out; Tune's file (older) lacks c
    r = _restored(pickled, tmp_path, ("a", configs["a"]), ("b", configs["b"]))
    assert r.suggest("d") == {"hp": GRID[2]}  # c's point, not lost
    assert r.suggest("e") is None  # three live: a, b, d
    r.on_trial_complete("a")
    assert r.suggest("f") == {"hp": GRID[3]}
    assert r.suggest("g") == Searcher.FINISHED  # every point handed out: Tune waits for the live ones
    assert r.live == {"b": 1, "d": 2, "f": 3}


def test_a_grid_trial_the_searcher_had_not_handed_out_yet_is_adopted(tmp_path):
    grid = GridQueue(GRID, max_concurrent=3)
    a = grid.suggest("a")
    pickled = _saved(grid, tmp_path)  # the searcher's file (older): a only
    b = grid.suggest("b")  # Tune's file (newer) has b too
    r = _restored(pickled, tmp_path, ("a", a), ("b", b), ("old", {"hp": {"lr": 9.0}}, Trial.TERMINATED))
    assert r.suggest("c") == {"hp": GRID[2]}  # not b's point again
    assert r.live == {"a": 0, "b": 1, "c": 2}
    r.on_trial_complete("b")
    assert "b" not in r.live


def test_an_ended_trial_the_searcher_still_held_is_forgotten(tmp_path):
    """Tune's file (newer) has a TERMINATED: the searcher's (older) still waited for it."""
    grid = GridQueue(GRID, max_concurrent=1)
    a = grid.suggest("a")
    r = _restored(_saved(grid, tmp_path), tmp_path, ("a", a, Trial.TERMINATED))
    assert r.suggest("b") == {"hp": GRID[0]}  # handed out again: the schedulers' settle ends it from the record


def test_a_race_issues_again_the_repeat_tune_never_saved_instead_of_waiting_for_it(tmp_path):
    sweep = validate(_spec({"seeds": [0, 1, 2], "racing": {"min_repeats": 2}}))
    folder = SimpleNamespace(path=tmp_path)
    race = build_race(sweep, folder, live=2)
    a, b = race.suggest("a"), race.suggest("b")
    pickled = _saved(race, tmp_path)
    r = _restored(pickled, tmp_path, ("a", a))
    assert r.suggest("c") == b  # b's repeat, not a wait for b
    assert r.live == {"a": race.live["a"], "c": race.live["b"]}

    r2 = _restored(pickled, tmp_path, ("a", a), ("b", b))
    assert r2.suggest("c") is None  # both live: nothing changes where the two files agree
    assert r2.live == race.live


def test_a_study_reissues_a_repeat_tune_never_saved_and_tells_its_suggestion(tmp_path):
    s = make(tmp_path, repeats=2, num_samples=1)
    a, _ = s.suggest("a"), s.suggest("b")
    r = _restored(_saved(s, tmp_path), tmp_path, ("a", a))  # Tune's file lacks b
    again = r.suggest("c")
    assert (again["__suggestion__"], again["__trial_index__"]) == (0, 1)
    r.on_trial_complete("a", done(0.4))
    r.on_trial_complete("c", done(0.6))
    (trial,) = study(tmp_path).trials
    assert trial.state.is_finished() and trial.value == 0.5  # told, not left RUNNING
    assert r.suggest("d") == Searcher.FINISHED


def test_a_study_hears_the_end_of_a_repeat_its_saved_state_had_not_issued(tmp_path):
    s = make(tmp_path, repeats=2, num_samples=1)
    a = s.suggest("a")
    pickled = _saved(s, tmp_path)  # the searcher's file (older): a only
    b = s.suggest("b")
    r = _restored(pickled, tmp_path, ("a", a), ("b", b))
    assert r.suggest("c") == Searcher.FINISHED  # b's repeat is not issued twice
    r.on_trial_complete("a", done(0.4))
    r.on_trial_complete("b", done(0.6))
    (trial,) = study(tmp_path).trials
    assert trial.value == 0.5  # b was heard


def test_a_study_told_nothing_because_the_kill_came_between_a_repeat_and_its_tell_is_told_on_its_replay(tmp_path):
    """CI of cf61389 (``test_searcher_resume[moo-2seed-asha]``): a group's last repeat was recorded
    on its study trial, the driver was killed before the tell, and the resumed driver's replay
    of that repeat (Tune still held it) was taken for one already told: the suggestion stayed
    RUNNING in a finished sweep."""
    s = make(tmp_path, repeats=2, num_samples=1)
    a, b = s.suggest("a"), s.suggest("b")
    s.on_trial_complete("a", done(0.4))
    pickled = _saved(s, tmp_path)
    record = s._record(done(0.6), False, s.frozen(0).params)
    s.storage.set_trial_user_attr(s.trial_id(0), REPEAT_ATTR.format(1), record)  # b recorded; killed before the tell
    assert study(tmp_path).trials[0].state.is_finished() is False
    r = _restored(pickled, tmp_path, ("b", b))
    r.on_trial_complete("b", done(0.6))  # the schedulers end b's restored copy from the sweep's record
    (trial,) = study(tmp_path).trials
    assert trial.state.is_finished() and trial.value == 0.5


def test_a_restore_opens_tunes_search_generator_again_and_the_searcher_says_when_it_has_finished(tmp_path):
    """Tune's SearchGenerator saved as finished, or counting a trial it never saved, would never
    ask the searcher again for the point it hands out again."""
    from ray.tune.search import SearchGenerator

    grid = GridQueue(GRID[:2], max_concurrent=2)
    a, _ = grid.suggest("a"), grid.suggest("b")
    generator = SearchGenerator(_restored(_saved(grid, tmp_path), tmp_path))
    generator.set_state({"counter": 2, "total_samples": 2, "finished": True, "experiment": None})
    assert generator.is_finished()
    held.hold(SimpleNamespace(search_alg=generator), SimpleNamespace(trial_id="a", config=a, status=Trial.PENDING))
    assert not generator.is_finished()
    assert generator.searcher.suggest("c") == {"hp": GRID[1]}  # b's point, which Tune never saved
    assert generator.searcher.suggest("d") == Searcher.FINISHED
