"""How many of a sweep's trials run at once, and how many Tune keeps pending at once, on the Ray
this driver joined (``contrasweep.runner.tune``: its ``fit`` and its tracker's progress).

May import: ``contrasweep.runner.sweep_plan``, ``contrasweep.runner.ray_start``, ``contrasweep.spec``; Ray.
"""

from __future__ import annotations

import os

from contrasweep.runner import sweep_plan
from contrasweep.runner.ray_start import boot_capacity
from contrasweep.spec.sweep import Sweep


def run_slots(sweep: Sweep) -> int:
    """How many of the sweep's trials run at once on the Ray this driver joined (``sweep_plan.concurrency``)."""
    import ray

    return sweep_plan.concurrency(sweep, {k: float(v) for k, v in ray.cluster_resources().items()})


def start_slots(sweep: Sweep) -> int:
    """How many trials may wait for their actors at once: as many as run at once, at most as
    many as Ray boots at once (``ray_start.boot_capacity``). More only queue boots: every pending
    trial's actor counts as booting, and a booting actor's trial waits for it
    (``search.warm_actors``) while freed actors sit idle. Measured, 2,000 one-second trials
    on 2 cores (docs/measurements/bookkeeping.md): 16 slots 147.8 s pending 16, 146.2 s pending
    2; 64 slots 142.2 s pending 64, 127.3 s pending 2."""
    return min(run_slots(sweep), boot_capacity())


def pending_trials(slots: int | None) -> dict[str, str]:
    """How many trials Tune keeps pending (asked of the searcher, their actors booting) at once
    (``slots``: ``start_slots``; None: Tune's default). Tune's own default for a searcher other
    than its generator is one (Ray 2.56-2.59; 2.60 reads a ``ConcurrencyLimiter``), so a wave
    of new trials started one actor boot after another (16 slots filled in 21.7 s,
    docs/measurements/bookkeeping.md). What may start is the searcher's gate's to say
    (``contrasweep.search.base.held_back``). A value the user set is kept."""
    if slots is None or os.environ.get("TUNE_MAX_PENDING_TRIALS_PG"):
        return {}
    return {"TUNE_MAX_PENDING_TRIALS_PG": str(max(1, slots))}
