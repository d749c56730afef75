"""Racing over repeats (``sweep.racing``; docs/spec.md, "Racing"): which repeats a sweep still
runs, decided from the ones that ended. Pure: no Ray, no files (``race_search.RaceSearcher``
feeds it Tune's events and keeps its journal in ``race.json``).

**The race.** Per setting, every configuration runs its first ``min_repeats`` repeats (a
configuration's repeats are the sweep's matched repeats: data variants × training seeds, in the
same order for every configuration). Then, at each round ``r`` (every configuration still in
the race has ``r`` repeats), the round's best configuration is the one with the best mean over
those repeats, and each other one is compared with it on their matched repeats; a configuration
significantly worse leaves the race, the others run their next repeat. The race ends when one
configuration is left (it runs its remaining repeats, so that its mean and std are over all of
them, as without racing) or the repeats run out; the last round is not judged (no repeat is
left to save: selection decides).

**The test** (``paired_p``): one-sided paired t-test of the per-repeat differences against 0
(scipy's ``ttest_1samp``, ``alternative="less"`` on ``sign · (candidate − best)``). Why not a
rank test: with 3–5 repeats the exact Wilcoxon signed-rank test's smallest one-sided p-value is
1/2ⁿ (0.125, 0.0625, 0.031), so it cannot reach 0.05 with 3–4 repeats, and not after a
correction for several comparisons; a paired bootstrap has only nⁿ resamples (27 at n = 3). The
t-test assumes roughly normal differences; on a seed's accuracy over a few hundred validation
examples that is a reasonable approximation, and it is the usual test for matched seeds.
Differences that are all equal (to rounding) give no variance: all below 0 is a p of 0 (the t statistic's
limit), all 0 or above a p of 1.

**The correction** (``holm``): Holm's step-down over the round's comparisons (one per
configuration besides the best): the chance that a round eliminates any configuration that is
in truth no worse than the round's best is at most ``alpha``. Over ``L`` judged rounds the
chance of eliminating the true best is at most ``L · alpha`` (a union bound), under the test's
assumptions; the selection is only as sure as that.

Settings race apart. A configuration whose repeat the scheduler stopped (group ASHA) or that
failed for good leaves the race with that outcome, as it would leave the selection.

May import: numpy, scipy (inside ``paired_p``), ``contrasweep.tracking.aggregate`` (the
selection's tie rule), ``contrasweep.tracking.store`` (the outcome's word), ``contrasweep.folder.race_record`` (the journal's words),
``contrasweep.spec`` (a trial's repeat group and repeat).
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
    d = sign * (np.asarray(candidate, dtype=float) - np.asarray(best, dtype=float))
    if d.size < 2 or not np.all(np.isfinite(d)):
        return 1.0
    tolerance = 1e-12 * max(1.0, float(np.max(np.abs(d))))  # accuracies' rounding: 0.7 - 0.6 != 0.8 - 0.7
    if np.ptp(d) <= tolerance:
        return 0.0 if d.mean() < -tolerance else 1.0
    from scipy import stats  # the driver's race only: plan and the console never import it

    return float(stats.ttest_1samp(d, 0.0, alternative="less").pvalue)


def holm(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm's adjusted p-values: sorted ascending, the i-th (from 0) of m is
    ``max_{j ≤ i} min(1, (m − j) · p_j)``; reject where the adjusted value is at most alpha."""
    m = len(pvalues)
    out, running = {}, 0.0
    for j, (key, p) in enumerate(sorted(pvalues.items(), key=lambda kv: (kv[1], kv[0]))):
        running = max(running, min(1.0, (m - j) * p))
        out[key] = running
    return out


def judge(values: dict[str, list[float]], sign: float) -> tuple[str, dict[str, float]]:
    """The round's best configuration (best mean; ties to the group key that sorts first, as
    the selection breaks them) and every other one's Holm-adjusted p-value against it."""
    means = {g: float(np.mean(v)) for g, v in values.items()}
    best = min(values, key=lambda g: rank(sign * means[g] if not math.isnan(means[g]) else -math.inf, g))
    return best, holm({g: paired_p(v, values[best], sign) for g, v in values.items() if g != best})


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
            best, adjusted = judge(values, self.sign)
            for group, p in adjusted.items():
                if p <= self.alpha:
                    self.out()[group] = {"outcome": ELIMINATED, "round": t, "p_value": p, "best": best}
                    self.touched.append(("out", group))
                    gone.append(group)
            self.journal["rounds"].setdefault(setting, []).append(
                {"round": t, "best": best, "p_values": adjusted, "eliminated": gone})
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
        return sum(len([r for r in repeats if r not in self.ended(g)])
                   for groups in self.settings.values() for g, repeats in groups.items() if g not in self.out())

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
