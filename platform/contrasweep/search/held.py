"""After a restore, a searcher's live trials are made the ones Tune restored (issue 54's resume).

Ray 2.60 saves a searcher (``searcher-state-<session>.pkl``: what it handed out and is waiting
for) and its trials (``experiment_state-<session>.json``) as two files. The save forced before
each new trial (``live_trials.save_now``) copies the searcher's first and the trials' last, and
Tune's periodic copy copies the staging folder in any order. A driver killed between the two
left a searcher whose live trials were not those Tune restored:

* newer than Tune's: it waited for a trial Tune never saved, for ever. A racing grid's resume
  hung with 2 trials "not started yet" (CI of ded29a5, ``test_racing_sweep``); a study would
  have waited for that repeat and a grid skipped that point;
* older than Tune's: it did not know a trial Tune runs, would hand its repeat out again, and
  would not hear of its end.

So after a restore the schedulers' ``on_trial_add`` (``group_asha.MovableFIFO``: Tune re-adds
every restored trial before it first asks the searcher) tells the searcher each trial (``hold``),
and at its first call after the restore (``settle_held``) the searcher's live trials become
exactly Tune's that have not ended: it forgets those Tune lacks (their repeats are handed out
again; one that had ended is ended from the sweep's record, never trained again) and adopts
those it lacks.

May import: Ray Tune's ``Trial``.
"""

from __future__ import annotations

import json
import logging
import sys

from ray.tune.experiment import Trial

logger = logging.getLogger(__name__)


class HeldByTune:
    """A searcher's side. ``live``: Tune trial id -> what it handed out (``identity`` of the
    trial's config); ``forgotten``/``adopted``: what a searcher does besides (the grid's
    position)."""

    live: dict
    _held: dict[str, Trial] | None = None  # after a restore, until the first call: the trials Tune re-added

    def await_held(self) -> None:
        """From ``restore``: the trials Tune re-adds next are the live ones."""
        self._held = {}

    def hold(self, trial: Trial) -> None:
        if self._held is not None:
            self._held[trial.trial_id] = trial

    def settle_held(self) -> None:
        """At the searcher's first call after a restore: its live trials are Tune's."""
        held, self._held = self._held, None
        if not held:  # no restore, or no word of Tune's trials (its restore needs one: none was added)
            return
        running = [tid for tid, t in held.items() if t.status != Trial.TERMINATED]
        forgotten = {tid: v for tid, v in self.live.items() if tid not in set(running)}
        adopted = {tid: self.identity(held[tid].config) for tid in running if tid not in self.live}
        self.live = {tid: self.live[tid] if tid in self.live else adopted[tid] for tid in running}
        if forgotten or adopted:
            logger.info("the searcher's saved state and Tune's disagreed (a kill between their two files): "
                        "%d handed out again, %d adopted", len(forgotten), len(adopted))
            self.forgotten(list(forgotten.values()))
            self.adopted(list(adopted.values()))

    def identity(self, config: dict):
        raise NotImplementedError

    def forgotten(self, values: list) -> None:
        """What it handed out that Tune never saved."""

    def adopted(self, values: list) -> None:
        """What Tune runs that it had not handed out yet."""


def hold(tune_controller, trial: Trial) -> None:
    """Tell the sweep's searcher a trial Tune added (the scheduler's view of the controller
    exposes its search algorithm; Tune wraps the searcher in a ``SearchGenerator``).

    At the first trial after a restore the ``SearchGenerator`` is opened again: its own saved
    state (a third file, ``search_gen_state-``) may count a trial Tune never saved, or say the
    searcher had finished, and Tune then never asks the searcher again, so a repeat it hands out
    again never ran. After a restore the searcher alone says when it has finished (each of ours
    returns ``Searcher.FINISHED`` once it has nothing left)."""
    search_alg = getattr(tune_controller, "search_alg", None)
    searcher = getattr(search_alg, "searcher", None)
    if not isinstance(searcher, HeldByTune) or searcher._held is None:
        return
    if not searcher._held and hasattr(search_alg, "_total_samples"):  # Ray 2.60's SearchGenerator
        search_alg._total_samples, search_alg._finished = sys.maxsize, False
    searcher.hold(trial)


def same(a: dict, b: dict) -> bool:
    """Whether two trials' hyperparameters are one (a restored config's values may have other types:
    a tuple saved comes back a list)."""
    return hp_key(a) == hp_key(b)


def hp_key(hp: dict) -> str:
    return json.dumps(hp, sort_keys=True, default=str)
