"""The line a new sweep opens with about its size: how many trials it starts (configurations ×
repeats, how many at a time) and, for a large sweep, ``plan``'s estimate of its wall time and how
to try it small first.

The estimate is ``plan``'s, from the calibration ``plan`` kept for this sweep's first trial on
this machine within a day (``sweep_plan.kept_calibration``); without one, a sweep of over
``LARGE_TRIALS`` trials calibrates its first trial as ``plan`` does (the real loop for a few
steps, at most about 20 s, nothing against the hours such a sweep takes), with the fixed costs
``plan`` kept for this machine or the defaults (never a probe here). A smaller sweep without a
kept calibration names ``plan`` instead; its status line shows an ETA once a trial has ended
(``contrasweep.console.progress``).

May import: ``contrasweep.runner.sweep_plan``, ``contrasweep.runner.plan_lines``,
``contrasweep.runner.fixed_costs``, ``contrasweep.search``, ``contrasweep.spec``.
"""

from __future__ import annotations

from contrasweep.runner import fixed_costs, plan_lines, sweep_plan
from contrasweep.search.registry import total_trials
from contrasweep.spec.smoke import TRIALS as SMOKE_TRIALS
from contrasweep.spec.sweep import Sweep
from contrasweep.spec.text import counted

LARGE_TRIALS = 100  # above this many trials a run says what it will cost and how to try it small


def size_lines(
    sweep: Sweep, prepared: list, available: dict[str, float], address: str | None, calibration: dict | None = None
) -> list[str]:
    """The line(s), without their ``[contrasweep]`` mark. ``calibration``: one already measured
    (tests), else the first trial's when the sweep is large."""
    total, slots = total_trials(sweep), sweep_plan.concurrency(sweep, available)
    configurations = total // max(1, sweep.repeats)
    head = (
        f"{total:,} trial{'' if total == 1 else 's'} to run: {configurations:,} "
        f"configuration{'' if configurations == 1 else 's'} × {counted(sweep.repeats, 'repeat')}, {slots} at a time"
    )
    large = total > LARGE_TRIALS
    calibration = calibration or sweep_plan.kept_calibration(sweep, prepared)
    if calibration is None and not large:
        return [
            f"{head} (`contrasweep plan SPEC` estimates time and disk before a run; the status line shows an ETA "
            "once a trial has ended)"
        ]
    if calibration is None:
        sweep_plan.quiet()
        calibration = sweep_plan.calibrate_first_trial(sweep, prepared)
    fixed = fixed_costs.kept(sweep.method, slots, address)
    found = sweep_plan.plan(sweep, prepared, calibration, available, tsne=False, fixed=fixed)
    where = address or "this machine"
    lines = [
        f"{head}; plan's estimate: {plan_lines.clock(found.estimated_seconds)} on {where}, every trial training "
        f"all its epochs ({found.steps_total:,} optimiser steps in all; `contrasweep plan SPEC` details it)"
    ]
    if large:
        lines.append(
            f"a large sweep (over {LARGE_TRIALS} trials): to try it small first, stop it (Ctrl-C keeps its "
            f"state) and run the same command with --smoke-test (1 epoch, at most {SMOKE_TRIALS} trials, its "
            "own experiment)"
        )
    return lines
