"""A trial's plan decoded from its Tune config: its hyperparameters, its data variant and its
training seed (docs/architecture.md, "The spec format"). A leaf: imports neither Ray nor torch,
so the tracker, the identity of a trial and the searchers read trials without the executor.
"""

from __future__ import annotations

from typing import Any

TRIAL_INDEX = "__trial_index__"  # which repeat of a searcher's suggestion (contrasweep.search.study_search)
SUGGESTION = "__suggestion__"  # which suggestion: the Optuna study's trial number (contrasweep.search.study_search)
DATA_KEY = "__data__"  # a grid trial's data variant (contrasweep.spec.sweep.DATA_KEY)


def trial_hp(config: dict[str, Any], static: dict[str, Any]) -> dict[str, Any]:
    """The trial's hyperparameters: grid trials carry them under "hp", searcher trials flat.
    A searcher trial's repeat index (``contrasweep.search.study_search``) counts seeds fastest, then variants."""
    hp = {k: v for k, v in (config["hp"] if "hp" in config else config).items() if not k.startswith("__")}
    if TRIAL_INDEX in config:
        hp["seed"] = static["seeds"][config[TRIAL_INDEX] % len(static["seeds"])]
    hp.setdefault("seed", static["seeds"][0])
    # Torch threads per trial = the CPUs the trial (or each worker) holds: 2 concurrent
    # trials on 2 cores must not each start 2 threads.
    hp.setdefault("torch_threads", max(1, int(static["resources"]["cpu"])))
    return hp


def trial_variant(config: dict[str, Any], static: dict[str, Any]) -> int:
    """Which data variant (``contrasweep.spec.axes``) the trial trains on."""
    n_variants = len(static.get("variants") or [None])
    if "hp" in config:
        return int(config["hp"].get(DATA_KEY, 0))
    if TRIAL_INDEX in config:
        return (config[TRIAL_INDEX] // len(static["seeds"])) % n_variants
    return 0
