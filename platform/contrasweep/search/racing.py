"""Racing over repeats (``sweep.racing``; docs/spec.md, "Racing"): which repeats a sweep still
runs, decided from the ones that ended. Pure: no Ray, no files (``race_search.RaceSearcher``
feeds it Tune's events and keeps its journal in ``race.json``).

**The race.** Per setting, every configuration runs its first ``min_repeats`` repeats (a
configuration's repeats are the sweep's matched repeats: data variants × training seeds, in the
same order for every configuration). Then, at each round ``r`` (every configuration still in
the race has ``r`` repeats), the round is judged on those repeats (``verdict``): a configuration
significantly worse than another one still racing leaves the race, the others run their next
repeat. The race ends when one configuration is left (it runs its remaining repeats, so that
its mean and std are over all of them, as without racing) or the repeats run out; the last
round is not judged (no repeat is left to save: selection decides).

**The test** (``paired_p``, ``pairwise_p``): one-sided paired t-test of the per-repeat differences
against 0 (Student's t CDF of the t statistic, as scipy's ``ttest_1samp(..., alternative="less")``
on ``sign · (i − j)``). Why not a rank test: with 3–5 repeats the exact Wilcoxon signed-rank
test's smallest one-sided p-value is 1/2ⁿ (0.125, 0.0625, 0.031), so it cannot reach 0.05 with
3–4 repeats, and not after a correction for several comparisons; a paired bootstrap has only nⁿ
resamples (27 at n = 3). The t-test assumes roughly normal differences; on a seed's accuracy over
a few hundred validation examples that is a reasonable approximation, and it is the usual test
for matched seeds. Differences that are all equal (to rounding) give no variance: all below 0 is
a p of 0 (the t statistic's limit), all 0 or above a p of 1 (outside the bound below: a
normal difference is never constant, a small validation set's accuracy can be).

**The correction** (``verdict``): every ordered pair (i, j) of the round's k configurations is
tested (i worse than j), Holm's step-down over all k·(k − 1) of them, and a configuration leaves
when any of its own is rejected at ``alpha`` (its p-value: its smallest adjusted one; the
round's best mean never leaves). Why every pair, and not each one against the round's best (as
before issue 69): the best is chosen on the very repeats it is then compared on, so "some
configuration looks worse than the best" is more likely than any one comparison says; with equal
configurations (n = 3, alpha 0.05) that test eliminated one in 9.6 % of rounds of 2, 17.5 % of
10 and 22.8 % of 30. Holm over every ordered pair holds whatever the dependence: **a round
eliminates any configuration that is in truth as good as the best of them with probability at
most ``alpha``** (measured on equal ones: 5.0 %, 4.1 %, 5.1 % of 4,000 rounds, ± 0.35 points:
``benchmarks/racing.py --simulate``; tests/test_racing.py). Over ``L`` judged rounds the chance
of ever eliminating the true best is at most ``L · alpha`` (a union bound), under the test's
assumptions; the selection is only as sure as that. The price is power with many configurations:
0.3 below the rest (seeds' spread 0.03), a configuration leaves at round 3 in 100 % / 69 % / 32
% of rounds of 2 / 10 / 30 (about 86 % / 45 % for 10 / 30 before), by round 4 in 100 % / 99.5 %
/ 89 %.

A study's race (``contrasweep.search.study_race``) applies one suggestion's decision per
judgement, so its family is that suggestion's k − 1 comparisons (``judge_one``, Bonferroni on
the smallest): a judgement eliminates a suggestion in truth as good as the best of its pool with
probability at most ``alpha``.

Settings race apart. A configuration whose repeat the scheduler stopped (group ASHA) or that
failed for good leaves the race with that outcome, as it would leave the selection.

May import: numpy, scipy (inside ``_one_sided``), ``contrasweep.tracking.aggregate`` (the
selection's tie rule), ``contrasweep.tracking.store`` (the outcome's word),
``contrasweep.folder.race_record`` (the journal's words), ``contrasweep.spec`` (a trial's repeat
group and repeat).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contrasweep.folder.race_record import new_journal
from contrasweep.spec.identity import identify
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import rank
from contrasweep.tracking.store import ELIMINATED


def paired_p(candidate: list[float], best: list[float], sign: float) -> float:
    """One-sided p-value that ``candidate`` is worse than ``best`` on matched repeats (``sign``:
    +1 where higher is better, −1 where lower is)."""
    return float(pairwise_p(np.asarray([candidate, best], dtype=float), sign)[0, 1])


def pairwise_p(values: np.ndarray, sign: float) -> np.ndarray:
    """``values``: configurations × matched repeats. The one-sided paired p-value of every ordered
    pair, ``out[i, j]``: that configuration i is worse than j (``paired_p``'s, for all pairs at
    once; 1 on the diagonal)."""
    values = np.asarray(values, dtype=float)
    k, n = values.shape
    if n < 2:
        return np.ones((k, k))
    columns = values.T
    out = _one_sided(sign * (columns[:, :, None] - columns[:, None, :]))  # [repeat, i, j]: i's value minus j's
    np.fill_diagonal(out, 1.0)
    return out


def _one_sided(d: np.ndarray) -> np.ndarray:
    """Per ``d[:, ...]`` (the matched repeats' differences on the first axis, at least 2): the
    one-sided paired t-test's p-value that their mean is below 0; 1 where one is not finite."""
    n = d.shape[0]
    finite = np.all(np.isfinite(d), axis=0)
    d = np.where(np.isfinite(d), d, 0.0)
    mean = d.mean(axis=0)
    # accuracies' rounding: 0.7 - 0.6 != 0.8 - 0.7
    tolerance = 1e-12 * np.maximum(1.0, np.max(np.abs(d), axis=0))
    flat = np.max(d, axis=0) - np.min(d, axis=0) <= tolerance
    from scipy import special  # the driver's race only: plan and the console never import it

    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (d.std(axis=0, ddof=1) / np.sqrt(n))
        p = special.stdtr(n - 1, t)  # Student's t CDF: scipy's ttest_1samp(..., alternative="less")
    p = np.where(flat, np.where(mean < -tolerance, 0.0, 1.0), p)
    return np.where(finite, p, 1.0)


def holm(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm's adjusted p-values: sorted ascending, the i-th (from 0) of m is
    ``max_{j ≤ i} min(1, (m − j) · p_j)``; reject where the adjusted value is at most alpha."""
    m = len(pvalues)
    out, running = {}, 0.0
    for j, (key, p) in enumerate(sorted(pvalues.items(), key=lambda kv: (kv[1], kv[0]))):
        running = max(running, min(1.0, (m - j) * p))
        out[key] = running
    return out


def holm_array(p: np.ndarray) -> np.ndarray:
    """``holm`` over every entry of ``p`` (any shape), vectorised."""
    flat = np.asarray(p, dtype=float).ravel()
    m = flat.size
    order = np.argsort(flat, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * flat[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out.reshape(np.shape(p))


@dataclass(frozen=True)
class Verdict:
    """A judged round: ``best``, the best mean (ties to the group key that sorts first, as the
    selection breaks them); for every other configuration its ``p_values`` entry, the smallest
    Holm-adjusted p-value (over the round's every ordered pair) that it is worse than another
    one, and ``than``, that other one (the round's best where tied); ``versus_best``, its adjusted
    p-value against the round's best."""

    best: str
    p_values: dict[str, float]
    than: dict[str, str]
    versus_best: dict[str, float]

    def reason(self, group: str, alpha: float) -> tuple[float, str]:
        """Why ``group`` leaves at ``alpha`` (its p-value is at most alpha): (the adjusted p-value,
        the configuration it is shown worse than), the round's best wherever that one shows it."""
        if self.versus_best[group] <= alpha:
            return self.versus_best[group], self.best
        return self.p_values[group], self.than[group]


def ranked(values: dict[str, list[float]], sign: float) -> list[str]:
    """The configurations best mean first (a NaN mean last; ties to the group key that sorts first)."""
    means = {g: float(np.mean(v)) if len(v) else math.nan for g, v in values.items()}
    return _ranked(list(values), [means[g] for g in values], sign)


def _ranked(keys: list[str], means, sign: float) -> list[str]:
    order = {g: rank(sign * m if not math.isnan(m) else -math.inf, g) for g, m in zip(keys, map(float, means))}
    return sorted(keys, key=order.__getitem__)


def verdict(values: dict[str, list[float]], sign: float) -> Verdict:
    """Judge a round (``values``: each configuration's values on the same matched repeats): every
    ordered pair (i, j) gets the one-sided paired test that i is worse than j, Holm over all
    k·(k − 1) of them; a configuration's p-value is its smallest adjusted one."""
    matrix = np.asarray(list(values.values()), dtype=float)
    position = {g: i for i, g in enumerate(values)}
    keys = _ranked(list(values), matrix.mean(axis=1), sign)
    matrix = matrix[[position[g] for g in keys]]
    k = len(keys)
    adjusted = np.full((k, k), np.inf)
    if k > 1:
        off = ~np.eye(k, dtype=bool)
        adjusted[off] = holm_array(pairwise_p(matrix, sign)[off])
    j = np.argmin(adjusted, axis=1)  # the first of equal ones: the better ranked, the round's best first
    p_values = {keys[i]: float(adjusted[i, j[i]]) for i in range(1, k)}
    return Verdict(
        keys[0],
        p_values,
        {keys[i]: keys[j[i]] for i in range(1, k)},
        {keys[i]: float(adjusted[i, 0]) for i in range(1, k)},
    )


def judge(values: dict[str, list[float]], sign: float) -> tuple[str, dict[str, float]]:
    """The round's best configuration and every other one's adjusted p-value (``verdict``)."""
    found = verdict(values, sign)
    return found.best, found.p_values


def judge_one(
    values: dict[str, list[float]], candidate: str, sign: float, alpha: float | None = None
) -> tuple[float, str | None]:
    """One configuration judged against the others (a study's race: only its decision is
    applied): the one-sided paired tests that ``candidate`` is worse than each other one, Holm
    over those k − 1 (for "any rejected": Bonferroni on the smallest). Returns (that adjusted
    p-value, the configuration it is against; None where there is none); with ``alpha``, the
    best mean's test wherever that one is at most ``alpha`` too (as ``Verdict.reason``)."""
    others = [g for g in ranked(values, sign) if g != candidate]
    if not others:
        return 1.0, None
    rows = np.asarray([values[g] for g in others], dtype=float)
    if rows.shape[1] < 2:
        return 1.0, others[0]
    p = np.minimum(1.0, len(others) * _one_sided(sign * (np.asarray(values[candidate], dtype=float)[None, :] - rows).T))
    j = 0 if alpha is not None and p[0] <= alpha else int(np.argmin(p))
    return float(p[j]), others[j]


@dataclass
class Entry:
    """One trial the race may run: its repeat group, its repeat's id (data variant and seed:
    the same ids for every configuration of a setting) and its setting."""

    group: str
    repeat: str
    setting: str


def repeat_id(identity) -> str:
    """A repeat's id, the same for every configuration of a setting: its repeat axes and seed."""
    axes = [f"{k}={v}" for k, v in identity.variant.repeat.items()]
    return " ".join([*axes, f"seed={identity.seed}"])


def entries_of(trials: list[dict], static: SweepStatic) -> list[Entry]:
    """The race's entries of a grid's trials (``Sweep.grid_trials``), in their order."""
    out = []
    for trial in trials:
        identity = identify({"hp": trial}, static)
        out.append(Entry(group=identity.group, repeat=repeat_id(identity), setting=identity.setting))
    return out


class Race:
    """The race over a sweep's trials (``entries``: every trial in the order the sweep lists
    them, a configuration's repeats in repeat order) with its journal (``race.json``'s content,
    changed in place: ``contrasweep.folder.race_record``)."""

    def __init__(self, entries: list[Entry], min_repeats: int, alpha: float, sign: float, journal: dict | None = None):
        self.min_repeats, self.alpha, self.sign = min_repeats, alpha, sign
        self.journal = journal if journal is not None else new_journal()
        self.touched: list[tuple[str, str | tuple[str, str]]] = []  # (section, key) changed since the journal was saved
        self.settings: dict[str, dict[str, list[str]]] = {}  # setting -> group -> repeat ids in order
        for e in entries:
            self.settings.setdefault(e.setting, {}).setdefault(e.group, []).append(e.repeat)

    # -- what the journal says ---------------------------------------------------------
    def ended(self, group: str) -> dict[str, dict]:
        return self.journal["repeats"].get(group, {})

    def out(self) -> dict[str, dict]:
        return self.journal["out"]

    def target(self, setting: str) -> int:
        """Repeats every configuration still racing in ``setting`` runs before its next round (all
        of them where one configuration is left: the race there is over)."""
        racing = self.racing(setting)
        if len(racing) <= 1:
            return max((len(self.settings[setting][g]) for g in racing), default=0)
        return self.journal["targets"].get(setting, self.min_repeats)

    def racing(self, setting: str) -> list[str]:
        return [g for g in self.settings[setting] if g not in self.out()]

    # -- events ------------------------------------------------------------------------
    def record(self, group: str, repeat: str, value: float | None, outcome: str) -> bool:
        """A repeat ended (``outcome``: complete, stopped or failed). False where it was
        recorded already (a replay after a restore)."""
        ended = self.journal["repeats"].setdefault(group, {})
        if repeat in ended:
            return False
        ended[repeat] = {"value": value, "outcome": outcome}
        self.touched.append(("repeats", (group, repeat)))
        if outcome != "complete" and group not in self.out():
            self.out()[group] = {"outcome": outcome, "round": len(ended)}
            self.touched.append(("out", group))
        return True

    def advance(self) -> list[str]:
        """Judge every round that is due; returns the groups eliminated now."""
        gone = []
        for setting in self.settings:
            while True:
                step = self._round(setting)
                if step is None:
                    break
                gone += step
        return gone

    def _round(self, setting: str) -> list[str] | None:
        """Judge ``setting``'s current round if every racing configuration has its repeats
        (None where it is not due or the race there is over)."""
        racing, t = self.racing(setting), self.target(setting)
        sizes = self.settings[setting]
        longest = max((len(sizes[g]) for g in racing), default=0)
        if not racing or t >= longest or any(len(self.ended(g)) < min(t, len(sizes[g])) for g in racing):
            return None
        gone = []
        if len(racing) > 1:
            matched = [r for r in sizes[racing[0]] if all(r in self.ended(g) for g in racing)][:t]
            values = {g: [self.ended(g)[r]["value"] for r in matched] for g in racing}
            found = verdict(values, self.sign)
            for group, p in found.p_values.items():
                if p <= self.alpha:
                    p, than = found.reason(group, self.alpha)  # "best": the one it is shown worse than
                    self.out()[group] = {"outcome": ELIMINATED, "round": t, "p_value": p, "best": than}
                    self.touched.append(("out", group))
                    gone.append(group)
            self.journal["rounds"].setdefault(
                setting, []
            ).append(  # an older journal's rounds lack "than": never read back
                {"round": t, "best": found.best, "p_values": found.p_values, "than": found.than, "eliminated": gone}
            )
            self.touched.append(("rounds", setting))
        left = self.racing(setting)
        self.journal["targets"][setting] = t + 1 if len(left) > 1 else max(len(sizes[g]) for g in left)
        self.touched.append(("targets", setting))
        return gone

    # -- what runs next ----------------------------------------------------------------
    def next(self, busy: set[tuple[str, str]]) -> tuple[str, str] | None:
        """The next (group, repeat) to run, none of ``busy`` (running now): the configurations
        of each setting in order, each up to its round's repeats."""
        for setting, groups in self.settings.items():
            t = self.target(setting)
            for group in self.racing(setting):
                ended = self.ended(group)
                started = [r for r in groups[group] if r in ended or (group, r) in busy]
                if len(started) >= min(t, len(groups[group])):
                    continue
                for repeat in groups[group]:
                    if repeat not in ended and (group, repeat) not in busy:
                        return group, repeat
        return None

    def needed(self) -> int:
        """Trials the race may still run (at most): every repeat not yet ended of the
        configurations still racing (the running ones included)."""
        return sum(
            len([r for r in repeats if r not in self.ended(g)])
            for groups in self.settings.values()
            for g, repeats in groups.items()
            if g not in self.out()
        )

    def fewest(self) -> int:
        """The fewest trials the race can run: every configuration its first round, where all
        but one then leave (the one left runs every repeat)."""
        out = 0
        for groups in self.settings.values():
            sizes = sorted(len(r) for r in groups.values())
            first = [min(self.min_repeats, n) for n in sizes]
            out += sum(first) - first[-1] + sizes[-1] if len(sizes) > 1 else sizes[-1]
        return out

    def total(self) -> int:
        """Every trial of the sweep without racing."""
        return sum(len(r) for groups in self.settings.values() for r in groups.values())
