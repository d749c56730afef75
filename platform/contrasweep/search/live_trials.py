"""The trials a scheduler still has to look at, and Tune's saved state kept to them (issue 54).

Ray Tune keeps every trial it ever ran in its controller and writes each one's JSON into every
save of its experiment state. The schedulers force that save before each new trial starts
(``group_asha.MovableFIFO``: a driver killed at any moment restores every trial that ran, with
its folder), so a save that holds every trial made each new trial cost O(trials so far), and a
sweep O(n²): at 300 tiny trials the driver spent more per trial than a trial's own start.

Here a trial leaves both once it has ended *and the sweep's own record holds its end*
(``tracking.json``, written by the tracker before Tune's next step;
``contrasweep.tracking.ledger``): the schedulers' loops go over the live trials only (their
order is Tune's, FIFO), and the trial's entry leaves the state Tune saves. Nothing is lost: a
resumed driver never creates an ended trial again (the searchers' saved positions and live sets
are written in the same save and had dropped it before: Tune tells the searcher first), and
what ended is read from the record (``settle``, the summary, the reports, MLflow). A trial that
failed stays in Tune's state (``resume`` retries it), and so does one that ended without ever
starting (a group stopped while it waited; the budget's unrun), which the record does not hold.
Tune's restore needs one trial in the state, so the last entry stays until another replaces it.

The trials themselves stay in Tune's controller list (the ResultGrid of this driver is whole);
only its loops that run once per sweep go over them.

The save forced before each new trial (``save_now``) writes Tune's state files and copies
those of this session, not the rest of the driver's staging folder: Tune's own save copies all
of it (``checkpoint(force=True)`` syncs the folder), which held every trial's logs (those now go
straight to the sweep folder: ``contrasweep.run.trial_logs``) and still holds a folder per trial.
Tune's own periodic save (``TUNE_GLOBAL_CHECKPOINT_S``: "auto") still copies it all, every 10 s
or more, not per trial.

It also holds the schedulers' other touches of Tune's controller (``stop_waiting``,
``stop_quickly``, ``mark_for_save``) and of a restored trial (``repoint_checkpoint``).

May import: Ray Tune's ``Trial``, ``contrasweep.tracking.ledger``, ``contrasweep.folder.record``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ray.tune.experiment import Trial

from contrasweep.folder.record import write_whole
from contrasweep.tracking import ledger

ENDED = (Trial.TERMINATED, Trial.ERROR)
CHECKPOINT_DIR = re.compile(r"checkpoint_(\d+)")  # Tune's name of a trial's n-th checkpoint folder


def controller_of(tune_controller):
    """Tune's controller behind the scheduler's view of it (the view wraps it)."""
    return getattr(tune_controller, "_tune_controller", tune_controller)


def stop_waiting(tune_controller, trial: Trial) -> None:
    """``stop_trial`` for a trial that is PENDING or PAUSED, so that Tune's saved state learns
    it too: Ray 2.60 re-serialises a trial into its experiment state only when the trial is
    marked, and ``stop_trial`` marks only a trial with a live actor. Unmarked, a trial stopped
    while waiting stayed PENDING in the saved state, so the ended sweep read as interrupted and
    a resume brought the trial back. A trial never scheduled gets its folder's name first, as
    Tune would name it: Tune's last progress report reads every trial's folder (a searcher
    restored from an earlier save hands out again a configuration the record says finished)."""
    if not trial.relative_logdir:
        trial.init_local_path()
    tune_controller.stop_trial(trial)
    mark_for_save(tune_controller, trial)


# Seconds Tune gives a trial's process to stop before it kills it when the sweep ends early
# (Ctrl-C). Ray 2.60 waits 10 s, a constant: a process still importing at a Ctrl-C (a trial
# starting) answers only then. A trial stopped that way has nothing left to write (its function's
# thread is not waited for), and what it wrote is whole (the state folders' rename).
STOP_GRACE_S = 2


def stop_quickly(tune_controller) -> None:
    """Have Tune kill the trials' processes ``STOP_GRACE_S`` after asking them to stop."""
    controller = controller_of(tune_controller)
    if hasattr(controller, "_actor_force_cleanup_timeout"):
        controller._actor_force_cleanup_timeout = STOP_GRACE_S


def mark_for_save(tune_controller, trial: Trial) -> None:
    """Have Tune's next save re-serialise ``trial`` (its status, its folder's name)."""
    controller = getattr(tune_controller, "_tune_controller", None)  # the scheduler's view wraps it
    if controller is not None:
        controller._mark_trial_to_checkpoint(trial)


class LiveTrials:
    """Trials added and not ended, in the order Tune added them (a re-added trial goes last, as
    Tune moves it to the end of its list)."""

    def __init__(self):
        self._live: dict[str, Trial] = {}

    def add(self, trial: Trial) -> None:
        self._live.pop(trial.trial_id, None)
        self._live[trial.trial_id] = trial

    def __iter__(self):
        return iter(list(self._live.values()))

    def sweep(self, tune_controller, recorded: dict[str, dict]) -> None:
        """Drop the trials that ended from the live ones, and from Tune's saved state those the
        record holds as finished: this driver's (``ledger.ended_here``) or an earlier one's
        (``recorded``: ``ledger.finished``, by configuration key)."""
        for trial in [t for t in self._live.values() if t.status in ENDED]:
            del self._live[trial.trial_id]
            if trial.status == Trial.TERMINATED and (ledger.ended_here(trial.trial_id)
                                                     or ledger.key(trial.config) in recorded):
                if forget(tune_controller, trial):
                    drop_staging(trial)


def forget(tune_controller, trial: Trial) -> bool:
    """Take an ended trial out of the state Tune saves next (Ray 2.60's controller keeps each
    trial's JSON in ``_trial_metadata``, refreshed from ``_trials_to_cache``); the last entry
    stays (Tune's restore reads its storage from the first trial). Returns whether it went."""
    controller = controller_of(tune_controller)
    metadata = getattr(controller, "_trial_metadata", None)
    marked = getattr(controller, "_trials_to_cache", None)
    if metadata is None or marked is None:
        return False  # another Tune: its state keeps every trial, as it did
    held = len(metadata) + sum(1 for t in marked if t.trial_id not in metadata)  # what the next save holds
    others = held - (trial.trial_id in metadata or trial in marked)
    if others < 1:
        return False
    marked.discard(trial)
    metadata.pop(trial.trial_id, None)
    return True


def drop_staging(trial: Trial) -> None:
    """Remove a forgotten trial's own folder from Tune's driver staging folder, if empty. Tune
    makes one per trial and never removes it (the trial's logs go to the sweep folder:
    ``contrasweep.run.trial_logs``), and both the save forced before each new trial
    (``save_now``) and Tune's periodic copy go over that folder: 8,761 empty folders at about
    8,700 no-op trials (``benchmarks/paper_scale.py``). A folder with anything in it stays."""
    try:
        path = trial.storage.trial_driver_staging_path
    except Exception:  # noqa: BLE001 - a trial Tune never named a folder for (or another Tune): none to remove
        return
    try:
        os.rmdir(path)
    except OSError:  # not empty, or gone
        pass


def save_now(tune_controller) -> None:
    """Tune's experiment state saved to the sweep's Tune folder now (the module's docstring)."""
    controller = controller_of(tune_controller)
    storage = getattr(controller, "_storage", None)
    session = getattr(controller, "_session_str", None)
    if storage is None or not session or not hasattr(controller, "save_to_dir"):
        controller.checkpoint(force=True)  # another Tune: its own save, whole
        return
    try:
        storage.syncer.wait()  # Tune's own copy first, where one runs: it reads the files rewritten next
    except Exception:  # noqa: BLE001 - Tune logs a failed copy itself; this save goes on
        pass
    controller.save_to_dir()
    staging = storage.experiment_driver_staging_path
    files = [e for e in os.scandir(staging) if e.is_file(follow_symlinks=False) and session in e.name]
    files.sort(key=lambda e: e.name.startswith("experiment_state"))  # the trials' file last: it opens the session
    for entry in files:
        put(storage, entry.path, entry.name)


def put(storage, source: str, name: str) -> None:
    """Copy one of Tune's state files into the experiment's folder in its storage, whole: a
    local folder gets it by rename (a reader never sees half of it), object storage as one object."""
    filesystem = storage.storage_filesystem
    if getattr(filesystem, "type_name", "") == "local":
        target = Path(storage.experiment_fs_path)
        target.mkdir(parents=True, exist_ok=True)
        write_whole(target / name, Path(source).read_bytes())
        return
    with filesystem.open_output_stream(f"{storage.experiment_fs_path.rstrip('/')}/{name}") as out:
        out.write(Path(source).read_bytes())


def repoint_checkpoint(trial: Trial) -> str | None:
    """A restored trial whose last checkpoint, as Tune's saved state names it, is gone from
    storage: point it at the trial's newest checkpoint folder there, or at none. Returns the
    path now named, where it changed.

    Tune keeps two checkpoints a trial (``CheckpointConfig(num_to_keep=2)``) and deletes an
    older one as a newer one registers, while its saved state is written before each new trial
    and every ``TUNE_GLOBAL_CHECKPOINT_S``: a driver killed in between left a state naming a
    deleted folder, and Ray 2.60's restore failed the trial ("Could not recover from checkpoint
    as it does not exist on storage anymore"; CI of a96875d). A checkpoint is a pointer to the
    trial's state folder, and the loop goes on from that folder's newest resume state whatever
    the pointer (``trainables.checkpointing``), so any surviving pointer, or none, resumes the
    same epoch. Tune's index of the trial's next checkpoint moves on with it, so that a later
    save does not write into a surviving folder."""
    from pyarrow import fs
    from ray.train import Checkpoint

    result = getattr(trial, "latest_checkpoint_result", None)  # None: a trial double, or another Tune
    if result is None or result.checkpoint is None:
        return None
    filesystem, path = result.checkpoint.filesystem, result.checkpoint.path
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        return None
    named = CHECKPOINT_DIR.fullmatch(Path(path).name)
    found = {int(m.group(1)): info.path
             for info in filesystem.get_file_info(fs.FileSelector(str(Path(path).parent), allow_not_found=True))
             if info.type == fs.FileType.Directory and (m := CHECKPOINT_DIR.fullmatch(info.base_name))}
    manager = trial.run_metadata.checkpoint_manager
    listed = any(r is result for r in manager._checkpoint_results)
    manager._checkpoint_results = [r for r in manager._checkpoint_results if r is not result
                                   and r.checkpoint.path in found.values()]  # the rest: none to delete
    if not found:
        manager._latest_checkpoint_result = None
        trial._restore_checkpoint_result = None
        trial.invalidate_json_state()
        return ""
    newest = max(found)
    result.checkpoint = Checkpoint(path=found[newest], filesystem=filesystem)
    manager._checkpoint_results = [r for r in manager._checkpoint_results if r.checkpoint.path != found[newest]]
    if listed:
        manager._checkpoint_results.append(result)
    if named and newest > int(named.group(1)):
        trial.storage.current_checkpoint_index += newest - int(named.group(1))
    trial.invalidate_json_state()
    return found[newest]
