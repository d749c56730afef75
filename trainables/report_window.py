"""What the loop reports for the epochs since its last report (``trainables.loop``): with
``eval_every`` above 1 an epoch that is not validated only trains, and the next report covers
every epoch since the last one: the mean training losses over their steps, the per-step series
of all of them (``STEP_METRICS``) and the seconds of each phase (``PhaseClock``).

May import: torch and ``trainables.phase_progress``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import torch

from trainables.phase_progress import STEP_METRICS


class ReportWindow:
    """The training steps of the epochs since the last report: their scalar outputs' sums and
    per-step series (on the device), their count and the first one's global step."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor] = {}
        self.per_step: dict[str, list[torch.Tensor]] = {}
        self.steps = 0
        self.first_step: int | None = None
        self.started: float | None = None  # when its first epoch began (time.perf_counter)
        self.evaluations = 0  # validations so far (a restore sets the count its state had)
        self.epoch_started = 0.0  # the last report's window began (its ``time/epoch_s``)

    def add(self, sums: dict, per_step: dict, steps: int, first_step: int, started: float) -> None:
        for key, value in sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        for key, values in per_step.items():
            self.per_step.setdefault(key, []).extend(values)
        self.steps += steps
        self.first_step = first_step if self.first_step is None else self.first_step
        self.started = started if self.started is None else self.started

    def take(self, session) -> dict[str, Any]:
        """The report's training part (``train/<loss>``: means over every rank's steps; the
        per-step series; ``evaluations``), counting one more validation; the window starts again
        (``epoch_started`` keeps when this one began: the report's ``time/epoch_s``)."""
        out: dict[str, Any] = mean_over_ranks(session, {k: float(v) for k, v in self.sums.items()}, self.steps)
        if any(self.per_step.values()):
            out[STEP_METRICS] = step_series(self.per_step, first_step=self.first_step or 1)
        self.evaluations += 1
        out["evaluations"] = self.evaluations
        self.epoch_started, self.started = self.started, None
        self.sums, self.per_step, self.steps, self.first_step = {}, {}, 0, None
        return out


class PhaseClock:
    """Seconds per phase since the last report (``time/<phase>_s``: the epoch's when every epoch
    is validated). On a GPU it waits for the device at the end of a phase, once per phase and
    epoch (never per step), so that queued kernels are counted where they were launched."""

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
