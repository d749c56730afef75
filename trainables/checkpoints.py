"""Checkpoints sized to their job (docs/architecture.md, "Checkpoints").

A trial keeps two kinds of state in its *state folder* (``<Tune trial folder>/state``, on the
sweep's storage: a local path, or a URI such as ``s3://…`` — then each folder is written once
to a node-local cache and uploaded, see ``StateFolder``), each file written once, straight into
the place it is kept (no temporary copy for Tune to copy again):

* ``best-eNNNN/``: the weights (``model.safetensors``) of the best validation epoch so far and
  a ``meta.json`` (config, epoch, that epoch's metrics). Written when validation improves;
  reports, the model registry and ``load_trained`` read it.
* ``resume-eNNNN/``: the full resume state — the weights and ``train_state.pt`` (optimiser,
  LR scheduler, gradient scaler, best-so-far tracker, RNG states). Written every
  ``checkpoint_every`` epochs, at the epochs where a scheduler may pause the trial (group
  ASHA's rungs) and at the last epoch; a trial killed at any moment redoes at most
  ``checkpoint_every`` epochs.

What the loop reports to Tune (or Ray Train) as a checkpoint is a *pointer*: one small
``meta.json`` naming the resume state and the best weights of that moment. Tune copies
kilobytes, and a restored pointer always names a resume state and a best folder that belong
together (the tracker in ``train_state.pt`` knows which epoch the best weights are from).

Pruning keeps the newest resume state and the best folders it and the current best name: a
driver killed between the trial's write and its record of the pointer restores the previous
pointer, and the loop goes on from the folder's newest complete state, never an older one
(``checkpointing.Checkpointer.restore``). Once a trial has ended no scheduler resumes it: the
tracker drops its resume states (``drop_resume_states``), the whole folder of a trial a scheduler
stopped and the best weights of one that can no longer be selected or kept (``remove_state``;
``contrasweep.tracking.pruning``). Folders are written under a ``.tmp``
name and renamed, so a kill during a write never leaves a half-written state under a real name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trainables.storage import filesystem, is_uri, local_path

if TYPE_CHECKING:  # torch is imported where tensors are read or written: the driver, which
    import torch  # only lists, reads and removes these folders, starts without it

WEIGHTS_FILE = "model.safetensors"
LEGACY_WEIGHTS_FILE = "model.pt"  # checkpoints written before the state folder existed
STATE_FILE = "train_state.pt"
META_FILE = "meta.json"
COMPLETE_FILE = "_COMPLETE"  # written last into an uploaded folder (remote state folders)
STATE_DIR = "state"
FAILURE_DIR = "failure"  # why an earlier attempt of the trial failed for good (a divergence)
_NAME = re.compile(r"^(best|resume)-e(\d+)$")
# weights no method reads: the backbone's own pooler (BERT-style dense + tanh over the first
# token; in every encoder copy, e.g. ABALONE's momentum encoder). Every method pools the last
# hidden states itself (trainables.encoder.pool), so an MLflow model leaves them out
# (contrasweep.tracking.model_flavor) and ``loop.load_trained`` accepts their absence.
UNREAD_WEIGHTS = re.compile(r"(^|\.)backbone\.pooler\.")
_KEEP_RESUME = 1  # the loop restores the newest complete one (module docstring)


def cpu_copy(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's state as independent, contiguous CPU tensors (safe to keep while training
    goes on, and storable as safetensors: no two entries share memory)."""
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in module.state_dict().items()}


def save_weights(state: dict[str, torch.Tensor], path: str | Path) -> None:
    from safetensors.torch import save_file

    save_file(state, str(path))


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """A state dict from ``model.safetensors`` (or an older ``model.pt``, tensors only)."""
    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(str(path))
    import torch

    return torch.load(str(path), map_location="cpu", weights_only=True)


# numpy's RNG state holds an array: the weights-only unpickler may rebuild plain arrays (data,
# no code) and nothing else of numpy's
_NUMPY_CORE = getattr(np, "_core", None) or np.core
_ARRAY_GLOBALS = [_NUMPY_CORE.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]


def load_state(path: str | Path) -> dict[str, Any]:
    """A resume state (``train_state.pt``: optimiser, scheduler, scaler, tracker, RNG) read
    with torch's weights-only unpickler: tensors, numbers, strings, containers and numpy
    arrays; a file holding any other object (code a tampered checkpoint would run) raises
    ``pickle.UnpicklingError`` instead of being executed."""
    import torch

    with torch.serialization.safe_globals(_ARRAY_GLOBALS):
        return torch.load(str(path), map_location="cpu", weights_only=True)


def read_meta(directory: str | Path) -> dict[str, Any]:
    with open(Path(directory) / META_FILE) as fh:
        return json.load(fh)


def write_meta(directory: str | Path, meta: dict[str, Any]) -> None:
    with open(Path(directory) / META_FILE, "w") as fh:
        json.dump(meta, fh, default=str)


def best_name(epoch: int) -> str:
    return f"best-e{epoch:04d}"


def resume_name(epoch: int) -> str:
    return f"resume-e{epoch:04d}"


def best_of_trial(state_dir: str | Path, best_epoch: int) -> Path | None:
    """A trial's best folder on this node, from its state folder and the ``best/epoch`` it
    reported (None when it is not there)."""
    folder = StateFolder(state_dir)
    name = best_name(best_epoch)
    return folder.local(name) if folder.has(name) else None


def epoch_of(name: str) -> int:
    match = _NAME.match(name)
    assert match is not None
    return int(match.group(2))


class StateFolder:
    """The trial's state folder; only rank 0 writes it, every rank may read it.

    ``location`` is a local path or a URI (``trainables.storage``: S3, GCS, …, what the sweep's
    ``storage`` names). On a URI each folder is written to a node-local cache first
    (``<tmp>/contrasweep-state/<hash of the location>/``), then uploaded, and a ``_COMPLETE``
    object written last marks it whole (object stores have no atomic rename); reads come from
    the cache, which a node fills by downloading a folder once.
    """

    def __init__(self, location: str | Path):
        self.location = str(location)
        self.remote = is_uri(self.location)
        if self.remote:
            self.fs, self.fs_path = filesystem(self.location)
            digest = hashlib.sha1(self.location.encode()).hexdigest()[:16]
            self.root = Path(tempfile.gettempdir()) / "contrasweep-state" / digest
        else:
            self.root = local_path(self.location)

    def path(self, name: str | None) -> Path | None:
        """Where folder ``name`` is (or will be) on this node: the folder itself, or its cached copy."""
        return self.root / name if name else None

    def has(self, name: str | None) -> bool:
        if not name:
            return False
        if not self.remote:
            return (self.root / name).is_dir()
        return (self.root / name).is_dir() or self._complete([name]) == [name]

    def local(self, name: str) -> Path:
        """Folder ``name`` on this node (downloaded into the cache once, when remote)."""
        folder = self.root / name
        if self.remote and not folder.is_dir():
            from pyarrow import fs

            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=self.root))
            try:
                fs.copy_files(
                    f"{self.fs_path}/{name}",
                    str(tmp),
                    source_filesystem=self.fs,
                    destination_filesystem=fs.LocalFileSystem(),
                )
                (tmp / COMPLETE_FILE).unlink(missing_ok=True)
                os.replace(tmp, folder)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return folder

    def names(self, kind: str) -> list[str]:
        """Complete ``best``/``resume`` folders, oldest epoch first."""
        if self.remote:
            from pyarrow import fs

            listed = self.fs.get_file_info(fs.FileSelector(self.fs_path, allow_not_found=True))
            found = self._complete([Path(i.path).name for i in listed if i.type == fs.FileType.Directory])
        elif self.root.is_dir():
            found = [p.name for p in self.root.iterdir() if p.is_dir()]
        else:
            return []
        found = [n for n in found if (m := _NAME.match(n)) and m.group(1) == kind]
        return sorted(found, key=epoch_of)

    def _complete(self, names: list[str]) -> list[str]:
        """The remote folders among ``names`` whose upload finished."""
        from pyarrow import fs

        infos = self.fs.get_file_info([f"{self.fs_path}/{n}/{COMPLETE_FILE}" for n in names])
        return [n for n, info in zip(names, infos) if info.type == fs.FileType.File]

    def _publish(self, name: str, write) -> str:
        """Write a folder under a temporary name, then rename it into place (and upload it)."""
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / name
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=self.root))
        try:
            write(tmp)
            if final.exists():  # the same epoch written again after a restore: replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if self.remote:
            self._upload(name)
        return name

    def _upload(self, name: str) -> None:
        from pyarrow import fs

        target = f"{self.fs_path}/{name}"
        if self.fs.get_file_info(target).type != fs.FileType.NotFound:  # an epoch written again: no stale marker
            self.fs.delete_dir_contents(target)
        fs.copy_files(
            str(self.root / name), target, source_filesystem=fs.LocalFileSystem(), destination_filesystem=self.fs
        )
        with self.fs.open_output_stream(f"{target}/{COMPLETE_FILE}") as out:
            out.write(b"")

    def _delete(self, name: str) -> None:
        shutil.rmtree(self.root / name, ignore_errors=True)
        if self.remote:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_dir(f"{self.fs_path}/{name}")

    def write_best(self, weights: dict[str, torch.Tensor], epoch: int, meta: dict[str, Any]) -> str:
        def write(folder: Path) -> None:
            save_weights(weights, folder / WEIGHTS_FILE)
            write_meta(folder, meta)

        return self._publish(best_name(epoch), write)

    def write_resume(
        self, method: torch.nn.Module, training_state: dict[str, Any], epoch: int, same_weights: Path | None = None
    ) -> str:
        """``same_weights``: a weights file already holding these weights (the best folder of
        this very epoch): hard-linked, not written again (one copy on disk)."""

        def write(folder: Path) -> None:
            try:
                if same_weights is None:
                    raise OSError("nothing to link")
                os.link(same_weights, folder / WEIGHTS_FILE)
            except OSError:  # no such file, or a filesystem without hard links
                save_weights(cpu_copy(method), folder / WEIGHTS_FILE)
            import torch

            torch.save({**training_state, "epoch": epoch, "rng": rng_state()}, folder / STATE_FILE)

        return self._publish(resume_name(epoch), write)

    def write_failure(self, info: dict[str, Any]) -> str:
        """Record why the trial cannot go on (``trainables.errors.TrainingDiverged``): a retry
        reads it and fails at once. Pruning never touches it (not a best/resume name)."""
        return self._publish(FAILURE_DIR, lambda folder: write_meta(folder, info))

    def failure(self) -> dict[str, Any] | None:
        """The failure record of an earlier attempt of this trial, if there is one."""
        return read_meta(self.local(FAILURE_DIR)) if self.has(FAILURE_DIR) else None

    def prune(self, keep: set[str | None]) -> None:
        """Remove resume states older than the newest, best folders no kept name points at, and
        leftovers of interrupted writes."""
        resumes = self.names("resume")
        kept = {k for k in keep if k} | set(resumes[-_KEEP_RESUME:])
        for name in resumes + self.names("best"):
            if name not in kept:
                self._delete(name)
        if self.root.is_dir():
            for leftover in self.root.glob(".*.tmp"):
                shutil.rmtree(leftover, ignore_errors=True)

    def size(self, name: str | None = None) -> int:
        """Bytes of folder ``name`` (all of the state folder without a name) where it is kept."""
        if self.remote:
            from pyarrow import fs

            where = f"{self.fs_path}/{name}" if name else self.fs_path
            infos = self.fs.get_file_info(fs.FileSelector(where, recursive=True, allow_not_found=True))
            return sum(i.size or 0 for i in infos if i.type == fs.FileType.File)
        folder = self.root / name if name else self.root
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0

    def remove(self) -> None:
        """The whole state folder, here and where it is kept."""
        shutil.rmtree(self.root, ignore_errors=True)
        if self.remote:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_dir(self.fs_path)


def rng_state() -> dict[str, Any]:
    import torch

    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def remove_state(state_dir: str | Path) -> int:
    """Delete a trial's state folder (a trial a scheduler stopped early: never selected, never
    resumed); returns the bytes freed."""
    folder = StateFolder(state_dir)
    freed = folder.size()
    folder.remove()
    return freed


def _drop_resumes(state_dir: str | Path, keep: int) -> tuple[int, int]:
    """Delete all but the ``keep`` newest resume states; (how many went, bytes freed)."""
    folder = StateFolder(state_dir)
    names = folder.names("resume")
    names = names[: len(names) - keep] if keep else names
    freed = 0
    for name in names:
        freed += folder.size(name)
        folder._delete(name)
    return len(names), freed


def drop_resume_states(state_dir: str | Path) -> int:
    """A trial that ended (nothing resumes it any more) keeps its best folder only; returns how
    many resume states went."""
    return _drop_resumes(state_dir, keep=0)[0]


def best_folder(path: str | Path) -> Path | None:
    """The folder holding a trained model's weights and meta: ``path`` itself (a best folder,
    a downloaded registry version or an older checkpoint with ``model.pt``), or the best folder
    a reported pointer names."""
    path = Path(os.path.expanduser(str(path)))
    if (path / WEIGHTS_FILE).is_file() or (path / LEGACY_WEIGHTS_FILE).is_file():
        return path
    try:
        meta = read_meta(path)
    except (OSError, ValueError):
        return None
    if meta.get("best") and meta.get("state_dir"):
        folder = StateFolder(meta["state_dir"])
        if not folder.has(meta["best"]):
            return None
        found = folder.local(meta["best"])
        return found if (found / WEIGHTS_FILE).is_file() else None
    return None


def weights_file(path: str | Path) -> Path | None:
    """The weights file of ``path``: the file itself, or that of ``best_folder(path)``."""
    path = Path(os.path.expanduser(str(path)))
    if path.is_file():
        return path
    folder = best_folder(path)
    if folder is None:
        return None
    for name in (WEIGHTS_FILE, LEGACY_WEIGHTS_FILE):
        if (folder / name).is_file():
            return folder / name
    return None
