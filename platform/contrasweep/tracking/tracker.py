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

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ray.tune import Callback

from contrasweep.spec.identity import key_of
from contrasweep.tracking.record import TrackingState
from contrasweep.tracking.store import (
    CONFIG_KEY_TAG, KIND_TAG, OUTCOME_TAG, PARENT_TAG, SWEEP_RUN_TAG, VARIANT_TAG, artifact_root_for, ensure_experiment,
    error_line, get_client, store_errors, store_line, trial_runs,
)


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


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


class MlflowTracker(Callback):
    def __init__(self, sweep_dir: Path, tracking_uri: str, experiment: str, sweep_name: str,
                 spec: dict, params: dict, metric: str, mode: str, artifact_root: str | None = None,
                 progress=None, static: dict | None = None, texts: dict[str, str] | None = None):
        # static: {"seeds", "resources", "method"} of the sweep, to log each trial's real hp;
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
        self.texts = texts or {}
        self.state: TrackingState | None = None
        self.client = None
        self.store_error: str | None = None  # set when MLflow failed: the sweep stops, resume catches up

    def __getstate__(self):
        # Tune pickles its callbacks into tuner.pkl and hands them back on restore: keep no
        # client and no stale copy of tracking.json in the pickle; setup() reads the file.
        state = self.__dict__.copy()
        state.update(client=None, state=None, store_error=None)
        return state

    def __setstate__(self, state):
        from contrasweep.folder.relocation import here

        state["sweep_dir"] = Path(here(state["sweep_dir"]))  # the sweep folder may have moved
        if (state.get("static") or {}).get("trial_storage"):
            state["static"] = {**state["static"], "trial_storage": here(state["static"]["trial_storage"])}
        self.__dict__.update(state)

    # -- parent run -------------------------------------------------------------------
    def setup(self, **info) -> None:
        import logging

        from contrasweep.errors import UserError

        # MLflow logs each database error with its traceback before raising it; store_failed
        # reports it in one line
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        self.state = TrackingState(self.sweep_dir / "tracking.json")
        try:
            self._setup()
        except store_errors() as exc:  # before any trial: nothing to stop yet
            raise UserError(f"{store_line(exc)}; allowed: a writable MLflow store (then `contrasweep resume "
                            f"{self.sweep_name}`)") from None

    def _setup(self) -> None:
        from contrasweep.tracking.runs_view import metric_columns, publish

        self.client = get_client(self.tracking_uri)
        exp_id = ensure_experiment(self.client, self.experiment, self.artifact_root)
        publish(self.client, exp_id, metric_columns(self.metric))
        if self.state.data.get("parent_run_id") is None:
            self._reattach(exp_id)
        parent = self.state.data.get("parent_run_id")
        if parent is None:
            from contrasweep.tracking.describe import NOTE_TAG, sweep_description, sweep_tags

            run = self.client.create_run(exp_id, run_name=self.sweep_name, tags={
                **sweep_tags(self.spec, self.sweep_name), NOTE_TAG: sweep_description(self.spec, self.sweep_name)})
            parent = run.info.run_id
            self.state.data.update(parent_run_id=parent, experiment_id=exp_id)
            self.state.save()
            self.client.log_batch(parent, params=_params(self.params))
            self.client.log_text(parent, _yaml(self.spec), "spec.yaml")
            for name, text in self.texts.items():
                self.client.log_text(parent, text, name)
        else:
            self.client.update_run(parent, status="RUNNING")
            for run_id in self.state.data.get("interrupted_runs", []):  # resumed: they go on
                self.client.update_run(run_id, status="RUNNING")
            self.state.data.pop("interrupted_runs", None)
            self.state.data.pop("store_error", None)
            self._catch_up()
            self.state.save()

    def _reattach(self, experiment_id: str) -> None:
        """No ``tracking.json`` (deleted, or lost with a disk): the sweep's runs in MLflow, found
        by their tags, become its content again (``contrasweep.tracking.reattach``)."""
        from contrasweep.tracking.reattach import rebuild

        created = None
        meta_file = self.sweep_dir / "sweep.json"
        if meta_file.exists():
            created = json.loads(meta_file.read_text()).get("created")
        data = rebuild(self.client, experiment_id, self.sweep_name, created, self.metric, self.mode)
        if data is None:
            return
        self.state.data = data
        self.state.save()
        print(f"[contrasweep] tracking.json was missing: re-attached to MLflow run {data['parent_run_id']} "
              f"({len(data['trials'])} trial runs)", file=sys.stderr, flush=True)

    def _catch_up(self) -> None:
        """On resume: what an MLflow failure left undone (metrics of epochs it could not log,
        trial runs it could not close) and artifacts lost from the store since (re-logged from
        the checkpoints the sweep keeps)."""
        for entry in self.state.trials.values():
            for start in range(0, len(entry.get("unlogged", [])), 1000):
                self.client.log_batch(entry["run_id"], metrics=[_metric(*m) for m in entry["unlogged"][start:start + 1000]])
            entry.pop("unlogged", None)
            self.state.save()
        for entry in list(self.state.trials.values()):
            if "pending" in entry:
                self._apply_finish(entry)
        for group, run_id in self.state.data.get("configs", {}).items():
            run = self.client.get_run(run_id)  # a group whose last repeat ended just before the stop
            if run.info.status not in ("FINISHED", "FAILED") or OUTCOME_TAG not in run.data.tags:
                self._close_group(group)
        self._repair_artifacts()

    def _repair_artifacts(self) -> int:
        """Re-log the parent's files and each complete trial's best checkpoint where the
        artifact store lost them (e.g. ``mlartifacts/`` removed); returns how many files."""
        from contrasweep.folder.relocation import here
        from trainables.checkpoints import WEIGHTS_FILE, best_of_trial

        repaired = 0
        have = {f.path for f in self.client.list_artifacts(self.parent_run_id)}
        for name, text in {"spec.yaml": _yaml(self.spec), **self.texts}.items():
            if name not in have:
                self.client.log_text(self.parent_run_id, text, name)
                repaired += 1
        for entry in self.state.trials.values():
            folder = entry.get("state_dir")
            if entry.get("outcome") != "complete" or not entry.get("best_epoch") or not folder:
                continue
            files = {os.path.basename(f.path) for f in self.client.list_artifacts(entry["run_id"], "best_checkpoint")}
            best = best_of_trial(here(folder), entry["best_epoch"])
            if WEIGHTS_FILE not in files and best is not None:
                self._log_checkpoint(entry["run_id"], best)
                repaired += 1
        if repaired:
            print(f"[contrasweep] re-logged {repaired} lost MLflow artifacts", file=sys.stderr, flush=True)
        return repaired

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
        import signal

        # Tune's own graceful stop, as on Ctrl-C: tune.run handles SIGUSR1 like SIGINT (where it
        # installed its handlers; elsewhere the trials go on and their results wait here). The
        # user sees one line, from the driver once Tune has stopped (contrasweep.run.tune._fit).
        if callable(signal.getsignal(getattr(signal, "SIGUSR1", signal.SIGINT))):
            os.kill(os.getpid(), getattr(signal, "SIGUSR1", signal.SIGINT))

    @property
    def parent_run_id(self) -> str:
        return self.state.data["parent_run_id"]

    # -- trial runs -------------------------------------------------------------------
    def _run_for(self, trial, trials=()) -> str:
        entry = self.state.trials.get(trial.trial_id)
        if entry:
            return entry["run_id"]
        key = key_of(trial.config)
        # one run per repeat: the run of a trial the restored experiment lost (unfinished first)
        known = {t.trial_id for t in trials}
        same = sorted((tid for tid, e in self.state.trials.items() if tid not in known and e["config_key"] == key),
                      key=lambda tid: "status" in self.state.trials[tid])
        orphan = same[0] if same else None
        if orphan is not None:  # re-attach it
            entry = self.state.trials.pop(orphan)
        else:
            from contrasweep.spec.identity import identify, run_name, tags

            identity = identify(trial.config, self.static)
            name = run_name(identity, self.static["method"], self.static.get("varied", []))
            run = self.client.create_run(
                self.state.data["experiment_id"],
                run_name=name,
                tags={PARENT_TAG: self._config_run(identity), SWEEP_RUN_TAG: self.parent_run_id, KIND_TAG: "trial",
                      "contrasweep.sweep": self.sweep_name, "contrasweep.trial_id": trial.trial_id,
                      "contrasweep.group_size": str(self._group_size(identity.group)), CONFIG_KEY_TAG: key,
                      VARIANT_TAG: str(identity.variant.get("index", 0)), **tags(identity, self.static["method"])},
            )
            entry = {"run_id": run.info.run_id, "config_key": key, "last_epoch": 0, "group": identity.group,
                     "variant": identity.variant.get("index", 0), "name": name}
            self.client.log_batch(entry["run_id"], params=_params(self._trial_params(trial.config)))
            from contrasweep.tracking.describe import dataset_input

            self.client.log_inputs(entry["run_id"], datasets=[dataset_input(identity.variant)])
        self.client.set_tag(entry["run_id"], "contrasweep.trial_id", trial.trial_id)
        self.state.trials[trial.trial_id] = entry
        self.state.save()
        return entry["run_id"]

    def _group_size(self, group: str) -> int:
        sizes = self.static.get("group_sizes", 1)
        return sizes if isinstance(sizes, int) else sizes.get(group, 1)

    def _config_run(self, identity) -> str:
        """The configuration run of a repeat group (sweep → configuration → repeats), made
        when its first repeat starts."""
        from contrasweep.spec.identity import config_run_name, tags

        configs = self.state.data.setdefault("configs", {})
        if identity.group not in configs:
            method = self.static["method"]
            own = {k: v for k, v in tags(identity, method).items()
                   if k in ("contrasweep.method", "contrasweep.dataset", "contrasweep.protocol", "contrasweep.k",
                            "contrasweep.n_total", "contrasweep.rho", "contrasweep.num_classes",
                            "contrasweep.config", "contrasweep.setting", "contrasweep.group")}
            run = self.client.create_run(
                self.state.data["experiment_id"], run_name=config_run_name(identity, method, self.static.get("varied", [])),
                tags={PARENT_TAG: self.parent_run_id, KIND_TAG: "configuration", "contrasweep.sweep": self.sweep_name,
                      "contrasweep.group_size": str(self._group_size(identity.group)), **own},
            )
            configs[identity.group] = run.info.run_id
            hp = {k: v for k, v in identity.hp.items() if k != "seed"}
            self.client.log_batch(run.info.run_id, params=_params({"hp": hp, "data": identity.variant.get("setting", {})}))
            self.state.save()
        return configs[identity.group]

    def _trial_params(self, config: dict) -> dict:
        """The hyperparameters the trial really trains with (the seed of a Repeater index too)."""
        from contrasweep.spec.sweep import hp_defaults
        from contrasweep.spec.trial import trial_hp, trial_variant

        # every value the trial trains with, defaults included, and the data it trains on
        out = {"method": self.static["method"], "hp": {**hp_defaults(self.static["method"]), **trial_hp(config, self.static)}}
        if self.static.get("variants"):
            out["data"] = self.static["variants"][trial_variant(config, self.static)]["data"]
        return out

    def _orphans(self, trials) -> list[str]:
        """Unfinished runs whose trial the (restored) experiment does not know."""
        known = {t.trial_id for t in trials}
        return [tid for tid, e in self.state.trials.items() if tid not in known and "status" not in e]

    @guarded
    def on_trial_start(self, iteration, trials, trial, **info):
        if self.store_error:
            return
        run_id = self._run_for(trial, trials)
        entry = self.state.trials[trial.trial_id]
        if entry.get("status") == "FAILED":  # an errored trial retried by `resume`
            del entry["status"]
            self.client.update_run(run_id, status="RUNNING")
            self.state.save()
        if self.progress and "status" not in entry:
            self.progress.trial_started(entry.get("name", trial.trial_id), self._epochs(trial), trial.trial_id)

    @guarded
    def on_trial_result(self, iteration, trials, trial, result, **info):
        if self.store_error and trial.trial_id not in self.state.trials:
            return  # no run to keep it for (the trial restarts from its checkpoint on resume)
        run_id = self._run_for(trial)
        entry = self.state.trials[trial.trial_id]
        epoch = int(result.get("epoch", 0))
        if epoch <= entry.get("last_epoch", 0):  # replayed after a restore: logged already
            return
        stamp = int(result.get("timestamp", 0) * 1000)
        metrics = [(k, float(v), stamp, epoch) for k, v in _numeric(result).items()]
        # per-step series (Method.step_metrics) at step = global optimiser step
        metrics += [(f"step/{k}", float(v), stamp, int(s)) for k, pairs in _step_series(result).items() for s, v in pairs]
        entry["last_epoch"] = epoch
        self._log_metrics(entry, metrics)
        value = result.get(self.metric)
        if value is not None and _better(value, entry.get("best_value"), self.mode):
            entry["best_value"] = float(value)
        if result.get("best/epoch"):  # names the trial's best folder (trainables.checkpoints)
            entry["best_epoch"] = int(result["best/epoch"])
        self.state.save()
        if self.progress:
            self.progress.trial_epoch(entry.get("name", trial.trial_id), epoch, self._epochs(trial), value, self._done())

    def _epochs(self, trial) -> int | None:
        from contrasweep.spec.trial import trial_hp
        from trainables.params import LOOP_PARAMS

        return trial_hp(trial.config, self.static).get("epochs", LOOP_PARAMS["epochs"].default) if self.static else None

    def _ended(self) -> list[dict]:
        return [e for e in self.state.trials.values() if "status" in e]

    def _done(self) -> int:
        return len(self._ended())

    def _log_metrics(self, entry: dict, metrics: list[tuple]) -> None:
        """One epoch's (key, value, timestamp, step) rows; kept in ``tracking.json`` instead
        while MLflow cannot be written (``resume`` logs them)."""
        logged = 0
        try:
            while logged < len(metrics) and not self.store_error:  # MLflow takes at most 1000 metrics a batch
                self.client.log_batch(entry["run_id"], metrics=[_metric(*m) for m in metrics[logged : logged + 1000]])
                logged += 1000
        except store_errors() as exc:
            self.store_failed(exc)
        if logged < len(metrics):
            entry.setdefault("unlogged", []).extend(list(m) for m in metrics[logged:])
        self.state.save()

    @guarded
    def on_trial_complete(self, iteration, trials, trial, **info):
        self._finish(trial, "FINISHED")

    @guarded
    def on_trial_error(self, iteration, trials, trial, **info):
        self._finish(trial, "FAILED")

    def _finish(self, trial, status: str) -> None:
        """Record how the trial ended in ``tracking.json`` first, then in MLflow: what MLflow
        could not take stays ``pending`` there and ``resume`` applies it."""
        if self.store_error and trial.trial_id not in self.state.trials:
            return
        self._run_for(trial)
        entry = self.state.trials[trial.trial_id]
        if entry.get("status") == status:
            return
        outcome = self._outcome(trial, entry, status)
        folder = self._state_dir(trial)
        entry.update(status=status, outcome=outcome)
        if status == "FINISHED":  # what a restored copy of this trial reports instead of training (contrasweep.tracking.ledger)
            entry["final"] = _numeric(getattr(trial, "last_result", None) or {})
        if folder:
            entry["state_dir"] = folder
        entry["pending"] = {"tags": failure_tags(trial) if status == "FAILED" else {}}
        self.state.save()
        self._apply_finish(entry)
        self._sweep_progress()
        if self.progress:
            self.progress.trial_ended(entry.get("name", trial.trial_id), status, outcome, entry.get("best_value"),
                                      entry.get("best_epoch"), entry.get("last_epoch", 0), self._done())

    def _apply_finish(self, entry: dict) -> None:
        if self.store_error:
            return
        from contrasweep.folder.relocation import here

        run_id, outcome, folder = entry["run_id"], entry["outcome"], entry.get("state_dir")
        folder = here(folder) if folder else None
        if folder and outcome == "complete":
            from trainables.checkpoints import best_of_trial, finish_state

            if entry.get("best_epoch"):
                self._log_checkpoint(run_id, best_of_trial(folder, entry["best_epoch"]))
            finish_state(folder)  # the older resume state is never restored now
        if folder and outcome == "stopped":  # never selected, never resumed: its weights and states go
            from trainables.checkpoints import remove_state

            remove_state(folder)
        tags = {OUTCOME_TAG: outcome, "contrasweep.last_epoch": str(entry.get("last_epoch", 0)),
                **entry["pending"]["tags"]}
        if folder:
            tags["contrasweep.state_dir"] = folder  # where resume finds the checkpoint if the artifact is lost
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)
        self.client.set_terminated(run_id, status=entry["status"])
        del entry["pending"]
        self.state.save()
        self._close_group(entry.get("group"))

    def _sweep_progress(self) -> None:
        """The sweep run's live numbers, so that its row in the runs table means something
        before the sweep ends: trials ended so far and the best trial's value of the objective
        (step: trials ended)."""
        from contrasweep.tracking.runs_view import BEST_TRIAL_PREFIX, ENDED_KEY

        if self.store_error:
            return
        ended = self._ended()
        metrics = [_metric(ENDED_KEY, len(ended), step=len(ended))]
        values = [e["best_value"] for e in ended if e.get("best_value") is not None]
        if values:
            best = max(values) if self.mode == "max" else min(values)
            metrics.append(_metric(BEST_TRIAL_PREFIX + self.metric, best, step=len(ended)))
        self.client.log_batch(self.parent_run_id, metrics=metrics)

    def _close_group(self, group: str | None) -> None:
        """Once every repeat of a group has ended: its mean, std and n on the configuration run."""
        from contrasweep.tracking.aggregate import groups_of, summary

        config_run = self.state.data.get("configs", {}).get(group)
        members = [e for e in self.state.trials.values() if e.get("group") == group]
        if config_run is None or len(members) < self._group_size(group) or any("status" not in e for e in members):
            return
        (found,) = groups_of([self.client.get_run(e["run_id"]) for e in members])
        metrics = summary(found)
        self.client.log_batch(config_run, metrics=[_metric(k, v) for k, v in metrics.items()])
        outcome = "complete" if found.complete else ("stopped" if found.outcomes.get("stopped") else "failed")
        self.client.set_tag(config_run, OUTCOME_TAG, outcome)
        self.client.set_terminated(config_run, status="FINISHED" if outcome != "failed" else "FAILED")

    def _best_to_parent(self) -> None:
        """The parent run holds each setting's best configuration (best mean validation metric
        over complete repeat groups): its aggregates, and a tag naming its run."""
        from contrasweep.tracking.aggregate import groups_of, select, selection_key, summary
        from contrasweep.tracking.runs_view import best_config_columns, publish

        found = groups_of(trial_runs(self.client, self.parent_run_id))
        metric = self.metric[len("best/"):] if self.metric.startswith("best/") else self.metric
        configs = self.state.data.get("configs", {})
        shown = []
        for setting, group in select(found, metric, self.mode).items():
            prefix = f"best_config/{_slug(setting)}/" if setting else "best_config/"
            self.client.log_batch(self.parent_run_id, metrics=[_metric(prefix + k, v) for k, v in summary(group).items()])
            if setting:  # the unprefixed keys are in the view from the start
                shown += best_config_columns(prefix, metric)
            if group.group in configs:
                self.client.set_tag(self.parent_run_id, f"contrasweep.best_config{'.' + _slug(setting) if setting else ''}",
                                    configs[group.group])
            self._register(setting, group, selection_key(metric))
        if shown:
            publish(self.client, self.state.data["experiment_id"], shown)

    def _register(self, setting: str, group, metric: str) -> None:
        """The best repeat (by its own validation value) of a setting's best configuration into
        the model registry, under the sweep's name (``contrasweep.tracking.models``); once per setting
        and run, so a sweep resumed after its end registers nothing twice."""
        from contrasweep.tracking.models import has_checkpoint, register

        candidates = [r for r in group.repeats if metric in r["metrics"]]
        if not candidates:
            return
        sign = 1.0 if self.mode == "max" else -1.0
        best = max(candidates, key=lambda r: sign * r["metrics"][metric])
        done = self.state.data.setdefault("registered", {})
        if done.get(setting, {}).get("run_id") == best["run_id"] or not has_checkpoint(self.client, best["run_id"]):
            return
        entry = next((e for e in self.state.trials.values() if e["run_id"] == best["run_id"]), {})
        variants = self.static.get("variants") or [{"data": {}}]
        data = variants[min(entry.get("variant", 0), len(variants) - 1)]["data"]
        version = register(self.client, self.sweep_name, best["run_id"], setting, data,
                           f"{metric}={best['metrics'][metric]:.4f}; configuration mean over "
                           f"{len(group.repeats)} repeats: {group.stats(metric)['mean']:.4f}")
        done[setting] = {"run_id": best["run_id"], "version": version}
        self.state.save()
        self.client.set_tag(self.parent_run_id, f"contrasweep.model{'.' + _slug(setting) if setting else ''}",
                            f"models:/{self.sweep_name}/{version}")

    def _outcome(self, trial, entry: dict, status: str) -> str:
        """complete (trained every epoch: a repeat aggregates may count), stopped (the scheduler
        ended it early: never counted as a finished repeat) or failed."""
        if status != "FINISHED":
            return "failed"
        from contrasweep.spec.trial import trial_hp
        from contrasweep.tracking.aggregate import ran_every_epoch

        return "complete" if ran_every_epoch(entry.get("last_epoch", 0), trial_hp(trial.config, self.static)) else "stopped"

    def _state_dir(self, trial) -> str | None:
        """The trial's state folder on the sweep's storage (a path or a URI: Tune's ``trial.path``
        is a path inside the storage's file system, without its scheme)."""
        from trainables.checkpoints import STATE_DIR
        from trainables.storage import join

        folder = getattr(trial, "path", None)
        if not folder:
            return None
        root = (self.static or {}).get("trial_storage")
        return join(root, os.path.basename(folder), STATE_DIR) if root else os.path.join(folder, STATE_DIR)

    def _log_checkpoint(self, run_id: str, path) -> None:
        """The best folder's weights and meta as the run's ``best_checkpoint`` artifact."""
        from trainables.checkpoints import META_FILE, WEIGHTS_FILE

        if path is None:
            return
        for name in (WEIGHTS_FILE, META_FILE):
            file = Path(path) / name
            if file.exists():
                self.client.log_artifact(run_id, str(file), artifact_path="best_checkpoint")

    @guarded
    def on_experiment_end(self, trials, **info):
        if self.progress:
            self.progress.close()
        if self.store_error:  # the sweep stopped for it: resume finishes what is left
            return
        # Runs never re-attached (their trial was lost and not regenerated) are deleted, so
        # MLflow holds exactly one run per trial.
        for tid in self._orphans(trials):
            self.client.delete_run(self.state.trials.pop(tid)["run_id"])
        live_groups = {e.get("group") for e in self.state.trials.values()}
        for group, run_id in list(self.state.data.get("configs", {}).items()):
            if group not in live_groups:  # every repeat of it was an orphan
                self.client.delete_run(self.state.data["configs"].pop(group))
        # after Ctrl-C Tune may call its trials TERMINATED; a run never ended here is unfinished
        done = (all(t.status in ("TERMINATED", "ERROR") for t in trials)
                and all("status" in e for e in self.state.trials.values()))
        any_error = any(t.status == "ERROR" for t in trials)
        if done:
            self._repair_artifacts()  # e.g. mlartifacts/ removed while the sweep ran
            self._best_to_parent()
        else:
            self._mark_interrupted()
        self.client.set_terminated(self.parent_run_id, status="FAILED" if any_error else ("FINISHED" if done else "KILLED"))
        self.state.data["finished"] = done
        self.state.save()

    def _mark_interrupted(self) -> None:
        """The sweep stopped with trials unfinished (Ctrl-C): their runs and the configuration
        runs of groups still open end KILLED, so that nothing in MLflow claims to be running;
        ``setup`` on resume sets them RUNNING again."""
        unfinished = [e for e in self.state.trials.values() if "status" not in e]
        killed = [e["run_id"] for e in unfinished]
        for group, run_id in self.state.data.get("configs", {}).items():
            members = [e for e in self.state.trials.values() if e.get("group") == group]
            if any("status" not in e for e in members) or len(members) < self._group_size(group):
                killed.append(run_id)
        for run_id in killed:
            self.client.set_terminated(run_id, status="KILLED")
        self.state.data["interrupted_runs"] = killed


def _better(value, best, mode: str) -> bool:
    return best is None or (value > best if mode == "max" else value < best)


_SKIP = {"timestamp", "training_iteration", "time_this_iter_s", "time_total_s", "pid", "time_since_restore",
         "iterations_since_restore", "done", "checkpoint_dir_name"}


def _numeric(result: dict) -> dict[str, float]:
    return {k: v for k, v in result.items() if k not in _SKIP and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _step_series(result: dict) -> dict[str, list]:
    from trainables.phase_progress import STEP_METRICS

    nested = result.get(STEP_METRICS)
    if isinstance(nested, dict):
        return nested
    prefix = STEP_METRICS + "/"  # Tune may have flattened the dict
    return {k[len(prefix):]: v for k, v in result.items() if k.startswith(prefix) and isinstance(v, list)}


def _metric(key: str, value: float, timestamp: int | None = None, step: int = 0):
    import time

    from mlflow.entities import Metric

    return Metric(key, float(value), int(time.time() * 1000) if timestamp is None else int(timestamp), int(step))


def _slug(text: str) -> str:
    """A setting label as part of a metric key (MLflow allows letters, digits, ``_-./`` and spaces)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text.replace("=", "_"))


def _params(params: dict[str, Any]):
    from mlflow.entities import Param

    return [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]


def failure_tags(trial) -> dict[str, str]:
    """Why a trial failed, from the error Tune wrote for it: ``contrasweep.error`` (the
    exception's last line, e.g. a ``TrainingDiverged`` naming the loss and step) and, for a
    divergence, ``contrasweep.error_step``."""
    path = getattr(trial, "error_file", None)
    try:
        text = Path(path).read_text(errors="replace") if path else ""
    except OSError:
        text = ""
    line = error_line(text)
    if not line:
        return {}
    tags = {"contrasweep.error": line[:5000]}
    step = re.search(r"TrainingDiverged: .* at step (\d+)", line)
    if step:
        tags["contrasweep.error_step"] = step.group(1)
    return tags


def _yaml(spec: dict) -> str:
    """The spec as logged to MLflow: a secret key in ``sweep.storage`` masked."""
    import yaml

    from trainables.storage import display

    storage = (spec.get("sweep") or {}).get("storage")
    if isinstance(storage, str) and display(storage) != storage.partition("?")[0]:
        spec = {**spec, "sweep": {**spec["sweep"], "storage": display(storage)}}
    return yaml.safe_dump(spec, sort_keys=False)
