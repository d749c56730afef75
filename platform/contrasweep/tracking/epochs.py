"""A trial's epochs in MLflow: each reported epoch's metrics logged once (step = epoch; the
per-step series at step = optimiser step), the trial's best value and best epoch, how far it got
(its outcome), and the sweep run's live numbers. While the store cannot be written the rows wait
in the sweep's record (``unlogged``) and ``catch_up`` logs them on resume.

May import: ``contrasweep.folder.record``, ``contrasweep.tracking.rows``,
``contrasweep.tracking.store``, ``contrasweep.tracking.aggregate``, ``contrasweep.spec``,
``trainables.params``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from contrasweep.folder.record import TrackingState
from contrasweep.spec.objective import Objective
from contrasweep.spec.trial import plan_of
from contrasweep.tracking.aggregate import ran_every_epoch
from contrasweep.tracking.rows import metric_entity, numeric, step_series
from contrasweep.tracking.runs_view import BEST_TRIAL_PREFIX, ENDED_KEY
from contrasweep.tracking.store import store_errors

BATCH = 1000  # MLflow takes at most 1000 metrics a batch
PROGRESS_EVERY_S = 5.0  # the sweep run's live numbers: written at most this often (EpochLog.sweep_progress)


class EpochLog:
    """``failed()``: whether the store has failed (then rows wait); ``on_failure(exc)``: the
    tracker's reaction to a store error met while logging."""

    def __init__(
        self,
        client,
        state: TrackingState,
        metric: str,
        mode: str,
        failed: Callable[[], bool],
        on_failure: Callable[[BaseException], None],
        seen: Callable[[str, list], None] | None = None,
    ):
        self.client, self.state, self.metric, self.mode = client, state, metric, mode
        self.failed, self.on_failure = failed, on_failure
        self.seen = seen  # told each trial's rows as they are logged (runs.RunTree.seen)
        self._progress: list = []  # the sweep run's live numbers not written yet (sweep_progress)
        self._progress_at = 0.0  # when they were last written (time.monotonic)

    def log_result(self, entry: dict, result: dict) -> bool:
        """One reported epoch of a trial; False when it was logged before (replayed after a restore)."""
        epoch = int(result.get("epoch", 0))
        if epoch <= entry.get("last_epoch", 0):
            return False
        stamp = int(result.get("timestamp", 0) * 1000)
        rows = [(k, float(v), stamp, epoch) for k, v in numeric(result).items()]
        # per-step series (Method.step_metrics) at step = global optimiser step
        rows += [(f"step/{k}", float(v), stamp, int(s)) for k, pairs in step_series(result).items() for s, v in pairs]
        entry["last_epoch"] = epoch
        if self.seen is not None:
            self.seen(entry["run_id"], rows)
        self.log_rows(entry, rows)
        value = result.get(self.metric)
        if value is not None and Objective(self.metric, self.mode).better(value, entry.get("best_value")):
            entry["best_value"] = float(value)
        if result.get("best/epoch"):  # names the trial's best folder (trainables.checkpoints)
            entry["best_epoch"] = int(result["best/epoch"])
        self.state.save_trial(entry)
        return True

    def log_rows(self, entry: dict, rows: list[tuple]) -> None:
        """(key, value, timestamp, step) rows; kept in ``tracking.json`` instead while MLflow
        cannot be written (``resume`` logs them)."""
        logged = 0
        try:
            while logged < len(rows) and not self.failed():
                self.client.log_batch(
                    entry["run_id"], metrics=[metric_entity(*m) for m in rows[logged : logged + BATCH]]
                )
                logged += BATCH
        except store_errors() as exc:
            self.on_failure(exc)
        if logged < len(rows):
            entry.setdefault("unlogged", []).extend(list(m) for m in rows[logged:])
            self.state.save_trial(entry)

    def catch_up(self) -> None:
        """On resume: the rows an MLflow failure kept in the record."""
        for entry in self.state.trials.values():
            for start in range(0, len(entry.get("unlogged", [])), BATCH):
                self.client.log_batch(
                    entry["run_id"], metrics=[metric_entity(*m) for m in entry["unlogged"][start : start + BATCH]]
                )
            entry.pop("unlogged", None)
            self.state.save()

    def sweep_progress(self, parent_run_id: str, ended: int, best: float | None, flush: bool = False) -> None:
        """The sweep run's live numbers, so that its row in the runs table means something
        before the sweep ends: trials ended so far and the best trial's value of the objective
        so far (``best``; step: trials ended). One point per ended trial, written together at
        most every ``PROGRESS_EVERY_S`` (one MLflow write per trial end cost as much as the
        trial's own run at 10,000 no-op trials) and at the sweep's end (``flush``)."""
        pending = self._progress
        pending.append(metric_entity(ENDED_KEY, ended, step=ended))
        if best is not None:
            pending.append(metric_entity(BEST_TRIAL_PREFIX + self.metric, best, step=ended))
        self.flush_progress(parent_run_id, force=flush or time.monotonic() - self._progress_at >= PROGRESS_EVERY_S)

    def resume_progress(self, parent_run_id: str, ended: int, best: float | None) -> None:
        """On resume: the live numbers as the record has them, where the sweep run's last point
        is behind (points still waiting for ``PROGRESS_EVERY_S`` are lost with a killed driver;
        a resumed sweep whose trials had all ended would otherwise end on that old count)."""
        history = self.client.get_metric_history(parent_run_id, ENDED_KEY)
        if ended and max((m.step for m in history), default=0) < ended:
            self.sweep_progress(parent_run_id, ended, best, flush=True)

    def flush_progress(self, parent_run_id: str, force: bool = True) -> None:
        """Write the sweep run's pending live numbers (``sweep_progress``) now (``force``)."""
        pending = self._progress
        if not pending or not force:
            return
        for start in range(0, len(pending), BATCH):
            self.client.log_batch(parent_run_id, metrics=pending[start : start + BATCH])
        pending.clear()
        self._progress_at = time.monotonic()


def outcome(trial, entry: dict, status: str, static) -> str:
    """complete (trained every epoch: a repeat aggregates may count), stopped (the scheduler
    ended it early: never counted as a finished repeat) or failed."""
    if status != "FINISHED":
        return "failed"

    plan, steps = plan_of(trial.config, static), (getattr(trial, "last_result", None) or {}).get("train/steps")
    return "complete" if ran_every_epoch(entry.get("last_epoch", 0), plan.hp, steps, plan.epochs) else "stopped"


def planned_epochs(trial, static) -> int | None:
    """The epochs a trial trains when not stopped (``TrialPlan.epochs``: ``max_steps`` resolved;
    None where its training rows are unknown)."""
    return plan_of(trial.config, static).epochs
