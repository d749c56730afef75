"""``contrasweep plan``'s lines: the plan (``contrasweep.runner.sweep_plan.SweepPlan``) as the console
prints it, with what the estimate assumes of other work on the machine (``busy_cpus``: measured
before the plan's own calibration), each data variant's split sizes (``data_lines``) and a
wall-clock time format shared with ``run``'s first lines.

May import: ``contrasweep.runner.sweep_plan``, ``contrasweep.runner.plan_steps``, ``contrasweep.runner.inputs``
(the split sizes' words), ``contrasweep.search``, ``contrasweep.spec``, ``contrasweep.console.summary``
(its number format).
"""

from __future__ import annotations

import os
import time

from contrasweep.console.summary import human
from contrasweep.runner.inputs import SPLIT_NAMES, sizes_text
from contrasweep.runner.plan_steps import floor_warning, steps_line
from contrasweep.runner.sweep_plan import SweepPlan, fixed_overheads
from contrasweep.search.registry import tests_in_trials
from contrasweep.spec.budget import trial_slots
from contrasweep.spec.sweep import Sweep
from contrasweep.spec.text import counted


def describe(
    sweep: Sweep, found: SweepPlan, available: dict[str, float], where: str, busy: float | None = None
) -> list[str]:
    """The plan as the console prints it; ``busy``: CPUs other work held before the plan (``busy_cpus``)."""
    c = found.calibration
    resources = ", ".join(f"{v:g} {k}" for k, v in available.items() if v) or "no resources"
    return [
        f"{counted(found.trials, 'trial')} = {counted(found.configurations, 'configuration')} × "
        f"{counted(found.repeats, 'repeat')} ({counted(found.settings, 'setting')}); method {sweep.method}, searcher "
        f"{sweep.searcher}, scheduler {sweep.scheduler}",
        *([racing_line(sweep, found)] if found.fewest_trials is not None else []),
        *data_lines(found.data),
        *([budget_line(sweep, found)] if found.budget_trials is not None else []),
        f"training: {counted(found.epochs_total, 'epoch')}, {counted(found.steps_total, 'optimiser step')} in all; "
        "test split: "
        + (
            f"once in each trial ({counted(found.test_passes, 'trial')}; evaluation.test: {sweep.test_split})"
            if tests_in_trials(sweep)
            else f"{counted(found.test_passes, 'evaluation')} after selection, at most (evaluation.test: reported)"
        ),
        *[line for line in (steps_line(found.setting_steps), floor_warning(found.setting_steps)) if line],
        f"disk: up to {human(found.disk_bytes)} in the sweep folder while it runs, {human(found.kept_bytes)} kept "
        f"when it has finished (best weights {human(c['weights_bytes'])} and a resume state "
        f"{human(c['resume_bytes'])} per trial; the MLflow models in the store)",
        f"estimated wall time: {clock(found.estimated_seconds)} with {found.concurrency} trial"
        f"{'s' if found.concurrency != 1 else ''} at a time on {where} ({resources}), every trial training "
        f"all its epochs, {load_text(where, busy)}",
        f"calibrated in {c['measured_s']:.1f} s on this machine (the real loop, {c['steps']} steps on the first "
        f"trial's data): {1000 * c['train_row_s']:.1f} ms per training row, {1000 * c['eval_row_s']:.1f} ms per "
        f"evaluated row + {c['eval_fixed_s']:.1f} s per evaluation, set-up {c['setup_s']:.1f} s",
        fixed_line(found.fixed, where),
    ]


def data_lines(variants: list[dict]) -> list[str]:
    """Each data variant's split sizes and unused source rows (``SweepPlan.data``; docs/spec.md,
    "How the splits are carved"): one line per setting where its data repeats agree, else one per
    variant."""
    settings: dict[str, list[dict]] = {}
    for variant in variants:
        settings.setdefault(variant["setting"], []).append(variant)
    lines = []
    for setting, group in settings.items():
        if len({tuple(v.get(k) for k in (*SPLIT_NAMES, "unused")) for v in group}) == 1:
            repeats = f" ({len(group)} data repeats)" if len(group) > 1 else ""
            lines.append(f"data{' ' + setting if setting else ''}{repeats}: {variant_sizes(group[0])}")
        else:
            lines += [f"data {v['label']}: {variant_sizes(v)}" for v in group]
    return lines


def variant_sizes(rows: dict) -> str:
    unused = rows.get("unused")
    if unused is None:
        return sizes_text(rows)
    total = unused + sum(rows[split] for split in SPLIT_NAMES)
    left = (
        f"{unused} of the source's {total} labelled rows unused" if unused else f"all {total} labelled source rows used"
    )
    return f"{sizes_text(rows)}; {left}"


def busy_cpus(seconds: float = 0.5) -> float | None:
    """CPUs busy with other work right now: /proc/stat's busy time over ``seconds`` (``plan``
    measures it before its own calibration); the 1-minute load average where there is no /proc."""

    def sample():
        with open("/proc/stat") as handle:
            values = [int(v) for v in handle.readline().split()[1:]]
        return sum(values) - values[3] - (values[4] if len(values) > 4 else 0), sum(
            values
        )  # busy, all (less idle, iowait)

    try:
        busy0, all0 = sample()
        time.sleep(seconds)
        busy1, all1 = sample()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return (busy1 - busy0) / max(all1 - all0, 1) * (os.cpu_count() or 1)


def load_text(where: str, busy: float | None) -> str:
    """What the estimate assumes of other work: nothing else running; with what was measured on
    this machine before the plan (``busy_cpus``; a cluster's is not measured)."""
    if where != "this machine" or busy is None:
        return "with nothing else running there"
    cpus = os.cpu_count() or 1
    slower = "; other work there would slow it" if busy >= 0.5 else ""
    return (
        f"with nothing else running ({busy:.1f} of {counted(cpus, 'CPU')} busy with other work when measured{slower})"
    )


def racing_line(sweep: Sweep, found: SweepPlan) -> str:
    assert sweep.racing is not None  # a race's plan (found.fewest_trials: sweep_plan)
    return (
        f"racing (min_repeats {sweep.racing.min_repeats}, alpha {sweep.racing.alpha:g}): between "
        f"{found.fewest_trials} and {found.trials} trials (every configuration's first "
        f"{sweep.racing.min_repeats} repeats; more while a configuration is not significantly worse than the "
        "best); the figures below are for all of them"
    )


def budget_line(sweep: Sweep, found: SweepPlan) -> str:
    assert found.budget_trials is not None and sweep.budget is not None  # a budgeted sweep's plan (sweep_plan)
    unit = trial_slots(float(sweep.resources["cpu"]), float(sweep.resources["gpu"]), 1)[1]
    fits = (
        "all of them fit"
        if found.budget_trials >= found.trials
        else f"about {found.budget_trials} of the {found.trials} trials fit; the sweep then stops launching trials"
    )
    return (
        f"budget: {sweep.budget.slot_hours:g} {unit}-hours (sweep.budget); all the trials would take "
        f"{found.slot_seconds / 3600:.3g} {unit}-hours: {fits}"
    )


def fixed_line(fixed: dict, where: str) -> str:
    over = fixed_overheads(fixed)
    what = (
        f"sweep {over['sweep_s']:.1f} s, a trial process's start {over['worker_start_s']:.1f} s, "
        f"{over['trial_s']:.2f} s per trial besides its loop"
    )
    if not fixed:
        return f"fixed costs: {what} (defaults: not measured on {where})"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(fixed["when"]))
    return (
        f"fixed costs measured on {where} at {when}{' (kept from then)' if fixed.get('kept') else ''}: {what} "
        f"(the driver's imports {fixed['driver_s']:.1f} s, Ray's start {fixed['ray_start_s']:.1f} s; "
        "`plan --remeasure` measures again)"
    )


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"
