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

The scheduler also enforces ``sweep.max_concurrent`` on the trials that run or wait to (not the
paused ones), because the searcher must be allowed to create a whole group (more live trials
than may run) for the rung barrier to be reachable: the searcher hands out a trial only while
``may_hand_out`` (Tune starts an actor for every trial handed out), and a paused trial goes on
only while a slot is free. Its records live in ``group_asha.json`` next to the sweep (a snapshot and its
journal, ``group_asha.journal``: one line per rung value or decision), so a resumed sweep keeps
every decision made before the interruption, and a repeat that was paused at a rung still open
comes back paused (``on_trial_add``): it trains nothing until its group's rung is decided.
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
from ray.tune.schedulers import TrialScheduler

from contrasweep.folder.record import TrackingState
from contrasweep.folder.relocation import here
from contrasweep.search.fifo import LiveFIFO, stop_waiting
from contrasweep.spec.identity import key_of
from contrasweep.spec.objective import Objective

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
    return bool(sign * value >= cutoff)  # numpy's bool otherwise


class GroupASHA(LiveFIFO):
    def __init__(
        self,
        metric: str,
        mode: str,
        max_t: int,
        grace_period: int,
        reduction_factor: float,
        group_of: Callable[[dict], str],
        group_sizes: dict[str, int] | int,
        max_running: int,
        state_path: str | os.PathLike,
        time_attr: str = "epoch",
        budget=None,
    ):
        super().__init__(budget)
        self._metric, self._mode, self.time_attr = metric, mode, time_attr
        self.max_t, self.reduction_factor = max_t, reduction_factor
        self.rungs = rungs(max_t, grace_period, reduction_factor)
        self.group_of = group_of  # trial config -> repeat group key
        self.group_sizes = group_sizes  # {group: expected repeats} or one number for every group
        self.max_running = max_running
        self.state_path = str(state_path)
        self._state: TrackingState | None = None  # group_asha.json, read once per driver
        self._groups: dict[str, str] = {}  # trial id -> group (choose_trial_to_run asks often)
        self._keys: dict[str, str] = {}  # trial id -> the repeat's configuration key (what the rungs record)
        self._settled = False  # rungs a kill left undecided: decided as this driver's first trial comes in

    # -- state -------------------------------------------------------------------------
    @property
    def state(self) -> dict[str, Any]:
        """``{"values": {rung: {group: {repeat key: value}}}, "decisions": {rung: {group: ...}}}``: a
        repeat is its configuration key (``identity.key_of``), whichever driver's trial runs it."""
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
        state.update(_state=None, _groups={}, _keys={}, _settled=False)  # read from group_asha.json by each driver
        return state

    def __setstate__(self, state):
        state["state_path"] = here(state["state_path"])  # the sweep folder may have moved
        self.__dict__.update(state)

    def _group(self, trial: Trial) -> str:
        if trial.trial_id not in self._groups:
            self._groups[trial.trial_id] = self.group_of(trial.config)
        return self._groups[trial.trial_id]

    def _key(self, trial: Trial) -> str:
        if trial.trial_id not in self._keys:
            self._keys[trial.trial_id] = key_of(trial.config)
        return self._keys[trial.trial_id]

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
            if self._key(trial) in recorded and self._decision(rung, group) is None:
                return True
        return False

    # -- scheduler API -----------------------------------------------------------------
    def on_trial_add(self, tune_controller, trial: Trial):
        """A repeat that an earlier driver paused at a rung still undecided comes in PAUSED, as
        it left: Tune files a trial it adds under the status it has after this call (Ray
        2.56-2.60's ``TuneController.add_trial``) and starts an actor for every PENDING one
        without asking a scheduler, which would train it an epoch past its rung; a PAUSED one
        starts when ``choose`` picks it, once the rung is decided. Rungs a kill left undecided
        are decided first (``_settle``)."""
        if not self._settled:
            self._settle(tune_controller)
        super().on_trial_add(tune_controller, trial)
        if trial.status == Trial.PENDING and self.waiting(trial):
            trial.set_status(Trial.PAUSED)

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
            values.setdefault(self._key(trial), float(result[self._metric]))
            self._saved("values", rung, group)
            if len(values) < self._size(group):
                return TrialScheduler.PAUSE  # wait for the group's other repeats at this rung
            action = self._decide(tune_controller, trial, rung, group)
            if action == TrialScheduler.STOP:
                return action
        return action

    def _decide(self, tune_controller, trial: Trial | None, rung: int, group: str) -> str:
        means = {
            g: float(np.mean(list(v.values())))
            for g, v in self.state["values"][str(rung)].items()
            if len(v) >= self._size(g)
        }
        decision = CONTINUE if survives(means[group], list(means.values()), self.reduction_factor, self._mode) else STOP
        self.state["decisions"].setdefault(str(rung), {})[group] = decision
        self._saved("decisions", rung, group)
        logger.info(
            "group %s at rung %d: mean %s=%.4f over %d repeats -> %s",
            group,
            rung,
            self._metric,
            means[group],
            self._size(group),
            decision,
        )
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
                members = [t for t in self._members(tune_controller, group) if self._key(t) in values]
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

    def _settle(self, tune_controller) -> None:
        """A rung every repeat of a group reached with no decision: a kill fell between the last
        value's line and the decision's in the journal. Its repeats would wait for a decision no
        result brings (each comes in PAUSED: ``on_trial_add``), so it is made now, once per driver."""
        self._settled = True
        for rung in self.rungs:
            for group, values in list(self.state["values"].get(str(rung), {}).items()):
                if (
                    self._decision(rung, group) is None
                    and not self._stopped(group)
                    and len(values) >= self._size(group)
                ):
                    self._decide(tune_controller, None, rung, group)

    def active(self) -> int:
        """Live trials that hold or wait for slots: running or pending (a paused one holds none)."""
        return sum(t.status in (Trial.RUNNING, Trial.PENDING) for t in self._live)

    def may_hand_out(self) -> bool:
        """``sweep.max_concurrent`` over the trials that hold or wait for slots: the searcher keeps
        a whole group live (more than may run) and hands out a group's next repeat once others
        paused at a rung."""
        return self.active() < self.max_running

    def choose(self, tune_controller) -> Trial | None:
        """A pending trial first (the searcher's gate let it start), else a paused one whose
        group's rung is decided, while a slot is free; the pending repeats of a stopped group end."""
        if not self._settled:
            self._settle(tune_controller)
        trials = list(self._live)
        for trial in trials:
            if trial.status == Trial.PENDING and self._stopped(self._group(trial)):
                stop_waiting(tune_controller, trial)
        for trial in trials:
            if trial.status == Trial.PENDING and not self.waiting(trial):
                return trial
        if self.active() >= self.max_running:
            return None
        for trial in trials:
            if trial.status == Trial.PAUSED and not self.waiting(trial):
                if self._stopped(self._group(trial)):
                    stop_waiting(tune_controller, trial)
                    continue
                return trial
        return None

    def debug_string(self) -> str:
        decided = sum(len(d) for d in self.state["decisions"].values())
        return f"GroupASHA: rungs {self.rungs}, {decided} group decisions."
