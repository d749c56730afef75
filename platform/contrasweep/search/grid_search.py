"""The ``grid`` searcher: the spec's exact grid (its ``grid`` section, or its blocks) × data
variants × training seeds, the paper's reported point first, on Tune's own generator
(``OptunaSearch`` refuses ``tune.grid_search``).

How it resumes: Tune's generator state is in Tune's experiment state; a trial the sweep's
record says finished is ended by the schedulers' ``settle`` (``group_asha.MovableFIFO``),
never trained again. What it stores: nothing of its own.

May import: ``contrasweep.spec``; Ray Tune (inside its methods).
"""

from __future__ import annotations

from collections import Counter

from contrasweep.spec.identity import GroupKey
from contrasweep.spec.static import SweepStatic


class GridSearch:
    name = "grid"

    def param_space(self, sweep) -> dict:
        """Every trial as one value of Tune's ``grid_search`` (its hyperparameters, ``__data__``, seed)."""
        from ray import tune

        return {"hp": tune.grid_search(sweep.grid_trials())}

    def search_alg(self, sweep, sweep_dir, live: int):
        from ray.tune.search.basic_variant import BasicVariantGenerator

        return BasicVariantGenerator(max_concurrent=live)

    def num_samples(self, sweep) -> int:
        return 1  # the grid is the samples

    def total_trials(self, sweep) -> int:
        return len(sweep.grid_trials())

    def candidate_configs(self, sweep) -> list[tuple[dict, str]]:
        """The configurations a method's ``check`` judges before the sweep: every grid point."""
        return [(config, "") for config in sweep.grid_configs()]

    def group_sizes(self, sweep) -> dict[str, int]:
        """Trials per repeat group, counted on the grid (a ``--smoke-test`` grid may cut a group short)."""
        key = GroupKey(SweepStatic.of(sweep))
        return dict(Counter(key({"hp": trial}) for trial in sweep.grid_trials()))
