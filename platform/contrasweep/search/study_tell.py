"""What the study of an ``optuna`` or ``random`` sweep is told of a suggestion's repeats
(``contrasweep.search.study_search.StudySearcher._tell``): each repeat's value of a metric
(``told``: what the selection ranks it by, its best epoch's value; a record written before
issue 69: its last epoch's) and their mean with the missing and NaN values left out
(``nanmean``).

May import: numpy.
"""

from __future__ import annotations

import math

import numpy as np


def told(record: dict, i: int) -> float | None:
    """What the study is told of one repeat for metric ``i``: what the selection ranks it by (its
    best epoch's value, ``aggregate.selection_key``). A record written before issue 69 has it for
    the first metric only (``selection``, since the race) or not at all: then the last epoch's value."""
    chosen = record.get("selections", [])[i : i + 1] or ([record.get("selection")] if i == 0 else [])
    if chosen and chosen[0] is not None:
        return chosen[0]
    values = record.get("values") or []
    return values[i] if i < len(values) else None


def number_or_none(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def nanmean(values: list) -> float:
    numbers = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(numbers)) if numbers else math.nan
