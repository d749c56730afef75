"""Pareto fronts of configurations over several metrics (means over their repeats).

The non-dominated sort is Optuna's (``Study.best_trials`` of a multi-objective study holding
one trial per point), so no dominance loop is written here. Directions follow the sweep's
modes (``max`` / ``min`` per metric); a point with a NaN value in any metric is never on the
front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, cast

from contrasweep.spec.objective import Objective


def pareto_front(points: Sequence[Sequence[float]], modes: Sequence[str]) -> list[int]:
    """Indices of the non-dominated points (ascending). ``points[i][j]`` is metric j of point i."""
    import optuna
    from optuna.trial import create_trial

    if any(m not in ("max", "min") for m in modes):
        raise ValueError(f"modes {list(modes)}: allowed 'max' or 'min' per metric")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Objective.direction is "maximize" or "minimize" (typed str)
    study = optuna.create_study(
        directions=[cast(Literal["maximize", "minimize"], Objective("", m).direction) for m in modes]
    )
    index = []
    for i, point in enumerate(points):
        if len(point) != len(modes):
            raise ValueError(f"point {i} has {len(point)} values for {len(modes)} metrics")
        if any(math.isnan(float(v)) for v in point):
            continue
        study.add_trial(create_trial(values=[float(v) for v in point], params={}, distributions={}))
        index.append(i)
    return sorted(index[t.number] for t in study.best_trials)
