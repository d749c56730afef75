"""``contrasweep plan SPEC``: what a sweep will cost before any trial runs (docs/architecture.md,
"Plan before launching").

Counts come from the objects ``run`` uses (the searcher registry's trials, the spec's data
variants, the repeat groups); each trial is costed from its own plan: its data variant's split
sizes (the data is tokenised into the cache, which the sweep then reuses), its epochs (a
``max_steps`` budget resolved on its training rows, ``trainables.params.epochs_for``), its
batch size, the resume states its scheduler and ``checkpoint_every`` make it write. Time and disk
come from one calibration on this machine (``trainables.calibration``: the real loop for a few
steps of the sweep's first trial on a slice of its data, at most about 20 s):
    trial_s = set-up + rows trained × train + validated epochs (``eval_every``) × (train rows ×
              second stage + an evaluation of the validation rows)
              [+ an evaluation of the test rows: evaluation.test all]
              + bytes written × write speed + the per-trial overhead
              (an evaluation: fixed seconds + rows × seconds per row)
    test_s  = set-up + an evaluation of the test rows + TEST_TASK_OVERHEAD_S, for each repeat the
              test phase evaluates (evaluation.test reported: ``reported_configurations`` per setting)
    sweep_s = sweep overhead + the makespan of the trials, in order, on ``concurrency`` slots
              whose processes start in the worker start (later trials reuse them)
              + the makespan of the test phase's evaluations on as many slots (new processes)
              + the report's t-SNE map (TSNE_S + up to TSNE_POINTS test rows × eval; not with --no-tsne)

The sweep overhead, a trial process's start and the per-trial overhead are measured on the
machine (or cluster) the sweep will run on (``contrasweep.runner.fixed_costs``: Ray's start, the
driver's imports, a Tune run of no-op trials under the sweeps' scheduler and tracker; kept for a
day), else the defaults below.

``concurrency`` is what Ray would run at once: ``sweep.max_concurrent`` within the CPUs (and
GPUs) of this machine or of the cluster at ``--address``, by ``sweep.resources``. The estimate
assumes every trial trains all its epochs (a scheduler that stops some makes the sweep shorter)
and, for a searched ``epochs``, ``max_steps`` or ``batch_size``, the most epochs and steps and the
smallest batch. The optimiser steps per trial of each setting, and a warning under ``MIN_STEPS``:
``contrasweep.runner.plan_steps``. Disk, kept models, the makespan and the budget's slot time:
``contrasweep.runner.plan_bounds``.

May import: ``contrasweep.spec``, ``contrasweep.search.registry``, ``contrasweep.runner.inputs``,
``contrasweep.runner.ray_start``, ``contrasweep.data`` (the data a plan prepares),
``trainables`` (the calibration); Ray (``--address``). Its lines: ``contrasweep.runner.plan_lines``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrasweep.data import load_splits
from contrasweep.data.cache import cache_root
from contrasweep.runner import kept_day
from contrasweep.runner.checks import _local_gpus
from contrasweep.runner.inputs import split_rows
from contrasweep.runner.plan_bounds import (
    TrialCost,
    disk_held,
    fit_in_budget,
    kept_models,
    makespan,
    trial_slot_seconds,
)
from contrasweep.runner.plan_steps import setting_steps
from contrasweep.runner.ray_start import init_ray
from contrasweep.search.registry import (
    fewest_trials,
    pause_epochs,
    reported_configurations,
    tests_in_trials,
    trial_configs,
)
from contrasweep.spec.identity import setting_label
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import Sweep
from contrasweep.spec.trial import DATA_KEY, plan_of
from trainables.calibration import calibrate
from trainables.params import LOOP_PARAMS, epochs_for, resume_states, steps_per_epoch, total_steps, validated_epochs

# Fixed costs where none were measured on this machine (contrasweep.runner.fixed_costs measures them
# for `contrasweep plan`; these are its tests' and an earlier day's, docs/performance.md, "plan's
# estimate"): a sweep's own seconds besides its trials (the command's imports, Ray's start, the
# Tuner, the registry, the summary and the report without t-SNE), a trial process's start (Ray's
# worker, importing torch and transformers: a slot's first trial), and a trial's own besides its
# loop (Tune's scheduling and saves, its MLflow runs).
SWEEP_OVERHEAD_S = 22.0
WORKER_START_S = 12.0
TRIAL_OVERHEAD_S = 2.0
# what a measured plan adds to the probe's numbers: the summary and the report's figures (no
# t-SNE), which the probe does not run
SWEEP_END_S = 2.0
# the report's t-SNE map (left out with --no-tsne): the registered model embeds up to
# TSNE_POINTS test rows (dashboards.embeddings), then scikit-learn's t-SNE and the figure
TSNE_POINTS = 500
TSNE_S = 3.0
DISTRIBUTED_TRIAL_OVERHEAD_S = 18.4  # a Ray Train worker group per trial (benchmarks/trial_overhead.py)
TEST_TASK_OVERHEAD_S = 1.0  # a test-phase task besides its evaluation: the weights read, its result logged


@dataclass
class SweepPlan:
    trials: int
    configurations: int
    settings: int
    repeats: int
    epochs_total: int
    steps_total: int
    disk_bytes: int
    kept_bytes: int
    estimated_seconds: float
    concurrency: int
    test_passes: int = 0  # test-split evaluations in all (in the trials, or in the test phase)
    calibration: dict = field(default_factory=dict)
    costs: list[TrialCost] = field(default_factory=list)
    fixed: dict = field(default_factory=dict)  # the measured fixed costs ({} where the defaults were used)
    fewest_trials: int | None = None  # a race's fewest (sweep.racing: its first rounds alone); None: every trial runs
    budget_trials: int | None = None  # trials that fit in sweep.budget, in the order they start; None: no budget
    slot_seconds: float = 0.0  # the trials' slot time in all (wall × CPUs, or GPUs): what sweep.budget counts
    setting_steps: dict = field(
        default_factory=dict
    )  # setting -> [fewest, most] optimiser steps per trial (plan_steps)
    # each data variant: {variant, label, setting, train, validation, test, unused} (inputs.split_rows)
    data: list = field(default_factory=list)

    def as_json(self) -> dict:
        keys = (
            "trials",
            "configurations",
            "settings",
            "repeats",
            "epochs_total",
            "steps_total",
            "disk_bytes",
            "kept_bytes",
            "estimated_seconds",
            "concurrency",
            "test_passes",
            "calibration",
            "fixed",
            "fewest_trials",
            "budget_trials",
            "slot_seconds",
            "setting_steps",
            "data",
        )
        return {k: getattr(self, k) for k in keys}


def hp_of(sweep: Sweep, hp: dict, key: str):
    """A trial's loop value; a searched one at its most expensive (most epochs and steps, smallest batch)."""
    if key in sweep.domains:
        domain = sweep.domains[key]
        return domain.largest() if key in ("epochs", "max_steps") else min(domain.check_values())
    return hp.get(key, LOOP_PARAMS[key].default)


def concurrency(sweep: Sweep, available: dict[str, float]) -> int:
    """Trials Ray runs at once: ``max_concurrent`` within the resources (``{"CPU": n, "GPU": m}``)."""
    res = sweep.resources
    workers = int(res["workers"])
    fit = math.floor(available.get("CPU", 0.0) / (float(res["cpu"]) * workers) + 1e-9)
    if res["gpu"] > 0:
        fit = min(fit, math.floor(available.get("GPU", 0.0) / (float(res["gpu"]) * workers) + 1e-9))
    return max(1, min(sweep.max_concurrent, fit))


def available_resources(address: str | None) -> dict[str, float]:
    """This machine's CPUs and GPUs as a local sweep's Ray gets them, or the cluster's."""
    if address:
        import ray

        was_up = ray.is_initialized()  # a Ray this process had before is its owner's to end
        init_ray(address)
        try:
            return {k: float(v) for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        finally:
            if not was_up:
                ray.shutdown()

    return {"CPU": float(os.cpu_count() or 1), "GPU": float(_local_gpus())}


def rows_trained(hp: dict, train_rows: int) -> int:
    """Training rows a trial's optimiser steps read (a ``max_steps`` trial's last epoch: only its steps' batches)."""
    per_epoch = steps_per_epoch(train_rows, hp["batch_size"]) or 1
    whole, left = divmod(total_steps(hp, train_rows), per_epoch)
    return whole * train_rows + min(train_rows, left * int(hp["batch_size"]))


# the cost model's relative weights without a calibration (a running sweep's ETA: scaled by the
# trials that end): a training row costs about 4.5 evaluated rows (MiniLM here: 113 vs 25 ms)
RELATIVE = {
    "setup_s": 0.0,
    "train_row_s": 1.0,
    "stage2_row_s": 0.0,
    "eval_fixed_s": 0.0,
    "eval_row_s": 0.22,
    "write_byte_s": 0.0,
    "weights_bytes": 0,
    "resume_bytes": 0,
}


def trial_units(sweep: Sweep, prepared: list) -> list[float]:
    """Each trial's relative cost (``RELATIVE``, no overheads), in the order Tune starts them."""
    return [c.seconds for c in cost_trials(sweep, sizes_of(prepared), RELATIVE, overheads=False)]


def sizes_of(prepared: list) -> list[dict]:
    """Rows per split of each data variant, and its unused source rows (``inputs.split_rows``)."""
    return [split_rows(p) for p in prepared]


def cost_trials(
    sweep: Sweep, sizes: list[dict], calibration: dict, overheads: bool = True, trial_overhead: float = TRIAL_OVERHEAD_S
) -> list[TrialCost]:
    """``sizes``: rows per split of each data variant (``sizes_of``); ``trial_overhead``: a
    trial's seconds besides its loop (``overheads``)."""
    static = SweepStatic.of(sweep)
    pauses = pause_epochs(sweep, tuple(rows["train"] for rows in sizes))
    workers = int(sweep.resources["workers"])
    tests = 1 if tests_in_trials(sweep) else 0  # else after selection (test_costs)
    out = []
    for config in trial_configs(sweep):
        plan = plan_of(config, static)
        hp = {k: v for k, v in plan.hp.items() if k != DATA_KEY}
        costed = {**hp, **{key: hp_of(sweep, hp, key) for key in ("epochs", "batch_size", "max_steps")}}
        rows = sizes[plan.variant]
        epochs, trained = epochs_for(costed, rows["train"]), rows_trained(costed, rows["train"])  # as the loop counts
        every = int(hp_of(sweep, hp, "eval_every"))
        states = resume_states(epochs, int(hp_of(sweep, hp, "checkpoint_every")), pauses, every)
        validated = len(validated_epochs(epochs, every, pauses)) if every > 1 else epochs
        c = calibration
        evaluations = (validated + tests) * c["eval_fixed_s"] + (
            validated * rows["validation"] + tests * rows["test"]
        ) * c["eval_row_s"]
        compute = (trained * c["train_row_s"] + validated * rows["train"] * c["stage2_row_s"] + evaluations) / workers
        written = (validated + 1) * c["weights_bytes"] + states * c["resume_bytes"]  # best folders, the model, resumes
        overhead = trial_overhead + (DISTRIBUTED_TRIAL_OVERHEAD_S if workers > 1 else 0.0) if overheads else 0.0
        seconds = c["setup_s"] + compute + written * c["write_byte_s"] + overhead
        out.append(TrialCost(plan.variant, epochs, total_steps(costed, rows["train"]), seconds, states))
    return out


def test_costs(sweep: Sweep, sizes: list[dict], calibration: dict, configurations: int) -> list[float]:
    """Seconds of each test-split evaluation the test phase runs (none for ``evaluation.test: all``:
    the trials evaluate it), at most ``reported_configurations`` per setting × its repeats."""
    if tests_in_trials(sweep):
        return []
    c = calibration
    repeats = [rows["test"] for rows in sizes for _ in sweep.seeds]  # a configuration's repeats, every setting's
    return [
        c["setup_s"] + c["eval_fixed_s"] + test_rows * c["eval_row_s"] + TEST_TASK_OVERHEAD_S
        for _ in range(min(reported_configurations(sweep), configurations))
        for test_rows in repeats
    ]


def fixed_overheads(fixed: dict | None) -> dict:
    """(sweep, worker start, per trial) seconds: measured (``contrasweep.runner.fixed_costs``) or the defaults."""
    if not fixed:
        return {"sweep_s": SWEEP_OVERHEAD_S, "worker_start_s": WORKER_START_S, "trial_s": TRIAL_OVERHEAD_S}
    return {
        "sweep_s": fixed["driver_s"] + fixed["ray_start_s"] + fixed["end_s"] + SWEEP_END_S,
        "worker_start_s": fixed["worker_start_s"],
        "trial_s": fixed["trial_s"],
    }


def plan(
    sweep: Sweep,
    prepared: list,
    calibration: dict,
    available: dict[str, float],
    tsne: bool = True,
    fixed: dict | None = None,
) -> SweepPlan:
    sizes = sizes_of(prepared)
    over = fixed_overheads(fixed)
    costs = cost_trials(sweep, sizes, calibration, trial_overhead=over["trial_s"])
    slots = concurrency(sweep, available)
    settings = {tuple(sorted(v.setting.items(), key=str)) for v in sweep.variants} or {()}
    weights, resume = calibration["weights_bytes"], calibration["resume_bytes"]
    running = min(slots, len(costs))
    configurations = len(costs) // max(1, sweep.repeats)
    tests = test_costs(sweep, sizes, calibration, configurations)
    shown = min(reported_configurations(sweep), configurations) * max(1, sweep.repeats)  # trials a report shows
    passes = len(costs) if tests_in_trials(sweep) else shown
    slot_costs = trial_slot_seconds(sweep, costs, slots, over["worker_start_s"])
    return SweepPlan(
        trials=len(costs),
        configurations=configurations,
        settings=len(settings),
        repeats=sweep.repeats,
        epochs_total=sum(c.epochs for c in costs),
        steps_total=sum(c.steps for c in costs),
        disk_bytes=disk_held(
            sweep, len(costs), running, len(settings), weights, resume, tuple(s["train"] for s in sizes)
        ),
        kept_bytes=kept_models(sweep, len(costs), len(settings)) * weights,  # one copy each, MLflow's
        estimated_seconds=(
            over["sweep_s"]
            + makespan([c.seconds for c in costs], slots, over["worker_start_s"])
            + makespan(tests, min(slots, len(tests)), over["worker_start_s"])
            + (TSNE_S + min(TSNE_POINTS, sizes[0]["test"]) * calibration["eval_row_s"] if tsne else 0.0)
        ),
        concurrency=slots,
        test_passes=passes,
        calibration=calibration,
        costs=costs,
        fixed=fixed or {},
        fewest_trials=fewest_trials(sweep) if sweep.racing else None,
        budget_trials=fit_in_budget(sweep, slot_costs) if sweep.budget else None,
        slot_seconds=sum(slot_costs),
        setting_steps=setting_steps(sweep, sizes),
        data=data_variants(sweep, sizes),
    )


def data_variants(sweep: Sweep, sizes: list[dict]) -> list[dict]:
    """Each data variant's split sizes (``sizes_of``), with its label and its setting's label."""
    return [
        {"variant": v.index, "label": v.label, "setting": setting_label(v), **rows}
        for v, rows in zip(SweepStatic.of(sweep).variants, sizes)
    ]


def quiet() -> None:
    """The plan prints its own lines only: no progress bars of datasets (tokenising into the
    cache) or transformers (loading weights) in this process."""
    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()


def _first_trial(sweep: Sweep, prepared: list) -> tuple[dict, Any]:
    """The loop config of the sweep's first trial and its prepared data variant."""
    config = trial_configs(sweep)[0]
    trial = plan_of(config, SweepStatic.of(sweep))
    hp = {k: v for k, v in trial.hp.items() if k != DATA_KEY}
    for key in ("epochs", "batch_size"):
        hp[key] = hp_of(sweep, hp, key)
    one = prepared[trial.variant]
    loop_config = {
        "method": sweep.method,
        "encoder": {"name": sweep.encoder["name"], "pooling": sweep.encoder["pooling"]},
        "hp": hp,
        "metric": sweep.objective.metric,
        "mode": sweep.objective.mode,
        "num_labels": one.num_labels,
    }
    return loop_config, one


def _calibration_key(sweep: Sweep, prepared: list) -> str:
    loop_config, one = _first_trial(sweep, prepared)
    text = json.dumps([socket.gethostname(), loop_config, getattr(one, "key", "")], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _calibrations_file() -> Path:
    return Path(cache_root()) / "calibrations.json"


def kept_calibration(sweep: Sweep, prepared: list) -> dict | None:
    """The calibration ``plan`` measured for this sweep's first trial on this host within a
    day, or None: what lets ``run`` print plan's estimate without calibrating again."""
    try:
        key = _calibration_key(sweep, prepared)
    except (AttributeError, KeyError, IndexError, TypeError):  # no first trial, or data without a key
        return None
    return kept_day.get(_calibrations_file(), key)


def calibrate_first_trial(sweep: Sweep, prepared: list) -> dict:
    """``trainables.calibration`` on the sweep's first trial and its data variant, kept a day
    (``kept_calibration``)."""
    loop_config, one = _first_trial(sweep, prepared)
    data = {"tables": load_splits(one.path), "num_labels": one.num_labels, "label_names": one.label_names}
    found = {**calibrate(loop_config, data), "when": time.time()}
    kept_day.put(_calibrations_file(), _calibration_key(sweep, prepared), found)
    return found
