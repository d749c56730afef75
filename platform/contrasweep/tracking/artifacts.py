"""A trial's state folder seen from MLflow (docs/architecture.md, "Checkpoints"): where it is on
the sweep's storage, what happens to it when the trial ends (a complete trial's resume states
go and its best weights stay while they can still matter, ``contrasweep.tracking.pruning``, to
be logged as its MLflow model ``model/``,
``contrasweep.tracking.model_flavor``, if it is kept: ``contrasweep.tracking.kept``; with
``tracking.keep_models: all`` they are logged now; a stopped trial's folder goes, it is never
selected nor resumed), and the repair of artifacts the store lost (the parent's files, each
logged model, re-logged from the folders the sweep keeps). A model that cannot be built (a
data variant without label names; an encoder folder without ``config.json``) is one line, and
the weights are logged as plain files under ``best_checkpoint/``.

May import: ``contrasweep.folder.record``, ``contrasweep.tracking.rows``,
``contrasweep.tracking.store``, ``contrasweep.tracking.model_flavor``, ``contrasweep.folder.relocation``,
``contrasweep.spec.static``, ``contrasweep.spec.identity`` (a repeat's key), ``trainables`` (the
state folder's helpers).
"""

from __future__ import annotations

import sys
from pathlib import Path

from contrasweep.folder.record import MODEL_LOGGED, TrackingState
from contrasweep.folder.relocation import here
from contrasweep.spec.identity import key_of
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.rows import spec_yaml
from contrasweep.tracking.store import CHECKPOINT_IN_MODEL, CHECKPOINT_PATH, MODEL_PATH
from trainables.checkpoints import (
    LEGACY_WEIGHTS_FILE,
    META_FILE,
    STATE_DIR,
    WEIGHTS_FILE,
    best_of_trial,
    drop_resume_states,
    remove_state,
)
from trainables.storage import join


class Artifacts:
    """``static``: the sweep's fixed part (``contrasweep.spec.static``: ``trial_storage``, the root
    the trials' folders are under, a path or a URI, or None; the method, encoder, data variants
    and ``max_length`` a model is described by; ``keep_models``)."""

    def __init__(self, client, state: TrackingState, static: SweepStatic):
        self.client, self.state, self.static = client, state, static
        self.trial_storage = static.trial_storage
        self.keep_models = static.keep_models

    def state_dir(self, trial) -> str | None:
        """The repeat's state folder on the sweep's storage (a path or a URI):
        ``trials/<configuration key>/state``, as the trial's loop names it (``runner.executor.state_dir``)."""
        if not self.trial_storage:
            return None
        return join(self.trial_storage, key_of(trial.config), STATE_DIR)

    def settle(self, entry: dict) -> str | None:
        """A trial ended: its state folder (where it is now) kept, trimmed or removed by outcome."""
        folder = entry.get("state_dir")
        folder = here(folder) if folder else None
        if folder and entry["outcome"] == "complete":
            best = best_of_trial(folder, entry["best_epoch"]) if entry.get("best_epoch") else None
            if best is not None and self.keep_models == "all":
                self.log_checkpoint(entry, best)
                entry["model"] = MODEL_LOGGED  # contrasweep.tracking.kept
            drop_resume_states(folder)  # never resumed now (a restored copy ends from the record)
        if folder and entry["outcome"] == "stopped":  # never selected, never resumed: its weights and states go
            remove_state(folder)
        return folder

    def log_checkpoint(self, entry: dict, path) -> None:
        """The best folder as the run's MLflow model (``model/``), or its weights and meta as
        plain files (``best_checkpoint/``) where no model can be built."""
        import tempfile

        from contrasweep.tracking.model_flavor import build_model  # MLflow models, pandas: only where one is logged

        if path is None:
            return
        with tempfile.TemporaryDirectory(prefix="contrasweep-model-") as tmp:
            try:
                model = build_model(
                    Path(tmp), Path(path), self.model_info(entry), self.static.encoder, self.static.method
                )
            except Exception as exc:  # noqa: BLE001 - the sweep goes on; the weights are logged as files
                model = None
                entry["model_error"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
                print(
                    f"[contrasweep] {entry.get('name', entry['run_id'])}: no MLflow model ({entry['model_error']}); "
                    f"its best weights are logged as files ({CHECKPOINT_PATH}/)",
                    file=sys.stderr,
                    flush=True,
                )
            if model is not None:
                self.client.log_artifacts(entry["run_id"], str(model), MODEL_PATH)
                return
        for name in (WEIGHTS_FILE, META_FILE):
            file = Path(path) / name
            if file.exists():
                self.client.log_artifact(entry["run_id"], str(file), artifact_path=CHECKPOINT_PATH)

    def model_info(self, entry: dict) -> dict:
        """What a model needs besides the weights: the variant's label names, pair flag and text
        columns (``data.text`` / ``data.text_pair``: the model takes them as well as ``text``) and
        the sweep's ``max_length`` (a variant without prepared data has no label names: ValueError)."""
        variant = self.static.variant(entry.get("variant", 0))
        if not variant.label_names:
            raise ValueError(f"data variant {variant.index} has no label names in the sweep's fixed part")
        columns = {"text_column": str(variant.data.get("text") or "text")}
        if variant.is_pair:
            columns["text_pair_column"] = str(variant.data.get("text_pair") or "text_pair")
        return {
            "label_names": list(variant.label_names),
            "is_pair": variant.is_pair,
            "max_length": self.static.max_length,
            **columns,
        }

    def repair(self, parent_run_id: str, spec: dict, texts: dict[str, str]) -> int:
        """Re-log the parent's files and each complete trial's best checkpoint where the
        artifact store lost them (e.g. ``mlartifacts/`` removed); returns how many files."""
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
            if entry.get("model", MODEL_LOGGED if self.keep_models == "all" else None) != MODEL_LOGGED:
                continue  # no model to repair: not kept (yet), or its weights were gone
            best = best_of_trial(here(folder), entry["best_epoch"])
            if best is not None and not logged_weights(self.client, entry["run_id"]):
                self.log_checkpoint(entry, best)
                repaired += 1
        if repaired:
            print(f"[contrasweep] re-logged {repaired} lost MLflow artifacts", file=sys.stderr, flush=True)
        return repaired


def logged_weights(client, run_id: str) -> str | None:
    """The artifact folder holding the run's best weights: its model's checkpoint, or the plain
    files of a run without a model; None when neither is in the store."""
    for folder in (CHECKPOINT_IN_MODEL, CHECKPOINT_PATH):
        if any(f.path.endswith((WEIGHTS_FILE, LEGACY_WEIGHTS_FILE)) for f in client.list_artifacts(run_id, folder)):
            return folder
    return None
