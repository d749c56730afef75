"""The report's sections (``dashboards.report`` puts them in order and renders the page): a
table as HTML with its CSV and Markdown files (``table_section``), and the figures, each with the
data it draws: curves over data axes (``curve_sections``), sensitivity to each searched
hyperparameter (``sensitivity_sections``), Pareto fronts of multi-metric sweeps
(``pareto_sections``), SCL-MOO's fronts (``moo_sections``), a race (``race_sections``),
hyperparameter importance (``importance_sections``) and the t-SNE map (``tsne_section``).

May import: ``contrasweep.spec.text``, ``contrasweep.tracking.aggregate``, the other modules of
``dashboards``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from contrasweep.spec.text import counted, hp_text
from contrasweep.tracking.aggregate import Group, on_slice, selection_key
from dashboards import plots, tables
from dashboards.embeddings import tsne_map
from dashboards.moo import write_fronts
from dashboards.pareto import pareto_front
from dashboards.source import SweepRecord

# data axes that get a curve, with what the axis is and where the paper plots it
CURVE_AXES = {
    "k": "examples per class k (LaCon Fig. 2)",
    "n_total": "labelled examples N (SCL-MOO Sec. 3)",
    "rho": "imbalance ratio ρ (LaCon Fig. 3)",
    "num_classes": "number of classes (LaCon Fig. 6)",
}


@dataclass
class Section:
    title: str
    body: str = ""  # HTML
    images: list[tuple[str, str]] = field(default_factory=list)  # (png path, caption)
    files: list[str] = field(default_factory=list)  # other files written (csv, md)


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
        line.n.append(int(stats["n"]))  # a count (Group.stats)
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


def _hp_text(group: Group, record: SweepRecord) -> str:
    keys = record.varied or sorted(group.hp)
    return " ".join(f"{record.hp_name(k)}={hp_text(group.hp[k]) if k in group.hp else ''}" for k in keys)


def _file(stem: Path, extension: str) -> Path:
    """``stem`` + extension (not ``with_suffix``: a stem like ``pareto_rho0.1`` has a dot)."""
    return stem.parent / (stem.name + extension)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text.replace("=", "")).strip("_") or "all"
