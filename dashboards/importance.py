"""Hyperparameter importance of a sweep (docs/architecture.md, "Reports"): per setting, Optuna's
fANOVA evaluator (``optuna.importance.FanovaImportanceEvaluator``: a random forest over the
configurations, then the share of the objective's variance each hyperparameter explains) over
the complete configurations' means of the selection objective (the mean over repeats of each
repeat's best validation value, what selection ranks). Nothing is trained again: the
configurations are added to an in-memory Optuna study as finished trials.

Only a sweep with at least two searched or gridded hyperparameters that vary among a setting's
complete configurations gets importances (one hyperparameter explains everything by
definition). Numeric values become a ``FloatDistribution`` over their range (on a log scale when
they span two decades or more, as learning rates and weight decays are searched), anything else
(booleans, lists such as dropout sets or preference vectors) a ``CategoricalDistribution`` of
the values as text. A setting whose objective is the same for every configuration has none.

May import: Optuna, ``contrasweep.tracking`` (aggregation), this package's ``source``.
"""

from __future__ import annotations

import math
import re

from contrasweep.tracking.aggregate import Group, selection_key
from dashboards.source import SweepRecord

METRIC_PREFIX = "importance/"
LOG_SPAN = 100.0  # numeric values spanning this ratio or more get a log-scale distribution
SEED = 0  # the forest's seed: the same sweep gives the same importances


def _number(value: str) -> float | None:
    if str(value).strip().lower() in ("true", "false"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def distribution(values: list[str]):
    """The Optuna distribution of one hyperparameter's values (strings, as MLflow keeps params)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    numbers = [n for n in (_number(v) for v in values) if n is not None]
    if len(numbers) == len(values):  # every value is a number
        low, high = min(numbers), max(numbers)
        return FloatDistribution(low, high, log=low > 0 and high / low >= LOG_SPAN)
    return CategoricalDistribution(sorted({str(v) for v in values}))


def _param(dist, value: str):
    from optuna.distributions import FloatDistribution

    return float(value) if isinstance(dist, FloatDistribution) else str(value)


def varied_in(record: SweepRecord, found: list[Group]) -> list[str]:
    """The record's searched/gridded hyperparameters that every one of ``found`` has and that take
    at least two values among them."""
    return [k for k in record.varied if all(k in g.hp for g in found) and len({g.hp[k] for g in found}) > 1]


def setting_importance(record: SweepRecord, setting: str) -> dict[str, float]:
    """hyperparameter → importance (they sum to 1), most important first; empty when the setting
    has fewer than two varied hyperparameters or an objective without variance."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    key = selection_key(record.metric)
    found = [g for g in record.groups if g.setting == setting and g.complete and math.isfinite(g.stats(key)["mean"])]
    names = varied_in(record, found)
    if len(names) < 2 or len({g.stats(key)["mean"] for g in found}) < 2:
        return {}
    dists = {k: distribution([g.hp[k] for g in found]) for k in names}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize" if record.mode == "max" else "minimize")
    study.add_trials(
        [
            optuna.trial.create_trial(
                params={k: _param(dists[k], g.hp[k]) for k in names}, distributions=dists, value=g.stats(key)["mean"]
            )
            for g in found
        ]
    )
    values = get_param_importances(study, evaluator=FanovaImportanceEvaluator(seed=SEED))
    return {k: float(v) for k, v in values.items()}


def importances(record: SweepRecord) -> dict[str, dict[str, float]]:
    """setting → ``setting_importance`` for every setting that has importances."""
    out = {}
    for setting in dict.fromkeys(g.setting for g in record.groups):
        values = setting_importance(record, setting)
        if values:
            out[setting] = values
    return out


def metric_key(hp: str, setting: str, several: bool) -> str:
    """``importance/<hp>``, or ``importance/<setting>/<hp>`` when the sweep has several settings
    (MLflow keys take no ``=``: ``k=20 rho=0.1`` is written ``k:20 rho:0.1``)."""
    name = re.sub(r"[^A-Za-z0-9_\-. :/]", "_", hp)
    if not several:
        return METRIC_PREFIX + name
    return f"{METRIC_PREFIX}{re.sub(r'[^A-Za-z0-9_.: -]', '_', setting.replace('=', ':'))}/{name}"


def log_importances(client, run_id: str, found: dict[str, dict[str, float]]) -> dict[str, float]:
    """The importances as metrics on the sweep run (``metric_key``); returns what was logged."""
    import time

    from mlflow.entities import Metric

    several = len(found) > 1
    metrics = {
        metric_key(hp, setting, several): value for setting, values in found.items() for hp, value in values.items()
    }
    if metrics:
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()])
    return metrics
