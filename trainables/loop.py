"""The generic training loop (docs/architecture.md, "Data flow"): one loop for every method.

AdamW with warm-up (LaCon Sec. 3.1: 6 % of the optimisation steps) and then a linear decay
(default), a constant rate or a half-cosine decay (``lr_schedule``), gradient clipping, evaluation on the
validation split every epoch, the test split once at the end on the best validation epoch's
weights, checkpoints sized to their job (``trainables.checkpoints``: best weights on
improvement, a full resume state every ``checkpoint_every`` epochs), seeded.

The loop never branches on a method's name: it builds the method from the registry and calls
only the interface of ``trainables.base.Method``.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from transformers import (
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
)

from trainables.checkpoints import (
    META_FILE,
    STATE_FILE,
    WEIGHTS_FILE,
    StateFolder,
    best_folder,
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
from trainables.encoder import load_encoder
from trainables.errors import TrainingDiverged
from trainables.phase_progress import STEP_METRICS, track
from trainables.batches import to_device, train_batches
from trainables.gather import StageContext
from trainables.gather import classification_evaluate as evaluate  # noqa: F401  (users' and tests' name)
from trainables.params import LOOP_PARAMS
from trainables.registry import get_method
from trainables.step import TrainStep


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_method(config: dict[str, Any], num_labels: int):
    """Encoder + method heads, from the trial config (also used to reload a checkpoint)."""
    encoder_cfg = config.get("encoder", {})
    encoder = load_encoder(encoder_cfg.get("name", "default"), encoder_cfg.get("pooling", "mean"))
    return get_method(config["method"])(encoder, num_labels, config["hp"])


def hp_value(config: dict[str, Any], key: str):
    return config["hp"].get(key, LOOP_PARAMS[key].default)


def train(config: dict[str, Any], data: dict[str, Any], session) -> dict[str, float]:
    """Train one trial. ``data``: {"tables": {split: pyarrow.Table}, "num_labels": int}.

    ``config``: {"method", "encoder": {name, pooling}, "hp": {...}, "metric", "mode"} and
    optionally ``checkpoint_at`` (epochs that must end with a full resume state: a scheduler
    may pause the trial there). Returns the final metrics (also reported every epoch through
    ``session``); the test split is evaluated once, after the last epoch, on the weights of
    the best validation epoch (docs/architecture.md, "Selection and the test split").
    """
    hp = lambda key: hp_value(config, key)  # noqa: E731
    setup_started = time.perf_counter()
    torch.set_num_threads(hp("torch_threads"))
    seed_everything(hp("seed"))
    tables, num_labels = data["tables"], data["num_labels"]
    method = build_method(config, num_labels)
    model = session.wrap_model(method)
    device = session.device

    steps_per_epoch = math.ceil(tables["train"].num_rows / hp("batch_size"))
    total_steps = steps_per_epoch * hp("epochs")
    optimizer = torch.optim.AdamW(method.param_groups(hp("lr"), hp("weight_decay")), lr=hp("lr"), eps=hp("adam_eps"))
    warmup = int(hp("warmup_ratio") * total_steps)
    scheduler = make_scheduler(optimizer, hp("lr_schedule"), method, warmup, total_steps)
    step = TrainStep(method, model, optimizer, scheduler, device=device, amp=hp("amp"), compile=hp("compile"),
                     max_grad_norm=hp("max_grad_norm"))
    scaler = step.scaler

    tracker = BestTracker(config.get("metric", "val/accuracy"), config.get("mode", "max"))
    saver = Checkpointer(session, config, tracker)
    saver.raise_recorded_failure()
    start_epoch = saver.restore(session.latest_checkpoint(), method, optimizer, scheduler, scaler) + 1

    metrics: dict[str, float] = {**saver.metrics, **tracker.best_metrics}  # the restored epoch's
    if saver.unreported and start_epoch <= hp("epochs"):
        # restored from a state newer than Ray's pointer: the driver may never have seen this
        # epoch (it died between the state's write and the report); it skips what it has logged
        saver.report(dict(metrics), start_epoch - 1)
    # cost metrics (a Pareto sweep may trade them against quality): trainable parameters and
    # the cumulative seconds spent in optimisation steps (evaluation excluded), kept across resumes
    parameters = float(sum(p.numel() for p in method.parameters() if p.requires_grad))
    train_seconds = float(saver.metrics.get("cost/train_s", 0.0))
    # where an epoch's time goes (benchmarks/epoch_costs.py, sweep_overhead.py): time/<phase>_s
    clock = PhaseClock(device)
    clock.times["setup"] = time.perf_counter() - setup_started
    for epoch in range(start_epoch, hp("epochs") + 1):
        started = time.perf_counter()
        model.train()
        with clock("train"):
            batches = track(train_batches(tables["train"], hp("batch_size"), hp("seed"), epoch, session.rank, session.world_size),
                            f"epoch {epoch}/{hp('epochs')} training", steps_per_epoch, session.rank)
            try:
                sums, per_step, steps = run_steps(step, batches, device, method.step_metrics,
                                                  first_step=(epoch - 1) * steps_per_epoch + 1, epoch=epoch)
            except TrainingDiverged as error:
                saver.record_failure(error, epoch)  # a retry fails at once instead of diverging again
                raise
        train_seconds += clock.times["train"]
        metrics = {"epoch": epoch, "lr": scheduler.get_last_lr()[0], "data/train_rows": tables["train"].num_rows,
                   "cost/train_s": train_seconds, "cost/parameters": parameters}
        metrics.update(mean_over_ranks(session, {k: float(v) for k, v in sums.items()}, steps))
        if per_step:
            metrics[STEP_METRICS] = step_series(per_step, first_step=(epoch - 1) * steps_per_epoch + 1)
        context = StageContext(tables, num_labels, hp("eval_batch_size"), session, hp("seed"), epoch, data)
        with clock("stage2"):
            metrics.update(prefixed("stage2", method.second_stage(context) or {}))
        with clock("eval"):
            metrics.update(prefixed("val", method.evaluate(context, "validation")))
        last = epoch == hp("epochs")
        with clock("checkpoint"):
            if tracker.update(metrics):
                saver.save_best(method, epoch, metrics)
            if saver.resume_due(epoch, last):
                saver.save_resume(method, optimizer, scheduler, scaler, epoch, metrics)
        metrics.update(tracker.best_metrics)
        if last:
            with clock("test"):
                metrics.update(evaluate_test(method, data, config, saver, session))
        metrics.update(clock.report())
        metrics["time/epoch_s"] = time.perf_counter() - started
        saver.report(metrics, epoch)
    if start_epoch > hp("epochs"):  # restored after the last epoch: its report may not have arrived
        metrics.update(evaluate_test(method, data, config, saver, session))
        saver.report(metrics, hp("epochs"), pointer=False)
    saver.wait()
    return metrics


# The loss is read on the host once every this many steps (one GPU sync per window, never per
# step) to stop a diverging trial within a few steps of its first non-finite loss.
DIVERGENCE_CHECK_STEPS = 16


def run_steps(step, batches, device, step_metrics, first_step: int = 1, epoch: int = 1) -> tuple[dict, dict, int]:
    """One epoch's optimiser steps: the sums of the scalar outputs and the per-step series of
    ``step_metrics``, both kept on the device (no host sync per step on a GPU). Raises
    ``TrainingDiverged`` naming the first step (``first_step`` = this epoch's first global
    step) whose loss is NaN or infinite, at most ``DIVERGENCE_CHECK_STEPS`` steps later."""
    sums: dict[str, torch.Tensor] = {}
    per_step: dict[str, list[torch.Tensor]] = {k: [] for k in step_metrics}
    window: list[torch.Tensor] = []
    steps = 0
    for batch in batches:
        out = step(to_device(batch, device))
        for key, value in out.items():
            if torch.is_tensor(value) and value.numel() == 1:
                sums[key] = sums.get(key, 0.0) + value.float()
        for key in per_step:
            per_step[key].append(out[key].float())
        window.append(out["loss"].detach().float())
        steps += 1
        if len(window) == DIVERGENCE_CHECK_STEPS:
            check_finite(window, first_step + steps - len(window), epoch)
            window = []
    if window:
        check_finite(window, first_step + steps - len(window), epoch)
    return sums, per_step, steps


def check_finite(losses: list[torch.Tensor], first_step: int, epoch: int) -> None:
    values = torch.stack(losses)
    finite = torch.isfinite(values)
    if bool(finite.all()):
        return
    at = int((~finite).nonzero()[0])
    raise TrainingDiverged(f"train/loss is {float(values[at])} at step {first_step + at} (epoch {epoch}): the trial "
                           "diverged; try a lower lr, gradient clipping (max_grad_norm) or less weight_decay")


class PhaseClock:
    """Seconds per phase of the current epoch (``time/<phase>_s``). On a GPU it waits for the
    device at the end of a phase, once per phase and epoch (never per step), so that queued
    kernels are counted where they were launched."""

    def __init__(self, device: torch.device):
        self.device = device
        self.times: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.times[phase] = self.times.get(phase, 0.0) + time.perf_counter() - started

    def report(self) -> dict[str, float]:
        out = {f"time/{phase}_s": seconds for phase, seconds in self.times.items()}
        self.times = {}
        return out


def evaluate_test(method, data: dict[str, Any], config: dict[str, Any], saver: "Checkpointer", session) -> dict[str, float]:
    """``test/*`` of the best validation epoch's weights: evaluated once per trial, after its
    last epoch (a trial a scheduler stops early is never evaluated on test). The method keeps
    the best weights afterwards."""
    if "test" not in data["tables"]:
        return {}
    saver.load_best_into(method)
    context = StageContext(data["tables"], data["num_labels"], hp_value(config, "eval_batch_size"), session,
                           hp_value(config, "seed"), saver.tracker.best_epoch or 0, data)  # fresh cache: new weights
    return prefixed("test", method.evaluate(context, "test"))


def make_scheduler(optimizer, schedule: str, method, warmup: int, total_steps: int):
    """Warm-up, then ``schedule``; ``method`` defers to the method's paper (``Method.lr_schedule``)."""
    if schedule == "method":
        schedule = method.lr_schedule()
    if schedule == "constant":
        return get_constant_schedule_with_warmup(optimizer, warmup)
    if schedule == "cosine":  # half a cosine period from the peak to 0 at the last step
        return get_cosine_schedule_with_warmup(optimizer, warmup, total_steps)
    return get_linear_schedule_with_warmup(optimizer, warmup, total_steps)


def step_series(per_step: dict[str, list[torch.Tensor]], first_step: int) -> dict[str, list[list[float]]]:
    """This rank's per-step values as ``{key: [[global_step, value], ...]}`` (rank 0's are the
    ones logged; one host sync per epoch, not per step)."""
    out = {}
    for key, values in per_step.items():
        host = torch.stack(values).cpu().tolist() if values else []
        out[key] = [[first_step + i, v] for i, v in enumerate(host)]
    return out


def mean_over_ranks(session, sums: dict[str, float], steps: int) -> dict[str, float]:
    """Training losses averaged over every rank's steps. Every rank must report the same
    numbers: the loop branches on them (best epoch -> test evaluation, a collective), and a
    rank that branched alone would wait forever in the other's all_gather."""
    gathered = session.all_gather((sums, steps))
    total_steps = max(sum(n for _, n in gathered), 1)
    keys = sorted({k for part, _ in gathered for k in part})
    return {f"train/{k}": sum(part.get(k, 0.0) for part, _ in gathered) / total_steps for k in keys}


def prefixed(prefix: str, metrics: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}/{k}": v for k, v in metrics.items()}


class BestTracker:
    """Best value of the objective so far and the validation metrics of that epoch."""

    def __init__(self, metric: str, mode: str):
        self.metric, self.mode = metric, mode
        self.best_value: float | None = None
        self.best_metrics: dict[str, float] = {}

    @property
    def best_epoch(self) -> int | None:
        epoch = self.best_metrics.get("best/epoch")
        return None if epoch is None else int(epoch)

    def update(self, metrics: dict[str, float]) -> bool:
        value = metrics.get(self.metric)
        if value is None:
            return False
        better = self.best_value is None or (value > self.best_value if self.mode == "max" else value < self.best_value)
        if better:
            self.best_value = value
            self.best_metrics = {f"best/{k}": v for k, v in metrics.items() if k.startswith("val/")}
            self.best_metrics["best/epoch"] = metrics["epoch"]
        return better

    def state(self) -> dict:
        return {"best_value": self.best_value, "best_metrics": self.best_metrics}

    def load(self, state: dict) -> None:
        self.best_value, self.best_metrics = state["best_value"], dict(state["best_metrics"])


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
        self.best: str | None = None        # best folder of the current best epoch
        self.best_weights: dict[str, torch.Tensor] | None = None
        self.resume: str | None = None      # newest resume state
        self.reported: set[str] = set()     # what the last reported pointer names
        self.unreported = False             # restored from a state newer than the pointer Ray gave
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
            raise TrainingDiverged(f"{failure['message']} (an earlier attempt of this trial; not trained again)")

    def resume_due(self, epoch: int, last: bool) -> bool:
        return last or epoch % self.every == 0 or epoch in self.pause_epochs

    def save_best(self, method, epoch: int, metrics: dict[str, Any]) -> None:
        """Copy the weights to host memory now; rank 0 writes them to disk in a background
        thread while training goes on (joined before anything that names them is written)."""
        self.wait()
        self.best_weights, self.best = cpu_copy(method), best_name(epoch)
        if self.session.rank == 0:
            meta = {"epoch": epoch, "config": self.config, "metrics": numeric(metrics)}
            weights = self.best_weights
            self._writer = BackgroundTask(lambda: (self.folder.write_best(weights, epoch, meta), self._prune()))

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
            state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "scaler": scaler.state_dict(), "tracker": self.tracker.state(), "best": self.best,
                     "metrics": numeric(metrics or {})}
            same = self.folder.path(self.best) / WEIGHTS_FILE if self.best == best_name(epoch) else None
            name = self.folder.write_resume(method, state, epoch, same_weights=same)
        self.resume = name

    def report(self, metrics: dict[str, Any], epoch: int, pointer: bool = True) -> None:
        """Report the epoch; with a pointer when a resume state was written at this epoch."""
        due = pointer and self.resume == resume_name(epoch)
        if due:
            self.wait()
        tmp = tempfile.mkdtemp(prefix="contrasweep-pointer-") if due and self.session.rank == 0 else None
        if tmp:
            write_meta(tmp, {"epoch": epoch, "config": self.config, "metrics": numeric(metrics),
                             "state_dir": self.folder.location, "resume": self.resume, "best": self.best})
        try:
            self.session.report(metrics, tmp)
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        if due:
            self.reported = {self.resume, self.best}
            self._prune()

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
        meta = read_meta(pointer) if pointer else {"resume": own[-1], "state_dir": self.folder.location}
        if "resume" not in meta:  # a checkpoint of an older contrasweep: the whole state in one folder
            meta.update(resume=".", state_dir=pointer)
        folder = self.folder if self.folder.has(meta["resume"]) else StateFolder(meta["state_dir"])
        if meta["resume"] != "." and (own or not folder.has(meta["resume"])):
            # A newer state than the pointer's: the driver died before Tune saved the pointer to
            # it (or finished the trial, and finish_state kept only its newest resume state).
            newer = [n for n in (own or self.folder.names("resume")) if epoch_of(n) > epoch_of(meta["resume"])]
            if newer:
                folder, meta["resume"] = self.folder, newer[-1]
                self.unreported = True
        self.unreported |= not pointer
        path = folder.local(meta["resume"])
        method.load_state_dict(load_weights(weights_file(path)))
        state = load_state(path / STATE_FILE)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:  # {} from a run without fp16: an enabled scaler cannot load it
            scaler.load_state_dict(state["scaler"])
        self.tracker.load(state["tracker"])
        set_rng_state(state["rng"])
        self.resume, self.best = meta["resume"], state.get("best")
        if self.best and folder is not self.folder:  # resumed into another folder: bring the best along
            self.best_weights = load_weights(folder.local(self.best) / WEIGHTS_FILE)
            best_meta = read_meta(folder.local(self.best))
            if self.session.rank == 0:
                self.best = self.folder.write_best(self.best_weights, best_meta["epoch"], best_meta)
        self.reported = {self.resume, self.best}
        self.metrics = dict(state.get("metrics") or meta.get("metrics", {}))
        return int(state["epoch"])

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


def load_trained(directory: str, num_labels: int | None = None):
    """Rebuild a trained method from a best folder, a reported pointer (its best folder) or a
    downloaded registry version (for reports and users)."""
    folder = best_folder(directory)
    if folder is None:
        raise FileNotFoundError(f"{directory}: no trained weights there ({WEIGHTS_FILE} and {META_FILE}, "
                                "or a checkpoint pointer naming them)")
    meta = read_meta(folder)
    encoder = meta["config"].get("encoder", {})
    if encoder.get("origin") and not os.path.exists(encoder["name"]):
        # trained on a cluster from a shipped folder (contrasweep.run.shipping): the worker read it at
        # a path relative to the job's working_dir; here it is the driver's own folder
        meta["config"]["encoder"] = {**encoder, "name": encoder["origin"]}
    if num_labels is None:
        num_labels = int(meta["config"].get("num_labels", 0)) or None
    method = build_method(meta["config"], num_labels)
    method.load_state_dict(load_weights(weights_file(folder)))
    return method.eval()
