"""Repeat groups of a sweep's trial runs: one row per configuration in one setting, with mean,
sample std and n of every final metric over its repeats, and the selection rule. The tracker
uses it to log a configuration run's aggregates and the parent's best configuration; reports
(``dashboards``) read the same groups back from MLflow.

Rules (docs/architecture.md, "Repeat groups and early stopping"):

* A group **counts** only when it is complete: every expected repeat
  (``contrasweep.group_size``) finished with ``contrasweep.outcome = complete``. A group that
  ASHA stopped, or one with a failed repeat, is listed but never selected and never averaged
  as if complete.
* **Selection**: per setting, the complete group with the best mean of ``best/<metric>`` (each
  repeat's best validation value) — grid, random and Optuna sweeps alike. Test metrics
  (``test/*``, taken by each repeat at its best validation epoch) are reported for the chosen
  group, never used to choose it.
* **Reported**: what a report shows test numbers for (``reported``): each setting's selected
  group and, for a grid, the complete groups on its sensitivity slices, equal to the selected
  one in every searched hyperparameter but one (LaCon Fig. 5). With ``evaluation.test:
  reported`` only these repeats evaluate the test split (``contrasweep.runner.test_phase``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contrasweep.spec.objective import Objective
from contrasweep.tracking.store import GROUP_TAG, OUTCOME_TAG, get_client, trial_runs
from trainables.params import LOOP_PARAMS


@dataclass
class Group:
    group: str
    setting: str
    config: str
    hp: dict[str, str]  # the configuration's hyperparameters (MLflow params, seed left out)
    size: int  # repeats expected
    info: dict[str, str] = field(default_factory=dict)  # method, dataset, protocol (the runs' tags)
    outcomes: dict[str, int] = field(default_factory=dict)  # complete / stopped / failed -> count
    repeats: list[dict[str, Any]] = field(default_factory=list)  # per run: run_id, seeds, metrics

    def add(self, outcome: str, repeat: dict[str, Any]) -> None:
        """One repeat (``{"metrics": {...}, ...}``) that ended with ``outcome``."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.repeats.append({**repeat, "outcome": outcome})

    @property
    def complete(self) -> bool:
        return self.outcomes.get("complete", 0) == self.size == len(self.repeats)

    def values(self, metric: str) -> list[float]:
        return [r["metrics"][metric] for r in self.repeats if metric in r["metrics"]]

    def stats(self, metric: str) -> dict[str, float]:
        """mean, std (sample, n − 1; 0 for one repeat) and n of ``metric`` over the repeats."""
        values = np.asarray(self.values(metric), dtype=float)
        if values.size == 0:
            return {"mean": math.nan, "std": math.nan, "n": 0}
        return {
            "mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if values.size > 1 else 0.0,
            "n": int(values.size),
        }


def groups(tracking_uri: str, parent_run_id: str) -> list[Group]:
    """The sweep's repeat groups read back from MLflow, in the order their first run was created."""
    return groups_of(trial_runs(get_client(tracking_uri), parent_run_id))


def config_hp(params: dict[str, str]) -> dict[str, str]:
    """A trial run's configuration as its MLflow params hold it: the ``hp.*`` values, seed left out."""
    return {k[3:]: v for k, v in params.items() if k.startswith("hp.") and k != "hp.seed"}


def groups_of(runs: list) -> list[Group]:
    """Trial runs (MLflow ``Run`` objects) grouped by their repeat group."""
    out: dict[str, Group] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        tags, params = run.data.tags, run.data.params
        hp = config_hp(params)
        key = tags[GROUP_TAG]
        group = out.setdefault(
            key,
            Group(
                group=key,
                setting=tags.get("contrasweep.setting", ""),
                config=tags["contrasweep.config"],
                hp=hp,
                size=int(tags["contrasweep.group_size"]),
                info={
                    k: tags[f"contrasweep.{k}"] for k in ("method", "dataset", "protocol") if f"contrasweep.{k}" in tags
                },
            ),
        )
        outcome = tags.get(OUTCOME_TAG) or ("complete" if run.info.status == "FINISHED" else "failed")
        group.add(
            outcome,
            {
                "run_id": run.info.run_id,
                "seed": params.get("hp.seed"),
                "data_seed": tags.get("contrasweep.data_seed"),
                "split_seed": tags.get("contrasweep.split_seed"),
                "metrics": dict(run.data.metrics),
            },
        )
    return list(out.values())


def ran_every_epoch(last_epoch: int, hp: dict, steps: float | None = None, epochs: int | None = None) -> bool:
    """Whether a trial that reached ``last_epoch`` trained its whole budget: its ``epochs``
    (``TrialPlan.epochs``, ``max_steps`` resolved; else ``hp["epochs"]``) or, for a ``max_steps``
    trial whose training rows nobody counted here, the optimiser ``steps`` it reported (``train/steps``)."""
    if epochs is not None:
        return int(last_epoch) >= int(epochs)
    max_steps = int(hp.get("max_steps", 0) or 0)
    if max_steps > 0:
        return steps is not None and int(steps) >= max_steps
    return int(last_epoch) >= int(hp.get("epochs", LOOP_PARAMS["epochs"].default))


def summary(group: Group) -> dict[str, float]:
    """``mean/<metric>``, ``std/<metric>`` for every final metric the repeats share, and ``n_repeats``."""
    names = set.intersection(*(set(r["metrics"]) for r in group.repeats)) if group.repeats else set()
    out: dict[str, float] = {"n_repeats": float(len(group.repeats))}
    for name in sorted(n for n in names if not n.startswith(("step/", "time/"))):
        stats = group.stats(name)
        out[f"mean/{name}"], out[f"std/{name}"] = stats["mean"], stats["std"]
    return {k: v for k, v in out.items() if not math.isnan(v)}


def selection_key(metric: str) -> str:
    """What a repeat is judged by: its best validation value (``best/val/...``, taken at its best
    epoch), or the final value of a metric that is not a validation one (``cost/train_s``)."""
    return f"best/{metric}" if metric.startswith("val/") else metric


def select(found: list[Group], metric: str, mode: str = "max") -> dict[str, Group]:
    """The best complete group of every setting by the mean of ``selection_key(metric)``.

    Equal means go to the group whose key (``contrasweep.group``, a hash of the configuration and
    setting) sorts first: the same results select the same configuration whatever order the
    trials started in (two concurrent trials start in either order; small validation sets tie).
    ``rank`` gives the order this implies."""
    best: dict[str, Group] = {}
    key = selection_key(metric)
    sign = Objective(metric, mode).sign
    for group in found:
        mean = group.stats(key)["mean"]
        if not group.complete or math.isnan(mean):
            continue
        current = best.get(group.setting)
        if current is None or rank(sign * mean, group.group) < rank(sign * current.stats(key)["mean"], current.group):
            best[group.setting] = group
    return best


def rank(score: float, group_key: str) -> tuple[float, str]:
    """Sort key of a group, best first: its signed mean (higher is better), then its group key."""
    return -score, group_key


def best_groups(found: list[Group], metric: str, mode: str, k: int | None) -> list[Group]:
    """The ``k`` best complete groups of every setting (all with ``k`` None) by the mean of
    ``selection_key(metric)``, best first within a setting, ties as ``select`` breaks them."""
    key, sign = selection_key(metric), Objective(metric, mode).sign
    by_setting: dict[str, list] = {}
    for group in found:
        mean = group.stats(key)["mean"]
        if group.complete and not math.isnan(mean):
            by_setting.setdefault(group.setting, []).append((rank(sign * mean, group.group), group))
    return [g for rows in by_setting.values() for _, g in sorted(rows, key=lambda row: row[0])[:k]]


def on_slice(group: Group, best: Group, hp: str, keys: list[str]) -> bool:
    """Whether ``group`` lies on ``best``'s sensitivity slice along ``hp``: complete, in the same
    setting, and equal to ``best`` in every key of ``keys`` (the searched hyperparameters) but ``hp``."""
    return (
        group.setting == best.setting
        and group.complete
        and hp in group.hp
        and all(group.hp.get(k) == best.hp.get(k) for k in keys if k not in (hp, "seed"))
    )


def reported(found: list[Group], metric: str, mode: str, keys: list[str], slices: bool = True) -> list[Group]:
    """The groups a report shows test numbers for: each setting's selected group and, with
    ``slices`` (grid sweeps), every group on one of its sensitivity slices (``on_slice`` along a
    key of ``keys``), in the order of ``found``."""
    chosen = select(found, metric, mode)
    picked = {id(g) for g in chosen.values()}
    if slices:
        for best in chosen.values():
            picked |= {id(g) for g in found for hp in keys if hp != "seed" and on_slice(g, best, hp, keys)}
    return [g for g in found if id(g) in picked]
