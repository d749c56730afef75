"""What a sweep optimises: a metric and whether larger or smaller is better (``sweep.metric``,
``sweep.mode``; a multi-objective sweep has one per metric). Every comparison of two values of
a metric goes through here, so that "better" means one thing in the tracker, the schedulers,
the searcher, the selection and the reports.

May import: nothing of the project.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

MODES = ("max", "min")


@dataclass(frozen=True)
class Objective:
    metric: str
    mode: str = "max"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}; allowed: {', '.join(MODES)}")

    @property
    def sign(self) -> float:
        """+1 where larger is better, -1 where smaller is: ``sign * value`` is then to be maximised."""
        return 1.0 if self.mode == "max" else -1.0

    @property
    def direction(self) -> str:
        """Optuna's word for it."""
        return "maximize" if self.sign > 0 else "minimize"

    def better(self, value: float, than: float | None) -> bool:
        """Whether ``value`` beats ``than``: anything beats None, a finite value beats a
        non-finite one, a non-finite value (NaN, infinite) beats nothing else (the trial's own
        rule, ``trainables.checkpointing.BestTracker``: a NaN first epoch is not the best for ever)."""
        if than is None:
            return True
        return math.isfinite(value) and (not math.isfinite(than) or self.sign * value > self.sign * than)

    def best(self, values: Iterable[float]) -> float:
        """The best finite value (the first value where none is finite)."""
        values = list(values)
        finite = [v for v in values if math.isfinite(v)]
        return max(finite, key=lambda v: self.sign * v) if finite else values[0]


def objectives(metrics: list[str], modes: list[str]) -> list[Objective]:
    return [Objective(m, mode) for m, mode in zip(metrics, modes)]
