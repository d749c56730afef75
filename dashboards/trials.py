"""A sweep's trials as rows read back from MLflow (read-only): params, final metrics and the
per-epoch history of a metric. Used by reports and by tests that check what MLflow holds."""

from __future__ import annotations

from typing import Any

from contrasweep.tracking.store import OUTCOME_TAG, PARENT_TAG, get_client, search_all
from contrasweep.tracking.store import trial_runs as _trial_runs


def parent_runs(tracking_uri: str, experiment: str, sweep: str | None = None) -> list:
    client = get_client(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    query = f"tags.`contrasweep.sweep` = '{sweep}'" if sweep else ""
    runs = search_all(client, [exp.experiment_id], query)
    return [r for r in runs if PARENT_TAG not in r.data.tags]


def trial_runs(tracking_uri: str, parent_run_id: str) -> list:
    """The sweep's trial (repeat) runs, below its configuration runs."""
    return _trial_runs(get_client(tracking_uri), parent_run_id)


def trial_table(
    tracking_uri: str, parent_run_id: str, metrics: tuple[str, ...] = ("best/val/accuracy",)
) -> list[dict[str, Any]]:
    rows = []
    for run in trial_runs(tracking_uri, parent_run_id):
        row = {
            "run_id": run.info.run_id,
            "status": run.info.status,
            "trial_id": run.data.tags.get("contrasweep.trial_id"),
            "outcome": run.data.tags.get(OUTCOME_TAG),
        }
        row.update(run.data.params)
        row.update({m: run.data.metrics.get(m) for m in metrics})
        rows.append(row)
    return rows


def history(tracking_uri: str, run_id: str, metric: str) -> list[tuple[int, float]]:
    """(epoch, value) pairs of one metric, in logging order."""
    return [(m.step, m.value) for m in get_client(tracking_uri).get_metric_history(run_id, metric)]
