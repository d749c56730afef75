"""Significance between two methods or configurations over matched repeats: the Wilcoxon
signed-rank test (``scipy.stats.wilcoxon``), as LaCon Sec. 3.1 reports p-values against its
baselines. Repeats are matched by their data repeat and training seed, so the test compares
two arms on the same few-shot sample with the same seed."""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

from contrasweep.tracking.aggregate import Group

MATCH_KEYS = ("data_seed", "split_seed", "seed")


def matched_values(a: Group, b: Group, metric: str) -> list[tuple[float, float]]:
    """``(a, b)`` value pairs of ``metric`` for the repeats both groups ran (same split and
    seed), in a stable order; repeats only one side has are left out."""
    def by_repeat(group: Group) -> dict[tuple, float]:
        return {tuple(r.get(k) for k in MATCH_KEYS): r["metrics"][metric]
                for r in group.repeats if metric in r["metrics"] and r["outcome"] == "complete"}

    left, right = by_repeat(a), by_repeat(b)
    return [(left[k], right[k]) for k in sorted(set(left) & set(right), key=str)]


def wilcoxon(a: Group, b: Group, metric: str, alternative: str = "two-sided") -> dict[str, Any]:
    """``{"n", "statistic", "p_value", "mean_difference"}`` of the signed-rank test of a − b.
    With fewer than two matched repeats, or no non-zero difference, the p-value is NaN (the test
    says nothing there) rather than an error."""
    pairs = matched_values(a, b, metric)
    diffs = [x - y for x, y in pairs]
    out = {"n": len(pairs), "statistic": math.nan, "p_value": math.nan,
           "mean_difference": sum(diffs) / len(diffs) if diffs else math.nan}
    if len(pairs) < 2 or not any(diffs):
        return out
    result = stats.wilcoxon([x for x, _ in pairs], [y for _, y in pairs], alternative=alternative)
    out.update(statistic=float(result.statistic), p_value=float(result.pvalue))
    return out
