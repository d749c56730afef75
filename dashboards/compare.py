"""Seed-aggregated comparisons read back from MLflow (read-only): one row per arm — a sweep,
or the trials of a sweep sharing some hyperparameters — with mean ± sample std of a metric
over its seeds. Paper tables report exactly this (e.g. SCL-MOO Table 1: mean ± std, 10 seeds)."""

from __future__ import annotations

import statistics
from typing import Any

from dashboards.trials import parent_runs, trial_table


def seed_summary(
    tracking_uri: str, experiment: str, sweep: str, metric: str = "test/accuracy", by: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Finished trials of ``sweep`` (not those ASHA stopped early) grouped by the hyperparameters
    ``by`` (``hp.<name>`` params);
    each row: the group's values, n, mean, std (sample, n - 1; 0 for one seed), seeds, values."""
    parents = parent_runs(tracking_uri, experiment, sweep)
    if not parents:
        raise LookupError(f"no sweep {sweep!r} in experiment {experiment!r}")
    groups: dict[tuple, list[tuple[str | None, float]]] = {}
    for row in trial_table(tracking_uri, parents[0].info.run_id, (metric,)):
        if row["status"] != "FINISHED" or row.get(metric) is None or row.get("outcome") == "stopped":
            continue  # a trial the scheduler stopped early is not a finished repeat
        key = tuple(row.get(f"hp.{k}") for k in by)
        groups.setdefault(key, []).append((row.get("hp.seed"), row[metric]))
    out = []
    for key, pairs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        pairs.sort(key=lambda p: str(p[0]))  # by seed
        values = [v for _, v in pairs]
        out.append(
            {
                **dict(zip(by, key)),
                "n": len(values),
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "seeds": [s for s, _ in pairs],
                "values": values,
            }
        )
    return out
