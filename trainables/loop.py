"""The generic training loop (docs/architecture.md, "Data flow"): one loop for every method.

AdamW with warm-up (LaCon Sec. 3.1: 6 % of the optimisation steps) and then a linear decay
(default), a constant rate or a half-cosine decay (``lr_schedule``), gradient clipping, evaluation on the
validation split every epoch (or every ``eval_every``-th: ``trainables.report_window``), the test split
once at the end on the best validation epoch's weights (unless the sweep evaluates it after selection:
``trainables.test_split``), checkpoints sized to their job (``trainables.checkpoints``: best weights on
improvement, a full resume state every ``checkpoint_every`` epochs; what is written when and the
restore: ``trainables.checkpointing``), seeded. ``train`` = ``set_up`` + one ``run_epoch`` per epoch.
The budget is ``epochs``, or ``max_steps`` optimiser steps where set (``trainables.params.epochs_for``:
the last epoch cut after the steps left, the schedule's total steps ``max_steps``); each epoch
reports ``train/steps``, the optimiser steps so far.

The loop never branches on a method's name: it builds the method from the registry and calls
only the interface of ``trainables.base.Method``. The schedule and an epoch's optimiser steps
with the divergence check: ``trainables.optim_steps``.

May import: torch, transformers, numpy and the generic modules of ``trainables`` (the registry
finds the method; never a module of ``trainables.methods`` by name).
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trainables.batches import train_batches
from trainables.checkpointing import BestTracker, Checkpointer
from trainables.checkpoints import (
    META_FILE,
    UNREAD_WEIGHTS,
    WEIGHTS_FILE,
    best_folder,
    load_weights,
    read_meta,
    weights_file,
)
from trainables.encoder import load_encoder
from trainables.errors import ObjectiveNotFinite, SpecError, TrainingDiverged
from trainables.gather import StageContext
from trainables.gather import classification_evaluate as evaluate  # noqa: F401  (users' and tests' name)
from trainables.optim_steps import make_scheduler, run_steps
from trainables.params import (  # noqa: F401  (LOOP_PARAMS: users' and tests' name)
    LOOP_PARAMS,
    epochs_for,
    hp_value,
    is_validated,
    steps_in_epoch,
    steps_per_epoch,
    total_steps,
)
from trainables.phase_progress import track
from trainables.registry import get_method
from trainables.report_window import PhaseClock, ReportWindow
from trainables.step import TrainStep


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_method(config: dict[str, Any], num_labels: int | None, pretrained: bool = True):
    """Encoder + method heads, from the trial config (also used to reload a checkpoint, whose
    weights replace the pretrained ones: ``pretrained=False`` reads the encoder's config only)."""
    encoder_cfg = config.get("encoder", {})
    encoder = load_encoder(encoder_cfg.get("name", "default"), encoder_cfg.get("pooling", "mean"), pretrained)
    if hp_value(config, "gradient_checkpointing"):
        checkpoint_activations(encoder)
    return get_method(config["method"])(encoder, num_labels, config["hp"])


def checkpoint_activations(encoder) -> None:
    """Hugging Face's gradient checkpointing on the encoder's backbone (``gradient_checkpointing``).
    The recomputation replays dropout's random state (torch's checkpoint) and, through
    ``context_fn``, each dropout module's rate as it was in the forward pass: SupCL-Seq passes a
    batch through the encoder once per dropout rate and back-propagates after the last view,
    which without it would recompute every view at the last rate (and fail torch's check)."""
    backbone = encoder.backbone
    if not getattr(backbone, "supports_gradient_checkpointing", False):
        raise SpecError(
            f"fixed.gradient_checkpointing=true is not allowed for {type(backbone).__name__}, which does not "
            "support it; allowed: false, or an encoder whose model does (BERT, RoBERTa, MiniLM)"
        )
    dropouts = [m for m in backbone.modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)]

    def rates_as_in_forward():
        rates = [m.p for m in dropouts]

        @contextmanager
        def recompute():
            now = [m.p for m in dropouts]
            for module, rate in zip(dropouts, rates):
                module.p = rate
            try:
                yield
            finally:
                for module, rate in zip(dropouts, now):
                    module.p = rate

        return nullcontext(), recompute()

    kwargs = {"use_reentrant": False, "context_fn": rates_as_in_forward}
    enable = getattr(backbone, "activation_checkpointing_enable", None)  # transformers >= 5.2x: the old name warns
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def train(config: dict[str, Any], data: dict[str, Any], session) -> dict[str, float]:
    """Train one trial. ``data``: {"tables": {split: pyarrow.Table}, "num_labels": int}.

    ``config``: {"method", "encoder": {name, pooling}, "hp": {...}, "metric", "mode"} and
    optionally ``checkpoint_at`` (epochs that must end with a full resume state: a scheduler
    may pause the trial there) and ``evaluate_test`` (``tests_in_trial``). Returns the final
    metrics (also reported every epoch through ``session``); the test split is evaluated once,
    after the last epoch, on the weights of the best validation epoch, unless the sweep does
    that after selection (docs/architecture.md, "Selection and the test split"). A trial whose
    objective was NaN or infinite at every validated epoch has no best epoch: it reports its
    last epoch, then raises ``ObjectiveNotFinite`` (``no_best``), untested.
    """
    run = set_up(config, data, session)
    epochs = run.epochs
    metrics = run.metrics
    for epoch in range(run.start_epoch, epochs + 1):
        metrics = run_epoch(run, epoch)
    if run.start_epoch > epochs:  # restored after the last epoch: its report may not have arrived
        failure = no_best(run, epochs)
        if tests_in_trial(config) and failure is None:
            metrics.update(evaluate_test(run.method, data, config, run.saver, session))
        run.saver.report(metrics, epochs, pointer=False)
        if failure is not None:
            raise failure
    run.saver.wait()
    return metrics


@dataclass
class TrialRun:
    """What ``set_up`` builds for a trial and every ``run_epoch`` uses."""

    config: dict[str, Any]
    data: dict[str, Any]
    session: Any
    method: Any
    model: Any  # the method as the session wraps it (DDP under Ray Train)
    optimizer: torch.optim.Optimizer
    scheduler: Any
    step: TrainStep
    tracker: BestTracker
    saver: Checkpointer
    clock: PhaseClock
    steps_per_epoch: int
    epochs: int  # the epochs it trains (``epochs_for``: ``max_steps`` resolved)
    start_epoch: int
    parameters: float  # cost/parameters: trainable parameters
    train_seconds: float  # cost/train_s: seconds in optimisation steps so far, kept across resumes
    metrics: dict[str, float] = field(default_factory=dict)  # the restored epoch's (the result if none is left)
    window: ReportWindow = field(default_factory=ReportWindow)  # the epochs trained since the last report

    def hp(self, key: str):
        return hp_value(self.config, key)


def set_up(config: dict[str, Any], data: dict[str, Any], session) -> TrialRun:
    """Seed, build the method, its optimiser, schedule and step, and restore the trial's newest
    state (reporting a restored epoch the driver may not have seen)."""
    hp = lambda key: hp_value(config, key)  # noqa: E731
    setup_started = time.perf_counter()
    torch.set_num_threads(hp("torch_threads"))
    seed_everything(hp("seed"))
    tables, num_labels = data["tables"], data["num_labels"]
    method = build_method(config, num_labels)
    model = session.wrap_model(method)
    device = session.device

    rows = tables["train"].num_rows
    per_epoch, epochs = steps_per_epoch(rows, hp("batch_size")), epochs_for(config["hp"], rows)
    steps = total_steps(config["hp"], rows)  # max_steps where set: the schedule ends at 0 after exactly these
    optimizer = torch.optim.AdamW(method.param_groups(hp("lr"), hp("weight_decay")), lr=hp("lr"), eps=hp("adam_eps"))
    warmup = int(hp("warmup_ratio") * steps)
    scheduler = make_scheduler(optimizer, hp("lr_schedule"), method, warmup, steps)
    step = TrainStep(
        method,
        model,
        optimizer,
        scheduler,
        device=device,
        amp=hp("amp"),
        compile=hp("compile"),
        max_grad_norm=hp("max_grad_norm"),
    )

    tracker = BestTracker(config.get("metric", "val/accuracy"), config.get("mode", "max"))
    saver = Checkpointer(session, config, tracker)
    saver.raise_recorded_failure()
    start_epoch = saver.restore(session.latest_checkpoint(), method, optimizer, scheduler, step.scaler) + 1

    metrics: dict[str, float] = {**saver.metrics, **tracker.best_metrics}  # the restored epoch's
    if saver.unreported and start_epoch <= epochs:
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
    run = TrialRun(
        config,
        data,
        session,
        method,
        model,
        optimizer,
        scheduler,
        step,
        tracker,
        saver,
        clock,
        per_epoch,
        epochs,
        start_epoch,
        parameters,
        train_seconds,
        metrics,
    )
    run.window.evaluations = int(
        saver.metrics.get("evaluations", start_epoch - 1)
    )  # a state before eval_every: each epoch
    return run


def run_epoch(run: TrialRun, epoch: int) -> dict[str, float]:
    """One epoch: the optimiser steps, then where the epoch is validated (``params.is_validated``:
    every ``eval_every``-th, the scheduler's pause epochs, the last) the method's second stage,
    validation, the checkpoints due, the test split after the last epoch (``tests_in_trial``) and
    the report of every epoch since the last one; returns the epoch's metrics (an epoch that only
    trained: its ``epoch`` and ``train/steps``)."""
    hp, session, method, clock, saver, tracker = run.hp, run.session, run.method, run.clock, run.saver, run.tracker
    tables, data, device = run.data["tables"], run.data, session.device
    first_step = (epoch - 1) * run.steps_per_epoch + 1
    due = steps_in_epoch(run.config["hp"], tables["train"].num_rows, epoch)  # fewer in a max_steps trial's last
    started, trained = time.perf_counter(), clock.times.get("train", 0.0)
    run.model.train()
    with clock("train"):
        batches: Iterator[Any] = itertools.islice(
            train_batches(tables["train"], hp("batch_size"), hp("seed"), epoch, session.rank, session.world_size), due
        )  # the same batches, in order, as far as due
        batches = track(batches, f"epoch {epoch}/{run.epochs} training", due, session.rank)
        try:
            sums, per_step, steps = run_steps(
                run.step, batches, device, method.step_metrics, first_step=first_step, epoch=epoch
            )
        except TrainingDiverged as error:
            saver.record_failure(error, epoch)  # a retry fails at once instead of diverging again
            raise
    run.train_seconds += clock.times["train"] - trained
    run.window.add(sums, per_step, steps, first_step, started)
    last = epoch == run.epochs
    if not is_validated(epoch, run.epochs, int(hp("eval_every")), saver.pause_epochs):
        return {"epoch": epoch, "train/steps": first_step - 1 + steps}
    metrics = {
        "epoch": epoch,
        "lr": run.scheduler.get_last_lr()[0],
        "data/train_rows": tables["train"].num_rows,
        "train/steps": first_step - 1 + steps,
        "cost/train_s": run.train_seconds,
        "cost/parameters": run.parameters,
    }
    metrics.update(run.window.take(session))
    context = StageContext(tables, data["num_labels"], hp("eval_batch_size"), session, hp("seed"), epoch, data)
    with clock("stage2"):
        metrics.update(prefixed("stage2", method.second_stage(context) or {}))
    with clock("eval"):
        metrics.update(prefixed("val", method.evaluate(context, "validation")))
    with clock("checkpoint"):
        if tracker.update(metrics):
            saver.save_best(method, epoch, metrics)
        if saver.resume_due(epoch, last):
            saver.save_resume(method, run.optimizer, run.scheduler, run.step.scaler, epoch, metrics)
    metrics.update(tracker.best_metrics)
    failure = no_best(run, epoch) if last else None
    if last and tests_in_trial(run.config) and failure is None:
        with clock("test"):
            metrics.update(evaluate_test(method, data, run.config, saver, session))
    metrics.update(clock.report())
    metrics["time/epoch_s"] = time.perf_counter() - run.window.epoch_started  # every epoch it reports
    saver.report(metrics, epoch)
    if failure is not None:  # the last epoch reported as every other, then the trial fails
        raise failure
    return metrics


def no_best(run: TrialRun, epoch: int) -> ObjectiveNotFinite | None:
    """After the last epoch: the trial's objective was non-finite at every validated epoch
    (``BestTracker.failure``), so no epoch is its best and nothing is tested; recorded in the
    state folder before the last report (a retry fails at once, never trains again)."""
    failure = run.tracker.failure()
    if failure is not None:
        run.saver.record_failure(failure, epoch)
    return failure


def tests_in_trial(config: dict[str, Any]) -> bool:
    """Whether the trial evaluates the test split after its last epoch (``evaluate_test`` in the
    loop's config, default yes). A sweep with ``evaluation.test: reported`` says no: it
    evaluates the test split after selection, from the best weights, for what it reports
    (``trainables.test_split``)."""
    return bool(config.get("evaluate_test", True))


def evaluate_test(
    method, data: dict[str, Any], config: dict[str, Any], saver: Checkpointer, session
) -> dict[str, float]:
    """``test/*`` of the best validation epoch's weights: evaluated once per trial, after its
    last epoch (a trial a scheduler stops early is never evaluated on test). The method keeps
    the best weights afterwards."""
    if "test" not in data["tables"]:
        return {}
    saver.load_best_into(method)
    context = StageContext(
        data["tables"],
        data["num_labels"],
        hp_value(config, "eval_batch_size"),
        session,
        hp_value(config, "seed"),
        saver.tracker.best_epoch or 0,
        data,
    )  # fresh cache: new weights
    return prefixed("test", method.evaluate(context, "test"))


def prefixed(prefix: str, metrics: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}/{k}": v for k, v in metrics.items()}


def load_trained(directory: str, num_labels: int | None = None, encoder_dir: str | None = None):
    """Rebuild a trained method from a best folder, a reported pointer (its best folder) or a
    downloaded registry version (for reports and users). ``encoder_dir``: a folder with the
    encoder's ``config.json`` (and tokenizer) but not its pretrained weights, as an MLflow
    model carries it (``trainables.inference``): the encoder is built from that config. The
    checkpoint must hold every weight but ``UNREAD_WEIGHTS`` (an MLflow model leaves those out)."""
    folder = best_folder(directory)
    if folder is None:
        raise FileNotFoundError(
            f"{directory}: no trained weights there ({WEIGHTS_FILE} and {META_FILE}, "
            "or a checkpoint pointer naming them)"
        )
    meta = read_meta(folder)
    encoder = meta["config"].get("encoder", {})
    if encoder_dir is not None:
        meta["config"]["encoder"] = {**encoder, "name": encoder_dir}
    elif encoder.get("origin") and not os.path.exists(encoder["name"]):
        # trained on a cluster from a shipped folder (contrasweep.runner.shipping): the worker read it at
        # a path relative to the job's working_dir; here it is the driver's own folder
        meta["config"]["encoder"] = {**encoder, "name": encoder["origin"]}
    if num_labels is None:
        num_labels = int(meta["config"].get("num_labels", 0)) or None
    method = build_method(meta["config"], num_labels, pretrained=encoder_dir is None)
    weights = weights_file(folder)
    assert weights is not None  # best_folder found the weights there
    missing, unexpected = method.load_state_dict(load_weights(weights), strict=False)
    missing = [k for k in missing if not UNREAD_WEIGHTS.search(k)]
    if missing or unexpected:
        raise RuntimeError(
            f"{folder}: the weights do not fit the method {meta['config'].get('method')!r} "
            f"(missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    return method.eval()
