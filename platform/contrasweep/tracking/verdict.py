"""Did a configuration learn? Its repeats against the chance level of their data
(``contrasweep.data.chance``) on the sweep's metric (issue 55).

The test: each repeat's value of the selection key (``best/val/<metric>``, its best validation
epoch) minus the chance level of its own data variant (a few-shot setting's repeats train on
different samples), signed so that better is positive. The configuration **learned** where both
(1) a one-sided one-sample t-test of those differences (scipy's ``ttest_1samp``,
``alternative="greater"``) rejects at ``alpha`` (``evaluation.alpha``, default 0.05; one repeat,
or equal differences: above the level), and (2) their mean exceeds what one evaluation of the
validation split shows by luck, ``z(1 - alpha)`` × the metric's noise at the level on that many
rows (``contrasweep.data.chance.noise``), at ``z(1 - alpha / epochs)`` for the best of its epochs.
Otherwise it **did not learn**: it is not
distinguishable from a predictor that never read a text. Why (2): ``judge``.

The verdict is kept in the sweep's record (``tracking.json``, ``verdicts``: the summary and
``list`` read it there) and tagged on the configuration run (``contrasweep.learned``: ``yes`` or
``no``; ``contrasweep.learned.p_value``; metric ``chance/<selection key>``).

May import: numpy, scipy (inside ``judge``: the driver only, when a repeat group closes),
``contrasweep.data.chance``, ``contrasweep.spec.identity``, ``contrasweep.tracking.rows``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from contrasweep.data.chance import level_of
from contrasweep.data.chance import noise as evaluation_noise
from contrasweep.spec.identity import setting_label
from contrasweep.tracking.rows import slug

LEARNED_TAG = "contrasweep.learned"  # "yes" | "no" on a configuration run
P_VALUE_TAG = "contrasweep.learned.p_value"
CHANCE_PREFIX = "chance/"  # chance/<metric>: the level a run or the sweep run is compared with
DEFAULT_ALPHA = 0.05
SPLIT_OF = {"val": "validation", "test": "test"}  # a metric's prefix -> the split it is measured on


@dataclass(frozen=True)
class Verdict:
    learned: bool
    level: float  # the chance level: the mean over the repeats' data variants
    mean: float  # the repeats' mean value
    p_value: float  # NaN where there was no spread to test
    n: int
    steps: int | None = None  # the optimiser steps each repeat took (the most of them), where reported
    margin: float = 0.0  # what the evaluation split's size lets a model that learned nothing score above the level

    def record(self) -> dict:
        """As ``tracking.json`` keeps it (JSON: no NaN)."""
        out = asdict(self)
        out["p_value"] = None if math.isnan(self.p_value) else self.p_value
        return out

    @classmethod
    def of(cls, data: dict) -> Verdict:
        return cls(**{**data, "p_value": math.nan if data.get("p_value") is None else data["p_value"]})

    def text(self) -> str:
        """``within 0.031 of it, the validation split's noise; p=0.24 over 4 repeats``."""
        over = f"{self.n} repeat{'' if self.n == 1 else 's'}"
        out = over if math.isnan(self.p_value) else f"p={self.p_value:.2g} over {over}"
        if abs(self.mean - self.level) <= self.margin:
            out = f"within {self.margin:.3f} of it, the evaluation split's noise; {out}"
        return out


def judge(
    values: list[float],
    levels: list[float | None],
    mode: str,
    alpha: float = DEFAULT_ALPHA,
    steps: int | None = None,
    noise: list[float] | None = None,
    looks: int = 1,
) -> Verdict | None:
    """``values``: each repeat's value; ``levels``: the chance level of each repeat's data
    (None: the metric has none, and there is no verdict); ``noise``: each repeat's evaluation
    noise at that level (``contrasweep.data.chance.noise``: its validation split's size);
    ``looks``: the evaluations each value is the best of (its epochs, for ``best/val/...``).

    Learned = both (1) the one-sided t-test over the repeats rejects at ``alpha`` (one repeat, or
    equal margins: above the level), and (2) the mean margin exceeds what the best of ``looks``
    evaluations of that split shows by luck, ``z(1 - alpha / looks)`` × the repeats' mean noise
    (a union bound over the epochs). (2) is what a t-test over repeats cannot see: repeats that
    all predict one class differ by almost nothing (issue 55's CE at N = 20: 0.2365 ± 0.0019
    against 0.230 passes (1) with p = 0.003, a third of a binomial sd, 0.019 on 500 rows, above a
    single-class predictor), and each repeat's best epoch on a small validation split is lifted
    by luck, a bias that averaging repeats does not remove (tweet sentiment at k = 10: 0.539 ±
    0.039 on 30 validation rows against 0.333, while its test accuracy, 0.404, is under the test
    split's majority share, 0.424): the noise is taken as every repeat's, not divided among them."""
    rows = [
        (float(v), float(c), float(e))
        for v, c, e in zip(values, levels, noise or [0.0] * len(values))
        if c is not None and v is not None and not math.isnan(v)
    ]
    if not rows:
        return None
    sign = 1.0 if mode == "max" else -1.0
    differences = np.asarray([sign * (v - c) for v, c, _ in rows])
    mean, level = float(np.mean([v for v, _, _ in rows])), float(np.mean([c for _, c, _ in rows]))
    from scipy import stats  # the driver, once a group closes: no trial process imports it

    margin = float(stats.norm.ppf(1.0 - alpha / max(int(looks), 1)) * np.mean([e for _, _, e in rows]))
    beyond = bool(differences.mean() > margin)
    if len(rows) == 1 or np.ptp(differences) == 0:
        return Verdict(bool(differences[0] > 0) and beyond, level, mean, math.nan, len(rows), steps, margin)
    p_value = float(stats.ttest_1samp(differences, 0.0, alternative="greater").pvalue)
    return Verdict(p_value <= alpha and beyond, level, mean, p_value, len(rows), steps, margin)


def judge_repeats(metrics: list[dict], variants: list, key: str, mode: str, alpha: float) -> Verdict | None:
    """A group's verdict from each repeat's final metrics and its data variant
    (``VariantStatic``: its chance levels and split sizes); ``key``: the selection key
    (``best/val/accuracy``). Variants without chance levels (a record from before them): no verdict."""
    steps = [int(m["train/steps"]) for m in metrics if "train/steps" in m]
    levels = [level_of(getattr(v, "chance", {}), key) for v in variants]
    split = SPLIT_OF.get(key.removeprefix("best/").split("/", 1)[0], "validation")
    noise = [
        evaluation_noise(key, c, v.sizes.get(split, 0), v.num_labels or 1) if c is not None else 0.0
        for c, v in zip(levels, variants)
    ]
    # the validations it is the best of (``evaluations``; a trial before eval_every: one an epoch)
    looks = max([int(m.get("evaluations", m.get("epoch", 1))) for m in metrics] + [1]) if key.startswith("best/") else 1
    return judge(
        [m.get(key, math.nan) for m in metrics], levels, mode, alpha, max(steps) if steps else None, noise, looks
    )


def sweep_chance(static) -> dict[str, float]:
    """The sweep run's chance levels: ``chance/<metric>``, per setting ``chance/<setting>/<metric>``
    (as ``best_config/``), each the mean over the setting's data variants (a few-shot setting's
    repeat samples each have their own)."""
    by_setting: dict[str, list[dict]] = {}
    for variant in static.variants:
        by_setting.setdefault(setting_label(variant), []).append(getattr(variant, "chance", {}))
    out = {}
    for setting, found in by_setting.items():
        prefix = CHANCE_PREFIX + (f"{slug(setting)}/" if setting else "")
        for key in dict.fromkeys(k for levels in found for k in levels):
            values = [levels[key] for levels in found if key in levels]
            out[prefix + key] = float(np.mean(values))
    return out


def not_learned_text(verdict: Verdict, metric: str) -> str:
    """``best/val/accuracy 0.2330 against chance 0.2300 (p=0.24 over 4 repeats; 20 optimiser steps)``."""
    steps = "" if verdict.steps is None else f"; {verdict.steps} optimiser step{'' if verdict.steps == 1 else 's'}"
    return f"{metric} {verdict.mean:.4f} against chance {verdict.level:.4f} ({verdict.text()}{steps})"
