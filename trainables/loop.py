"""The generic training loop (docs/architecture.md, "Data flow"): one loop for every method.

AdamW with warm-up (LaCon Sec. 3.1: 6 % of the optimisation steps) and then a linear decay
(default), a constant rate or a half-cosine decay (``lr_schedule``), gradient clipping, evaluation on the
validation split every epoch, test metrics of the best validation epoch, one checkpoint per
epoch (Tune keeps the best and the latest), seeded.

The loop never branches on a method's name: it builds the method from the registry and calls
only the interface of ``trainables.base.Method``.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
import time
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from transformers import (
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
)

from trainables.encoder import load_encoder
from trainables.batches import to_device, train_batches
from trainables.gather import StageContext
from trainables.gather import classification_evaluate as evaluate  # noqa: F401  (users' and tests' name)
from trainables.params import LOOP_PARAMS
from trainables.registry import get_method

MODEL_FILE = "model.pt"
STATE_FILE = "train_state.pt"
META_FILE = "meta.json"
# The result key under which per-step series travel to the tracker (Method.step_metrics).
STEP_METRICS = "step_metrics"


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

    ``config``: {"method", "encoder": {name, pooling}, "hp": {...}, "metric", "mode"}.
    Returns the final metrics (also reported every epoch through ``session``).
    """
    hp = lambda key: hp_value(config, key)  # noqa: E731
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
    use_amp = bool(hp("amp")) and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    tracker = BestTracker(config.get("metric", "val/accuracy"), config.get("mode", "max"))
    start_epoch = 1
    resume_dir = session.latest_checkpoint()
    if resume_dir:
        start_epoch = restore_checkpoint(resume_dir, method, optimizer, scheduler, scaler, tracker) + 1

    metrics: dict[str, float] = dict(tracker.best_metrics)
    # cost metrics (a Pareto sweep may trade them against quality): trainable parameters and
    # the cumulative seconds spent in optimisation steps (evaluation excluded), kept across resumes
    parameters = float(sum(p.numel() for p in method.parameters() if p.requires_grad))
    train_seconds = previous_cost(resume_dir)
    for epoch in range(start_epoch, hp("epochs") + 1):
        started = time.perf_counter()
        model.train()
        sums: dict[str, torch.Tensor] = {}  # on the device: no host sync per step (GPU)
        per_step: dict[str, list[torch.Tensor]] = {k: [] for k in method.step_metrics}
        steps = 0
        for batch in train_batches(tables["train"], hp("batch_size"), hp("seed"), epoch, session.rank, session.world_size):
            batch = to_device(batch, device)
            autocast = torch.autocast("cuda", dtype=torch.float16) if use_amp else nullcontext()
            with autocast:
                out = model(batch)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(out["loss"]).backward()
            if hp("max_grad_norm") > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(method.parameters(), hp("max_grad_norm"))
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            for key, value in out.items():
                if torch.is_tensor(value) and value.numel() == 1:
                    sums[key] = sums.get(key, 0.0) + value.detach().float()
            for key in per_step:
                per_step[key].append(out[key].detach().float())
            steps += 1
        train_seconds += time.perf_counter() - started
        metrics = {"epoch": epoch, "lr": scheduler.get_last_lr()[0], "data/train_rows": tables["train"].num_rows,
                   "cost/train_s": train_seconds, "cost/parameters": parameters}
        metrics.update(mean_over_ranks(session, {k: float(v) for k, v in sums.items()}, steps))
        if per_step:
            metrics[STEP_METRICS] = step_series(per_step, first_step=(epoch - 1) * steps_per_epoch + 1)
        context = StageContext(tables, num_labels, hp("eval_batch_size"), session, hp("seed"), epoch, data)
        metrics.update(prefixed("stage2", method.second_stage(context) or {}))
        metrics.update(prefixed("val", method.evaluate(context, "validation")))
        improved = tracker.update(metrics)
        if improved and "test" in tables:
            tracker.best_metrics.update(prefixed("test", method.evaluate(context, "test")))
        metrics.update(tracker.best_metrics)
        metrics["time/epoch_s"] = time.perf_counter() - started
        report_epoch(session, metrics, method, optimizer, scheduler, scaler, tracker, epoch, config)
    return metrics


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
    """Best value of the objective so far and the metrics (val + test) of that epoch."""

    def __init__(self, metric: str, mode: str):
        self.metric, self.mode = metric, mode
        self.best_value: float | None = None
        self.best_metrics: dict[str, float] = {}

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


def report_epoch(session, metrics, method, optimizer, scheduler, scaler, tracker, epoch, config) -> None:
    """Write this epoch's checkpoint (rank 0) and report; the temporary copy is removed after
    Ray has persisted it."""
    tmp = None
    if session.rank == 0:
        tmp = tempfile.mkdtemp(prefix="contrasweep-epoch-")
        save_checkpoint(tmp, method, optimizer, scheduler, scaler, tracker, epoch, config, metrics)
    try:
        session.report(metrics, tmp)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def save_checkpoint(directory, method, optimizer, scheduler, scaler, tracker, epoch, config, metrics) -> None:
    torch.save(method.state_dict(), os.path.join(directory, MODEL_FILE))
    torch.save(
        {
            "epoch": epoch,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "tracker": tracker.state(),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        },
        os.path.join(directory, STATE_FILE),
    )
    with open(os.path.join(directory, META_FILE), "w") as fh:
        json.dump({"epoch": epoch, "config": config, "metrics": metrics}, fh, default=str)


def restore_checkpoint(directory, method, optimizer, scheduler, scaler, tracker) -> int:
    """Load model + optimiser state; return the epoch the checkpoint ended."""
    method.load_state_dict(torch.load(os.path.join(directory, MODEL_FILE), map_location="cpu"))
    state = torch.load(os.path.join(directory, STATE_FILE), map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    tracker.load(state["tracker"])
    torch.set_rng_state(state["rng"]["torch"])
    np.random.set_state(state["rng"]["numpy"])
    random.setstate(state["rng"]["python"])
    return int(state["epoch"])


def previous_cost(directory: str | None) -> float:
    """``cost/train_s`` as the checkpoint being resumed recorded it (0 for a fresh start)."""
    if not directory:
        return 0.0
    try:
        with open(os.path.join(directory, META_FILE)) as fh:
            return float(json.load(fh)["metrics"].get("cost/train_s", 0.0))
    except (OSError, ValueError, KeyError):
        return 0.0


def load_trained(directory: str, num_labels: int | None = None):
    """Rebuild a trained method from a checkpoint directory (for reports and users)."""
    with open(os.path.join(directory, META_FILE)) as fh:
        meta = json.load(fh)
    state = torch.load(os.path.join(directory, MODEL_FILE), map_location="cpu")
    if num_labels is None:
        num_labels = int(meta["config"].get("num_labels", 0)) or None
    method = build_method(meta["config"], num_labels)
    method.load_state_dict(state)
    return method.eval()
