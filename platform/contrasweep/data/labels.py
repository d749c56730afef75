"""Class names of a labelled text file: which spellings are one class (``data.labels``).

A hand-kept file writes one class several ways (``'billing'``, ``'Billing '``). Under the
spec's :class:`~contrasweep.data.config.LabelRule` (strip surrounding spaces by default,
fold case on request) spellings with one key are merged into one class, named by the spelling
most rows use (ties: the first in sorted order). Spellings the rule keeps apart although they
differ only in case or surrounding spaces are reported with the setting that would merge
them. Both go to the sweep's first lines and ``data_stats.json`` (``labels``).

Imports: pyarrow, numpy, ``contrasweep.data.config``. Hub ``ClassLabel`` columns and number
labels are not names and never pass through here.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.data.config import LabelRule

EVERYTHING = LabelRule(strip=True, casefold=True)


def encode(columns: dict[str, pa.ChunkedArray], rule: LabelRule) -> tuple[dict, list[str], dict]:
    """``columns`` (string labels per split) as int64 class indices, the class names (sorted),
    and the report: ``{"merged": {name: [spellings]}, "similar": [{"names": [...], "differ_in":
    "case", "set": "data.labels.casefold: true"}]}``, each part left out when empty."""
    counts: Counter = Counter()
    for column in columns.values():
        for row in pc.value_counts(column).to_pylist():
            counts[row["values"]] += row["counts"]
    spellings = sorted(counts)
    groups: dict[str, list[str]] = {}
    for value in spellings:
        groups.setdefault(rule.key(value), []).append(value)
    name_of_group = {key: _name(values, counts, rule) for key, values in groups.items()}
    names = sorted(set(name_of_group.values()))
    index = {name: i for i, name in enumerate(names)}
    code = np.array([index[name_of_group[rule.key(v)]] for v in spellings], dtype=np.int64)
    value_set = pa.array(spellings, type=pa.string())
    out = {
        split: pa.array(code[pc.index_in(column, value_set=value_set).to_numpy(zero_copy_only=False)])
        for split, column in columns.items()
    }
    report: dict[str, dict[str, list[str]] | list[dict]] = {}
    merged = {name_of_group[key]: values for key, values in groups.items() if len(values) > 1}
    if merged:
        report["merged"] = dict(sorted(merged.items()))
    similar = _similar(names, rule)
    if similar:
        report["similar"] = similar
    return out, names, report


def notes(report: dict) -> list[str]:
    """One line per merge and per set of names the rule keeps apart (the sweep's first lines)."""
    out = []
    for name, values in (report or {}).get("merged", {}).items():
        how = [
            what
            for what, on in (
                ("surrounding spaces stripped", any(v != v.strip() for v in values)),
                ("case folded", len({v.strip() for v in values}) > 1),
            )
            if on
        ]
        out.append(f"labels {_listed(values)} are one class {name!r} (data.labels: {', '.join(how)})")
    for one in (report or {}).get("similar", []):
        out.append(f"labels {_listed(one['names'])} differ only in {one['differ_in']}: set {one['set']} to merge them")
    return out


def merge_hint(report: dict, name: str) -> str:
    """``', or merge …'`` for a class the rule keeps apart from another spelling, else ``''``."""
    for one in (report or {}).get("similar", []):
        if name in one["names"]:
            return f"; or merge {_listed(one['names'])} (they differ only in {one['differ_in']}): {one['set']}"
    return ""


def _name(values: list[str], counts: Counter, rule: LabelRule) -> str:
    """A class's name: its most used spelling (spaces stripped when the rule strips)."""
    shown: Counter = Counter()
    for value in values:
        shown[value.strip() if rule.strip else value] += counts[value]
    return min(shown, key=lambda s: (-shown[s], s))


def _similar(names: list[str], rule: LabelRule) -> list[dict]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(EVERYTHING.key(name), []).append(name)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        spaces = not rule.strip and len({n.casefold() for n in group}) > 1
        case = not rule.casefold and len({n.strip() for n in group}) > 1
        differ = " and ".join(w for w, on in (("case", case), ("surrounding spaces", spaces)) if on)
        setting = " and ".join(f"data.labels.{k}: true" for k, on in (("casefold", case), ("strip", spaces)) if on)
        out.append({"names": group, "differ_in": differ, "set": setting})
    return out


def _listed(values: list[str]) -> str:
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
