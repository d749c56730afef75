"""``contrasweep list``'s row of a sweep: its method, the selected configuration (so far, while
the sweep runs) with its validation and test metric, marked where it did not learn (its verdict:
``contrasweep.tracking.verdict``, kept in the sweep's record). Read from the sweep's record
(``tracking.json``) alone: no MLflow.

May import: ``contrasweep.folder`` (the record), ``contrasweep.spec``, ``contrasweep.tracking``,
``contrasweep.console.summary`` (disk use); ``trainables.user_methods`` (a method's short name).
"""

from __future__ import annotations

import math
import statistics

from contrasweep.console.summary import disk_use
from contrasweep.folder import budget_record
from contrasweep.folder.record import read as read_record
from contrasweep.spec.names import configuration_text, method_name, varied_keys
from contrasweep.spec.text import counted, mean_std
from contrasweep.tracking.aggregate import rank


def selected(trials: dict, mode: str) -> tuple[list[float], str | None]:
    """The best validation values of the repeats of the configuration the summary would select
    so far (``tracking.json``), and its repeat group: the best mean over complete groups, every
    repeat of which trained every epoch (``group_size`` of them); equal means as the summary and
    selection break them (``contrasweep.tracking.aggregate.rank``: the group key that sorts first)."""
    groups: dict[str, list[dict]] = {}
    for entry in trials.values():
        groups.setdefault(entry["group"], []).append(entry)
    best, best_rank, chosen = [], None, None
    sign = 1.0 if mode == "max" else -1.0
    for group, entries in groups.items():
        values = [
            e["best_value"]
            for e in entries
            if e.get("outcome") == "complete"
            and isinstance(e.get("best_value"), (int, float))
            and not math.isnan(e["best_value"])
        ]
        size = max([int(e["group_size"]) for e in entries] + [len(entries)])
        if len(values) < size:
            continue
        here = rank(sign * statistics.fmean(values), group)
        if best_rank is None or here < best_rank:
            best, best_rank, chosen = values, here, group
    return best, chosen


def selected_values(trials: dict, mode: str) -> list[float]:
    return selected(trials, mode)[0]


def _mean_std(values: list[float]) -> str:
    """``0.7500 ± 0.3536 (2 repeats)``; one repeat: no ± (no spread to show)."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean_std(sum(values) / len(values), std, len(values))} ({counted(len(values), 'repeat')})"


def test_text(trials: dict, tests: dict | None, group: str | None, metric: str) -> str:
    """The selected configuration's test metric, mean ± std over its repeats that have one
    (each repeat's own, or the test phase's result: ``tracking.json``'s ``tests``); ``-`` before
    any repeat was tested (``evaluation.test: reported`` tests after selection)."""
    name = "test/" + metric.removeprefix("val/") if metric.startswith("val/") else None
    chosen = [
        e for e in trials.values() if group is not None and e.get("group") == group and e.get("outcome") == "complete"
    ]
    results = (tests or {}).get("results", {})

    def tested(entry: dict):
        phase = results.get(entry.get("run_id"), {}).get("metrics") or {}
        return phase.get(name, (entry.get("final") or {}).get(name))

    values = [v for v in map(tested, chosen) if isinstance(v, (int, float)) and not math.isnan(v)]
    if name is None or not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    part = f" ({len(values)} of {len(chosen)} repeats)" if len(values) < len(chosen) else ""
    return f"{name} {mean_std(sum(values) / len(values), std, len(values))}{part}"


def listing(sweep) -> dict:
    """``contrasweep list``'s row: status, trials ended / in all, the method (a user's by its class),
    the selected configuration (``selected``: its values by their display names,
    ``contrasweep.spec.names``, marked ``(so far)`` while the sweep has not ended), its validation
    metric (mean ± std of its repeats' best values) and test metric, whether it learned (its
    verdict: "no (chance 0.2300, 20 steps)"), disk use, creation."""
    status = sweep.status()
    meta = sweep.meta() if status != "damaged" else {}
    try:
        record = read_record(sweep.path / "tracking.json")
    except (OSError, ValueError):
        record = {}
    trials = record.get("trials", {})
    ended = sum(1 for e in trials.values() if "status" in e) if trials else meta.get("trials", 0)
    total = meta.get("total") or meta.get("trials") or "?"
    try:
        raw = sweep.spec() or {}
    except Exception:  # noqa: BLE001 - a damaged spec: the row shows no best value
        raw = {}
    section = raw.get("sweep") or {}
    metric, mode = section.get("metric", "val/accuracy"), section.get("mode", "max")
    metric, mode = (metric[0] if isinstance(metric, list) else metric), (mode[0] if isinstance(mode, list) else mode)
    method = str(raw.get("method", "")) or "-"
    values, group = selected(trials, mode)
    best, chosen, test, learned = "-", "-", "-", "-"
    if values:
        best = f"{metric} {_mean_std(values)}"
        test = test_text(trials, record.get("tests"), group, metric)
        hp = next((e["hp"] for e in trials.values() if e.get("group") == group and isinstance(e.get("hp"), dict)), None)
        if hp is not None:  # a record written before trials kept their values: none to show
            chosen = configuration_text(hp, method, varied_keys(raw), raw.get("fixed") or {})
        if status not in ("finished", "failed", "damaged"):  # running, or interrupted until `resume`
            chosen += " (so far)"
        judged = record.get("verdicts", {}).get(group)
        if judged is not None and not judged["learned"]:
            steps = f", {judged['steps']} steps" if judged.get("steps") else ""
            learned = f"no (chance {judged['level']:.4f}{steps})"
        elif judged is not None:
            learned = "yes"
    elif (budget_record.read(sweep.path / budget_record.BUDGET_FILE) or {}).get("ended"):
        chosen = "none: the budget ended the sweep first"
    if meta.get("extensions"):  # contrasweep extend
        status = f"{status}+ext{len(meta['extensions'])}"
    return {
        "status": status,
        "trials": f"{ended}/{total}",
        "method": method_name(method),
        "selected": chosen,
        "best": best,
        "test": test,
        "learned": learned,
        "disk": disk_use(sweep.path),
        "created": str(meta.get("created", "")),
    }
