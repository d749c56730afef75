"""ASHA over repeat groups: early stopping that never drops single seeds from an aggregate.

The rule (docs/architecture.md, "Repeat groups and early stopping"): a configuration's repeats
in one setting (its data repeats × training seeds, one *repeat group*,
``contrasweep.spec.identity``) always run to the same budget. At each rung (ASHA's milestones
``grace_period · reduction_factor^i`` epochs, below ``max_t``) a trial that reaches the rung
is PAUSED until every repeat of its group has reached it; then the group's **mean** at the rung
is compared with the means other groups had at the same rung, exactly as asynchronous
successive halving compares single trials (Li et al. 2020: continue when the value is in the
top ``1/reduction_factor`` of those recorded at the rung). The whole group continues or the
whole group stops. A stopped group's trials are tagged as stopped by the tracker and no
aggregate counts them as finished repeats.

Pausing costs a checkpoint restore per rung (the loop checkpoints every epoch and resumes from
the latest); rungs are few (1, 2, 4, 8 for grace 1, factor 2, 10 epochs).

The scheduler also enforces ``sweep.max_concurrent`` on RUNNING trials, because the searcher
must be allowed to create a whole group (more live trials than may run) for the rung barrier
to be reachable. Its records live in ``group_asha.json`` next to the sweep (a snapshot and its
journal, ``group_asha.journal``: one line per rung value or decision), so a resumed sweep keeps
every decision made before the interruption.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from contrasweep.folder.record import TrackingState
from contrasweep.folder.relocation import here
from contrasweep.search.held import hold
from contrasweep.search.live_trials import (LiveTrials, controller_of, mark_for_save, repoint_checkpoint, save_now,
                                            stop_quickly, stop_waiting)
from contrasweep.search.warm_actors import keep_warm
from contrasweep.spec.objective import Objective
from contrasweep.tracking import ledger

logger = logging.getLogger(__name__)

CONTINUE, STOP = "continue", "stop"


def rungs(max_t: int, grace_period: int, reduction_factor: float) -> list[int]:
    """ASHA's milestones below ``max_t``, smallest first."""
    out, t = [], float(grace_period)
    while t < max_t:
        out.append(int(math.ceil(t)))
        t *= reduction_factor
    return sorted(set(out))


def survives(value: float, recorded: list[float], reduction_factor: float, mode: str) -> bool:
    """ASHA's cutoff: keep a value in the top ``1/reduction_factor`` of the values recorded at
    the rung (its own included). NaN never survives against a number."""
    values = np.asarray([v for v in recorded if not math.isnan(v)], dtype=float)
    if math.isnan(value):
        return values.size == 0
    sign = Objective("", mode).sign
    cutoff = np.percentile(sign * values, (1 - 1 / reduction_factor) * 100)
    return sign * value >= cutoff


class MovableFIFO(FIFOScheduler):
    """FIFO whose trials never run twice and whose new trials follow a moved sweep folder.

    ``settle`` runs before Tune starts any trial (``choose_trial_to_run`` opens every step of
    Tune's loop that starts trials, docs/architecture.md, "Resume"):
    - a new trial is saved in Tune's experiment state before it can start, with its folder's
      name (the trial chosen to start is named here, as Tune would name it next; one Tune
      schedules by itself is saved once Tune has named it, before any training): forced saves,
      so a driver killed at any moment restores every trial that ran, with its folder;
    - a PENDING trial that the sweep's own record (``contrasweep.tracking.ledger``, ``tracking_file``)
      says finished (it ended after Tune's last save) is ended at once with its recorded final
      result, never trained again;
    - a trial that ended and whose end the record holds leaves the trials its loops look at and
      the state Tune saves next (``contrasweep.search.live_trials``): a save and a step cost
      O(live trials), not O(trials so far).

    Tune moves the trials it restores, but the searcher's saved state (``SearchGenerator``'s
    experiment, the grid's iterators) still names the old folder, so a trial created after
    ``resume`` would write there (``contrasweep.folder.relocation``)."""

    def __init__(self, tracking_file: str | os.PathLike | None = None, budget=None):
        super().__init__()
        self.tracking_file = str(tracking_file) if tracking_file else None
        self.budget = budget  # sweep.budget's gate (contrasweep.search.budget_gate), or None
        self._transient()

    def _transient(self) -> None:
        self._unsaved = False  # trials added (or their folders named) since Tune last saved its state
        self._seen: set[str] = set()  # trials already checked against the record
        self._named: set[str] = set()  # trials whose folder name Tune's state has
        self._finished: dict[str, dict] | None = None  # the record, read once per driver
        self._live = LiveTrials()  # what the loops below look at: trials not ended (search.live_trials)

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_unsaved", "_seen", "_named", "_finished", "_live"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        if state.get("tracking_file"):
            state["tracking_file"] = here(state["tracking_file"])  # the sweep folder may have moved
        self.__dict__.update(state)
        self._transient()

    def on_trial_add(self, tune_controller, trial: Trial):
        import copy

        storage = getattr(trial, "storage", None)
        if storage is not None and here(storage.storage_fs_path) != storage.storage_fs_path:
            moved = copy.copy(storage)
            moved.storage_fs_path = here(storage.storage_fs_path)
            trial.set_storage(moved)
        repoint_checkpoint(trial)  # Tune deleted the checkpoint its saved state names (search.live_trials)
        hold(tune_controller, trial)  # after a restore, the searcher's live trials are Tune's (search.held)
        self._unsaved = True
        self._live.add(trial)
        super().on_trial_add(tune_controller, trial)

    def settle(self, tune_controller) -> None:
        """Before any trial starts: end the finished ones, mark the new ones for Tune's save
        (``save_if_unsaved`` makes it, once the trial to start is chosen and named)."""
        if self._finished is None:
            self._finished = ledger.finished(getattr(self, "tracking_file", None))
            stop_quickly(tune_controller)
            keep_warm(controller_of(tune_controller))  # finished trials' actors wait for the next (search.warm_actors)
        self._live.sweep(tune_controller, self._finished)  # the ended leave it, and Tune's saved state once recorded
        for trial in self._live:
            if getattr(trial, "relative_logdir", None) and trial.trial_id not in self._named:
                self._named.add(trial.trial_id)  # Tune named its folder (it names it when it schedules the trial)
                mark_for_save(tune_controller, trial)
                self._unsaved = True
            if trial.trial_id in self._seen or trial.status != Trial.PENDING:
                continue
            self._seen.add(trial.trial_id)
            final = self._finished.get(ledger.key(trial.config))
            if final is None:
                continue
            logger.info("trial %s finished before the driver stopped (the sweep's record): not run again", trial.trial_id)
            if final:
                trial.update_last_result({**final, "trial_id": trial.trial_id, "config": trial.config, "done": True})
            stop_waiting(tune_controller, trial)

    def save_if_unsaved(self, tune_controller) -> None:
        if self._unsaved:
            self._unsaved = False
            # Tune's state (its live trials' and the searcher's) saved now rather than at its next
            # period (TUNE_GLOBAL_CHECKPOINT_S), so no trial runs unsaved (search.live_trials)
            save_now(tune_controller)

    def name_chosen(self, tune_controller, trial: Trial | None) -> None:
        """Name the folder of the trial about to be started, as Tune does next
        (``Trial.init_local_path``, which keeps a name once given), so that the save before it
        starts holds its folder too: one forced save per new trial, not one when it is added
        and another when Tune names it (each save writes every trial's state: twice per
        trial made a sweep's bookkeeping grow with the square of its trials)."""
        if trial is None or trial.relative_logdir:
            return
        trial.init_local_path()
        self._named.add(trial.trial_id)
        mark_for_save(tune_controller, trial)
        self._unsaved = True

    def choose(self, tune_controller) -> Trial | None:
        """The trial to start (the subclass's rule; FIFO's here, over the live trials only)."""
        for status in (Trial.PENDING, Trial.PAUSED):
            for trial in self._live:
                if trial.status == status:
                    return trial
        return None

    def choose_trial_to_run(self, tune_controller) -> Trial | None:
        self.settle(tune_controller)
        trial = self.choose(tune_controller)
        budget = getattr(self, "budget", None)
        if trial is not None and budget is not None:
            if not budget.admits() and budget.fresh(trial):
                budget.end(tune_controller)  # the never-started trials end unrun; the search algorithm is finished
                self.budget_ended(tune_controller, budget.cut_sizes())
                trial = self.choose(tune_controller)  # a started one (paused at a rung, restored) still runs
            if trial is not None:
                budget.running(trial)
        self.name_chosen(tune_controller, trial)
        self.save_if_unsaved(tune_controller)
        return trial

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


class GroupASHA(MovableFIFO):
    def __init__(self, metric: str, mode: str, max_t: int, grace_period: int, reduction_factor: float,
                 group_of: Callable[[dict], str], group_sizes: dict[str, int] | int, max_running: int,
                 state_path: str | os.PathLike, time_attr: str = "epoch", tracking_file: str | os.PathLike | None = None,
                 budget=None):
        super().__init__(tracking_file, budget)
        self._metric, self._mode, self.time_attr = metric, mode, time_attr
        self.max_t, self.reduction_factor = max_t, reduction_factor
        self.rungs = rungs(max_t, grace_period, reduction_factor)
        self.group_of = group_of  # trial config -> repeat group key
        self.group_sizes = group_sizes  # {group: expected repeats} or one number for every group
        self.max_running = max_running
        self.state_path = str(state_path)
        self._state: TrackingState | None = None  # group_asha.json, read once per driver
        self._groups: dict[str, str] = {}  # trial id -> group (choose_trial_to_run asks often)

    # -- state -------------------------------------------------------------------------
    @property
    def state(self) -> dict[str, Any]:
        """``{"values": {rung: {group: {trial_id: value}}}, "decisions": {rung: {group: ...}}}``."""
        return self._record().data

    def _record(self) -> TrackingState:
        """``group_asha.json`` and its journal (``contrasweep.folder.record``): a rung value or a
        decision is one appended line, not the whole file again (that grew with the sweep)."""
        if self._state is None:
            self._state = TrackingState(Path(self.state_path), {"values": {}, "decisions": {}})
        return self._state

    def _saved(self, section: str, rung: int, group: str) -> None:
        self._record().save_key(section, (str(rung), group))

    def __getstate__(self):
        state = super().__getstate__()
        state["_state"] = None  # re-read from group_asha.json after a restore
        state["_groups"] = {}
        return state

    def __setstate__(self, state):
        state["state_path"] = here(state["state_path"])  # the sweep folder may have moved
        super().__setstate__(state)

    def _group(self, trial: Trial) -> str:
        if trial.trial_id not in self._groups:
            self._groups[trial.trial_id] = self.group_of(trial.config)
        return self._groups[trial.trial_id]

    def _size(self, group: str) -> int:
        budget = getattr(self, "budget", None)
        cut = budget.cut_sizes() if budget is not None else {}
        if group in cut:  # the budget ended the sweep before its other repeats started
            return cut[group]
        return self.group_sizes if isinstance(self.group_sizes, int) else self.group_sizes.get(group, 1)

    def _decision(self, rung: int, group: str) -> str | None:
        return self.state["decisions"].get(str(rung), {}).get(group)

    def _stopped(self, group: str) -> bool:
        return any(d.get(group) == STOP for d in self.state["decisions"].values())

    def waiting(self, trial: Trial) -> bool:
        """The trial has reached a rung whose group decision is still open."""
        group = self._group(trial)
        for rung in self.rungs:
            recorded = self.state["values"].get(str(rung), {}).get(group, {})
            if trial.trial_id in recorded and self._decision(rung, group) is None:
                return True
        return False

    # -- scheduler API -----------------------------------------------------------------
    def result_action(self, tune_controller, trial: Trial, result: dict) -> str:
        if self.time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        group = self._group(trial)
        if self._stopped(group):
            return TrialScheduler.STOP
        t = result[self.time_attr]
        if t >= self.max_t:
            return TrialScheduler.CONTINUE
        action = TrialScheduler.CONTINUE
        for rung in self.rungs:
            if t < rung or self._decision(rung, group) == CONTINUE:
                continue
            values = self.state["values"].setdefault(str(rung), {}).setdefault(group, {})
            values.setdefault(trial.trial_id, float(result[self._metric]))
            self._saved("values", rung, group)
            if len(values) < self._size(group):
                return TrialScheduler.PAUSE  # wait for the group's other repeats at this rung
            action = self._decide(tune_controller, trial, rung, group)
            if action == TrialScheduler.STOP:
                return action
        return action

    def _decide(self, tune_controller, trial: Trial, rung: int, group: str) -> str:
        means = {g: float(np.mean(list(v.values()))) for g, v in self.state["values"][str(rung)].items()
                 if len(v) >= self._size(g)}
        decision = CONTINUE if survives(means[group], list(means.values()), self.reduction_factor, self._mode) else STOP
        self.state["decisions"].setdefault(str(rung), {})[group] = decision
        self._saved("decisions", rung, group)
        logger.info("group %s at rung %d: mean %s=%.4f over %d repeats -> %s", group, rung, self._metric,
                    means[group], self._size(group), decision)
        if decision == STOP:
            for other in self._members(tune_controller, group):
                if other is not trial and other.status in (Trial.PAUSED, Trial.PENDING):
                    stop_waiting(tune_controller, other)
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def _members(self, tune_controller, group: str) -> list[Trial]:
        """The group's trials that have not ended (the ended ones need no decision)."""
        return [t for t in self._live if self._group(t) == group]

    def budget_ended(self, tune_controller, cut: dict[str, int]) -> None:
        """A cut group's rung barrier waits for the repeats that started alone (``_size``): a
        rung they have all reached is decided now, and its paused repeats continue or stop."""
        for rung in self.rungs:
            for group, values in self.state["values"].get(str(rung), {}).items():
                if group not in cut or self._decision(rung, group) is not None or len(values) < cut[group]:
                    continue
                members = [t for t in self._members(tune_controller, group) if t.trial_id in values]
                if members and self._decide(tune_controller, members[0], rung, group) == TrialScheduler.STOP:
                    stop_waiting(tune_controller, members[0])

    def on_trial_error(self, tune_controller, trial: Trial) -> None:
        """A repeat that failed for good can never reach the next rung: its group stops (its
        aggregate would be partial anyway); resume retries the failed repeat alone."""
        group = self._group(trial)
        for other in self._members(tune_controller, group):
            if other is not trial and other.status == Trial.PAUSED and self.waiting(other):
                stop_waiting(tune_controller, other)
        super().on_trial_error(tune_controller, trial)

    def choose(self, tune_controller) -> Trial | None:
        trials = list(self._live)
        if sum(t.status == Trial.RUNNING for t in trials) >= self.max_running:
            return None
        for status in (Trial.PENDING, Trial.PAUSED):
            for trial in trials:
                if trial.status == status and not self.waiting(trial):
                    if self._stopped(self._group(trial)):
                        stop_waiting(tune_controller, trial)
                        continue
                    return trial
        return None

    def debug_string(self) -> str:
        decided = sum(len(d) for d in self.state["decisions"].values())
        return f"GroupASHA: rungs {self.rungs}, {decided} group decisions."
