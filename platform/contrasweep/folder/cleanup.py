"""Disk a sweep no longer needs (``contrasweep clean``; a finished sweep does it itself).

A trial's state folder holds its best validation epoch's weights (reports, the registry and
re-logging a lost MLflow artifact read them) and full resume states (weights, optimiser state,
RNG: twice the model or more), which only ``resume`` reads. So: a finished sweep drops every
resume state; any sweep drops the state folders of trials the scheduler stopped (never
resumed: the tracker removes them as they stop) and the leftovers of interrupted writes. The
best weights and everything MLflow holds stay.
"""

from __future__ import annotations

import json
import shutil

from contrasweep.folder.sweeps import SweepDir
from trainables.storage import filesystem, join


def state_dirs(sweep: SweepDir) -> list[str]:
    """Each trial's state folder on the sweep's storage (``tune/<trial>/state``, and
    ``tune-extN/<trial>/state`` for the trials of its extensions)."""
    from pyarrow import fs

    from trainables.checkpoints import STATE_DIR

    out = []
    for location in sweep.tune_locations:
        pa_fs, root = filesystem(location)
        found = pa_fs.get_file_info(fs.FileSelector(root, allow_not_found=True))
        out += [join(location, info.base_name, STATE_DIR) for info in found
                if info.type == fs.FileType.Directory and pa_fs.get_file_info(f"{info.path}/{STATE_DIR}").type
                == fs.FileType.Directory]
    return out


def reclaim(sweep: SweepDir) -> int:
    """Remove what ``sweep`` can no longer use; returns how many folders went."""
    from trainables.checkpoints import STATE_DIR, drop_resume_states, remove_state

    finished = sweep.status() == "finished"
    stopped = _stopped_trials(sweep)
    removed = 0
    for folder in state_dirs(sweep):
        trial = folder.rstrip("/").rsplit("/", 2)[-2]
        if any(trial.startswith(f"run_trial_{t}_") for t in stopped):
            remove_state(folder)
            removed += 1
        elif finished:
            removed += drop_resume_states(folder)
        local = sweep.path / folder.rstrip("/").rsplit("/", 3)[-3] / trial / STATE_DIR
        for leftover in local.glob(".*.tmp") if local.is_dir() else ():
            shutil.rmtree(leftover, ignore_errors=True)
    return removed


def _stopped_trials(sweep: SweepDir) -> set[str]:
    """Trial ids whose runs ended as stopped by the scheduler (``tracking.json``)."""
    try:
        trials = json.loads((sweep.path / "tracking.json").read_text())["trials"]
    except (OSError, ValueError, KeyError):
        return set()
    return {tid for tid, e in trials.items() if e.get("outcome") == "stopped"}
