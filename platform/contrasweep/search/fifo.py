"""The schedulers' base: FIFO over the trials that have not ended, with the budget's clock
(docs/architecture.md, "Resume").

Every driver builds a fresh Tuner from the sweep's own records (``runner.tune``): its searcher never
hands out a repeat the record says finished, and an unfinished one comes back under a new Tune
trial whose loop goes on from the repeat's state folder (``trials/<key>/state``). So nothing
here reads or writes Tune's saved state: a trial is started, paused or stopped, and the loops
that run at every step of Tune's (``choose_trial_to_run``) go over the live trials only
(``LiveTrials``), O(live), not O(trials so far).

May import: Ray Tune's ``Trial`` and schedulers, ``contrasweep.search.warm_actors``.
"""

from __future__ import annotations

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from contrasweep.search.warm_actors import keep_warm

ENDED = (Trial.TERMINATED, Trial.ERROR)


def stop_waiting(tune_controller, trial: Trial) -> None:
    """End a trial that is PENDING or PAUSED (a group stopped at a rung, a budget's cut): Tune's
    ``stop_trial``, as its own schedulers (HyperBand, PBT) end a paused trial. A trial never
    scheduled gets its folder's name first, as Tune would name it (``Trial.init_local_path``):
    Tune's progress report reads every trial's folder, and Ray 2.60 raises for one without."""
    if not trial.relative_logdir:
        trial.init_local_path()
    tune_controller.stop_trial(trial)


class LiveTrials:
    """Trials added and not ended, in the order Tune added them."""

    def __init__(self) -> None:
        self._live: dict[str, Trial] = {}

    def add(self, trial: Trial) -> None:
        self._live.pop(trial.trial_id, None)
        self._live[trial.trial_id] = trial

    def __iter__(self):
        return iter(list(self._live.values()))

    def sweep(self) -> None:
        """Drop the trials that ended."""
        for trial in [t for t in self._live.values() if t.status in ENDED]:
            del self._live[trial.trial_id]


class LiveFIFO(FIFOScheduler):
    """FIFO over the live trials; ``budget``: sweep.budget's gate
    (``contrasweep.search.budget_gate``), or None."""

    def __init__(self, budget=None) -> None:
        super().__init__()
        self.budget = budget
        self._live = LiveTrials()
        self._arrived: list[Trial] = []  # handed out, not yet judged by the budget
        self._warm = False

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_live=LiveTrials(), _arrived=[], _warm=False)
        return state

    def on_trial_add(self, tune_controller, trial: Trial):
        self._live.add(trial)
        if getattr(self, "budget", None) is not None:
            self._arrived.append(trial)  # admitted (or not) at Tune's next choice (``admit``)
        super().on_trial_add(tune_controller, trial)

    def settle(self, tune_controller) -> None:
        """Before a trial starts: the ended leave the live trials."""
        if not self._warm:
            self._warm = True
            keep_warm(tune_controller)  # finished trials' actors wait for the next (search.warm_actors)
        self._live.sweep()

    def choose(self, tune_controller) -> Trial | None:
        """The trial to start (the subclass's rule; FIFO's here, over the live trials only)."""
        for status in (Trial.PENDING, Trial.PAUSED):
            for trial in self._live:
                if trial.status == status:
                    return trial
        return None

    def may_hand_out(self) -> bool:
        """The searcher's gate (``contrasweep.search.base.held_back``): whether one more trial may
        start now. FIFO's: always (the searcher's ``max_concurrent`` is the limit)."""
        return True

    def choose_trial_to_run(self, tune_controller) -> Trial | None:
        self.settle(tune_controller)
        budget = getattr(self, "budget", None)
        if budget is not None:
            self.admit(tune_controller, budget)
        trial = self.choose(tune_controller)
        if trial is not None and budget is not None and trial.status == Trial.PAUSED:
            budget.running(trial)  # again after a pause (group ASHA's rungs)
        return trial

    def admit(self, tune_controller, budget) -> None:
        """The budget's gate, for every trial the searcher handed out since the last step (Tune asks
        this scheduler before it starts actors for its pending trials: ``choose_trial_to_run``
        comes first in each of its steps): a trial that never ran is admitted while one more
        fits, else the budget ends the sweep (its never-started trials end unrun; a started one,
        paused at a rung, still runs). A pending trial's clock is set again at every step, so
        that it runs from the step it starts in."""
        arrived, self._arrived = self._arrived, []
        for trial in arrived:
            if trial.status != Trial.PENDING:
                continue  # ended (by the budget's end among them: it ends every never-started trial at once)
            if budget.fresh(trial) and not budget.admits():
                budget.end(tune_controller)  # the search algorithm is finished
                self.budget_ended(tune_controller, budget.cut_sizes())
                continue
            budget.running(trial)
        budget.waiting([t for t in self._live if t.status == Trial.PENDING])

    def budget_ended(self, tune_controller, cut: dict[str, int]) -> None:
        """The budget cut the groups ``cut`` (group -> repeats that started) short."""

    # -- the budget's clock (sweep.budget) ------------------------------------------------------
    def result_action(self, tune_controller, trial: Trial, result: dict) -> str:
        """What a result means for the trial (the subclass's rule; FIFO's here)."""
        return TrialScheduler.CONTINUE

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        action = self.result_action(tune_controller, trial, result)
        if getattr(self, "budget", None) is not None:
            self.budget.result(trial, holds=action == TrialScheduler.CONTINUE)
        return action

    def on_trial_complete(self, tune_controller, trial: Trial, result: dict):
        if getattr(self, "budget", None) is not None:
            self.budget.trial_ended(trial)
        super().on_trial_complete(tune_controller, trial, result)

    def on_trial_error(self, tune_controller, trial: Trial):
        if getattr(self, "budget", None) is not None:
            self.budget.trial_ended(trial)
        super().on_trial_error(tune_controller, trial)

    def on_trial_remove(self, tune_controller, trial: Trial):
        if getattr(self, "budget", None) is not None:
            self.budget.trial_ended(trial)
        super().on_trial_remove(tune_controller, trial)
