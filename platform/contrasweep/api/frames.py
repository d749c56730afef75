"""A sweep's MLflow runs as pandas DataFrames (``contrasweep.api.Sweep``'s tables; their columns
are listed in docs/api.md, "Sweep"): one row per trial run, one per repeat group, and the
per-epoch values of one metric. Read only; no Ray.

MLflow params are strings (``hp.lr = "0.0001"``); a column of them is given back as the numbers
or booleans it holds (``value``), so a frame sorts and plots as the spec wrote the values.

May import: pandas, ``contrasweep.tracking`` (tag names, the repeat groups), ``dashboards.source``
(the sweep's record: verdicts, race, budget cut, selection).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from contrasweep.tracking.aggregate import Group
from contrasweep.tracking.store import GROUP_TAG, OUTCOME_TAG, VARIANT_TAG
from dashboards.source import SweepRecord

# a trial run's identity columns, in order, and the tag each comes from: keys and names stay text
# (a hex key such as "00061170" is not a number), the variant and the data seeds are numbers
KEYS = {
    "trial_id": "contrasweep.trial_id",
    "name": "mlflow.runName",
    "group": GROUP_TAG,
    "config": "contrasweep.config",
    "setting": "contrasweep.setting",
}
NUMBERS = {"variant": VARIANT_TAG, "data_seed": "contrasweep.data_seed", "split_seed": "contrasweep.split_seed"}
IDENTITY = {**KEYS, **NUMBERS}
# final metrics a trial row leaves out: the last epoch's bookkeeping (its history has them)
BOOKKEEPING = ("epoch", "lr", "evaluations")


def value(text: str | None) -> Any:
    """An MLflow param or tag (a string) as the value it holds: int, float, bool, None, or the string."""
    if text is None:
        return None
    if text in ("True", "true", "False", "false"):
        return text in ("True", "true")
    if text == "None":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def trial_rows(runs: list) -> pd.DataFrame:
    """One row per trial run (MLflow ``Run``), oldest first: ``run_id``, the identity columns
    (``IDENTITY``), ``seed``, ``status`` (MLflow's), ``outcome`` (complete, stopped, failed),
    ``best_epoch``, ``last_epoch``, ``start_time``, ``end_time``, ``duration_s``, every ``hp.*``
    and ``data.*`` param, and every final metric but ``BOOKKEEPING``, by its MLflow name."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id)):
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        start, end = run.info.start_time, run.info.end_time
        row: dict[str, Any] = {"run_id": run.info.run_id}
        row.update({column: tags.get(tag) for column, tag in KEYS.items()})
        row.update({column: value(tags.get(tag)) for column, tag in NUMBERS.items()})
        row["setting"] = tags.get("contrasweep.setting", "")
        row["seed"] = value(params.get("hp.seed"))
        row["status"] = run.info.status
        row["outcome"] = tags.get(OUTCOME_TAG) or ("complete" if run.info.status == "FINISHED" else "failed")
        best = metrics.get("best/epoch")
        row["best_epoch"] = int(best) if best is not None and math.isfinite(best) else None
        row["last_epoch"] = value(tags.get("contrasweep.last_epoch"))
        row["start_time"] = pd.to_datetime(start, unit="ms", utc=True) if start else pd.NaT
        row["end_time"] = pd.to_datetime(end, unit="ms", utc=True) if end else pd.NaT
        row["duration_s"] = (end - start) / 1000 if start and end else math.nan
        row.update({k: value(v) for k, v in sorted(params.items()) if k.startswith(("hp.", "data."))})
        row.update({k: v for k, v in sorted(metrics.items()) if k not in BOOKKEEPING})
        rows.append(row)
    return _frame(rows, ["run_id", *IDENTITY, "seed", "status", "outcome", "best_epoch", "last_epoch"])


def configuration_rows(record: SweepRecord) -> pd.DataFrame:
    """One row per repeat group of ``record`` (``contrasweep.tracking.aggregate.Group``), in the
    order their first repeat started: ``group``, ``config``, ``setting``, each ``hp.*`` value the
    repeats share, ``repeats_expected``, ``repeats`` (runs so far), ``repeats_complete``,
    ``repeats_stopped``, ``repeats_failed``, ``complete`` (every expected repeat complete: the
    group may be selected), ``selected``, ``learned`` and ``learned_p`` (the verdict against the
    chance level; None where none was made), ``raced_out``, ``race_round``, ``race_p``
    (``sweep.racing``), ``budget_cut`` (``sweep.budget``), then ``mean/<m>``, ``std/<m>`` (sample,
    0 for one repeat) and ``n/<m>`` of every final metric ``m`` of its repeats (``time/*`` left
    out, as on its MLflow configuration run)."""
    chosen = {g.group for g in record.selected.values()}
    rows = []
    for group in record.groups:
        verdict, race = record.learned.get(group.group), record.race.get(group.group)
        row: dict[str, Any] = {"group": group.group, "config": group.config, "setting": group.setting}
        row.update({f"hp.{k}": value(v) for k, v in sorted(group.hp.items())})
        row.update(
            {
                "repeats_expected": group.size,
                "repeats": len(group.repeats),
                "repeats_complete": group.outcomes.get("complete", 0),
                "repeats_stopped": group.outcomes.get("stopped", 0),
                "repeats_failed": group.outcomes.get("failed", 0),
                "complete": group.complete,
                "selected": group.group in chosen,
                "learned": None if verdict is None else verdict["learned"],
                "learned_p": None if verdict is None else verdict["p_value"],
                "raced_out": race is not None,
                "race_round": None if race is None else race["round"],
                "race_p": None if race is None else race["p_value"],
                "budget_cut": group.group in record.cut,
            }
        )
        row.update(_statistics(group))
        rows.append(row)
    return _frame(rows, ["group", "config", "setting"])


def _statistics(group: Group) -> dict[str, float]:
    """As a configuration run's ``mean/``, ``std/`` metrics (``aggregate.summary``): timings left out."""
    found = {m for r in group.repeats for m in r["metrics"]}
    names = sorted(m for m in found if m not in BOOKKEEPING and not m.startswith(("step/", "time/")))
    out: dict[str, float] = {}
    for name in names:
        stats = group.stats(name)
        out[f"mean/{name}"], out[f"std/{name}"], out[f"n/{name}"] = stats["mean"], stats["std"], stats["n"]
    return out


def history_rows(trials: pd.DataFrame, metric: str, histories: dict[str, list]) -> pd.DataFrame:
    """``metric``'s logged values per trial: ``run_id``, ``group``, ``setting``, ``seed``,
    ``variant``, ``step`` (the epoch), ``value``, ``timestamp``; ``histories``: run id → MLflow
    ``Metric`` objects, in logging order."""
    keep = ["run_id", "group", "setting", "seed", "variant"]
    rows = []
    for trial in trials[keep].to_dict("records"):
        for point in histories.get(trial["run_id"], []):
            rows.append(
                {
                    **trial,
                    "metric": metric,
                    "step": int(point.step),
                    "value": float(point.value),
                    "timestamp": pd.to_datetime(point.timestamp, unit="ms", utc=True),
                }
            )
    return _frame(rows, [*keep, "metric", "step", "value", "timestamp"])


def _frame(rows: list[dict[str, Any]], first: list[str]) -> pd.DataFrame:
    """``rows`` as a frame whose columns start with ``first`` (present even with no row)."""
    frame = pd.DataFrame(rows)
    rest = [c for c in frame.columns if c not in first]
    return frame.reindex(columns=[*first, *rest])
