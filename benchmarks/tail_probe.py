"""Where a sweep's wall goes after its last trial (``bookkeeping.py``'s ``tail_s``): the driver's
end-of-run calls, timed in the benchmark's child process only.

``install`` wraps each of ``TARGETS`` (class or module, attribute) so that a call lasting at
least ``MIN_S`` appends ``(label, began, ended)`` to a list; ``after`` sums, per label, the part
of those calls after a moment (the last trial's last report). Calls nest (the tracker's end runs
inside Tune's cleanup), so the labels' seconds overlap: read them as a tree, not a sum.
Measurement only: nothing here runs in a user's sweep.
"""

from __future__ import annotations

import functools
import importlib
import time

MIN_S = 0.01
# (module, owner inside it or "" for the module itself, attribute, label)
TARGETS = (
    ("ray.tune.execution.tune_controller", "TuneController", "checkpoint", "tune: experiment-state save"),
    ("ray.tune.execution.tune_controller", "TuneController", "cleanup", "tune: cleanup (actors, callbacks' end)"),
    ("ray.tune.analysis.experiment_analysis", "ExperimentAnalysis", "__init__", "tune: ExperimentAnalysis"),
    ("contrasweep.tracking.tracker", "MlflowTracker", "on_experiment_end", "tracker: experiment end"),
    ("contrasweep.tracking.tracker", "MlflowTracker", "_remap", "tracker: remap placeholder ids"),
    ("contrasweep.tracking.tracker", "MlflowTracker", "close_writer", "tracker: writer drain and exit"),
    ("contrasweep.tracking.runs", "RunTree", "delete_orphans", "tracker: delete orphans"),
    ("contrasweep.tracking.runs", "RunTree", "close_dropped", "tracker: close dropped groups"),
    ("contrasweep.tracking.artifacts", "Artifacts", "repair", "tracker: artifacts repair"),
    ("contrasweep.tracking.selection", "Selection", "best_to_parent", "tracker: best to the sweep run"),
    ("contrasweep.runner.tune", "", "reclaim", "fit: reclaim resume states"),
    ("contrasweep.runner.tune", "", "_status", "fit: status"),
)


def install(calls: list[tuple[str, float, float]], targets=TARGETS) -> list[str]:
    """Wrap ``targets``; returns the labels of those not found (another version's names)."""
    missing = []
    for module_name, owner_name, attr, label in targets:
        try:
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name) if owner_name else module
            original = getattr(owner, attr)
        except (ImportError, AttributeError):
            missing.append(label)
            continue
        setattr(owner, attr, timed(original, label, calls))
    return missing


def timed(function, label: str, calls: list):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        began = time.time()
        try:
            return function(*args, **kwargs)
        finally:
            ended = time.time()
            if ended - began >= MIN_S:
                calls.append((label, began, ended))

    return wrapper


def after(calls, moment: float) -> dict[str, float]:
    """Seconds per label spent after ``moment``, largest first."""
    out: dict[str, float] = {}
    for label, began, ended in calls:
        if ended > moment:
            out[label] = out.get(label, 0.0) + ended - max(began, moment)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
