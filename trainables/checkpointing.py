"""The loop's side of a trial's state folder (``trainables.checkpoints``): the best-so-far
tracker of the objective (``BestTracker``), what is written when (``Checkpointer``: best weights
on improvement, written in a background thread, ``BackgroundTask``; a full resume state when
one is due; the pointer reported with an epoch's metrics; a recorded divergence) and the
restore of a trial from a reported pointer or its own newest resume state.

May import: torch, ``trainables.checkpoints``, ``trainables.errors``, ``trainables.params``;
never ``trainables.loop`` (which imports this module).
"""

from __future__ import annotations

import math
import shutil
import threading
from pathlib import Path
from typing import Any

import torch

from trainables.checkpoints import (
    STATE_FILE,
    WEIGHTS_FILE,
    StateFolder,
    best_name,
    cpu_copy,
    epoch_of,
    load_state,
    load_weights,
    read_meta,
    resume_name,
    set_rng_state,
    weights_file,
    write_meta,
)
from trainables.errors import ObjectiveNotFinite, TrainingDiverged
from trainables.params import hp_value

POINTER_DIR = ".pointer.tmp"  # the reported pointer's folder inside the state folder (StateFolder.prune: ``.*.tmp``)


class BestTracker:
    """Best value of the objective so far and the validation metrics of that epoch.

    A non-finite value (NaN, as ``val/sts_spearman`` is when every cosine is the same, or
    infinite) is never the best: the first finite value is, whatever came before it (issue 69:
    ``value > nan`` is never true, so a NaN epoch 1 stayed "best" for ever). The epochs whose
    value was non-finite are kept (``non_finite``, in the resume state too), so that a trial
    with no finite value at all fails saying so (``failure``)."""

    def __init__(self, metric: str, mode: str):
        self.metric, self.mode = metric, mode
        self.best_value: float | None = None
        self.best_metrics: dict[str, float] = {}
        self.non_finite: list[tuple[int, float]] = []  # (epoch, value) of each non-finite value

    @property
    def best_epoch(self) -> int | None:
        epoch = self.best_metrics.get("best/epoch")
        return None if epoch is None else int(epoch)

    def update(self, metrics: dict[str, float]) -> bool:
        value = metrics.get(self.metric)
        if value is None:
            return False
        if not math.isfinite(value):
            self.non_finite.append((int(metrics["epoch"]), float(value)))
            return False
        better = self.best_value is None or (value > self.best_value if self.mode == "max" else value < self.best_value)
        if better:
            self.best_value = value
            self.best_metrics = {f"best/{k}": v for k, v in metrics.items() if k.startswith("val/")}
            self.best_metrics["best/epoch"] = metrics["epoch"]
        return better

    def failure(self) -> ObjectiveNotFinite | None:
        """Why the trial has no best epoch, where every value it validated was non-finite
        (None where one was finite, or none was validated)."""
        if self.best_value is not None or not self.non_finite:
            return None
        values = list(dict.fromkeys(repr(v) for _, v in self.non_finite))
        what = "NaN" if values == ["nan"] else f"not finite ({', '.join(values)})"
        epochs = ", ".join(str(e) for e, _ in self.non_finite)
        return ObjectiveNotFinite(
            f"{self.metric} was {what} at every one of its {len(self.non_finite)} validated epochs ({epochs}): "
            "no epoch can be the trial's best, so it has no best weights to keep or test (a constant output, "
            "e.g. every prediction or cosine the same, gives this); try another lr, or check the method's evaluation"
        )

    def state(self) -> dict:
        return {
            "best_value": self.best_value,
            "best_metrics": self.best_metrics,
            "non_finite": [list(pair) for pair in self.non_finite],
        }

    def load(self, state: dict) -> None:
        """A resume state's tracker. One saved before issue 69 may hold a NaN best (its first
        epoch's, kept since): it loads as no best yet, that epoch as a non-finite one."""
        self.best_value, self.best_metrics = state["best_value"], dict(state["best_metrics"])
        self.non_finite = [(int(e), float(v)) for e, v in state.get("non_finite", [])]
        if self.best_value is not None and not math.isfinite(self.best_value):
            if "non_finite" not in state and self.best_epoch is not None:
                self.non_finite = [(self.best_epoch, float(self.best_value))]
            self.best_value, self.best_metrics = None, {}


class Checkpointer:
    """The loop's side of ``trainables.checkpoints``: best weights when validation improves
    (kept in memory too, for the test evaluation), a full resume state when one is due, and the
    small pointer reported with the epoch's metrics. Only rank 0 writes; every rank keeps the
    same in-memory copy (the same improvement decisions: every rank sees the same metrics)."""

    def __init__(self, session, config: dict[str, Any], tracker: BestTracker):
        self.session, self.config, self.tracker = session, config, tracker
        self.folder = StateFolder(session.state_dir)
        self.every = int(hp_value(config, "checkpoint_every"))
        self.pause_epochs = {int(e) for e in config.get("checkpoint_at", ())}
        self.best: str | None = None  # best folder of the current best epoch
        self.best_weights: dict[str, torch.Tensor] | None = None
        self.resume: str | None = None  # newest resume state
        self.state_epoch = 0  # its epoch (0: none)
        self.reported: set[str | None] = set()  # what the newest resume state names (its pointer)
        self.unreported = False  # restored from a state newer than the pointer Ray gave
        self.metrics: dict[str, float] = {}  # the restored pointer's metrics (cost/train_s)
        self._writer: BackgroundTask | None = None

    def record_failure(self, error: TrainingDiverged, epoch: int) -> None:
        if self.session.rank == 0:
            self.wait()
            self.folder.write_failure({"error": type(error).__name__, "message": str(error), "epoch": epoch})

    def raise_recorded_failure(self) -> None:
        """An earlier attempt of this trial diverged (deterministically: same seed, same
        weights from the same resume state): fail again at once, without training."""
        failure = self.folder.failure()
        if failure:
            error = ObjectiveNotFinite if failure.get("error") == ObjectiveNotFinite.__name__ else TrainingDiverged
            raise error(f"{failure['message']} (an earlier attempt of this trial; not trained again)")

    def resume_due(self, epoch: int, last: bool) -> bool:
        """At a validated ``epoch`` (the loop asks at no other): the last, a pause epoch, or the
        first since a multiple of ``checkpoint_every`` passed (that multiple itself when every
        epoch is validated)."""
        return last or epoch // self.every > self.state_epoch // self.every or epoch in self.pause_epochs

    def save_best(self, method, epoch: int, metrics: dict[str, Any]) -> None:
        """Copy the weights to host memory now; rank 0 writes them to disk in a background
        thread while training goes on (joined before anything that names them is written)."""
        self.wait()
        self.best_weights, self.best = cpu_copy(method), best_name(epoch)
        if self.session.rank == 0:
            meta = {"epoch": epoch, "config": self.config, "metrics": numeric(metrics)}
            weights = self.best_weights

            def write() -> None:
                self.folder.write_best(weights, epoch, meta)
                self._prune()

            self._writer = BackgroundTask(write)

    def wait(self) -> None:
        """Until the pending best-weights write is on disk (re-raises its error)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.join()

    def save_resume(self, method, optimizer, scheduler, scaler, epoch: int, metrics: dict | None = None) -> None:
        self.wait()  # the resume state names the best folder: it must exist first
        name = resume_name(epoch)
        if self.session.rank == 0:
            # metrics: the epoch's own, so the state restores whole even without its pointer
            state = {
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "tracker": self.tracker.state(),
                "best": self.best,
                "metrics": numeric(metrics or {}),
            }
            best = self.folder.path(self.best) if self.best == best_name(epoch) else None
            same = best / WEIGHTS_FILE if best is not None else None
            name = self.folder.write_resume(method, state, epoch, same_weights=same)
        self.resume, self.state_epoch = name, epoch
        # the state just written is what a restore goes on from (``restore``): the older one and
        # the best folder only it names go now, before a scheduler may pause the trial here
        self.reported = {self.resume, self.best}
        self._prune()

    def report(self, metrics: dict[str, Any], epoch: int, pointer: bool = True) -> None:
        """Report the epoch; with a pointer when a resume state was written at this epoch."""
        due = pointer and self.resume == resume_name(epoch)
        if due:
            self.wait()
        tmp = None
        if due and self.session.rank == 0:
            # in the trial's own state folder, not the system's temp folder: a trial process Tune
            # ends inside its report never runs the ``finally`` below, and the next ``_prune`` (or
            # the next report) removes what it left (``.*.tmp``; issue 57: one per killed report)
            tmp = Path(self.folder.root) / POINTER_DIR
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        if tmp:
            write_meta(
                tmp,
                {
                    "epoch": epoch,
                    "config": self.config,
                    "metrics": numeric(metrics),
                    "state_dir": self.folder.location,
                    "resume": self.resume,
                    "best": self.best,
                },
            )
        try:
            self.session.report(metrics, tmp)
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def _prune(self) -> None:
        if self.session.rank == 0 and self.session.prune:
            self.folder.prune(self.reported | {self.best, self.resume})

    def restore(self, pointer: str | None, method, optimizer, scheduler, scaler) -> int:
        """Load the state a reported pointer names, or a newer resume state of the trial's own
        folder (``session.resume_newest``: Tune's saved pointer may be older than the folder, or
        missing where Tune saved no state after the trial began); return its epoch (0: a fresh
        start)."""
        own = self.folder.names("resume") if getattr(self.session, "resume_newest", False) else []
        if not pointer and not own:
            return 0
        meta: dict[str, Any] = read_meta(pointer) if pointer else {"resume": own[-1], "state_dir": self.folder.location}
        if "resume" not in meta:  # a checkpoint of an older contrasweep: the whole state in one folder
            meta.update(resume=".", state_dir=pointer)
        folder = self.folder if self.folder.has(meta["resume"]) else StateFolder(meta["state_dir"])
        if meta["resume"] != "." and (own or not folder.has(meta["resume"])):
            # A newer state than the pointer's: the driver died before Tune saved the pointer to
            # it (pruning keeps only the newest resume state).
            newer = [n for n in (own or self.folder.names("resume")) if epoch_of(n) > epoch_of(meta["resume"])]
            if newer:
                folder, meta["resume"] = self.folder, newer[-1]
                self.unreported = True
        self.unreported |= not pointer
        path = folder.local(meta["resume"])
        weights = weights_file(path)
        if weights is None:
            raise FileNotFoundError(f"no weights file in {path}")
        method.load_state_dict(load_weights(weights))
        state = load_state(path / STATE_FILE)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:  # {} from a run without fp16: an enabled scaler cannot load it
            scaler.load_state_dict(state["scaler"])
        self.tracker.load(state["tracker"])
        set_rng_state(state["rng"])
        # no best where the tracker has none (a state whose only "best" was a NaN: BestTracker.load)
        self.resume, self.best = meta["resume"], state.get("best") if self.tracker.best_value is not None else None
        if self.best and folder is not self.folder:  # resumed into another folder: bring the best along
            self.best_weights = load_weights(folder.local(self.best) / WEIGHTS_FILE)
            best_meta = read_meta(folder.local(self.best))
            if self.session.rank == 0:
                self.best = self.folder.write_best(self.best_weights, best_meta["epoch"], best_meta)
        self.reported = {self.resume, self.best}
        self.metrics = dict(state.get("metrics") or meta.get("metrics", {}))
        self.state_epoch = int(state["epoch"])
        return self.state_epoch

    def load_best_into(self, method) -> None:
        """The best validation epoch's weights into ``method`` (from memory, or from the state
        folder after a restore)."""
        if self.best_weights is None and self.best:
            self.best_weights = load_weights(self.folder.local(self.best) / WEIGHTS_FILE)
        if self.best_weights is not None:
            method.load_state_dict(self.best_weights)


class BackgroundTask:
    """``fn`` in a daemon thread; ``join`` waits and re-raises what it raised."""

    def __init__(self, fn):
        self._error: BaseException | None = None

        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to join()
                self._error = exc

        self._thread = threading.Thread(target=run, name="contrasweep-best-weights", daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def numeric(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
