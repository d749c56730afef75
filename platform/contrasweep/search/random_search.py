"""The ``random`` searcher: the ``optuna`` searcher with Optuna's ``RandomSampler`` (seeded by
the sweep's first seed); it resumes and stores as that one does (the sweep's study).

May import: ``contrasweep.search.optuna_search``; Optuna (inside its methods).
"""

from __future__ import annotations

from contrasweep.search.optuna_search import EXTENSION_SEED_STEP, OptunaSearch


class RandomSearch(OptunaSearch):
    name = "random"

    def sampler(self, sweep, warm: int = 0, extension: int = 0):
        """Random whatever it has seen: warm points (``warm``) change no suggestion; an
        extension of the sweep draws from a seed of its own."""
        import optuna

        return optuna.samplers.RandomSampler(seed=sweep.seeds[0] + EXTENSION_SEED_STEP * extension)
