"""MLflow is the record, ``tracking.json`` its cache: find a sweep's runs by their tags and
rebuild the cache from them (a resume whose ``tracking.json`` was deleted re-attaches to the
same runs instead of opening a second parent; ``contrasweep.runner.recovery`` closes a dead sweep's
runs the same way).

Every run of a sweep carries ``contrasweep.sweep`` (its name) and ``contrasweep.kind``; the
configuration runs name the parent in ``mlflow.parentRunId``, the trial runs in
``contrasweep.sweep_run``, with their Tune trial id, config key and repeat group as tags.
"""

from __future__ import annotations

import time

from contrasweep.spec.objective import Objective
from contrasweep.tracking.store import (
    CONFIG_KEY_TAG,
    GROUP_TAG,
    KIND_TAG,
    OUTCOME_TAG,
    PARENT_TAG,
    SWEEP_RUN_TAG,
    VARIANT_TAG,
    search_all,
)

# runs started this long before sweep.json's "created" still belong to it (clock skew, slow start)
SLACK_S = 120


def sweep_runs(client, experiment_id: str, name: str) -> list:
    return search_all(client, [experiment_id], f"tags.`contrasweep.sweep` = '{name}'")


def parent_of(runs: list, created: str | None):
    """The sweep's parent run: of the parent runs with its name started after the sweep
    folder was made (an older sweep of the same name whose folder was removed is not it), the
    first."""
    parents = [r for r in runs if r.data.tags.get(KIND_TAG) == "sweep"]
    if created:
        try:
            since = (time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%S")) - SLACK_S) * 1000
        except ValueError:
            since = 0
        parents = [r for r in parents if r.info.start_time >= since]
    return min(parents, key=lambda r: r.info.start_time) if parents else None


def children_of(runs: list, parent_id: str) -> list:
    return [
        r
        for r in runs
        if r.info.run_id != parent_id and parent_id in (r.data.tags.get(PARENT_TAG), r.data.tags.get(SWEEP_RUN_TAG))
    ]


def rebuild(client, experiment_id: str, name: str, created: str | None, metric: str, mode: str) -> dict | None:
    """``tracking.json``'s content from MLflow, or None when the sweep has no parent run there."""
    runs = sweep_runs(client, experiment_id, name)
    parent = parent_of(runs, created)
    if parent is None:
        return None
    data = {
        "parent_run_id": parent.info.run_id,
        "experiment_id": experiment_id,
        "trials": {},
        "configs": {},
        "interrupted_runs": [],
        "registered": {},
    }
    children = children_of(runs, parent.info.run_id)
    for run in children:
        tags, run_id = run.data.tags, run.info.run_id
        ended = OUTCOME_TAG in tags and run.info.status in ("FINISHED", "FAILED")
        if not ended and run.info.status == "KILLED":  # closed when the sweep stopped: resume reopens it
            data["interrupted_runs"].append(run_id)
        if tags.get(KIND_TAG) == "configuration":
            data["configs"][tags.get(GROUP_TAG, run_id)] = run_id
        elif tags.get(KIND_TAG) == "trial" and "contrasweep.trial_id" in tags:
            data["trials"][tags["contrasweep.trial_id"]] = _trial_entry(client, run, ended, metric, mode)
    data["registered"] = _registered(client, parent, children)
    return data


def _trial_entry(client, run, ended: bool, metric: str, mode: str) -> dict:
    tags, metrics = run.data.tags, run.data.metrics
    entry = {
        "run_id": run.info.run_id,
        "config_key": tags.get(CONFIG_KEY_TAG),
        "last_epoch": int(metrics.get("epoch", 0)),
        "group": tags.get(GROUP_TAG),
        "variant": int(tags.get(VARIANT_TAG, 0)),
        "name": run.info.run_name,
    }
    if tags.get("contrasweep.group_size", "").isdigit():
        entry["group_size"] = int(tags["contrasweep.group_size"])
    hp = {k[3:]: v for k, v in run.data.params.items() if k.startswith("hp.") and k != "hp.seed"}
    if hp:  # the values it trains with, as text (`contrasweep list` shows the selected configuration's)
        entry["hp"] = hp
    values = [m.value for m in client.get_metric_history(run.info.run_id, metric)]
    if values:
        entry["best_value"] = Objective(metric, mode).best(values)
    if metrics.get("best/epoch"):
        entry["best_epoch"] = int(metrics["best/epoch"])
    if "contrasweep.state_dir" in tags:
        entry["state_dir"] = tags["contrasweep.state_dir"]
    if ended:
        entry["status"] = run.info.status
        entry["outcome"] = tags[OUTCOME_TAG]
        if run.info.status == "FINISHED":  # its last values: what a restored copy reports (contrasweep.tracking.ledger)
            entry["final"] = {k: v for k, v in metrics.items() if not k.startswith("step/")}
    return entry


def _registered(client, parent, children: list) -> dict:
    """Which run each setting registered (the parent's ``contrasweep.model*`` tags), so a
    re-attached sweep registers nothing twice."""
    by_id = {r.info.run_id: r for r in children}
    out = {}
    for key, uri in parent.data.tags.items():
        if not key.startswith("contrasweep.model") or not uri.startswith("models:/"):
            continue
        model, _, version = uri[len("models:/") :].rpartition("/")
        run_id = client.get_model_version(model, version).run_id
        run = by_id.get(run_id)
        setting = run.data.tags.get("contrasweep.setting", "") if run else ""
        out[setting] = {"run_id": run_id, "version": version}
    return out
