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
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.spec.text import counted, hp_text
from contrasweep.tracking.aggregate import Group, on_slice, selection_key
from contrasweep.tracking.store import get_client
from dashboards import plots, tables
from dashboards.embeddings import tsne_map
from dashboards.importance import importances, log_importances
from dashboards.moo import write_fronts
from dashboards.pareto import pareto_front
from dashboards.significance import repeats_needed
from dashboards.source import SweepRecord, load

# data axes that get a curve, with what the axis is and where the paper plots it
CURVE_AXES = {
    "k": "examples per class k (LaCon Fig. 2)",
    "n_total": "labelled examples N (SCL-MOO Sec. 3)",
    "rho": "imbalance ratio ρ (LaCon Fig. 3)",
    "num_classes": "number of classes (LaCon Fig. 6)",
}
ARTIFACT_PATH = "report"


@dataclass
class Section:
    title: str
    body: str = ""  # HTML
    images: list[tuple[str, str]] = field(default_factory=list)  # (png path, caption)
    files: list[str] = field(default_factory=list)  # other files written (csv, md)


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


def table_section(title: str, table: tables.Table, stem: Path, note: str = "") -> Section:
    _file(stem, ".csv").write_text(table.csv(), encoding="utf-8")
    _file(stem, ".md").write_text(f"**{table.title}**\n\n" + table.markdown(), encoding="utf-8")
    body = (
        (f"<p>{html.escape(note)}</p>" if note else "")
        + f"<p class='cap'>{html.escape(table.title)}</p>"
        + table.html()
    )
    return Section(title, body, files=[str(_file(stem, ".csv")), str(_file(stem, ".md"))])


def curve_sections(records: list[SweepRecord], out: Path) -> list[Section]:
    """For every data axis with two or more values: the selected configurations' test metric
    against it (their best validation value where one was not tested, and the figure says so),
    one line per sweep and combination of the other setting axes."""
    sections = []
    for axis, meaning in CURVE_AXES.items():
        points: dict[str, list[tuple[SweepRecord, Group, str]]] = {}
        for record in records:
            for group in record.selected.values():
                setting = tables.parse_setting(group.setting)
                if axis not in setting:
                    continue
                others = " ".join(f"{k}={v}" for k, v in setting.items() if k != axis)
                label = f"{record.label} ({record.name})" + (f" {others}" if others else "")
                points.setdefault(label, []).append((record, group, setting[axis]))
        if len({x for found in points.values() for _, _, x in found}) < 2:
            continue
        tested = all(r.figure_metric([g]) == r.test_metric for found in points.values() for r, g, _ in found)
        series = [
            _series(label, [(g, x) for _, g, x in found], _drawn(found[0][0], tested))
            for label, found in points.items()
        ]
        metric = _drawn(records[0], tested)
        series += plots.chance_series(
            [(x, r.chance(g.setting, metric)) for found in points.values() for r, g, x in found]
        )
        path = str(out / f"curve_{axis}.png")
        plots.curves(series, meaning, metric, f"{metric} vs {axis}", path, log_x=axis in ("k", "n_total"))
        data = plots.write_data(series, metric, str(out / f"curve_{axis}.csv"))
        sections.append(
            Section(
                f"{metric} against {axis}",
                files=[data],
                images=[
                    (
                        path,
                        f"selected configuration per setting; mean ± std over repeats; x: {meaning}{_untested(tested)}",
                    )
                ],
            )
        )
    return sections


def sensitivity_sections(records: list[SweepRecord], out: Path) -> list[Section]:
    sections = []
    for record in records:
        for hp in record.varied:
            lines = []
            for setting, best in record.selected.items():
                found = [g for g in record.groups if on_slice(g, best, hp, record.varied)]
                if len({g.hp[hp] for g in found}) >= 2:
                    lines.append((setting, found))
            if not lines:
                continue
            metric = record.figure_metric([g for _, found in lines for g in found])
            series = [
                _series(setting or record.name, [(g, g.hp[hp]) for g in found], metric) for setting, found in lines
            ]
            for setting, found in lines:  # each setting's chance level, across its line
                series += plots.chance_series(
                    [(g.hp[hp], record.chance(setting, metric)) for g in found],
                    plots.CHANCE + (f" {setting}" if len(lines) > 1 else ""),
                )
            stem = f"sensitivity_{_slug(record.name)}_{_slug(hp)}"
            path = str(out / f"{stem}.png")
            shown = record.hp_name(hp)
            plots.curves(series, shown, metric, f"{record.name}: {metric} vs {shown}", path)
            data = plots.write_data(series, metric, str(out / f"{stem}.csv"))
            sections.append(
                Section(
                    f"{record.name}: sensitivity to {shown}",
                    files=[data],
                    images=[
                        (
                            path,
                            "complete configurations equal to the selected one in every other searched hyperparameter; "
                            f"mean ± std over repeats (LaCon Fig. 5){_untested(metric == record.test_metric)}",
                        )
                    ],
                )
            )
    return sections


def _drawn(record: SweepRecord, tested: bool) -> str:
    return record.test_metric if tested else selection_key(record.metric)


def _untested(tested: bool) -> str:
    return (
        ""
        if tested
        else (
            "; validation values: not every configuration drawn was evaluated on the test "
            "split (evaluation.test: reported tests the selected ones)"
        )
    )


def _series(label: str, points: list[tuple[Group, object]], metric: str) -> plots.Series:
    line = plots.Series(label, [], [], [], [])
    for group, x in points:
        stats = group.stats(metric)
        line.x.append(x)
        line.mean.append(stats["mean"])
        line.std.append(stats["std"])
        line.n.append(stats["n"])
    return line


def pareto_sections(records: list[SweepRecord], out: Path) -> list[Section]:
    """Multi-metric sweeps: per setting, the complete configurations' means of each metric's
    best validation value and the non-dominated ones (Optuna's sort)."""
    sections = []
    for record in (r for r in records if len(r.metrics) > 1):
        keys = [selection_key(m) for m in record.metrics]
        for setting in dict.fromkeys(g.setting for g in record.groups):
            found = [g for g in record.groups if g.setting == setting and g.complete]
            points = [[g.stats(k)["mean"] for k in keys] for g in found]
            if not points:
                continue
            on = set(pareto_front(points, record.modes))
            table = tables.Table(
                f"{record.name} {setting}: Pareto front of configuration means",
                ["configuration", *keys, "on front"],
                [
                    [_hp_text(g, record), *(f"{v:.4f}" for v in p), "✓" if i in on else ""]
                    for i, (g, p) in enumerate(zip(found, points))
                ],
                [
                    {
                        "setting": setting,
                        **{f"hp.{k}": v for k, v in g.hp.items()},
                        **dict(zip(keys, p)),
                        "on_front": i in on,
                    }
                    for i, (g, p) in enumerate(zip(found, points))
                ],
            )
            stem = out / f"pareto_{_slug(record.name)}{'_' + _slug(setting) if setting else ''}"
            section = table_section(f"{record.name}{' ' + setting if setting else ''}: Pareto front", table, stem)
            path = str(_file(stem, ".png"))
            plots.front(
                [(p[0], p[1]) for p in points],
                [i in on for i in range(len(points))],
                [_hp_text(g, record) for g in found],
                keys[0],
                keys[1],
                table.title,
                path,
                chance=(record.chance(setting, keys[0]), record.chance(setting, keys[1])),
            )
            section.images.append(
                (
                    path,
                    f"{len(on)} of {len(points)} configurations non-dominated "
                    f"({', '.join(f'{k} {m}' for k, m in zip(keys, record.modes))})",
                )
            )
            sections.append(section)
    return sections


def moo_sections(records: list[SweepRecord], out: Path) -> list[Section]:
    """SCL-MOO sweeps that report ℓ1 and ℓ2: LS and EPO fronts across preferences r (Eq. 6-7)."""
    sections = []
    for record in (r for r in records if r.method == "scl_moo"):
        for setting in dict.fromkeys(g.setting for g in record.groups):
            found = [g for g in record.groups if g.setting == setting]
            if not any(g.values("val/l1") and g.complete for g in found):
                continue
            stem = out / f"moo_fronts_{_slug(record.name)}{'_' + _slug(setting) if setting else ''}"
            points = write_fronts(
                found,
                str(_file(stem, ".png")),
                str(_file(stem, ".csv")),
                accuracy=record.test_metric,
                selection=selection_key(record.metric),
                selection_mode=record.mode,
                setting=setting,
            )
            count = sum(len(p) for p in points.values())
            sections.append(
                Section(
                    f"{record.name}{' ' + setting if setting else ''}: SCL-MOO fronts",
                    images=[
                        (
                            str(_file(stem, ".png")),
                            f"{count} (solver, r) points; final val ℓ1, ℓ2 "
                            "means over repeats; dotted: preference rays (Eq. 7)",
                        )
                    ],
                    files=[str(_file(stem, ".csv"))],
                )
            )
    return sections


def race_sections(records: list[SweepRecord], out: Path) -> list[Section]:
    """Per racing sweep (``sweep.racing``) and setting: how many repeats each configuration ran,
    the eliminated ones ending at the round they left (the configurations table gives the p-values)."""
    sections = []
    for record in (r for r in records if (r.spec.get("sweep") or {}).get("racing") is not None):
        for setting in dict.fromkeys(g.setting for g in record.groups):
            found = [g for g in record.groups if g.setting == setting]
            names = {g.group: _hp_text(g, record) or g.config for g in found}
            kept = {names[g.group]: float(len(g.repeats)) for g in found if g.group not in record.race}
            left = {names[g.group]: float(len(g.repeats)) for g in found if g.group in record.race}
            title = f"{record.name}{' ' + setting if setting else ''}: the race"
            stem = out / f"race_{_slug(record.name + '_' + setting)}"
            path = str(_file(stem, ".png"))
            plots.bars({"kept to the end": kept, "eliminated": left}, "repeats run (the round it left)", title, path)
            saved = sum(g.size - len(g.repeats) for g in found)
            sections.append(
                Section(
                    title,
                    body=f"<p>{counted(len(left), 'configuration')} eliminated, "
                    f"{counted(saved, 'repeat')} not run.</p>",
                    images=[(path, "repeats each configuration ran; eliminated: where it left")],
                )
            )
    return sections


def importance_sections(
    records: list[SweepRecord], found: dict[str, dict[str, dict[str, float]]], out: Path
) -> list[Section]:
    """Per sweep with importances (``dashboards.importance``): a table (hyperparameter × setting)
    and a bar plot."""
    sections = []
    for record in (r for r in records if found.get(r.name)):
        values = found[record.name]
        names = list(dict.fromkeys(hp for v in values.values() for hp in v))
        settings = list(values)
        table = tables.Table(
            f"{record.name}: importance of each hyperparameter for the mean "
            f"{selection_key(record.metric)} (fANOVA, per setting)",
            ["hyperparameter", *(s or "importance" for s in settings)],
            [[record.hp_name(hp), *(f"{values[s].get(hp, 0.0):.3f}" for s in settings)] for hp in names],
            [
                {"setting": s, "hyperparameter": hp, "importance": values[s].get(hp, 0.0)}
                for s in settings
                for hp in names
            ],
        )
        stem = out / f"importance_{_slug(record.name)}"
        count = {s: sum(g.setting == s and g.complete for g in record.groups) for s in settings}
        section = table_section(
            f"{record.name}: hyperparameter importance",
            table,
            stem,
            note=(
                "Share of the variance of the configuration means explained by each hyperparameter (Optuna's fANOVA "
                "over "
                + ", ".join(f"{n} complete configurations" + (f" at {s}" if s else "") for s, n in count.items())
                + "); on the sweep run as importance/* metrics."
            ),
        )
        path = str(_file(stem, ".png"))
        shown = {s: {record.hp_name(hp): v for hp, v in row.items()} for s, row in values.items()}
        plots.bars(
            shown,
            f"share of the variance of the mean {selection_key(record.metric)}",
            f"{record.name}: hyperparameter importance (fANOVA)",
            path,
        )
        section.images.append(
            (path, "fANOVA importance per hyperparameter" + (", one bar per setting" if len(settings) > 1 else ""))
        )
        sections.append(section)
    return sections


def tsne_section(record: SweepRecord, out: Path) -> Section:
    path, caption = tsne_map(record, str(out / "tsne.png"))
    section = Section(f"{record.name}: t-SNE of the registered model")
    if path is None:
        section.body = f"<p>{html.escape(caption)}</p>"
    else:
        section.images.append((path, caption + " (LaCon Fig. 4)"))
    return section


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


def _hp_text(group: Group, record: SweepRecord) -> str:
    keys = record.varied or sorted(group.hp)
    return " ".join(f"{record.hp_name(k)}={hp_text(group.hp[k]) if k in group.hp else ''}" for k in keys)


def _file(stem: Path, extension: str) -> Path:
    """``stem`` + extension (not ``with_suffix``: a stem like ``pareto_rho0.1`` has a dot)."""
    return stem.parent / (stem.name + extension)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text.replace("=", "")).strip("_") or "all"
