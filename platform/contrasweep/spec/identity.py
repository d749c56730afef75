"""Who a trial is: its configuration (the hyperparameters it shares with its repeats), its
data setting and repeat (``contrasweep.spec.axes``), its training seed, and the readable name and
tags it carries in MLflow (``lacon τ=0.1 λ=0.5 · k=20 split=3 seed=1``).

A configuration's repeats are the trials with the same ``config`` key in the same ``setting``;
aggregates and selection group by exactly that pair (``group``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from contrasweep.spec.axes import short_value
from contrasweep.spec.names import hp_values
from contrasweep.spec.static import SweepStatic, VariantStatic
from contrasweep.spec.trial import DATA_KEY, SUGGESTION, TrialPlan, plan_of
from trainables.user_methods import short_name

# How repeat axes read in a run name.
AXIS_NAMES = {"seed": "split", "split_seed": "split_seed"}


@dataclass(frozen=True)
class TrialIdentity:
    hp: dict  # every hyperparameter the trial sets (seed included)
    variant: VariantStatic  # the data variant it trains on
    seed: int
    config: str  # key of the configuration: the hyperparameters without the seed
    setting: str  # the setting's label ("" when the sweep varies no setting axis)
    suggestion: int | None = None  # a searcher's suggestion (the Optuna study's trial number)
    plan: TrialPlan | None = None  # the decoded Tune config it came from (torch threads included)

    @property
    def group(self) -> str:
        """The repeat group: one configuration in one setting."""
        return group_of(self.config, self.setting)


def group_of(config: str, setting: str) -> str:
    """The repeat group of configuration key ``config`` in the setting labelled ``setting``."""
    return key_of({"config": config, "setting": setting})


def setting_label(variant: VariantStatic) -> str:
    """``k=20 n_total=100``: the setting axes' values of a data variant ("" for none)."""
    return " ".join(f"{k}={short_value(v)}" for k, v in variant.setting.items())


def key_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def identify(config: dict, static: SweepStatic) -> TrialIdentity:
    plan = plan_of(config, static)
    hp = {k: v for k, v in plan.hp.items() if k != "torch_threads"}  # threads: a resource, not a hyperparameter
    variant = static.variants[plan.variant]
    setting = setting_label(variant)
    shared = {k: v for k, v in hp.items() if k != "seed"}
    if (
        plan.suggestion is not None
    ):  # a searcher's suggestion is its own configuration, even where two draw the same values
        shared[SUGGESTION] = plan.suggestion
    return TrialIdentity(
        hp=hp,
        variant=variant,
        seed=plan.seed,
        config=key_of(shared),
        setting=setting,
        suggestion=plan.suggestion,
        plan=plan,
    )


def run_name(identity: TrialIdentity, static: SweepStatic) -> str:
    """``lacon τ=0.1 λ=0.5 · k=20 split=3 seed=1``: the method, the hyperparameters that vary
    between configurations, the data axes, the training seed (the reported point: ``_described``)."""
    data = [f"{k}={short_value(v)}" for k, v in identity.variant.setting.items()]
    data += [f"{AXIS_NAMES.get(k, k)}={v}" for k, v in identity.variant.repeat.items()]
    return _described(identity, static) + " · " + " ".join(data + [f"seed={identity.seed}"])


def config_run_name(identity: TrialIdentity, static: SweepStatic) -> str:
    """``lacon τ=0.1 λ=0.5 · k=20``: a configuration in one setting (its repeats' runs nest under it)."""
    data = [f"{k}={short_value(v)}" for k, v in identity.variant.setting.items()]
    return _described(identity, static) + (" · " + " ".join(data) if data else "")


def _described(identity: TrialIdentity, static: SweepStatic) -> str:
    """The method and the varied hyperparameters' values. The paper's reported point of a grid
    (``reported``: ``Sweep.outside_reported``, its configuration and the defaults it trains with
    where it sets no value) is named "(reported)" with every varied value, the defaults too:
    where it lies outside the user's grid, its name says how it differs. Hyperparameters show by
    their display names (``contrasweep.spec.names``: ``τ`` for a declared symbol)."""
    method, varied, reported = static.method, static.varied, static.reported
    hp = identity.hp
    mark = ""
    if reported and {k: v for k, v in hp.items() if k != "seed"} == reported["config"]:
        hp, mark = {**reported["defaults"], **hp}, " (reported)"
    values = hp_values(hp, method, varied)
    return short_name(method) + (" " + values if values else "") + mark


def tags(identity: TrialIdentity, method: str) -> dict[str, str]:
    """Tags the MLflow UI can group and filter trial runs by."""
    data = identity.variant.data
    out = {
        "contrasweep.method": method,
        "contrasweep.dataset": short_value(data.get("source", "")),
        "contrasweep.protocol": str(data.get("protocol", data.get("task", "full"))),
        "contrasweep.seed": str(identity.seed),
        "contrasweep.config": identity.config,
        "contrasweep.setting": identity.setting,
        "contrasweep.group": identity.group,
    }
    if identity.suggestion is not None:
        out["contrasweep.suggestion"] = str(identity.suggestion)
    for key, tag in (
        ("k", "k"),
        ("n_total", "n_total"),
        ("rho", "rho"),
        ("num_classes", "num_classes"),
        ("seed", "data_seed"),
        ("split_seed", "split_seed"),
    ):
        if data.get(key) is not None:
            out[f"contrasweep.{tag}"] = str(data[key])
    return out


def reported_config(sweep, static: SweepStatic) -> str | None:
    """The configuration key of a grid's reported point (it runs first: ``Sweep.grid_points``),
    as ``identify`` gives its trials; None without one, or for a searcher, whose suggestions are
    configurations of their own."""
    if not sweep.has_reported_point:
        return None
    first = {**sweep.grid_points()[0], DATA_KEY: 0, "seed": static.seeds[0] if static.seeds else 0}
    return identify({"hp": first}, static).config


class GroupKey:
    """``config -> repeat group`` for a sweep's fixed part (picklable: the scheduler that
    holds it is saved with the Tuner)."""

    def __init__(self, static: SweepStatic):
        self.static = static

    def __call__(self, config: dict) -> str:
        return identify(config, self.static).group
