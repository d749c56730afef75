"""A sweep's fixed part (``SweepStatic``): what every trial of a sweep shares, typed and frozen
(docs/architecture.md, "Data flow"). Built once per driver from the ``Sweep``, the prepared data
and the sweep's folder (``SweepStatic.of``; ``contrasweep.runner.inputs.sweep_static`` gives it
what only the run knows), then handed as the same object to the executor (each trial's process),
the tracker, the repeat groups' key and ``plan``. Where no data is prepared (``plan``, the
console's summary, a searcher counting its groups), ``SweepStatic.of(sweep)`` gives the part a
trial's plan and identity read: seeds, resources, variants.

What Tune pickles: this object is what ``tune.with_parameters`` puts in Ray's object store for
the trial processes, and what the tracker and the repeat-group key carry in Tune's saved
experiment state (``tuner.pkl``): plain values only (no data, no clients, no open files).

May import: nothing of the project but ``contrasweep.spec.axes`` (a leaf, like
``contrasweep.spec.trial``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from contrasweep.spec.axes import expand


@dataclass(frozen=True)
class Resources:
    """What one trial holds: CPUs and a GPU share per worker, and its workers (``workers > 1``:
    a Ray Train run of that many ranks)."""

    cpu: float = 1.0
    gpu: float = 0.0
    workers: int = 1

    @classmethod
    def of(cls, resources: dict[str, Any]) -> Resources:
        return cls(
            cpu=float(resources.get("cpu", 1.0)),
            gpu=float(resources.get("gpu", 0.0)),
            workers=int(resources.get("workers", 1)),
        )

    @property
    def threads(self) -> int:
        """Torch threads per trial: the CPUs it (or each worker) holds, at least one."""
        return max(1, int(self.cpu))


@dataclass(frozen=True)
class VariantStatic:
    """One data variant (``contrasweep.spec.axes``) as trials and MLflow read it. The prepared
    data's facts (``num_labels`` onwards) are empty where nothing was prepared."""

    index: int = 0
    label: str = ""
    data: dict = field(default_factory=dict)  # the variant's data section (one value per axis)
    setting: dict = field(default_factory=dict)  # its setting axes' values (e.g. k=20)
    repeat: dict = field(default_factory=dict)  # its repeat axes' values (e.g. seed=3)
    num_labels: int | None = None
    cache_key: str = ""  # the tokenised cache's content key (contrasweep.data.cache)
    sizes: dict = field(default_factory=dict)  # rows per split
    # what a trial's MLflow model is described by (contrasweep.tracking.model_flavor)
    label_names: tuple[str, ...] = ()
    is_pair: bool = False
    # what a model that learned nothing scores, keyed as trials report it (``val/accuracy``: the
    # best of the predictors of contrasweep.data.chance); empty where nothing was prepared
    chance: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SweepStatic:
    """What every trial of one sweep shares."""

    method: str
    seeds: tuple[int, ...] = (0,)
    resources: Resources = Resources()
    variants: tuple[VariantStatic, ...] = (VariantStatic(),)  # at least one, in the order trials index them
    encoder: str = "default"  # the name (or path) the driver knows the encoder by
    pooling: str = "mean"
    max_length: int = 128
    metric: Any = "val/accuracy"  # the objective's first metric and its mode (contrasweep.spec.objective)
    mode: Any = "max"
    varied: tuple[str, ...] = ()  # hyperparameters that differ between configurations (run names show them)
    reported: dict | None = None  # a grid's reported point outside its own points (Sweep.outside_reported)
    reported_config: str | None = None  # a grid's reported point's configuration key (identity.reported_config)
    distributed: bool = False
    train_storage: str | None = None  # where a distributed trial's Train run keeps its state
    trial_storage: str | None = None  # where each repeat's state folder is, by configuration key (trials/)
    checkpoint_at: tuple[int, ...] = ()  # epochs the scheduler may pause at (a full resume state there)
    # evaluation.test: all = each complete trial evaluates the test split; reported = after
    # selection (contrasweep.runner.test_phase)
    tests_in_trials: bool = True
    # which complete trials keep an MLflow model (contrasweep.tracking.kept): "all", as they end,
    # or after selection what a report shows plus the best keep_models configurations per setting
    keep_models: int | str = "all"
    paths: dict = field(default_factory=dict)  # a shipped local file -> where a worker reads it
    alpha: float = 0.05  # evaluation.alpha: a configuration at chance level (contrasweep.tracking.verdict)

    @classmethod
    def of(
        cls,
        sweep,
        prepared: Sequence = (),
        folder=None,
        checkpoint_at: Sequence[int] = (),
        paths: dict[str, str] | None = None,
        tests_in_trials: bool = True,
        reported: dict | None = None,
    ) -> SweepStatic:
        """``sweep``: a ``Sweep``; ``prepared``: its ``PreparedData``, one per variant in
        ``sweep.variants`` order (none: the variants carry no data facts); ``folder``: its
        ``SweepDir`` (its storage locations); ``checkpoint_at``: the scheduler's pause epochs;
        ``tests_in_trials`` and ``reported``: what its searcher says of them
        (``contrasweep.search.base.Searcher``)."""
        variants = sweep.variants or expand(sweep.data)
        facts = [_prepared_facts(p) for p in prepared] or [{}] * len(variants)
        return cls(
            method=sweep.method,
            seeds=tuple(sweep.seeds),
            resources=Resources.of(sweep.resources),
            variants=tuple(
                VariantStatic(index=v.index, label=v.label, data=v.data, setting=v.setting, repeat=v.repeat, **f)
                for v, f in zip(variants, facts)
            ),
            encoder=sweep.encoder["name"],
            pooling=sweep.encoder["pooling"],
            max_length=sweep.encoder["max_length"],
            metric=sweep.objective.metric,
            mode=sweep.objective.mode,
            varied=tuple(sweep.varied),
            reported=reported,
            distributed=sweep.distributed,
            train_storage=folder.train_location if folder is not None else None,
            trial_storage=folder.trials_location if folder is not None else None,
            checkpoint_at=tuple(checkpoint_at),
            tests_in_trials=tests_in_trials,
            keep_models=sweep.keep_models,
            paths=dict(paths or {}),
            alpha=sweep.alpha,
        )

    def variant(self, index: int) -> VariantStatic:
        """The variant a trial or a record's entry names (the last one for an index past them)."""
        return self.variants[min(index, len(self.variants) - 1)]

    @property
    def train_rows(self) -> tuple[int, ...]:
        """Each variant's training rows, in order; () where a variant's are unknown (nothing prepared)."""
        rows = tuple(v.sizes.get("train") for v in self.variants)
        return () if any(r is None for r in rows) else cast(tuple[int, ...], rows)  # none is None there

    def moved(self, trial_storage: str) -> SweepStatic:
        """The same sweep whose trial folders are now under ``trial_storage`` (a moved folder)."""
        return replace(self, trial_storage=trial_storage)


def _prepared_facts(prepared) -> dict[str, Any]:
    return {
        "num_labels": prepared.num_labels,
        "cache_key": prepared.key,
        "sizes": {s: v["n"] for s, v in prepared.stats.items() if isinstance(v, dict) and "n" in v},
        "label_names": tuple(str(n) for n in prepared.label_names),
        "is_pair": prepared.is_pair,
        "chance": prepared.chance_levels,
    }
