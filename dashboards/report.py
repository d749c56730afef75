"""``contrasweep report NAME [--compare OTHER ...]``: a sweep's results as the papers show
them, read from MLflow only, written as one self-contained HTML file (figures inlined) plus its
CSV, Markdown and PNG files, and logged to the sweep's parent run under ``report/`` so that
the MLflow UI shows them.

Sections (each present only when the sweeps hold what it needs):

* main table: method × dataset/setting, mean ± std of the selected configuration's test
  metric; against the baseline (named with why it was chosen, ``pick_baseline``) the mean
  paired difference with its t-interval, the matched repeats and the Wilcoxon p, or in words
  that the repeats are too few for the test to reach alpha (LaCon Table 2, SCL-MOO Table 1);
* every configuration of each sweep (outcome, validation and test mean ± std, learned, selected);
* every table ends with the data's chance level (``contrasweep.data.chance``) and every figure
  of a metric draws it as a dashed line; a configuration that did not learn is marked;
* curves over data axes: k (LaCon Fig. 2), N, ρ (Fig. 3), classes (Fig. 6);
* sensitivity: the test metric against each searched hyperparameter, the others at the
  selected configuration's values (Fig. 5);
* Pareto fronts of configuration means for multi-metric sweeps; SCL-MOO's LS and EPO fronts
  in the (ℓ1, ℓ2) plane with the preference rays;
* a racing sweep's race: the repeats each configuration ran, and where the eliminated left;
* hyperparameter importance (Optuna's fANOVA over the configuration means of the selection
  objective) for sweeps with two or more varied hyperparameters, also as ``importance/*``
  metrics on the sweep run;
* t-SNE of the registered model's instance and label embeddings (Fig. 4).

Each section is built in ``dashboards.report_sections``; this module reads the sweeps, picks the
baseline, renders the page and logs it.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.spec.text import counted
from contrasweep.tracking.aggregate import selection_key
from contrasweep.tracking.store import get_client
from dashboards import tables
from dashboards.importance import importances, log_importances
from dashboards.report_sections import (
    Section,
    _slug,
    curve_sections,
    importance_sections,
    moo_sections,
    pareto_sections,
    race_sections,
    sensitivity_sections,
    table_section,
    tsne_section,
)
from dashboards.significance import repeats_needed
from dashboards.source import SweepRecord, load

ARTIFACT_PATH = "report"


@dataclass
class Report:
    html_path: Path
    main: tables.Table
    sections: list[Section]
    baseline: str | None = None  # the sweep the comparisons are against
    baseline_why: str = ""  # why it was chosen (pick_baseline)
    not_logged: str = ""  # why the report is not on the sweep run (a user who may read it only), else empty


def build(
    tracking_uri: str,
    name: str,
    out_dir: str | Path,
    compare: tuple[str, ...] = (),
    baseline: str | None = None,
    log: bool = True,
    tsne: bool = True,
    run_ids: dict[str, str] | None = None,
) -> Report:
    """``run_ids``: sweep name -> its sweep run, where its folder's record names it (else found by tags)."""
    names = list(dict.fromkeys([name, *compare]))
    check_baseline(names, baseline)  # before anything is read
    records = [load(tracking_uri, n, (run_ids or {}).get(n)) for n in names]
    base, why = pick_baseline(records, baseline)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    main = tables.main_table(records, base)
    sections = [table_section("Results", main, out / "main_table", note=_main_note(records, base, why))]
    sections += [
        table_section(
            f"Configurations of {r.name}", tables.configurations_table(r), out / f"configurations_{_slug(r.name)}"
        )
        for r in records
    ]
    sections += curve_sections(records, out) + sensitivity_sections(records, out)
    sections += pareto_sections(records, out) + moo_sections(records, out) + race_sections(records, out)
    found = {r.name: importances(r) for r in records}
    sections += importance_sections(records, found, out)
    if tsne:
        sections.append(tsne_section(records[0], out))
    path = out / "report.html"
    path.write_text(render(records, sections), encoding="utf-8")
    not_logged = _logged(tracking_uri, records[0], found[records[0].name], out) if log else ""
    return Report(path, main, sections, base.name if base is not None else None, why, not_logged)


def _logged(tracking_uri: str, record: SweepRecord, found: dict, out: Path) -> str:
    """The report's files and importances onto the sweep run; a server that lets this user read
    the sweep but not write it (READ, issue 73) leaves the report on disk: why, in words."""
    from mlflow.exceptions import MlflowException
    from requests import HTTPError

    client = get_client(tracking_uri)
    try:
        log_importances(client, record.parent.info.run_id, found)
        client.log_artifacts(record.parent.info.run_id, str(out), ARTIFACT_PATH)
    except (MlflowException, HTTPError) as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if getattr(exc, "error_code", None) != "PERMISSION_DENIED" and status != 403:
            raise
        return f"{tracking_uri} lets this user read the sweep, not write it (HTTP 403: EDIT on its experiment logs it)"
    return ""


def check_baseline(names: list[str], baseline: str | None) -> None:
    """``--baseline`` must name one of the report's sweeps (a one-line UserError)."""
    if baseline is not None and baseline not in names:
        raise UserError(
            f"--baseline {baseline!r} is not among the report's sweeps; allowed: "
            + ", ".join(names)
            + " (the sweep named first and those after --compare)"
        )


def pick_baseline(records: list[SweepRecord], name: str | None) -> tuple[SweepRecord | None, str]:
    """The sweep the others are compared with, and why it: ``--baseline NAME``, else the first
    ``ce`` sweep among several, else the first sweep named; none for one sweep (no comparison)."""
    check_baseline([r.name for r in records], name)
    if name is not None:
        return next(r for r in records if r.name == name), "chosen with --baseline"
    if len(records) < 2:
        return None, ""
    found = next((r for r in records if r.method == "ce"), None)
    if found is not None:
        return found, "the first ce sweep"
    return records[0], "no ce sweep among them: the first sweep named"


def _main_note(records: list[SweepRecord], base: SweepRecord | None, why: str = "") -> str:
    metric = records[0].metric
    note = (
        f"Per setting, the configuration with the best mean {metric} over a complete repeat group is "
        f"selected; the table reports its {records[0].test_metric} (never used to select). The last row is "
        "the chance level: the best a predictor that never reads a text scores (one class for every text, "
        "or classes drawn at the train split's shares); 'did not learn': the configuration's "
        f"{selection_key(metric)} is not above its data's chance level (a one-sided t-test over its repeats "
        "and a margin beyond the validation split's noise, at evaluation.alpha)."
    )
    if base is not None:
        alpha = records[0].alpha
        note += (
            f" Baseline: {base.name} ({why}). Against it, each cell gives Δ, the mean paired difference (this "
            f"sweep − {base.name}) over the repeats both ran (matched by data split and training seed), its "
            f"{100 * (1 - alpha):g}% paired t-interval (evaluation.alpha {alpha:g}), the number of matched "
            "repeats and p, the two-sided Wilcoxon signed-rank test's. With n matched repeats that differ that "
            "test cannot go below p = 2/2^n (0.5 for 2); where that is above alpha the cell says so and how "
            f"many it needs ({repeats_needed(alpha)} at {alpha:g}) instead of a p that could not have been small."
        )
    return note


def render(records: list[SweepRecord], sections: list[Section]) -> str:
    parts = [f"<h1>contrasweep report: {html.escape(', '.join(r.name for r in records))}</h1>"]
    for r in records:
        paper = r.spec.get("paper") or {}
        ref = f" — {html.escape(paper.get('title', ''))} ({html.escape(str(paper.get('where', '')))})" if paper else ""
        parts.append(
            f"<p><b>{html.escape(r.name)}</b>: <code>{html.escape(r.method)}</code>, "
            f"{counted(len({g.config for g in r.groups}), 'configuration')} × "
            f"{counted(len({g.setting for g in r.groups}), 'setting')} "
            f"({counted(len(r.groups), 'repeat group')}), selection on {html.escape(r.metric)} "
            f"({html.escape(r.mode)}){ref}; MLflow run {html.escape(r.parent.info.run_id)}</p>"
        )
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>{section.body}")
        for path, caption in section.images:
            data = base64.b64encode(Path(path).read_bytes()).decode()
            parts.append(
                f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(Path(path).name)}'>"
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
        "th{background:#f3f3f3}.cap{font-style:italic}img{max-width:100%}figcaption{font-size:12px;color:#555}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>contrasweep report</title>"
        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>"
    )
