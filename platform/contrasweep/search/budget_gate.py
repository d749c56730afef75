"""The gate that keeps a sweep within ``sweep.budget`` (``contrasweep.spec.budget``): both
schedulers (``fifo.LiveFIFO.admit``) ask it for every trial the searcher hands out, before Tune
starts an actor for it.

Slot time is counted from the scheduler's own clock: a trial's slot time runs from the moment
it starts (the last of Tune's steps it was pending in) or the scheduler chooses it to run again
after a pause, until it pauses (group ASHA's rungs) or ends, × its slots (its
GPUs, else its CPUs: ``spec.budget.trial_slots``); it is added up at every result, so a killed
driver loses at most one epoch per running trial. A trial that never ran is admitted while

    spent + Σ over running trials max(expected − its slot time so far, 0) + expected ≤ budget,

``expected`` being the mean slot time of the trials that ended (before any has ended: the
longest running one's so far, a lower bound, so the first wave may overshoot by less than one
trial each). When it is not admitted the budget ends the sweep: the trials that never started
are ended without a run (``end``: Tune's public ``stop_trial``, after ``budget.json`` names
them, so the tracker makes no MLflow run for them, and after the searcher ``forget``s them, so
no searcher records them as repeats: an extension with a larger budget runs them), the search
algorithm is told it is finished (Tune then ends the experiment once the running trials have),
and the repeat groups that started without all their repeats are *cut*: they close with what they
ran (``budget_record.cut_groups``).

Memory: ``budget.json`` (``contrasweep.folder.budget_record``); the open intervals live in
this object only. A larger budget (``contrasweep extend NAME --set sweep.budget.slot_hours=H``)
opens an ended gate again.

May import: ``contrasweep.folder`` (the journal), ``contrasweep.tracking.ledger`` (which trials
started), Ray Tune's ``Trial``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from ray.tune.experiment import Trial

from contrasweep.folder import budget_record
from contrasweep.folder.relocation import here
from contrasweep.tracking import ledger

logger = logging.getLogger(__name__)


class BudgetGate:
    """``slot_hours``: the budget; ``slots``: one trial's slots; ``group_of``: a trial config's
    repeat group; ``group_sizes``: trials per group (``{group: n}`` or one number)."""

    def __init__(
        self,
        path,
        slot_hours: float,
        slots: float,
        group_of: Callable[[dict], str],
        group_sizes: dict[str, int] | int,
        tracking_file,
    ):
        self.path, self.tracking_file = str(path), str(tracking_file)
        self.slot_hours, self.slots = slot_hours, slots
        self.group_of, self.group_sizes = group_of, group_sizes
        self._transient()

    def _transient(self) -> None:
        self._journal: dict | None = None
        self._open: dict[str, float] = {}  # trial id -> when its slot time was last counted (running trials)
        self._so_far: dict[str, float] = {}  # trial id -> its slot-seconds in this driver
        self._started: dict[str, tuple[str, str]] = {}  # trial id -> (config key, group): chosen to run by this driver
        self._recorded: dict[str, str] | None = None  # the record's started repeats, read once per driver (``fresh``)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        state["path"], state["tracking_file"] = here(state["path"]), here(state["tracking_file"])
        self.__dict__.update(state)
        self._transient()

    @property
    def journal(self) -> dict:
        if self._journal is None:
            journal = budget_record.read(self.path) or budget_record.new_journal(self.slot_hours)
            if journal["slot_hours"] != self.slot_hours:  # an extension's larger budget: the gate opens again
                journal.update(slot_hours=self.slot_hours, ended=None)
            self._journal = journal
        return self._journal

    def _save(self) -> None:
        budget_record.write(self.path, self.journal)

    @property
    def ended(self) -> bool:
        return self.journal["ended"] is not None

    # -- counting ---------------------------------------------------------------------------
    def _count(self, trial_id: str, now: float, close: bool) -> None:
        since = self._open.pop(trial_id, None) if close else self._open.get(trial_id)
        if since is None:
            return
        used = (now - since) * self.slots
        self.journal["spent_s"] += used
        self._so_far[trial_id] = self._so_far.get(trial_id, 0.0) + used
        if not close:
            self._open[trial_id] = now

    def running(self, trial: Trial, now: float | None = None) -> None:
        """The scheduler admitted ``trial`` (new) or chose it to run again after a pause."""
        self._open[trial.trial_id] = time.monotonic() if now is None else now
        if trial.trial_id not in self._started:
            self._started[trial.trial_id] = (ledger.key(trial.config), self.group_of(trial.config))

    def waiting(self, trials: list[Trial], now: float | None = None) -> None:
        """``trials`` are admitted and still pending (waiting for an actor or for resources):
        their clocks start again now, so that each runs from the moment its trial starts."""
        now = time.monotonic() if now is None else now
        for trial in trials:
            if trial.trial_id in self._open:
                self._open[trial.trial_id] = now

    def result(self, trial: Trial, holds: bool, now: float | None = None) -> None:
        """A result came; ``holds``: the trial keeps its slots (it was not paused or stopped)."""
        self._count(trial.trial_id, time.monotonic() if now is None else now, close=not holds)
        self._save()

    def trial_ended(self, trial: Trial, now: float | None = None) -> None:
        if trial.trial_id not in self._so_far and trial.trial_id not in self._open:
            return  # never ran in this driver (a restored copy the record says finished)
        self._count(trial.trial_id, time.monotonic() if now is None else now, close=True)
        self.journal["ended_n"] += 1
        self.journal["ended_s"] += self._so_far.pop(trial.trial_id, 0.0)
        self._save()

    # -- the gate ---------------------------------------------------------------------------
    def fresh(self, trial: Trial, recorded: dict[str, str] | None = None) -> bool:
        """``trial`` never ran: pending, not admitted by this driver, with no run in the record
        (``recorded``; by default the record as this driver found it: what this driver starts,
        it admitted first)."""
        if trial.status != Trial.PENDING or trial.trial_id in self._started:
            return False
        if recorded is None:
            if self._recorded is None:
                self._recorded = ledger.started(self.tracking_file)
            recorded = self._recorded
        return ledger.key(trial.config) not in recorded

    def spent(self, now: float) -> float:
        """Slot-seconds spent, the running trials' time since they were last counted included."""
        return self.journal["spent_s"] + sum((now - since) * self.slots for since in self._open.values())

    def admits(self, now: float | None = None) -> bool:
        """Whether one more trial fits (the module's rule)."""
        if self.ended:
            return False
        now = time.monotonic() if now is None else now
        so_far = {tid: self._so_far.get(tid, 0.0) + (now - since) * self.slots for tid, since in self._open.items()}
        n = self.journal["ended_n"]
        expected = self.journal["ended_s"] / n if n else max(so_far.values(), default=0.0)
        left = sum(max(expected - s, 0.0) for s in so_far.values())
        return self.spent(now) + left + expected <= self.slot_hours * 3600.0

    def end(self, tune_controller, now: float | None = None) -> list[Trial]:
        """The budget ends the sweep: the trials that never started end without running, the
        search algorithm is finished, and the groups that started short of their repeats are cut.
        Returns the trials it ended; once ended, it ends the trials a resumed driver's searcher hands out anew."""
        now = time.monotonic() if now is None else now
        recorded = ledger.started(self.tracking_file)
        gone = [t for t in tune_controller.get_trials() if self.fresh(t, recorded)]
        for trial in gone:
            if not trial.relative_logdir:  # Tune's reporter and its save read every trial's folder
                trial.init_local_path()
        ran = Counter({**recorded, **dict(self._started.values())}.values())  # started repeats per group
        cut = {g: n for g, n in ran.items() if n < self.size(g)}
        before = self.journal["ended"] or {"not_run": [], "cut": {}}
        self.journal["ended"] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "spent_s": self.spent(now),
            "not_run": [*before["not_run"], *(t.relative_logdir for t in gone)],
            "cut": {**before["cut"], **cut},
        }
        self._save()  # before Tune's callbacks hear of them: the tracker makes no run for a trial it lists
        searcher = tune_controller.search_alg.searcher
        for trial in gone:
            searcher.forget(trial.trial_id)  # not recorded as a repeat: a larger budget runs it
            tune_controller.stop_trial(trial)
        tune_controller.search_alg.set_finished()
        if gone:
            logger.info(
                "budget of %s slot-hours ended the sweep: %d trials not run, %d groups cut short",
                self.slot_hours,
                len(gone),
                len(cut),
            )
        return gone

    def size(self, group: str) -> int:
        return self.group_sizes if isinstance(self.group_sizes, int) else self.group_sizes.get(group, 1)

    def cut_sizes(self) -> dict[str, int]:
        """Repeats each cut group ran (group ASHA's barrier waits for these alone)."""
        return dict(self.journal["ended"]["cut"]) if self.ended else {}
