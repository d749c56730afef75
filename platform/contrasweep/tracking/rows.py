"""What a trial's results and a sweep's files become in MLflow: the numeric metrics of a Tune
result and its per-step series, MLflow's ``Metric``/``Param`` entities, a setting label as part
of a metric key, the spec as logged (a secret storage key masked), why a trial failed.

May import: ``contrasweep.tracking.store``, ``trainables`` (key names, storage display); MLflow
and PyYAML inside functions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from contrasweep.tracking.store import error_line
from trainables.phase_progress import STEP_METRICS
from trainables.storage import display


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


_SKIP = {
    "timestamp",
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    "pid",
    "time_since_restore",
    "iterations_since_restore",
    "done",
    "checkpoint_dir_name",
}


def numeric(result: dict) -> dict[str, float]:
    return {
        k: v for k, v in result.items() if k not in _SKIP and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def step_series(result: dict) -> dict[str, list]:
    nested = result.get(STEP_METRICS)
    if isinstance(nested, dict):
        return nested
    prefix = STEP_METRICS + "/"  # Tune may have flattened the dict
    return {k[len(prefix) :]: v for k, v in result.items() if k.startswith(prefix) and isinstance(v, list)}


def metric_entity(key: str, value: float, timestamp: int | None = None, step: int = 0):
    import time

    from mlflow.entities import Metric

    return Metric(key, float(value), int(time.time() * 1000) if timestamp is None else int(timestamp), int(step))


def slug(text: str) -> str:
    """A setting label as part of a metric key (MLflow allows letters, digits, ``_-./`` and spaces)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text.replace("=", "_"))


def param_entities(params: dict[str, Any]):
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


def spec_yaml(spec: dict) -> str:
    """The spec as logged to MLflow: a secret key in ``sweep.storage`` masked."""
    import yaml

    storage = (spec.get("sweep") or {}).get("storage")
    if isinstance(storage, str) and display(storage) != storage.partition("?")[0]:
        spec = {**spec, "sweep": {**spec["sweep"], "storage": display(storage)}}
    return yaml.safe_dump(spec, sort_keys=False)
