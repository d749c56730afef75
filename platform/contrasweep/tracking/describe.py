"""What a sweep and its trials are about, in the forms MLflow shows: the parent run's
description (``mlflow.note.content``, rendered as Markdown on the run page) and tags, and
each trial's data as an MLflow dataset input (name, digest, split sizes) so that the UI's
"Datasets used" column links every repeat to the exact sample it trained on."""

from __future__ import annotations

import json
from typing import Any

from contrasweep.spec.axes import short_value
from contrasweep.tracking.store import KIND_TAG
from trainables.user_methods import is_reference, short_name

NOTE_TAG = "mlflow.note.content"


def method_params(method: str) -> dict[str, str]:
    """The sweep and trial runs' ``method`` param: the short name the runs table shows (a
    built-in's name, a user's class), and for a user's method its full reference as
    ``method_path`` (``/abs/path/x.py:ProtoPull``, ``mylab.losses:CESupCon``). The tag
    ``contrasweep.method`` keeps the full reference (what a model or ``resume`` loads)."""
    return {"method": short_name(method), "method_path": method} if is_reference(method) else {"method": method}


def dataset_name(data: dict) -> str:
    """``bbc_news few_shot k=20 seed=3``: the source, the protocol and its sampling values."""
    parts = [short_value(data.get("source", "")), str(data.get("protocol", data.get("task", "full")))]
    for key in ("k", "n_total", "rho", "num_classes", "seed", "split_seed"):
        if data.get(key) is not None:
            parts.append(f"{key}={short_value(data[key])}")
    return " ".join(p for p in parts if p)


def dataset_input(variant):
    """The MLflow ``DatasetInput`` of one data variant (``contrasweep.spec.static.VariantStatic``): the digest is
    the content hash of the tokenised cache, so two runs share a digest exactly when they
    trained and were evaluated on the same rows."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    profile = {"num_rows": variant.sizes, "num_labels": variant.num_labels}
    dataset = Dataset(
        name=dataset_name(variant.data),
        digest=variant.cache_key[:36],
        source_type="contrasweep",
        source=json.dumps(variant.data, sort_keys=True, default=str),
        profile=json.dumps(profile, sort_keys=True),
    )
    return DatasetInput(dataset, [InputTag("mlflow.data.context", "train")])


def sweep_tags(spec: dict, sweep_name: str) -> dict[str, str]:
    """Tags of the parent run, so the experiment's run list can be filtered by them."""
    data, sweep = spec.get("data", {}), spec.get("sweep", {})
    metric = sweep.get("metric", "")
    return {
        "contrasweep.sweep": sweep_name,
        KIND_TAG: "sweep",
        "contrasweep.method": str(spec.get("method", "")),
        "contrasweep.dataset": short_value(data.get("source", "")),
        "contrasweep.protocol": str(data.get("protocol", data.get("task", "full"))),
        "contrasweep.searcher": str(sweep.get("searcher", "")),
        "contrasweep.scheduler": str(sweep.get("scheduler", "")),
        "contrasweep.metric": ",".join(metric) if isinstance(metric, list) else str(metric),
        # --smoke-test runs go to "<experiment>-smoke" (contrasweep.cli): tagged, to filter them anywhere
        "contrasweep.smoke": str(str((spec.get("tracking") or {}).get("experiment", "")).endswith("-smoke")).lower(),
    }


def sweep_description(spec: dict, sweep_name: str) -> str:
    """Markdown for the parent run: the paper it replicates, the data, what is searched, the
    selection rule and where the report is."""
    paper = spec.get("paper") or {}
    sweep = spec.get("sweep", {})
    lines = [f"**{sweep_name}**: `{spec.get('method')}` sweep."]
    if paper:
        lines.append(
            f"Paper: *{paper.get('title', '?')}*" + (f" ({paper['where']})" if paper.get("where") else "") + "."
        )
    lines.append(f"Data: `{_inline(spec.get('data', {}))}`; encoder `{_inline(spec.get('encoder', {}))}`.")
    searched = {section: spec[section] for section in ("grid", "search") if spec.get(section)}
    lines.append(
        f"Searcher `{sweep.get('searcher')}`, scheduler `{sweep.get('scheduler')}`, "
        f"training seeds {sweep.get('seeds')}; searched: `{_inline(searched)}`."
    )
    lines.append(
        "Selection: per data setting, the configuration with the best mean validation metric over "
        "its complete repeat groups (`best_config/...` metrics below); test metrics are reported for it, "
        "never used to choose it."
    )
    lines.append(
        "Runs nest sweep → configuration (mean/std/n of its repeats) → repeat. "
        "The report (`contrasweep report`) is under Artifacts → `report/report.html`."
    )
    return "\n\n".join(lines)


def _inline(value: Any) -> str:
    return json.dumps(value, sort_keys=False, default=str)
