"""Significance between two methods or configurations over matched repeats: the Wilcoxon
signed-rank test (``scipy.stats.wilcoxon``), as LaCon Sec. 3.1 reports p-values against its
baselines, beside the mean paired difference with its t-interval (``scipy.stats.t``) and what
the test can conclude at all with that many repeats. Repeats are matched by their data repeat
and training seed, so the test compares two arms on the same few-shot sample with the same seed.

The smallest two-sided p the exact signed-rank test can give over ``n`` non-zero differences is
2 / 2**n: under the null each of the 2**n sign patterns is equally likely, and the most extreme
(every difference of one sign) is one pattern per side (``min_p``). So 2 matched repeats never
go below p = 0.5, and p ≤ 0.05 needs 6 (``repeats_needed``); a comparison with fewer says so in
words rather than showing a p that could not have been small (``Comparison``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from contrasweep.spec.text import counted
from contrasweep.tracking.aggregate import Group

MATCH_KEYS = ("data_seed", "split_seed", "seed")
ALPHA = 0.05  # where a sweep's spec sets none (evaluation.alpha's default)


def matched_values(a: Group, b: Group, metric: str) -> list[tuple[float, float]]:
    """``(a, b)`` value pairs of ``metric`` for the repeats both groups ran (same split and
    seed), in a stable order; repeats only one side has are left out. A NaN value stays in the
    pair (``compare`` counts and leaves out pairs without two finite values)."""

    def by_repeat(group: Group) -> dict[tuple, float]:
        return {
            tuple(r.get(k) for k in MATCH_KEYS): r["metrics"][metric]
            for r in group.repeats
            if metric in r["metrics"] and r["outcome"] == "complete"
        }

    left, right = by_repeat(a), by_repeat(b)
    return [(left[k], right[k]) for k in sorted(set(left) & set(right), key=str)]


def min_p(differing: int) -> float:
    """The smallest two-sided p-value the exact signed-rank test reaches over ``differing``
    non-zero paired differences: 2 / 2**n (1 for none or one)."""
    return min(1.0, 2.0 ** (1 - differing)) if differing > 0 else 1.0


def repeats_needed(alpha: float) -> int:
    """The fewest non-zero paired differences whose smallest reachable p is at most ``alpha``
    (6 at 0.05, 5 at 0.0625, 8 at 0.01)."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha {alpha} is not in (0, 1]")
    n = 1
    while min_p(n) > alpha:
        n += 1
    return n


@dataclass(frozen=True)
class Comparison:
    """One arm against the baseline over their matched repeats (difference: this − baseline)."""

    matched: int  # repeats both ran, with a value on both sides
    left_out: int  # repeats both ran where a side's value is NaN or infinite: not compared (the text says so)
    differing: int  # matched repeats whose difference is not zero (the signed-rank test's n)
    difference: float  # mean paired difference; NaN without a matched repeat
    ci_low: float  # paired t-interval at 1 − alpha; NaN under 2 matched repeats
    ci_high: float
    p_value: float  # two-sided Wilcoxon; NaN under 2 matched repeats or without a non-zero difference
    statistic: float
    alpha: float

    @property
    def min_p(self) -> float:
        return min_p(self.differing)

    @property
    def needed(self) -> int:
        return repeats_needed(self.alpha)

    @property
    def decidable(self) -> bool:
        """Whether the test could reach p ≤ alpha with these repeats at all."""
        return self.min_p <= self.alpha

    def text(self) -> str:
        """``Δ +0.0209, 95% CI [+0.0101, +0.0317], 6 matched repeats, p=0.031``; where the test
        cannot reach alpha, that in words instead of the p."""
        missing = (
            f"; {counted(self.left_out, 'matched repeat')} without a finite value left out" if self.left_out else ""
        )
        if self.matched == 0:
            return "no matched repeats with the baseline: no comparison" + missing
        out = f"Δ {self.difference:+.4f}"
        if self.matched >= 2:
            out += f", {100 * (1 - self.alpha):g}% CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}]"
        if self.decidable:
            return out + f", {counted(self.matched, 'matched repeat')}, p={self.p_value:.3g}" + missing
        repeats = counted(self.matched, "matched repeat")
        if self.differing < self.matched:
            repeats += f", {self.matched - self.differing} without a difference"
        if self.matched < 2:
            repeats += ": no interval under 2, and"
        else:
            repeats += ":"
        that_differ = " that differ" if self.differing < self.matched else ""
        return (
            out
            + f"; {repeats} this test cannot reach p ≤ {self.alpha:g}; it needs at least {self.needed}"
            + that_differ
            + missing
        )

    def record(self) -> dict[str, Any]:
        """The CSV's columns."""
        return {
            "matched": self.matched,
            "left_out": self.left_out,
            "difference": self.difference,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "min_p": self.min_p,
            "decidable": self.decidable,
        }


def t_interval(diffs: list[float], alpha: float) -> tuple[float, float]:
    """The paired t-interval of the mean difference at 1 − alpha: mean ± t(1 − alpha/2, n − 1)
    · s / √n (s: sample std); zero width where every difference is the same, NaN under 2."""
    if len(diffs) < 2:
        return math.nan, math.nan
    values = np.asarray(diffs, dtype=float)
    half = float(stats.t.ppf(1 - alpha / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return float(values.mean()) - half, float(values.mean()) + half


def compare(a: Group, b: Group, metric: str, alpha: float = ALPHA) -> Comparison:
    """``a`` against ``b`` (the baseline) over their matched repeats with a value on both sides."""
    found = matched_values(a, b, metric)
    pairs = [(x, y) for x, y in found if math.isfinite(x) and math.isfinite(y)]
    diffs = [x - y for x, y in pairs]
    test = wilcoxon_of(pairs)
    low, high = t_interval(diffs, alpha)
    return Comparison(
        matched=len(pairs),
        left_out=len(found) - len(pairs),
        differing=sum(d != 0 for d in diffs),
        difference=float(np.mean(diffs)) if diffs else math.nan,
        ci_low=low,
        ci_high=high,
        p_value=test["p_value"],
        statistic=test["statistic"],
        alpha=alpha,
    )


def wilcoxon_of(pairs: list[tuple[float, float]]) -> dict[str, float]:
    """``{"statistic", "p_value"}`` of the two-sided signed-rank test of a − b over ``pairs``;
    NaN under two pairs or without a non-zero difference (the test says nothing there)."""
    if len(pairs) < 2 or not any(x - y for x, y in pairs):
        return {"statistic": math.nan, "p_value": math.nan}
    result = stats.wilcoxon([x for x, _ in pairs], [y for _, y in pairs])
    return {"statistic": float(result.statistic), "p_value": float(result.pvalue)}


def wilcoxon(a: Group, b: Group, metric: str) -> dict[str, Any]:
    """``{"n", "statistic", "p_value", "mean_difference"}`` of the signed-rank test of a − b over
    the matched repeats with a value on both sides."""
    found = compare(a, b, metric)
    return {
        "n": found.matched,
        "statistic": found.statistic,
        "p_value": found.p_value,
        "mean_difference": found.difference,
    }
