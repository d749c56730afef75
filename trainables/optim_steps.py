"""The optimiser's side of the generic loop (``trainables.loop``): the learning-rate schedule
after the warm-up (``make_scheduler``: linear, constant or half-cosine, or the method's own) and
one epoch's optimiser steps (``run_steps``), their outputs summed on the device and the loss
read on the host once every ``DIVERGENCE_CHECK_STEPS`` steps to stop a diverging trial
(``check_finite``).

May import: torch, transformers, ``trainables.batches``, ``trainables.errors``.
"""

from __future__ import annotations

import torch
from transformers import (
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
)

from trainables.batches import to_device
from trainables.errors import TrainingDiverged


def make_scheduler(optimizer, schedule: str, method, warmup: int, total_steps: int):
    """Warm-up, then ``schedule``; ``method`` defers to the method's paper (``Method.lr_schedule``)."""
    if schedule == "method":
        schedule = method.lr_schedule()
    if schedule == "constant":
        return get_constant_schedule_with_warmup(optimizer, warmup)
    if schedule == "cosine":  # half a cosine period from the peak to 0 at the last step
        return get_cosine_schedule_with_warmup(optimizer, warmup, total_steps)
    return get_linear_schedule_with_warmup(optimizer, warmup, total_steps)


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
    raise TrainingDiverged(
        f"train/loss is {float(values[at])} at step {first_step + at} (epoch {epoch}): the trial "
        "diverged; try a lower lr, gradient clipping (max_grad_norm) or less weight_decay"
    )
