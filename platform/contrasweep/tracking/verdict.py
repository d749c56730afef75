"""Did a configuration learn? Its repeats against the chance level of their data
(``contrasweep.data.chance``) on the sweep's metric (issue 55).

The test: each repeat's value of the selection key (``best/val/<metric>``, its best validation
epoch) minus the chance level of its own data variant (a few-shot setting's repeats train on
different samples, each with its own validation split), signed so that better is positive;
one-sided one-sample t-test that the mean difference is above 0 (scipy's ``ttest_1samp``,
``alternative="greater"``). The configuration **did not learn** where p > ``alpha``
(``evaluation.alpha``, default 0.05): its repeats are not distinguishable from a predictor that
never read a text. With one repeat, or repeats that all differ by the same amount, there is no
spread to test: it learned where it is above the level, and the p-value is left out.

The best validation epoch is the max over epochs of a noisy number, so a configuration at chance
scores a little above the level; the test over repeats, not one repeat's margin, is what
separates that from learning (issue 55's runs: 0.2330 ± 0.0075 over 4 repeats against 0.230).

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
from contrasweep.spec.identity import setting_label
from contrasweep.tracking.rows import slug

LEARNED_TAG = "contrasweep.learned"  # "yes" | "no" on a configuration run
P_VALUE_TAG = "contrasweep.learned.p_value"
CHANCE_PREFIX = "chance/"  # chance/<metric>: the level a run or the sweep run is compared with
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Verdict:
    learned: bool
    level: float  # the chance level: the mean over the repeats' data variants
    mean: float  # the repeats' mean value
    p_value: float  # NaN where there was no spread to test
    n: int
    steps: int | None = None  # the optimiser steps each repeat took (the most of them), where reported

    def record(self) -> dict:
        """As ``tracking.json`` keeps it (JSON: no NaN)."""
        out = asdict(self)
        out["p_value"] = None if math.isnan(self.p_value) else self.p_value
        return out

    @classmethod
    def of(cls, data: dict) -> Verdict:
        return cls(**{**data, "p_value": math.nan if data.get("p_value") is None else data["p_value"]})

    def text(self) -> str:
        """``p=0.24 over 4 repeats`` (``1 repeat`` where untested)."""
        over = f"{self.n} repeat{'' if self.n == 1 else 's'}"
        return over if math.isnan(self.p_value) else f"p={self.p_value:.2g} over {over}"


def judge(values: list[float], levels: list[float | None], mode: str, alpha: float = DEFAULT_ALPHA,
          steps: int | None = None) -> Verdict | None:
    """``values``: each repeat's value; ``levels``: the chance level of each repeat's data
    (None: the metric has none, and there is no verdict)."""
    pairs = [(float(v), float(c)) for v, c in zip(values, levels) if c is not None and v is not None and not math.isnan(v)]
    if not pairs:
        return None
    sign = 1.0 if mode == "max" else -1.0
    differences = np.asarray([sign * (v - c) for v, c in pairs])
    mean, level = float(np.mean([v for v, _ in pairs])), float(np.mean([c for _, c in pairs]))
    if len(pairs) == 1 or np.ptp(differences) == 0:
        return Verdict(bool(differences[0] > 0), level, mean, math.nan, len(pairs), steps)
    from scipy import stats  # the driver, once a group closes: no trial process imports it

    p_value = float(stats.ttest_1samp(differences, 0.0, alternative="greater").pvalue)
    return Verdict(p_value <= alpha, level, mean, p_value, len(pairs), steps)


def judge_repeats(metrics: list[dict], variant_levels: list[dict], key: str, mode: str, alpha: float) -> Verdict | None:
    """A group's verdict from each repeat's final metrics and its variant's chance levels
    (``VariantStatic.chance``); ``key``: the selection key (``best/val/accuracy``)."""
    steps = [int(m["train/steps"]) for m in metrics if "train/steps" in m]
    return judge([m.get(key, math.nan) for m in metrics], [level_of(c, key) for c in variant_levels], mode, alpha,
                 max(steps) if steps else None)


def sweep_chance(static) -> dict[str, float]:
    """The sweep run's chance levels: ``chance/<metric>``, per setting ``chance/<setting>/<metric>``
    (as ``best_config/``), each the mean over the setting's data variants (a few-shot setting's
    repeat samples each have their own)."""
    by_setting: dict[str, list[dict]] = {}
    for variant in static.variants:
        by_setting.setdefault(setting_label(variant), []).append(variant.chance)
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
