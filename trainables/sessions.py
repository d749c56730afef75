"""Where the loop runs: the loop talks to a session, never to Ray directly.

* ``LocalSession``  — plain Python (unit tests, debugging): reports go to a list.
* ``TuneSession``   — a one-worker trial run inside the Tune trial process.
* ``TrainSession``  — one rank of a Ray Train ``TorchTrainer`` (DDP, gloo on CPU / nccl on GPU).

Only rank 0 writes checkpoints; every rank calls ``report`` (Train's report is a barrier).
Each session names the trial's *state folder* (``trainables.checkpoints``): where the loop
writes best weights and resume states once, and what it reports is a small pointer to them.
``prune`` says whether superseded states are deleted (not by ``LocalSession``: a debugging run
keeps every epoch's state, so that any epoch can be resumed from). ``resume_newest`` says
whether a restart goes on from the newest resume state in the trial's folder when that is newer
than the pointer Ray hands back (Tune's saved experiment state may be older than the folder:
docs/architecture.md, "Resume"); a ``LocalSession`` resumes exactly what it is given.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import torch


class LocalSession:
    rank = 0
    world_size = 1
    prune = False
    resume_newest = False

    def __init__(self, checkpoint_root: str | None = None, resume_from: str | None = None, use_gpu: bool = False):
        self.reports: list[dict[str, Any]] = []
        self.checkpoints: list[str] = []
        self._given_root = checkpoint_root
        self._resume_from = resume_from
        self.device = torch.device("cuda" if use_gpu and torch.cuda.is_available() else "cpu")

    @property
    def _root(self) -> str:
        """The folder it keeps states in: a temporary one made when first written to, so a
        session that never writes (a ``TuneSession``, an embedding pass) leaves nothing behind
        (issue 57: an empty ``contrasweep-ckpt-*`` per trial)."""
        if self._given_root is None:
            self._given_root = tempfile.mkdtemp(prefix="contrasweep-ckpt-")
        return self._given_root

    @property
    def state_dir(self) -> str:
        return os.path.join(self._root, "state")

    def latest_checkpoint(self) -> str | None:
        return self._resume_from

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        self.reports.append(dict(metrics))
        if checkpoint_dir is not None:
            kept = os.path.join(self._root, f"epoch_{metrics.get('epoch', len(self.reports))}")
            shutil.copytree(checkpoint_dir, kept, dirs_exist_ok=True)
            self.checkpoints.append(kept)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.to(self.device)

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]


def checkpoint_path(ckpt) -> str | None:
    """Where a restored Ray checkpoint (the loop's small pointer) can be read: in place on a
    local file system; else a copy in one folder per process, replaced by the next restore and
    removed at exit. Ray's ``to_directory()`` made a new ``checkpoint_tmp_*`` in the temp folder
    on every restore and never removed it (issue 57)."""
    if ckpt is None:
        return None
    import pyarrow.fs

    if isinstance(ckpt.filesystem, pyarrow.fs.LocalFileSystem):
        return ckpt.path
    import atexit

    target = os.path.join(tempfile.gettempdir(), f"contrasweep-restore-{os.getpid()}")
    if not os.path.exists(target):
        atexit.register(shutil.rmtree, target, True)
    shutil.rmtree(target, ignore_errors=True)
    return ckpt.to_directory(target)


class TuneSession(LocalSession):
    """The trial process itself runs the loop (no Train worker group: ~1 s start-up, not ~30 s),
    on the GPU Tune gave the trial when ``use_gpu`` (a fraction of one GPU is enough: several
    small trials share it)."""

    prune = True
    resume_newest = True

    def __init__(self, state_dir: str, use_gpu: bool = False):
        super().__init__(use_gpu=use_gpu)
        self._state_dir = state_dir

    @property
    def state_dir(self) -> str:
        return self._state_dir

    def latest_checkpoint(self) -> str | None:
        from ray import tune

        return checkpoint_path(tune.get_checkpoint())

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        from ray import tune

        checkpoint = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        tune.report(metrics, checkpoint=checkpoint)


class TrainSession:
    """One Ray Train worker; ``prepare_model`` picks the device and wraps in DDP. ``state_dir``:
    the Tune trial's state folder, handed over by the trial (rank 0 writes it; every rank reads
    it on a restore, so it must be on storage every worker sees)."""

    prune = True
    resume_newest = True

    def __init__(self, state_dir: str):
        import ray.train

        self.state_dir = state_dir

        context = ray.train.get_context()
        self.rank = context.get_world_rank()
        self.world_size = context.get_world_size()
        from ray.train.torch import get_device

        self.device = get_device()

    def latest_checkpoint(self) -> str | None:
        import ray.train

        return checkpoint_path(ray.train.get_checkpoint())

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        import ray.train

        checkpoint = None
        if checkpoint_dir is not None and self.rank == 0:
            checkpoint = ray.train.Checkpoint.from_directory(checkpoint_dir)
        ray.train.report(metrics, checkpoint=checkpoint)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        from ray.train.torch import prepare_model

        # find_unused_parameters: a method may leave a head unused in some steps (ablations).
        return prepare_model(model, parallel_strategy_kwargs={"find_unused_parameters": True})

    def all_gather(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out
