"""Report tables (read only).

* The **main table** (LaCon Table 2, SCL-MOO Table 1): one row per sweep (method), one column
  per dataset and setting; a cell is the selected configuration's test metric, mean ± std over
  its repeats, and against the baseline sweep's selected configuration in the same column: the
  mean paired difference with its t-interval, the matched repeats, and the Wilcoxon signed-rank
  p-value, or in words that this many repeats cannot reach the report's alpha
  (``dashboards.significance``).
* The **configurations table**: every repeat group of one sweep, with its outcome, validation
  and test mean ± std, whether it learned (its verdict: above its data's chance level) and
  whether it was selected; its hyperparameter columns by their display names (``τ``, as run
  names show them: ``SweepRecord.hp_name``), its CSV's keys by MLflow's (``hp.temperature``).

Both end with a **chance level** row: what a model that never read a text scores there
(``contrasweep.data.chance``); a main-table cell whose configuration did not learn says so, and a
p-value between two that both did not learn says the comparison means nothing.

Each table renders as CSV rows, Markdown, HTML and fixed-width terminal text.
"""

from __future__ import annotations

import csv
import html
import io
import math
from dataclasses import dataclass

from contrasweep.spec.text import hp_text, mean_std
from contrasweep.tracking.aggregate import Group, selection_key
from dashboards.significance import ALPHA, Comparison, compare
from dashboards.source import SweepRecord


def parse_setting(label: str) -> dict[str, str]:
    """``"k=5 rho=0.1"`` -> ``{"k": "5", "rho": "0.1"}`` (the labels ``contrasweep.spec.identity`` writes)."""
    return dict(part.split("=", 1) for part in label.split() if "=" in part)


def column_of(group: Group) -> str:
    """``bbc_news k=5``: the dataset (unless the setting names it) and the setting."""
    setting = parse_setting(group.setting)
    dataset = "" if "source" in setting else group.info.get("dataset", "")
    return f"{dataset} {group.setting}".strip() or "all"


@dataclass
class Cell:
    metric: str
    mean: float
    std: float
    n: int
    comparison: Comparison | None = None  # None for the baseline itself or without a baseline
    fallback: bool = False  # a test column's cell showing the validation value (SweepRecord.shown)
    at_chance: bool = False  # its configuration did not learn (contrasweep.tracking.verdict)
    both_at_chance: bool = False  # ... and neither did the baseline's it is compared with

    def text(self) -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "–"
        out = mean_std(self.mean, self.std, self.n)  # ± only over 2 or more repeats
        if self.fallback:
            out += " (validation)"
        if self.at_chance:
            out += " (did not learn)"
        if self.comparison is not None:
            out += f" ({self.comparison.text()}"
            out += ", both at chance: the comparison says nothing)" if self.both_at_chance else ")"
        return out

    @property
    def p_value(self) -> float | None:
        return None if self.comparison is None else self.comparison.p_value


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]  # already formatted cells, first column(s) = row labels
    records: list[dict]  # machine-readable rows for the CSV

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        out = io.StringIO()
        if self.records:
            writer = csv.DictWriter(out, fieldnames=list(self.records[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(self.records)
        return out.getvalue()

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def text(self) -> str:
        widths = [max(len(r[i]) for r in [self.columns, *self.rows]) for i in range(len(self.columns))]
        fmt = "  ".join(f"{{:{w}}}" for w in widths)
        return "\n".join(
            [fmt.format(*self.columns), fmt.format(*("-" * w for w in widths))]
            + [fmt.format(*row) for row in self.rows]
        )


def cell(
    record: SweepRecord,
    group: Group,
    baseline_group: Group | None,
    baseline: SweepRecord | None = None,
    alpha: float = ALPHA,
) -> Cell:
    metric = record.shown(group, record.test_metric)
    stats = group.stats(metric)
    found = None
    if baseline_group is not None and baseline_group is not group:
        found = compare(group, baseline_group, metric, alpha)
    at_chance = record.at_chance(group)
    return Cell(
        metric,
        stats["mean"],
        stats["std"],
        int(stats["n"]),
        found,
        fallback=metric != record.test_metric,
        at_chance=at_chance,
        both_at_chance=at_chance
        and baseline is not None
        and baseline_group is not None
        and baseline.at_chance(baseline_group),
    )


NO_COMPARISON = ("matched", "left_out", "difference", "ci_low", "ci_high", "min_p", "decidable")  # Comparison.record()


def chance_text(level: float | None) -> str:
    return "–" if level is None else f"{level:.4f}"


def main_table(records: list[SweepRecord], baseline: SweepRecord | None = None, alpha: float | None = None) -> Table:
    """Rows: the sweeps; columns: every (dataset, setting) any of them selected a configuration in.
    ``alpha``: the comparisons' level (default: the first sweep's ``evaluation.alpha``)."""
    alpha = alpha if alpha is not None else (records[0].alpha if records else ALPHA)
    columns: list[str] = []
    for record in records:
        for g in record.selected.values():
            if column_of(g) not in columns:
                columns.append(column_of(g))
    base = {column_of(g): g for g in baseline.selected.values()} if baseline is not None else {}
    settings = {column_of(g): (r, g.setting) for r in reversed(records) for g in r.selected.values()}
    rows, out = [], []
    for record in records:
        mine = {column_of(g): g for g in record.selected.values()}
        label = f"{record.label} ({record.name})" + (" [baseline]" if record is baseline else "")
        row = [label]
        for column in columns:
            group = mine.get(column)
            if group is None:
                row.append("–")
                continue
            value = cell(record, group, base.get(column), baseline, alpha)
            row.append(value.text())
            out.append(
                {
                    "sweep": record.name,
                    "method": record.method,
                    "column": column,
                    "metric": value.metric,
                    "mean": value.mean,
                    "std": value.std,
                    "n": value.n,
                    "p_value": "" if value.p_value is None else value.p_value,
                    **(value.comparison.record() if value.comparison is not None else dict.fromkeys(NO_COMPARISON, "")),
                    "baseline": baseline.name if baseline is not None else "",
                    "did_not_learn": value.at_chance,
                    "chance": record.chance(group.setting, value.metric),
                    "hp": " ".join(f"{record.hp_name(k)}={hp_text(v)}" for k, v in sorted(group.hp.items())),
                }
            )
        rows.append(row)
    metric = records[0].test_metric if records else ""
    # what a model that learned nothing scores there (contrasweep.data.chance: the best of the
    # majority and stratified predictors; a few-shot setting's mean over its samples)
    rows.append(
        ["chance level"] + [chance_text(r.chance(setting, metric)) for r, setting in (settings[c] for c in columns)]
    )
    return Table(
        f"{metric}: mean ± std over repeats of each setting's selected configuration", ["method"] + columns, rows, out
    )


def configurations_table(record: SweepRecord) -> Table:
    """Every repeat group of ``record``: setting, varied hyperparameters, outcome, n, validation
    and test mean ± std, and a mark on the selected one of each setting."""
    varied = record.varied or sorted({k for g in record.groups for k in g.hp})
    chosen = {id(g) for g in record.selected.values()}
    val, test = selection_key(record.metric), record.test_metric
    rows, out = [], []
    for group in record.groups:
        v, t = group.stats(val), group.stats(test)
        # an incomplete group says what its repeats did: "1 complete, 2 stopped" (never averaged as complete)
        outcome = "complete" if group.complete else ", ".join(f"{n} {k}" for k, n in sorted(group.outcomes.items()))
        if group.group in record.race:  # a race dropped it: after which round, on what p-value (Holm)
            left = record.race[group.group]
            outcome = f"eliminated at round {left['round']} (p {left['p_value']:.3g})"
        elif group.group in record.cut:  # the budget ended the sweep before its other repeats started
            outcome = "cut short by the budget"
        hp = [hp_text(group.hp[k]) if k in group.hp else "" for k in varied]
        learned = learned_text(record.learned.get(group.group), group)
        rows.append(
            [
                group.setting or "–",
                *hp,
                outcome,
                f"{len(group.repeats)}/{group.size}",
                Cell(val, v["mean"], v["std"], int(v["n"])).text(),
                Cell(test, t["mean"], t["std"], int(t["n"])).text(),
                learned,
                "✓" if id(group) in chosen else "",
            ]
        )
        out.append(
            {
                "setting": group.setting,
                **{f"hp.{k}": group.hp.get(k, "") for k in varied},
                "outcome": outcome,
                "repeats": len(group.repeats),
                "expected": group.size,
                f"mean {val}": v["mean"],
                f"std {val}": v["std"],
                f"mean {test}": t["mean"],
                f"std {test}": t["std"],
                "learned": learned,
                "selected": id(group) in chosen,
            }
        )
    for setting in dict.fromkeys(g.setting for g in record.groups):  # a row per setting: what learning nothing scores
        rows.append(
            [
                setting or "–",
                *([""] * len(varied)),
                "chance level",
                "",
                chance_text(record.chance(setting, val)),
                chance_text(record.chance(setting, test)),
                "",
                "",
            ]
        )
    return Table(
        f"{record.name}: every configuration (selected: best mean {val} among complete groups; learned: "
        f"above its data's chance level, one-sided t-test over its repeats)",
        ["setting", *map(record.hp_name, varied), "outcome", "repeats", val, test, "learned", "selected"],
        rows,
        out,
    )


def learned_text(verdict: dict | None, group: Group | None = None) -> str:
    """``yes (p=0.003)``, ``did not learn (p=0.24; 20 steps)`` (the optimiser steps its repeats
    took, where they reported them); blank where unjudged (a stopped group)."""
    if verdict is None:
        return ""
    parts = [] if math.isnan(verdict["p_value"]) else [f"p={verdict['p_value']:.2g}"]
    steps = [r["metrics"]["train/steps"] for r in (group.repeats if group else []) if "train/steps" in r["metrics"]]
    if steps and not verdict["learned"]:
        parts.append(f"{max(steps):.0f} steps")
    return ("yes" if verdict["learned"] else "did not learn") + (f" ({'; '.join(parts)})" if parts else "")
