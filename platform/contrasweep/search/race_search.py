"""The search algorithm of a racing grid (``sweep.racing``; ``contrasweep.search.racing``): Tune
asks it for trials one at a time, and it gives the grid's trials in the race's order, each
configuration's repeats only while the configuration is still in the race.

Why a ``Searcher`` and not Tune's grid generator: the generator makes every trial up front;
a race decides a configuration's next repeat from the ones that ended.

Memory: the race's journal (``race.json``, ``contrasweep.folder.race_record``: one appended line
per change) is written the moment a repeat ends, before the tracker records it (Tune tells the
searcher first), so a driver killed at any moment resumes the race exactly: a repeat whose value
is in the journal is not raced again, and no elimination is undone. Every driver builds this
object anew (``runner.tune``); ``first``, the repeats the sweep's record calls unfinished, go out
before the race's next ones (a kill between the journal's write and the record's: the repeat's
loop goes on from its state folder to its end, which the record then holds).

May import: Ray Tune's ``Searcher``, ``contrasweep.search.racing``, ``contrasweep.search.base``, ``contrasweep.spec``,
``contrasweep.folder`` (the journal, a moved folder), ``contrasweep.tracking``.
"""

from __future__ import annotations

import logging
import pickle

from ray.tune.search import Searcher

from contrasweep.folder import race_record
from contrasweep.folder.record import TrackingState
from contrasweep.folder.relocation import here
from contrasweep.search.base import held_back
from contrasweep.search.racing import Entry, Race, entries_of
from contrasweep.spec.identity import key_of
from contrasweep.spec.objective import Objective
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import ran_every_epoch, selection_key

logger = logging.getLogger(__name__)


class RaceSearcher(Searcher):
    """``trials``: the grid's trials (``Sweep.grid_trials``) and ``entries`` their race entries,
    in the same order; ``metric``/``mode``: the sweep's objective (a repeat's value is its
    ``selection_key``, as the selection judges it); ``path``: ``race.json``; ``first``: the Tune
    configs of the repeats the sweep's record calls unfinished."""

    def __init__(
        self,
        trials: list[dict],
        entries: list[Entry],
        min_repeats: int,
        alpha: float,
        metric: str,
        mode: str,
        path: str,
        max_concurrent: int,
        first=(),
    ):
        super().__init__(metric=metric, mode=mode)
        self.trials = {(e.group, e.repeat): t for e, t in zip(entries, trials)}
        self.entries, self.min_repeats, self.alpha = entries, min_repeats, alpha
        self.path, self.max_concurrent = str(path), max_concurrent
        self.live: dict[str, tuple[str, str]] = {}  # Tune trial id -> (group, repeat)
        self.gate = None  # the scheduler's may_hand_out (search.base.held_back)
        self.forgotten: set[str] = set()  # handed out, never to run (``forget``)
        by_key = {key_of({"hp": t}): entry for entry, t in self.trials.items()}
        self.first = [by_key[key_of(c)] for c in first if key_of(c) in by_key]
        self._race: Race | None = None
        self._journal: TrackingState | None = None  # race.json, open (folder.record.TrackingState)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_race=None, _journal=None)  # re-read from race.json
        return state

    def __setstate__(self, state):
        state["path"] = here(state["path"])  # the sweep folder may have moved
        self.__dict__.update(state)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the objective and the trials are the spec's

    def save(self, checkpoint_path: str) -> None:
        """Tune's periodic copy (never read back: ``race.json`` is the memory)."""
        with open(checkpoint_path, "wb") as fh:
            pickle.dump({"live": self.live}, fh)

    @property
    def race(self) -> Race:
        if self._race is None:
            self._journal = race_record.open_journal(self.path)
            self._race = Race(
                self.entries, self.min_repeats, self.alpha, Objective(self.metric, self.mode).sign, self._journal.data
            )
            self._race.advance()  # a round due when the driver stopped (none: a round is judged with its last repeat)
            self._write(whole=True)
        return self._race

    def _write(self, whole: bool = False) -> None:
        """What changed in the race, one journal line each (``whole``: a new snapshot)."""
        race = self._race
        assert race is not None and self._journal is not None  # made by ``race`` before any write
        ending = sum(
            1 for g, r in self.live.values() if g in race.out() and r not in race.ended(g)
        )  # out, still running
        race.journal.update(needed=race.needed() + ending, total=race.total())
        if whole:
            self._journal.save()
        else:
            for section, key in [*dict.fromkeys(race.touched), (None, "needed"), (None, "total")]:
                self._journal.save_key(section, key)
        race.touched.clear()

    # -- Searcher API ------------------------------------------------------------------
    def suggest(self, trial_id: str) -> dict | str | None:  # type: ignore[override]  # Ray's types omit its FINISHED
        race = self.race
        if held_back(self):
            return None
        chosen = self.first.pop(0) if self.first else race.next(set(self.live.values()))
        if chosen is None:
            return Searcher.FINISHED if not self.live else None  # the next round waits for the running repeats
        self.live[trial_id] = chosen
        return {"hp": dict(self.trials[chosen])}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # stopping inside a repeat is the scheduler's (group ASHA)

    def forget(self, trial_id: str) -> None:
        """A repeat handed out that will never run (the budget ended the sweep first): out of
        ``live``, not in the journal; Tune's end of it is not a result."""
        self.live.pop(trial_id, None)
        self.forgotten.add(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """A repeat ended: its value (its ``selection_key``) and outcome go into the journal, and
        a round whose last repeat this was is judged. Tune ends a trial without a result only
        when it was waiting: the schedulers end a restored copy of a repeat the journal already
        holds (nothing new), and group ASHA stops the waiting repeats of a group it stopped, or
        of one whose repeat failed: ``stopped``, and the configuration leaves the race (never
        issued again: the group's deciding repeat reports only after its waiting ones end)."""
        race = self.race
        if trial_id in self.forgotten:
            return
        if trial_id not in self.live:
            logger.debug("trial %s is not a repeat this race issued (or it ended before a restore)", trial_id)
            return
        group, repeat = self.live.pop(trial_id)
        result = result or {}
        value = result.get(selection_key(self.metric), result.get(self.metric))
        if error:
            outcome = "failed"
        else:
            # a max_steps budget: the steps it reported (no training rows counted here)
            every_epoch = ran_every_epoch(
                result.get("epoch", 0), self.trials[(group, repeat)], result.get("train/steps")
            )
            outcome = "complete" if result and every_epoch else "stopped"
        value = float(value) if isinstance(value, (int, float)) else None
        if race.record(group, repeat, value, outcome):
            for gone in race.advance():
                logger.info("racing: configuration %s eliminated (%s)", gone, race.out()[gone])
            self._write()


def build(sweep, sweep_dir, live: int) -> RaceSearcher:
    """The racing grid's search algorithm over ``sweep.grid_trials()``; the repeats the sweep's
    record calls unfinished first."""
    from contrasweep.tracking import ledger

    trials = sweep.grid_trials()
    objective = sweep.objective
    return RaceSearcher(
        trials,
        entries_of(trials, SweepStatic.of(sweep)),
        sweep.racing.min_repeats,
        sweep.racing.alpha,
        objective.metric,
        objective.mode,
        str(sweep_dir.path / race_record.RACE_FILE),
        live,
        ledger.unfinished(sweep_dir.path / "tracking.json"),
    )
