"""What a plan (``contrasweep.runner.sweep_plan``) bounds besides its trials' seconds: a trial's
cost (``TrialCost``), the makespan of trials on slots, the disk a sweep holds at once and the
models it keeps, and its trials' slot time against ``sweep.budget``.

Disk (``disk_held``): a live trial (running, or paused at a rung) holds its newest resume state
(weights + optimiser state; a second while it writes one) and up to three best folders; a trial
that ended holds no resume state, and its best weights only while its group is open, among its
setting's ``max(keep_models, 1)`` best, the reported point's or cut short by the budget
(``contrasweep.tracking.pruning``). ``disk_bytes`` is the most the sweep folder holds at once
by that rule; ``kept_bytes`` what stays once it has finished: one copy of the best weights of
each trial that keeps an MLflow model (the repeats of the ``tracking.keep_models`` best
configurations of each setting and of the reported point; or every trial;
``contrasweep.tracking.kept``), in the store.

May import: ``contrasweep.spec``, ``contrasweep.search.registry``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from contrasweep.search.registry import live_limit, pause_epochs, reported_configurations
from contrasweep.spec.budget import trial_slots
from contrasweep.spec.sweep import Sweep


@dataclass
class TrialCost:
    variant: int
    epochs: int
    steps: int
    seconds: float
    resume_states: int


def makespan(seconds: list[float], slots: int, start: float = 0.0) -> float:
    """Trials started in order on the first free of ``slots`` (Tune's FIFO), each slot's first
    after ``start`` (its process)."""
    free = [start] * slots
    for s in seconds:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free) if seconds else 0.0


def kept_models(sweep: Sweep, trials: int, settings: int) -> int:
    """The most trials that keep an MLflow model: every one (``keep_models: all``), or per setting
    the repeats of the configurations a report shows whose weights the sweep kept: the
    ``keep_models`` best ones (the selected one among them) and the grid's reported point
    (``contrasweep.tracking.pruning``)."""
    if sweep.keep_models == "all":
        return trials
    keep = int(sweep.keep_models)
    configurations = min(
        reported_configurations(sweep) + max(0, keep - 1), max(1, keep) + (1 if sweep.has_reported_point else 0)
    )
    return min(trials, configurations * max(1, sweep.repeats) * settings)


def disk_held(
    sweep: Sweep, trials: int, running: int, settings: int, weights: int, resume: int, train_rows: tuple[int, ...] = ()
) -> int:
    """The most bytes the sweep folder holds at once (module docstring): ``3 ×`` the live trials'
    best folders + the repeats of each setting's ``max(keep_models, 1) + 1`` best configurations
    (one closing while another leaves) and of the grid's reported point; resume states: one per
    live trial and one more per running trial. ``train_rows``: each variant's (``pause_epochs``)."""
    live = min(trials, live_limit(sweep)) if pause_epochs(sweep, train_rows) else running  # paused trials hold theirs
    repeats = max(1, sweep.setting_repeats)  # a repeat group's trials
    kept = 0 if sweep.keep_models == "all" else max(1, int(sweep.keep_models)) + 1  # "all": in MLflow at once
    reported = repeats if sweep.has_reported_point else 0
    best = min(trials, 3 * live + settings * (kept * repeats + reported))
    return best * weights + min(trials, live + running) * resume


def trial_slot_seconds(sweep: Sweep, costs: list[TrialCost], slots: int, worker_start: float) -> list[float]:
    """Each trial's slot time as ``sweep.budget`` counts it: its seconds (a slot's first trial
    also waits for its process) × its CPUs, or GPUs (``contrasweep.spec.budget.trial_slots``)."""
    res = sweep.resources
    per_second = trial_slots(float(res["cpu"]), float(res["gpu"]), int(res["workers"]))[0]
    return [(c.seconds + (worker_start if i < slots else 0.0)) * per_second for i, c in enumerate(costs)]


def fit_in_budget(sweep: Sweep, slot_costs: list[float]) -> int:
    """How many trials, in the order they start, fit in ``sweep.budget`` (each whole)."""
    assert sweep.budget is not None  # the plan asks only for a sweep with a budget
    left, n = sweep.budget.slot_seconds, 0
    for cost in slot_costs:
        if cost > left:
            break
        left, n = left - cost, n + 1
    return n
