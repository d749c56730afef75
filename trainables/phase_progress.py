"""Progress inside a long epoch or evaluation, for the driver's console (``contrasweep.console.progress``).

A trial reports to the driver once per epoch; an epoch on a full-size corpus can take minutes.
So the trial process prints a marked line every ``$CONTRASWEEP_PROGRESS_S`` seconds while it
iterates batches (rank 0 only; nothing when the variable is unset, as outside a sweep): Ray
forwards trial output to the driver, whose console takes these lines off the stream and shows
them as the trial's progress (``<name> epoch 3/10 training 120/400``) instead of printing them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator

# The result key under which per-step series travel to the driver's tracker with each epoch's
# report (Method.step_metrics; here, not in trainables.loop, so the driver reads it without torch).
STEP_METRICS = "step_metrics"
PREFIX = "[contrasweep-progress]"
ENV = "CONTRASWEEP_PROGRESS_S"

_trial: str | None = None


def set_trial(trial_id: str | None) -> None:
    """The Tune trial this process trains (its lines name it)."""
    global _trial
    _trial = trial_id


def track(items: Iterable, phase: str, total: int, rank: int = 0) -> Iterator:
    """``items`` unchanged; a progress line at most every ``$CONTRASWEEP_PROGRESS_S`` seconds."""
    every = float(os.environ.get(ENV, 0) or 0)
    if every <= 0 or _trial is None or rank != 0:
        yield from items
        return
    last = time.monotonic()
    for done, item in enumerate(items, start=1):
        yield item
        if time.monotonic() - last >= every and done < total:
            last = time.monotonic()
            print(f"{PREFIX} {_trial} {phase} {done}/{total}", flush=True)


def parse(line: str) -> tuple[str, str, int, int] | None:
    """(trial id, phase, done, total) of a progress line (Ray's ``(pid=…)`` prefix allowed)."""
    if PREFIX not in line:
        return None
    try:
        trial, rest = line.split(PREFIX, 1)[1].strip().split(" ", 1)
        phase, count = rest.rsplit(" ", 1)
        done, total = count.split("/")
        return trial, phase, int(done), int(total)
    except ValueError:
        return None
