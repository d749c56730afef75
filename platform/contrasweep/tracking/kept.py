"""Which complete trials keep an MLflow model (``tracking.keep_models``; docs/architecture.md,
"What a sweep keeps").

Nobody reads a thousand models: what a user looks at is each setting's selected configuration,
the configurations on its sensitivity slices (what a report shows, ``aggregate.reported``) and
perhaps the next best few. So a complete trial's best weights stay in its state folder while
the sweep runs, and once Tune has ended (the test phase, ``contrasweep.runner.test_phase``, after
a run, a resume or an extension) the repeats of the reported configurations and of the
``keep_models`` best configurations of each setting (best mean validation value, ties as the
selection breaks them) get their MLflow model (``artifacts.Artifacts.log_checkpoint``).
``keep_models: all`` logs every complete trial's model as it ends, as before. The record
(``tracking.json``) marks each trial's model ``logged`` or ``missing`` (its weights were
removed when the sweep first finished: an extension selected it later), and keeps the kept
trial ids under ``tests.kept``; ``contrasweep.folder.cleanup`` then drops every state folder
whose weights MLflow holds (one copy) and those of trials not kept.

May import: ``contrasweep.tracking.aggregate``, ``artifacts``, ``pruning``, ``contrasweep.folder``;
``trainables`` (the state folder's readers).
"""

from __future__ import annotations

from contrasweep.folder.record import MODEL_LOGGED, MODEL_MISSING, TrackingState
from contrasweep.folder.relocation import here
from contrasweep.tracking.aggregate import Group, best_groups
from contrasweep.tracking.artifacts import Artifacts, logged_weights
from contrasweep.tracking.pruning import PRUNED
from trainables.checkpoints import best_of_trial


def kept_groups(chosen: list[Group], found: list[Group], metric: str, mode: str, keep_models: int | str) -> list[Group]:
    """The reported groups, then the ``keep_models`` best of each setting not among them."""
    out = {g.group: g for g in chosen}
    for group in best_groups(found, metric, mode, None if keep_models == "all" else int(keep_models)):
        out.setdefault(group.group, group)
    return list(out.values())


def keep_models(artifacts: Artifacts, state: TrackingState, groups: list[Group]) -> None:
    """Every complete repeat of ``groups`` with an MLflow model: logged from its state folder
    where it has none yet, marked missing where its weights are gone (the summary counts both)."""
    by_run = {e["run_id"]: (tid, e) for tid, e in state.trials.items()}
    kept = []
    for group in groups:
        for repeat in group.repeats:
            if repeat["outcome"] != "complete" or repeat["run_id"] not in by_run:
                continue
            tid, entry = by_run[repeat["run_id"]]
            if entry.get("weights") == PRUNED and entry.get("model") != MODEL_LOGGED:
                continue  # its weights went while the sweep ran (contrasweep.tracking.pruning)
            kept.append(tid)
            if entry.get("model") in (MODEL_LOGGED, MODEL_MISSING) or not entry.get("best_epoch"):
                continue
            if "model" not in entry and logged_weights(artifacts.client, entry["run_id"]):
                entry["model"] = MODEL_LOGGED  # a sweep that logged every model as its trials ended
            else:
                folder = entry.get("state_dir")
                best = best_of_trial(here(folder), entry["best_epoch"]) if folder else None
                if best is None:
                    entry["model"] = MODEL_MISSING
                else:
                    artifacts.log_checkpoint(entry, best)
                    entry["model"] = MODEL_LOGGED
            state.save_key("trials", tid)
    state.data.setdefault("tests", {})["kept"] = kept
    state.save()
