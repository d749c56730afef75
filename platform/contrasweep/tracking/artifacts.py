"""A trial's state folder seen from MLflow (docs/architecture.md, "Checkpoints"): where it is on
the sweep's storage, what happens to it when the trial ends (a complete trial's best weights are
logged as its ``best_checkpoint`` artifact and its older resume state goes; a stopped trial's
folder goes, it is never selected nor resumed), and the repair of artifacts the store lost
(the parent's files, each complete trial's best checkpoint, re-logged from the folders the
sweep keeps).

May import: ``contrasweep.tracking.record``, ``contrasweep.tracking.rows``,
``contrasweep.folder.relocation``, ``trainables`` (the state folder's helpers).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from contrasweep.folder.relocation import here
from contrasweep.tracking.record import TrackingState
from contrasweep.tracking.rows import spec_yaml


class Artifacts:
    """``trial_storage``: the root the trials' folders are under (a path or a URI), or None."""

    def __init__(self, client, state: TrackingState, trial_storage: str | None):
        self.client, self.state, self.trial_storage = client, state, trial_storage

    def state_dir(self, trial) -> str | None:
        """The trial's state folder on the sweep's storage (a path or a URI: Tune's ``trial.path``
        is a path inside the storage's file system, without its scheme)."""
        from trainables.checkpoints import STATE_DIR
        from trainables.storage import join

        folder = getattr(trial, "path", None)
        if not folder:
            return None
        root = self.trial_storage
        return join(root, os.path.basename(folder), STATE_DIR) if root else os.path.join(folder, STATE_DIR)

    def settle(self, entry: dict) -> str | None:
        """A trial ended: its state folder (where it is now) kept, trimmed or removed by outcome."""
        folder = entry.get("state_dir")
        folder = here(folder) if folder else None
        if folder and entry["outcome"] == "complete":
            from trainables.checkpoints import best_of_trial, finish_state

            if entry.get("best_epoch"):
                self.log_checkpoint(entry["run_id"], best_of_trial(folder, entry["best_epoch"]))
            finish_state(folder)  # the older resume state is never restored now
        if folder and entry["outcome"] == "stopped":  # never selected, never resumed: its weights and states go
            from trainables.checkpoints import remove_state

            remove_state(folder)
        return folder

    def log_checkpoint(self, run_id: str, path) -> None:
        """The best folder's weights and meta as the run's ``best_checkpoint`` artifact."""
        from trainables.checkpoints import META_FILE, WEIGHTS_FILE

        if path is None:
            return
        for name in (WEIGHTS_FILE, META_FILE):
            file = Path(path) / name
            if file.exists():
                self.client.log_artifact(run_id, str(file), artifact_path="best_checkpoint")

    def repair(self, parent_run_id: str, spec: dict, texts: dict[str, str]) -> int:
        """Re-log the parent's files and each complete trial's best checkpoint where the
        artifact store lost them (e.g. ``mlartifacts/`` removed); returns how many files."""
        from trainables.checkpoints import WEIGHTS_FILE, best_of_trial

        repaired = 0
        have = {f.path for f in self.client.list_artifacts(parent_run_id)}
        for name, text in {"spec.yaml": spec_yaml(spec), **texts}.items():
            if name not in have:
                self.client.log_text(parent_run_id, text, name)
                repaired += 1
        for entry in self.state.trials.values():
            folder = entry.get("state_dir")
            if entry.get("outcome") != "complete" or not entry.get("best_epoch") or not folder:
                continue
            files = {os.path.basename(f.path) for f in self.client.list_artifacts(entry["run_id"], "best_checkpoint")}
            best = best_of_trial(here(folder), entry["best_epoch"])
            if WEIGHTS_FILE not in files and best is not None:
                self.log_checkpoint(entry["run_id"], best)
                repaired += 1
        if repaired:
            print(f"[contrasweep] re-logged {repaired} lost MLflow artifacts", file=sys.stderr, flush=True)
        return repaired
