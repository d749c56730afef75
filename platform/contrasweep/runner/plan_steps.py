"""``plan``'s optimiser steps: how many a trial of each setting trains, and the one-line warning
when a setting trains fewer than ``MIN_STEPS`` (issue 55).

A setting is a data variant's setting axes (``k=10``, ``k=20``: few-shot settings differ in
their training rows, so in their steps per epoch); a trial's steps are
``trainables.params.total_steps`` of its hyperparameters on its variant's training rows:
``max_steps`` where set, else epochs × ceil(train rows / batch_size). A searched ``epochs``,
``batch_size`` or ``max_steps`` is taken at its bounds, so a setting shows its fewest and most.

May import: ``contrasweep.spec``, ``contrasweep.search.registry``; ``trainables.params``.
"""

from __future__ import annotations

import itertools

from contrasweep.search.registry import trial_configs
from contrasweep.spec.identity import setting_label
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.trial import DATA_KEY, plan_of
from trainables.params import total_steps

MIN_STEPS = 100
"""The fewest optimiser steps per trial below which ``plan`` warns. Fine-tuning a BERT-style
encoder at the learning rates the papers use (1e-5 to 5e-5, AdamW, 6 % linear warm-up: LaCon
Sec. 3.1) moves a freshly initialised classifier off the majority class only after on the order
of a hundred steps; measured in this repository (issue 55), the few-shot spec at N = 20 (10
epochs × batch 16 = 20 steps) selected a configuration that predicts the majority class in every
repeat. 100 is that order of magnitude, not a tuned threshold: a setting below it is worth
another look (more epochs, a smaller batch, or ``fixed.max_steps``), not refused."""

BUDGET_KEYS = ("epochs", "batch_size", "max_steps")  # what a trial's steps depend on (with its rows)


def setting_steps(sweep, sizes: list[dict]) -> dict[str, list[int]]:
    """setting label ("" for a sweep without setting axes) -> [fewest, most] optimiser steps a
    trial of that setting trains; ``sizes``: rows per split of each data variant (``sweep_plan.sizes_of``)."""
    static = SweepStatic.of(sweep)
    searched = {key: _bounds(sweep.domains[key], key) for key in BUDGET_KEYS if key in sweep.domains}
    out: dict[str, list[int]] = {}
    for config in trial_configs(sweep):
        plan = plan_of(config, static)
        hp = {k: v for k, v in plan.hp.items() if k != DATA_KEY}
        rows = sizes[plan.variant]["train"]
        label = setting_label(static.variant(plan.variant))
        for values in itertools.product(*searched.values()):
            steps = total_steps({**hp, **dict(zip(searched, values))}, rows)
            fewest, most = out.get(label, (steps, steps))
            out[label] = [min(fewest, steps), max(most, steps)]
    return out


def _bounds(domain, key: str) -> list:
    """A searched budget key's values that bound a trial's steps: its smallest and largest, and
    for ``max_steps`` the smallest above 0 (0 hands the budget back to the epochs)."""
    values = sorted(domain.check_values())
    out = {values[0], values[-1], domain.largest()}
    if key == "max_steps":
        out |= {next((v for v in values if v > 0), values[-1])}
    return sorted(out)


def steps_line(found: dict[str, list[int]]) -> str | None:
    """``optimiser steps per trial: k=10 20, k=20 40-80``; None without settings counted."""
    if not found:
        return None
    return "optimiser steps per trial: " + ", ".join(
        f"{label + ' ' if label else ''}{_span(fewest, most)}" for label, (fewest, most) in found.items()
    )


def floor_warning(found: dict[str, list[int]]) -> str | None:
    """One line naming the settings whose trials may train fewer than ``MIN_STEPS`` steps, the
    floor, and what gives more; None where every setting reaches it."""
    low = {label: fewest for label, (fewest, _) in found.items() if fewest < MIN_STEPS}
    if not low:
        return None
    where = ", ".join(f"{n} ({label})" if label else str(n) for label, n in low.items())
    return (
        f"warning: trials train as few as {where} optimiser steps, under the floor of {MIN_STEPS} "
        "(MIN_STEPS: a fine-tuned encoder may not leave the majority class in fewer, issue 55); more steps: "
        f"more fixed.epochs, a smaller batch_size, or fixed.max_steps={MIN_STEPS} (the same steps in every setting)"
    )


def _span(fewest: int, most: int) -> str:
    return str(fewest) if fewest == most else f"{fewest}-{most}"
