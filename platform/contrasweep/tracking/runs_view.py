"""The MLflow UI's runs table for contrasweep's experiments, useful at once.

Left alone, MLflow 3's UI opens an experiment on its GenAI side (an empty traces overview) and
its runs table shows names and dates only: every metric column is hidden until picked by hand.
Two things of MLflow's own make it open on the sweeps instead:

- the experiment tag ``mlflow.experimentKind = custom_model_development`` (MLflow's kind for a
  model-training experiment; a kind already set is kept), and a link whose query names the
  "Model training" side (``workflowType=machine_learning``);
- a saved view: an experiment tag ``mlflow.sharedViewState.<id>`` holding
  ``{"name", "createdAt", "updatedAt", "state"}``, ``state`` being the runs page's UI state as a
  JSON string (selected columns as ``metrics.`key```, ``params.`key```,
  ``attributes.`Label```; sort order). It is what the UI's own "Views" menu writes and lists;
  a link with ``viewStateShareKey=<id>`` opens the table with it.

The view shows each level's own numbers: the sweep run's ended trials, best trial so far and
best configuration (mean over repeats, validation and test), a configuration run's means, a
trial run's best validation and test values. Each sweep adds its columns to the view of its
experiment (sweeps of other methods or settings log other keys)."""

from __future__ import annotations

import json
import time

from contrasweep.tracking.aggregate import selection_key

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
TRAINING_KIND = "custom_model_development"
VIEW_PREFIX = "mlflow.sharedViewState."
VIEW_ID = "contrasweep"
VIEW_NAME = "contrasweep sweeps"
MAX_COLUMNS = 40  # a wide grid stays readable; the UI's column picker has the rest

# the sweep run's live numbers, logged as each trial ends (step: trials ended so far)
ENDED_KEY = "trials/ended"
BEST_TRIAL_PREFIX = "best_trial/"

ATTRIBUTES = ("Duration",)
PARAMS = ("method", "data.source")


def base_url(tracking_uri: str, port: int = 5000) -> str:
    """Where the UI of ``tracking_uri`` answers: the tracking server itself, or ``contrasweep ui``."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return f"http://127.0.0.1:{port}"


def runs_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table on the Model training side, with contrasweep's view."""
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_ID}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


def _keys(metric: str) -> list[str]:
    """A trial's numbers for objective ``metric``: its selection key and, for a validation
    metric, the test metric of the same name (``contrasweep.tracking.aggregate``)."""
    test = ["test/" + metric.removeprefix("val/")] if metric.startswith("val/") else []
    return [selection_key(metric)] + test


def best_config_columns(prefix: str, metric: str) -> list[str]:
    """The sweep run's best-configuration means, under ``prefix`` (``best_config/`` or
    ``best_config/<setting>/``)."""
    return [f"{prefix}mean/{k}" for k in _keys(metric)]


def metric_columns(metric: str) -> list[str]:
    """The metric keys of a sweep whose objective is ``metric``, per level: sweep run, then
    configuration run (mean over repeats, and the spread of the selection key), then trial run."""
    keys = _keys(metric)
    sweep = [ENDED_KEY, BEST_TRIAL_PREFIX + metric] + best_config_columns("best_config/", metric)
    config = [f"mean/{keys[0]}", f"std/{keys[0]}"] + [f"mean/{k}" for k in keys[1:]]
    return sweep + config + keys


def columns(metrics: list[str]) -> list[str]:
    """The view's column keys: a few attributes and parameters, then ``metrics``."""
    return (
        [f"attributes.`{a}`" for a in ATTRIBUTES]
        + [f"params.`{p}`" for p in PARAMS]
        + [f"metrics.`{m}`" for m in metrics]
    )


def publish(client, experiment_id: str, metrics: list[str]) -> None:
    """Mark the experiment as model training and add ``metrics`` to its contrasweep view
    (created on first use; columns a user or an earlier sweep put there are kept, in order)."""
    experiment = client.get_experiment(experiment_id)
    tags = experiment.tags or {}
    if EXPERIMENT_KIND_TAG not in tags:  # a kind the user chose stays
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)
    now = int(time.time() * 1000)
    raw = tags.get(VIEW_PREFIX + VIEW_ID)
    state: dict | None  # the view's saved state; None where it cannot be read (below)
    if raw is None:
        envelope = {"name": VIEW_NAME, "createdAt": now}
        state = {"orderByKey": "attributes.start_time", "orderByAsc": False}
    else:
        try:
            envelope = json.loads(raw)
            state = json.loads(envelope["state"])
        except (KeyError, TypeError, ValueError):
            state = None
        if not isinstance(state, dict):
            return  # saved over in the UI (which may compress it): the user's view now, left as it is
    selected = list(state.get("selectedColumns") or [])
    wanted = [c for c in columns(metrics) if c not in selected]
    if not wanted:
        return
    state["selectedColumns"] = (selected + wanted)[:MAX_COLUMNS]
    # the grid sorts a group's columns by name; this order puts the sweep run's numbers first,
    # wide enough for their keys
    state["columnOrder"] = state["selectedColumns"]
    state["columnWidths"] = {
        **{c: 7 * len(c) for c in state["selectedColumns"] if c.startswith("metrics.")},
        **(state.get("columnWidths") or {}),
    }
    envelope.update(state=json.dumps(state), updatedAt=now)
    client.set_experiment_tag(experiment_id, VIEW_PREFIX + VIEW_ID, json.dumps(envelope))
