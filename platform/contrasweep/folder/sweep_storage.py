"""A sweep's storage (``sweep.storage`` / ``--storage``): where Tune's experiment state, Ray
Train's runs and every trial's state folder live, so that all nodes of a cluster reach them.

Without a storage the sweep folder itself holds them (one machine). With one,
``<storage>/<name>/tune`` and ``<storage>/<name>/train`` hold them, and the driver's own files
(spec, ``sweep.json``, ``tracking.json``, the Optuna study, group ASHA's state, the race's
journal, the budget's spending) are mirrored to
``<storage>/<name>/sweep`` while the sweep runs, so ``contrasweep resume NAME --storage URI``
works on another machine that sees the same storage and MLflow server (docs/architecture.md,
"Storage and clusters").

Preflight (before any trial starts, one line each): the storage answers and takes a write
within ``TIMEOUT_S``; a path that only this machine sees is refused when the Ray cluster spans
more than one machine (a path on a network file system — NFS, CIFS, Lustre, … — is shared).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from ray.tune import Callback

from contrasweep.errors import UserError
from contrasweep.folder.relocation import here
from trainables.storage import display, filesystem, is_uri, join, local_path

TIMEOUT_S = 20.0
MIRRORED = (
    "spec.yaml",
    "sweep.json",
    "tracking.journal",
    "tracking.json",
    "group_asha.journal",
    "group_asha.json",
    "race.journal",
    "race.json",
    "budget.json",
    "optuna.db",
)  # each journal
# before its snapshot: a snapshot written between the two copies makes the older journal copy one it ignores
NETWORK_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "lustre",
    "gpfs",
    "ceph",
    "fuse.cephfs",
    "beegfs",
    "glusterfs",
    "fuse.glusterfs",
    "fuse.s3fs",
    "fuse.gcsfuse",
    "fuse.juicefs",
    "9p",
    "virtiofs",
    "afs",
    "pvfs2",
    "orangefs",
)


def check(storage: str | None, sweep_path: Path, machines: int) -> None:
    """Refuse (one line) a storage the cluster cannot use; ``machines``: how many machines
    the alive Ray nodes run on."""
    where = storage or str(sweep_path)
    if storage and is_uri(storage):
        _reachable(storage)
        return
    if machines > 1 and not shared_path(local_path(where)):
        raise UserError(
            f"the sweep's storage {where} is a folder of this machine only, but the Ray cluster spans {machines} "
            "machines: trials on other nodes could neither write nor resume their checkpoints; allowed: --storage "
            "s3://bucket/prefix (or gs://…, hdfs://…), or a path on a file system every node mounts (NFS)"
        )


def shared_path(path: Path) -> bool:
    """Whether ``path`` lies on a network file system (the longest mount point above it)."""
    path = path.resolve()
    best, kind = "", ""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    for line in mounts:
        fields = line.split()
        if (
            len(fields) >= 3
            and (str(path) + "/").startswith(fields[1].rstrip("/") + "/")
            and len(fields[1]) >= len(best)
        ):
            best, kind = fields[1], fields[2]
    return kind in NETWORK_FS


def _reachable(storage: str) -> None:
    """List and write a probe object, with a time limit (an unreachable endpoint retries for minutes)."""

    def probe() -> None:
        fs, path = filesystem(storage)
        with fs.open_output_stream(f"{path}/.contrasweep-probe") as out:
            out.write(b"ok")
        fs.delete_file(f"{path}/.contrasweep-probe")

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(probe).result(timeout=TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        raise UserError(
            f"storage {display(storage)} did not answer within {TIMEOUT_S:g} s; allowed: a storage URI "
            "this machine and every node reach (check the endpoint, network and credentials)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises OSError/ValueError/ArrowInvalid; all mean "unusable"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"storage {display(storage)} cannot be written: {reason}; allowed: an existing bucket or "
            "folder with write access (credentials from the environment or the URI)"
        ) from None
    finally:
        pool.shutdown(wait=False)


def state_root(storage: str | None, sweep_path: Path, name: str) -> str:
    """Where Tune, Train and the trials keep the sweep's state."""
    return join(storage, name) if storage else str(sweep_path)


def mirror(storage: str | None, sweep_path: Path) -> None:
    """Copy the driver's files to ``<storage>/<name>/sweep`` (nothing without a URI storage:
    a local or NFS storage's sweep folder is already where resume looks)."""
    if not storage or not is_uri(storage):
        return
    from pyarrow import fs as pafs

    fs, base = filesystem(join(storage, sweep_path.name, "sweep"))
    with tempfile.TemporaryDirectory(prefix="contrasweep-mirror-") as tmp:
        for name in MIRRORED:
            source = sweep_path / name
            if not source.is_file():
                continue
            if name.endswith(".db"):  # a consistent copy of a database a searcher may be writing
                copy = Path(tmp) / name
                with sqlite3.connect(source) as src, sqlite3.connect(copy) as dst:
                    src.backup(dst)
                source = copy
            pafs.copy_files(
                str(source), f"{base}/{name}", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs
            )


def fetch(storage: str, sweep_path: Path) -> bool:
    """Bring a sweep's mirrored driver files from ``storage`` into ``sweep_path`` (a resume on
    another machine); False when the storage holds no such sweep."""
    from pyarrow import fs as pafs

    fs, base = filesystem(join(storage, sweep_path.name, "sweep"))
    try:
        if fs.get_file_info(f"{base}/sweep.json").type != pafs.FileType.File:
            return False
    except OSError as exc:
        raise UserError(
            f"storage {display(storage)} cannot be read: {str(exc).splitlines()[0]}; allowed: a storage "
            "URI this machine reaches"
        ) from None
    sweep_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{sweep_path.name}.", dir=sweep_path.parent))
    try:
        pafs.copy_files(base, str(tmp), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
        os.replace(tmp, sweep_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


class StorageMirror(Callback):
    """Mirrors the driver's files to the storage while the sweep runs: after each finished
    trial, at most every ``every_s`` seconds on results, and at the end."""

    def __init__(self, storage: str | None, sweep_path: Path, every_s: float = 30.0):
        self.storage, self.sweep_path, self.every_s = storage, Path(sweep_path), every_s
        self._last = 0.0

    def __setstate__(self, state):
        state["sweep_path"] = Path(here(state["sweep_path"]))  # the sweep folder may have moved
        self.__dict__.update(state)

    def _mirror(self, force: bool = False) -> None:
        if force or time.monotonic() - self._last >= self.every_s:
            self._last = time.monotonic()
            mirror(self.storage, self.sweep_path)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self._mirror()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._mirror(force=True)

    def on_experiment_end(self, trials, **info):
        self._mirror(force=True)
