"""MLflow tracking from the driver (docs/architecture.md, "Data flow").

Runs nest two levels (nesting = the tag ``mlflow.parentRunId``): one parent run per sweep,
one configuration run per repeat group (a configuration in one setting, ``contrasweep.spec.identity``)
and below it one run per trial (a repeat), with params, one metric value per epoch
(step = epoch), the spec and the best checkpoint as artifacts. When every repeat of a group
has ended, its configuration run gets ``mean/<metric>``, ``std/<metric>`` and ``n_repeats``
(``contrasweep.tracking.aggregate``); when the sweep ends, the parent gets each setting's best
configuration (``best_config/...`` metrics, ``contrasweep.best_config`` tags). Only the driver
talks to MLflow (SQLite locks under many writers).

Ray's ``MLflowLoggerCallback`` keeps no state across ``Tuner.restore`` and opens a second run
per trial on resume; this callback persists every run id (and the last epoch logged per
trial) in ``tracking.json`` next to the sweep, so a resumed sweep re-attaches to the same runs
and never logs an epoch twice. A trial that Tune had not yet saved when the driver died comes
back with a new trial id but the same config: its orphaned run is re-attached by config.
"""

from __future__ import annotations

import os
from pathlib import Path

from ray.tune import Callback

from contrasweep.errors import UserError
from contrasweep.folder import budget_record, race_record
from contrasweep.folder.placeholders import ids_path, remap
from contrasweep.folder.record import Follower, TrackingState
from contrasweep.folder.relocation import here
from contrasweep.folder.sweeps import SweepDir
from contrasweep.spec.objective import Objective
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.artifacts import Artifacts
from contrasweep.tracking.epochs import EpochLog, planned_epochs
from contrasweep.tracking.epochs import outcome as outcome_of
from contrasweep.tracking.provenance import provenance_tags
from contrasweep.tracking.pruning import Pruner
from contrasweep.tracking.rows import failure_tags, numeric
from contrasweep.tracking.run_ids import queued_runs, recover
from contrasweep.tracking.runs import RunTree
from contrasweep.tracking.runs_view import metric_columns, publish
from contrasweep.tracking.selection import Selection
from contrasweep.tracking.store import (
    BUDGET_CUT,
    artifact_root_for,
    ensure_experiment,
    get_client,
    store_errors,
    store_line,
)
from contrasweep.tracking.writer import QueuedClient


def guarded(hook):
    """A callback hook whose MLflow failure stops the sweep cleanly (``MlflowTracker.store_failed``)
    instead of one traceback per hook while the trials go on."""
    import functools

    @functools.wraps(hook)
    def wrapper(self, *args, **kwargs):
        try:
            return hook(self, *args, **kwargs)
        except store_errors() as exc:
            self.store_failed(exc)

    return wrapper


class MlflowTracker(Callback):
    """Tune's callback that writes the sweep to MLflow, over its parts: the run hierarchy
    (``runs.RunTree``), each epoch's metrics (``epochs.EpochLog``), the state folders and artifacts
    (``artifacts.Artifacts``), the selection and registry (``selection.Selection``) and the
    console's progress. Only the constructor's arguments are pickled into Tune's ``tuner.pkl``
    (the parts are built in ``setup``), so a sweep tracked by an earlier version resumes with this one."""

    def __init__(
        self,
        sweep_dir: Path,
        tracking_uri: str,
        experiment: str,
        sweep_name: str,
        spec: dict,
        params: dict,
        metric: str,
        mode: str,
        artifact_root: str | None = None,
        progress=None,
        static: SweepStatic | None = None,
        group_sizes: dict[str, int] | int = 1,
        texts: dict[str, str] | None = None,
    ):
        # static: the sweep's fixed part (contrasweep.spec.static), to name and log each trial's
        # real hp; group_sizes: trials per repeat group (runs.RunTree);
        # texts: extra files for the parent run (e.g. the data's label statistics)
        self.sweep_dir = Path(sweep_dir)
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.sweep_name = sweep_name
        self.spec = spec
        self.params = params
        self.metric, self.mode = metric, mode
        self.artifact_root = artifact_root if artifact_root is not None else artifact_root_for(tracking_uri)
        self.progress = progress
        self.static = static
        self.group_sizes = group_sizes
        self.texts = texts or {}
        self.state: TrackingState | None = None
        self.client: QueuedClient | None = None
        self.store_error: str | None = None  # set when MLflow failed: the sweep stops, resume catches up

    PARTS = ("runs", "artifacts", "selection", "epochs", "pruner", "ended", "best_ended", "race_journal")

    def __getstate__(self):
        # Tune pickles its callbacks into tuner.pkl and hands them back on restore: keep no
        # client, no parts and no stale copy of tracking.json in the pickle; setup() reads the file.
        state = {k: v for k, v in self.__dict__.items() if k not in self.PARTS}
        state.update(client=None, state=None, store_error=None)
        return state

    def __setstate__(self, state):
        state["sweep_dir"] = Path(here(state["sweep_dir"]))  # the sweep folder may have moved
        if state["static"] is not None and state["static"].trial_storage:
            state["static"] = state["static"].moved(here(state["static"].trial_storage))
        self.__dict__.update(state)

    # -- the sweep run ----------------------------------------------------------------------
    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info) -> None:
        # Tune's stopper and sample counts: its own (the parameters match Callback.setup)
        import logging

        # MLflow logs each database error with its traceback before raising it; store_failed
        # reports it in one line
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        self.state = TrackingState(self.sweep_dir / "tracking.json")
        try:
            self._setup()
        except store_errors() as exc:  # before any trial: nothing to stop yet
            self.close_writer()
            raise UserError(
                f"{store_line(exc)}; allowed: a writable MLflow store (then `contrasweep resume {self.sweep_name}`)"
            ) from None

    def _setup(self) -> None:
        # setup() has just read the record; a tracked sweep always has its fixed part (self.static.variants below)
        assert self.state is not None and self.static is not None
        lost = not ids_path(self.sweep_dir).exists() and self.state.data.get("experiment_id") is not None
        if (
            lost
            and queued_runs(self.tracking_uri)
            and recover(get_client(self.tracking_uri), self.sweep_dir, self.state.data["experiment_id"])
        ):
            self.state = TrackingState(self.sweep_dir / "tracking.json")  # its placeholders mapped on load
        self.client = QueuedClient(self.tracking_uri, self.sweep_dir)  # MLflow's writes off Tune's loop
        started_with = SweepDir(self.sweep_dir).meta().get("method")  # a user's method as the sweep began
        self.runs = RunTree(
            self.client,
            self.state,
            self.sweep_name,
            self.static,
            self.group_sizes,
            provenance_tags(self.spec, started_with),
            self.sweep_dir / race_record.RACE_FILE,
            self.sweep_dir / budget_record.BUDGET_FILE,
        )
        self.artifacts = Artifacts(self.client, self.state, self.static)
        self.epochs = EpochLog(
            self.client,
            self.state,
            self.metric,
            self.mode,
            lambda: self.store_error is not None,
            self.store_failed,
            self.runs.seen,
        )
        self.race_journal = Follower(self.sweep_dir / race_record.RACE_FILE)
        self.selection = Selection(
            self.client, self.state, self.sweep_name, self.static.variants, self.metric, self.mode
        )
        exp_id = ensure_experiment(self.client, self.experiment, self.artifact_root)
        self._remap()  # the writer has replayed what an earlier one left: runs named by placeholders it made
        publish(self.client, exp_id, metric_columns(self.metric))
        if self.state.data.get("parent_run_id") is None:
            self.runs.reattach(exp_id, self.sweep_dir, self.metric, self.mode)
        self.pruner = Pruner(self.state, self.static, self.runs.group_size, self.runs.members, self.runs.dropped())
        ended = [e for e in self.state.trials.values() if "status" in e]  # kept from here on: not re-counted per trial
        self.ended = {e["run_id"] for e in ended}
        self.best_ended: float | None = None
        for entry in ended:
            self._count_best(entry)
        if self.state.data.get("parent_run_id") is None:
            self.runs.open_parent(exp_id, self.spec, self.params, self.texts)
        else:
            self.runs.reopen()
            self.state.data.pop("store_error", None)
            self._catch_up()
            self.state.save()

    def _remap(self) -> None:
        """The record's placeholders (runs this driver or a killed one named before the writer
        made them) by their MLflow ids, once the writer has applied its queue (``run_ids``)."""
        assert self.client is not None and self.state is not None  # both set in setup
        ids = self.client.placeholders()
        if remap(self.state.data, ids):
            remap(getattr(self, "ended", set()), ids)  # set in setup after the first remap
            self.runs.remap(ids)
            self.state.save()

    def _catch_up(self) -> None:
        """On resume: what an MLflow failure left undone (metrics of epochs it could not log,
        trial runs it could not close), the sweep run's live numbers a kill kept from being
        written, and artifacts lost from the store since (re-logged from the checkpoints the sweep keeps)."""
        self.epochs.catch_up()
        self.epochs.resume_progress(self.parent_run_id, self._done(), self.best_ended)
        assert self.state is not None
        for entry in list(self.state.trials.values()):
            if "pending" in entry:
                self._apply_finish(entry)
        self.runs.close_open_groups()
        self.artifacts.repair(self.parent_run_id, self.spec, self.texts)

    def store_failed(self, exc: BaseException) -> None:
        """MLflow cannot be written: say so once, record it, and stop the sweep as Ctrl-C does
        (Tune saves its state; the trials stay resumable). Until then results are kept in
        ``tracking.json`` and logged by ``resume`` (``_catch_up``)."""
        if self.store_error is not None:
            return
        self.store_error = store_line(exc)
        if self.state is not None:
            self.state.data["store_error"] = self.store_error
            self.state.save()
        stop_tune()

    @property
    def parent_run_id(self) -> str:
        assert self.state is not None
        return self.state.data["parent_run_id"]

    # -- trials -----------------------------------------------------------------------------
    @guarded
    def on_trial_start(self, iteration, trials, trial, **info):
        if self.store_error:
            return
        run_id = self.runs.trial_run(trial, trials)
        entry = self.state.trials[trial.trial_id]
        if entry.get("status") == "FAILED":  # an errored trial retried by `resume`
            del entry["status"]
            self.ended.discard(entry["run_id"])
            self.client.update_run(run_id, status="RUNNING")
            self.state.save_trial(entry)
        if self.progress and "status" not in entry:
            self.progress.trial_started(
                entry.get("name", trial.trial_id), planned_epochs(trial, self.static), trial.trial_id
            )

    @guarded
    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.store_error and trial.trial_id not in self.state.trials:
            return  # no run to keep it for (the trial restarts from its checkpoint on resume)
        self.runs.trial_run(trial)
        entry = self.state.trials[trial.trial_id]
        if self.epochs.log_result(entry, result) and self.progress:
            self.progress.trial_epoch(
                entry.get("name", trial.trial_id),
                entry["last_epoch"],
                planned_epochs(trial, self.static),
                result.get(self.metric),
                self._done(),
            )

    def _done(self) -> int:
        return len(self.ended)

    def _count_best(self, entry: dict) -> None:
        """The best trial's value of the objective so far (the sweep run's live number)."""
        value = entry.get("best_value")
        if value is not None:
            known: list[float] = [] if self.best_ended is None else [self.best_ended]
            self.best_ended = Objective(self.metric, self.mode).best([*known, value])

    @guarded
    def on_trial_complete(self, iteration, trials, trial, **info):
        if trial.trial_id not in self.state.trials and self.runs.not_run(trial):
            return  # the budget ended it before it started (contrasweep.search.budget_gate)
        self._finish(trial, "FINISHED")

    @guarded
    def on_trial_error(self, iteration, trials, trial, **info):
        self._finish(trial, "FAILED")

    def _finish(self, trial, status: str) -> None:
        """Record how the trial ended in ``tracking.json`` first, then in MLflow: what MLflow
        could not take stays ``pending`` there and ``resume`` applies it."""
        assert self.state is not None  # read in setup, as self.runs was made
        if self.store_error and trial.trial_id not in self.state.trials:
            return
        self.runs.trial_run(trial)
        entry = self.state.trials[trial.trial_id]
        if entry.get("status") == status:
            return
        outcome = outcome_of(trial, entry, status, self.static)
        folder = self.artifacts.state_dir(trial)
        entry.update(status=status, outcome=outcome)
        if status == "FINISHED":  # its final result, as the record keeps it (contrasweep.tracking.ledger.finished)
            entry["final"] = numeric(getattr(trial, "last_result", None) or {})
        if folder:
            entry["state_dir"] = folder
        entry["pending"] = {"tags": failure_tags(trial) if status == "FAILED" else {}}
        self.state.save_trial(entry)
        self.ended.add(entry["run_id"])
        self._count_best(entry)
        journal = self.race_journal.read()  # a race's (what was appended since the last trial end)
        dropped = self.runs.dropped(journal or {"out": {}})
        self._apply_finish(entry, dropped)
        if not self.store_error:
            self.epochs.sweep_progress(self.parent_run_id, self._done(), self.best_ended)
        if self.progress and journal and journal.get("needed") is not None:
            self.progress.total = self._done() + journal["needed"]  # what the race may still run
        if self.progress and any(d["outcome"] == BUDGET_CUT for d in dropped.values()):
            self.progress.total = len(self.state.trials)  # the budget ended the sweep: what started is all
        if self.progress:
            self.progress.trial_ended(
                entry.get("name", trial.trial_id),
                status,
                outcome,
                entry.get("best_value"),
                entry.get("best_epoch"),
                entry.get("last_epoch", 0),
                self._done(),
            )

    def _apply_finish(self, entry: dict, dropped: dict | None = None) -> None:
        """``dropped``: the configurations a race or the budget dropped (``RunTree.dropped``),
        where the caller has read them."""
        if self.store_error:
            return
        dropped = self.runs.dropped() if dropped is None else dropped
        self.runs.end_trial(entry, self.artifacts.settle(entry), dropped)
        self.pruner.trial_ended(entry, dropped)  # after MLflow has the end: a kill between re-prunes on resume

    # -- the end ----------------------------------------------------------------------------
    def close_writer(self) -> None:
        """Every queued MLflow write applied, the writer process ended (``tracking.writer``)."""
        if isinstance(self.client, QueuedClient):
            self.client.close()

    def on_experiment_end(self, trials, **info):
        try:
            self._end(trials)
        finally:
            self.close_writer()

    @guarded
    def _end(self, trials):
        if self.progress:
            self.progress.close()
        if self.store_error:  # the sweep stopped for it: resume finishes what is left
            return
        self.epochs.flush_progress(self.parent_run_id)  # the sweep run's live numbers not written yet
        self._remap()  # what follows compares the record's run ids with MLflow's, and so do its readers
        self.runs.delete_orphans(trials)  # MLflow holds exactly one run per trial
        # after Ctrl-C Tune may call its trials TERMINATED; a run never ended here is unfinished
        done = all(t.status in ("TERMINATED", "ERROR") for t in trials) and all(
            "status" in e for e in self.state.trials.values()
        )
        any_error = any(t.status == "ERROR" for t in trials)
        if done:
            self.runs.close_dropped()  # a group the budget cut after its last started repeat had ended
            self.artifacts.repair(self.parent_run_id, self.spec, self.texts)  # e.g. mlartifacts/ removed meanwhile
            self.selection.best_to_parent(self.parent_run_id, self.runs.closed_groups())
        else:
            self.runs.mark_interrupted()
        self.client.set_terminated(
            self.parent_run_id, status="FAILED" if any_error else ("FINISHED" if done else "KILLED")
        )
        self.state.data["finished"] = done
        self.state.save()


def stop_tune() -> None:
    """Tune's own graceful stop, as on Ctrl-C: ``tune.run`` handles SIGUSR1 like SIGINT (where it
    installed its handlers; elsewhere the trials go on and their results wait in the record).
    The user sees one line, from the driver once Tune has stopped (``contrasweep.runner.tune.fit``)."""
    import signal

    if callable(signal.getsignal(getattr(signal, "SIGUSR1", signal.SIGINT))):
        os.kill(os.getpid(), getattr(signal, "SIGUSR1", signal.SIGINT))
