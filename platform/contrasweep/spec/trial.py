"""A trial's plan decoded from its Tune config: its hyperparameters, its data variant and its
training seed (docs/architecture.md, "The spec format"). A leaf: imports neither Ray nor torch,
so the tracker, the identity of a trial and the searchers read trials without the executor.

Tune holds a trial's config in one of two forms, kept as they are because sweeps saved in them
resume: a grid trial is ``{"hp": {..., "__data__": variant, "seed": s}}`` (one value of Tune's
``grid_search``), a searcher's trial is flat (the suggestion's values, ``__suggestion__``,
``__trial_index__``). ``plan_of`` turns either into the one ``TrialPlan`` every reader uses.

A trial's epochs (``TrialPlan.epochs``) are resolved here once, with the loop's own rule
(``trainables.params.epochs_for``: ``max_steps`` optimiser steps over its variant's training
rows, ``SweepStatic.variants[i].sizes``), so the driver (group ASHA, the tracker's outcome and
progress, ``plan``) and the loop count the same epochs.

May import: ``trainables.params`` (torch-free); ``contrasweep.spec.static`` for its types only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainables.params import epochs_for

if TYPE_CHECKING:
    from contrasweep.spec.static import SweepStatic

TRIAL_INDEX = "__trial_index__"  # which repeat of a searcher's suggestion (contrasweep.search.study_search)
SUGGESTION = "__suggestion__"  # which suggestion: the Optuna study's trial number (contrasweep.search.study_search)
DATA_KEY = "__data__"  # a grid trial's data variant (contrasweep.spec.sweep.DATA_KEY)


def trial_hp(config: dict[str, Any], static: SweepStatic) -> dict[str, Any]:
    """The trial's hyperparameters: grid trials carry them under "hp", searcher trials flat.
    A searcher trial's repeat index (``contrasweep.search.study_search``) counts seeds fastest, then variants."""
    hp = {k: v for k, v in (config["hp"] if "hp" in config else config).items() if not k.startswith("__")}
    if TRIAL_INDEX in config:
        hp["seed"] = static.seeds[config[TRIAL_INDEX] % len(static.seeds)]
    hp.setdefault("seed", static.seeds[0])
    # Torch threads per trial = the CPUs the trial (or each worker) holds: 2 concurrent
    # trials on 2 cores must not each start 2 threads.
    hp.setdefault("torch_threads", static.resources.threads)
    return hp


def trial_variant(config: dict[str, Any], static: SweepStatic) -> int:
    """Which data variant (``contrasweep.spec.axes``) the trial trains on."""
    if "hp" in config:
        return int(config["hp"].get(DATA_KEY, 0))
    if TRIAL_INDEX in config:
        return (config[TRIAL_INDEX] // len(static.seeds)) % len(static.variants)
    return 0


@dataclass(frozen=True)
class TrialPlan:
    """What one trial trains: ``hp`` (every value it sets, its training seed and torch threads
    included), the index of its data variant, the searcher's suggestion it repeats (None for a
    grid trial), and the epochs it trains when not stopped: ``epochs``, or with ``max_steps``
    those its variant's training rows give (``trainables.params.epochs_for``); None where it
    sets ``max_steps`` and the rows are unknown (a ``SweepStatic`` built without prepared data:
    ``ran_every_epoch`` then judges a trial by the ``train/steps`` it reported)."""

    hp: dict
    variant: int
    suggestion: int | None = None
    epochs: int | None = None

    @property
    def seed(self) -> int:
        return int(self.hp["seed"])


def trial_epochs(hp: dict[str, Any], train_rows: int | None) -> int | None:
    """The epochs a trial trains when not stopped (``TrialPlan.epochs``); None where ``max_steps``
    needs training rows nobody counted."""
    if train_rows is None and int(hp.get("max_steps", 0) or 0) > 0:
        return None
    return epochs_for(hp, train_rows or 0)


def plan_of(config: dict[str, Any], static: SweepStatic) -> TrialPlan:
    """A Tune trial config (either form) and the sweep's fixed part → the trial's plan."""
    hp, variant = trial_hp(config, static), trial_variant(config, static)
    rows = static.variant(variant).sizes.get("train")
    return TrialPlan(hp, variant, config.get(SUGGESTION), trial_epochs(hp, rows))
