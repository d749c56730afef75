"""The seeds axis for searchers: each suggestion runs once per seed, the searcher is told the
mean over seeds. Ray's ``Repeater`` does this for one metric; Optuna's multi-objective mode
(NSGA-II over several metrics) needs the mean of every metric, so this subclass averages a
vector of metrics (NaN for a seed that reported nothing, as Repeater does)."""

from __future__ import annotations

import logging

import numpy as np
from ray.tune.search import Repeater

logger = logging.getLogger(__name__)


class SeedRepeater(Repeater):
    def _metrics(self) -> list[str]:
        metric = self.searcher.metric
        return list(metric) if isinstance(metric, (list, tuple)) else [metric]

    def on_trial_complete(self, trial_id: str, result: dict | None = None, **kwargs) -> None:
        if trial_id not in self._trial_id_to_group:
            logger.error("Trial %s not in a seed group; cannot report its score", trial_id)
            return
        group = self._trial_id_to_group[trial_id]
        result = result or {}
        # A tuple, not an array: the group tests `None in scores` with ==.
        group.report(trial_id, tuple(float(result.get(m, np.nan)) for m in self._metrics()))
        if group.finished_reporting():
            means = np.nanmean(np.array(group.scores(), dtype=float), axis=0)
            self.searcher.on_trial_complete(
                group.primary_trial_id, result=dict(zip(self._metrics(), means.tolist())), **kwargs
            )
