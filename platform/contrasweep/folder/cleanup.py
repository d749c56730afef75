"""Disk a sweep no longer needs (``contrasweep clean``; a finished sweep does it itself).

A trial's state folder holds its best validation epoch's weights (the test phase and the MLflow
model of a kept trial are made from them) and full resume states (weights, optimiser state,
RNG: twice the model or more), which only ``resume`` reads. So: a finished sweep drops every
resume state, and the state folder of every complete trial it no longer needs: one whose
weights its MLflow model now holds (one copy of each kept weight file: a later extension's test
phase and the report read the model's), and one neither reported nor kept
(``tracking.json``'s ``tests.reported`` and ``tests.kept``, recorded by the test phase:
``contrasweep.tracking.kept``); any sweep drops the state folders of trials the scheduler
stopped (never resumed: the tracker removes them as they stop) and the leftovers of
interrupted writes. Everything MLflow holds stays.
"""

from __future__ import annotations

import shutil

from contrasweep.folder.record import MODEL_LOGGED
from contrasweep.folder.record import read as read_record
from contrasweep.folder.sweeps import SweepDir
from trainables.checkpoints import STATE_DIR, drop_resume_states, remove_state
from trainables.storage import filesystem, join


def state_dirs(sweep: SweepDir) -> dict[str, str]:
    """Each repeat's state folder on the sweep's storage, by configuration key
    (``trials/<key>/state``, whichever driver or extension ran it)."""
    from pyarrow import fs

    location = sweep.trials_location
    pa_fs, root = filesystem(location)
    found = pa_fs.get_file_info(fs.FileSelector(root, allow_not_found=True))
    return {
        info.base_name: join(location, info.base_name, STATE_DIR)
        for info in found
        if info.type == fs.FileType.Directory
        and pa_fs.get_file_info(f"{info.path}/{STATE_DIR}").type == fs.FileType.Directory
    }


def reclaim(sweep: SweepDir) -> int:
    """Remove what ``sweep`` can no longer use; returns how many folders went."""
    finished = sweep.status() == "finished"
    stopped, unreported = _trials_to_drop(sweep)
    removed = 0
    for key, folder in state_dirs(sweep).items():
        if key in stopped | (unreported if finished else set()):
            remove_state(folder)
            removed += 1
        elif finished:
            removed += drop_resume_states(folder)
        local = sweep.path / "trials" / key / STATE_DIR
        for leftover in local.glob(".*.tmp") if local.is_dir() else ():
            shutil.rmtree(leftover, ignore_errors=True)
    return removed


def _trials_to_drop(sweep: SweepDir) -> tuple[set[str], set[str]]:
    """Configuration keys (``tracking.json``) whose runs ended as stopped by the scheduler, and
    those of complete trials a finished sweep needs no state folder for (none where the test
    phase has not recorded them): neither reported nor kept (``tests.reported``, ``tests.kept``,
    trial ids: ``contrasweep.tracking.kept``), or whose best weights MLflow holds (one copy: the
    test phase of a later extension and the report read the model's)."""
    try:
        state = read_record(sweep.path / "tracking.json")
        trials = state["trials"]
    except (OSError, ValueError, KeyError):
        return set(), set()
    stopped = {e.get("config_key") for e in trials.values() if e.get("outcome") == "stopped"}
    tests = state.get("tests") or {}
    if not tests.get("done"):
        return stopped, set()
    shown = set(tests.get("reported", [])) | set(tests.get("kept", []))
    return stopped, {
        e.get("config_key")
        for tid, e in trials.items()
        if e.get("outcome") == "complete" and (tid not in shown or e.get("model") == MODEL_LOGGED)
    }
