"""Which complete trials keep an MLflow model (``tracking.keep_models``; docs/architecture.md,
"What a sweep keeps").

Nobody reads a thousand models: what a user looks at is each setting's selected configuration,
the configurations on its sensitivity slices (what a report shows, ``aggregate.reported``) and
perhaps the next best few. So a complete trial's best weights stay in its state folder while
the sweep runs, and once Tune has ended (the test phase, ``contrasweep.run.test_phase``, after
a run, a resume or an extension) the repeats of the reported configurations and of the
``keep_models`` best configurations of each setting (best mean validation value, ties as the
selection breaks them) get their MLflow model (``artifacts.Artifacts.log_checkpoint``).
``keep_models: all`` logs every complete trial's model as it ends, as before. The record
(``tracking.json``) marks each trial's model ``logged`` or ``missing`` (its weights were
removed when the sweep first finished: an extension selected it later), and keeps the kept
trial ids under ``tests.kept``; ``contrasweep.folder.cleanup`` then drops every state folder
whose weights MLflow holds (one copy) and those of trials not kept.

May import: ``contrasweep.tracking.aggregate``, ``artifacts``, ``contrasweep.folder``;
``trainables`` (the state folder's readers).
"""

from __future__ import annotations

from contrasweep.folder.record import TrackingState
from contrasweep.folder.relocation import here
from contrasweep.tracking.aggregate import Group, best_groups
from contrasweep.tracking.artifacts import Artifacts, logged_weights

LOGGED, MISSING = "logged", "missing"


def kept_groups(chosen: list[Group], found: list[Group], metric: str, mode: str, keep_models: int | str) -> list[Group]:
    """The reported groups, then the ``keep_models`` best of each setting not among them."""
    out = {g.group: g for g in chosen}
    for group in best_groups(found, metric, mode, None if keep_models == "all" else int(keep_models)):
        out.setdefault(group.group, group)
    return list(out.values())


def keep_models(artifacts: Artifacts, state: TrackingState, groups: list[Group]) -> tuple[int, list[str]]:
    """Every complete repeat of ``groups`` with an MLflow model: logged from its state folder
    where it has none yet. Returns (models logged, names of the repeats whose weights are gone)."""
    from trainables.checkpoints import best_of_trial

    by_run = {e["run_id"]: (tid, e) for tid, e in state.trials.items()}
    logged, missing, kept = 0, [], []
    for group in groups:
        for repeat in group.repeats:
            if repeat["outcome"] != "complete" or repeat["run_id"] not in by_run:
                continue
            tid, entry = by_run[repeat["run_id"]]
            kept.append(tid)
            if entry.get("model") in (LOGGED, MISSING) or not entry.get("best_epoch"):
                continue
            if "model" not in entry and logged_weights(artifacts.client, entry["run_id"]):
                entry["model"] = LOGGED  # a sweep that logged every model as its trials ended
            else:
                folder = entry.get("state_dir")
                best = best_of_trial(here(folder), entry["best_epoch"]) if folder else None
                if best is None:
                    entry["model"] = MISSING
                    missing.append(entry.get("name", entry["run_id"]))
                else:
                    artifacts.log_checkpoint(entry, best)
                    entry["model"] = LOGGED
                    logged += 1
            state.save_trial(entry)
    state.data.setdefault("tests", {})["kept"] = kept
    state.save()
    return logged, missing
