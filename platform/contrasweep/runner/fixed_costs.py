"""What a sweep costs besides its trials' own work, measured on the machine (or the cluster) that
will run it (docs/architecture.md, "Plan before launching"; issue 41). ``contrasweep plan`` used
constants measured on a slower day: on a faster one it estimated a tiny 2-trial sweep at 39 s
against 19 s measured.

One probe, in a fresh Python process as ``contrasweep run`` is one, measures:

* ``driver_s``: the interpreter's start and what the driver imports before Ray starts (the Tune
  launcher, MLflow, Optuna, the report's plotting), read from outside the process;
* ``ray_start_s``: Ray's start (or the connection to ``--address``);
* on that Ray, a Tune run of ``4 × slots`` trials, ``slots`` at a time on 1 CPU each, under the
  sweeps' scheduler (``fifo.LiveFIFO``) and the sweeps'
  MLflow tracker (writing to a scratch SQLite store). Each trial imports the trial's import
  chain (the loop, its Tune session, the method) and reports one epoch. ``worker_start_s``:
  from the Tune run's start to a slot's first trial's end, less a later trial's time on that
  slot (its process, its imports, Tune's own start); ``trial_s``: the median time on its slot
  of a trial after the first, start to next start (Tune's scheduling and saves, the tracker's
  writes); ``end_s``: from the last trial's end to the Tune run's (the tracker's end).

A GPU trial's CUDA start is not in the probe (its trials ask for CPUs only); the calibration's
set-up holds the method's build on this machine.

The result is kept for a day in the data cache's folder, per host, Ray address, slots and method
(``contrasweep plan --remeasure`` measures again); the plan says when it was measured.

May import: ``contrasweep.runner.ray_start``, ``contrasweep.search.fifo``,
``contrasweep.tracking.tracker``, ``contrasweep.spec.static``, ``contrasweep.data.cache`` (the
cache's folder); Ray;
``trainables`` (inside the probe's trials).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contrasweep.data.cache import cache_root
from contrasweep.runner import kept_day
from contrasweep.runner.ray_start import init_ray
from contrasweep.spec.static import SweepStatic
from trainables.registry import get_method

# what the driver imports before Ray starts (contrasweep.cli's run: the launcher and the tracker;
# the summary and report: MLflow's client, Optuna's importance, matplotlib)
DRIVER_IMPORTS = ("contrasweep.runner.tune", "contrasweep.tracking.tracker", "mlflow", "optuna", "matplotlib.pyplot")


def cache_file() -> Path:
    return Path(cache_root()) / "fixed_costs.json"


def kept(method: str, slots: int, address: str | None) -> dict | None:
    """The fixed costs ``measured`` keeps for these (a day old at most), or None: never a probe."""
    found = kept_day.get(cache_file(), _key(method, slots, address))
    return {**found, "kept": True} if found else None


def _key(method: str, slots: int, address: str | None) -> str:
    return f"{socket.gethostname()}|{address or 'local'}|{slots}|{method}"


def measured(method: str, slots: int, address: str | None, remeasure: bool = False) -> dict:
    """The fixed costs of a sweep of ``method`` with ``slots`` trials at a time: kept ones (a
    day old at most, same host, address and slots), or a new probe's."""
    found = None if remeasure else kept(method, slots, address)
    if found:
        return found
    found = probe(method, slots, address)
    kept_day.put(cache_file(), _key(method, slots, address), found)
    return {**found, "kept": False}


def probe(method: str, slots: int, address: str | None) -> dict:
    """The probe in a fresh process (this one has imported what a plan needs, not what a run does)."""
    with tempfile.TemporaryDirectory(prefix="contrasweep-probe-") as work:
        out = Path(work) / "probe.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [
            sys.executable,
            "-m",
            "contrasweep.runner.fixed_costs",
            "--method",
            method,
            "--slots",
            str(slots),
            "--work",
            work,
            "--out",
            str(out),
        ] + (["--address", address] if address else [])
        began = time.perf_counter()
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(
                f"the fixed-cost probe failed (exit {done.returncode}): "
                f"{(done.stderr.strip().splitlines() or [''])[-1]}"
            )
        inner = json.loads(out.read_text())
    # the interpreter's start and the driver's imports: everything before the probe's own clock
    inner["driver_s"] = wall - inner.pop("inner_s") + inner.pop("imports_s")
    inner["when"] = time.time()
    return inner


# -- the probe process --------------------------------------------------------------------------
def _trial(config: dict) -> None:
    """A trial that imports what a sweep's trial imports (``runner.executor.run_trial``: the loop,
    its Tune session, the method) and reports one epoch."""
    from ray import tune

    from trainables.loop import train  # noqa: F401 - imported for its cost
    from trainables.sessions import TuneSession  # noqa: F401

    get_method(config["method"])
    tune.report({"epoch": 1, "val/accuracy": 0.5, "pid": os.getpid()})


def _run_probe(method: str, slots: int, address: str | None, work: Path) -> dict:
    began = time.perf_counter()
    import importlib

    for name in DRIVER_IMPORTS:
        importlib.import_module(name)
    imports_s = time.perf_counter() - began

    import ray
    from ray import tune

    from contrasweep.search.fifo import LiveFIFO
    from contrasweep.tracking.tracker import MlflowTracker

    started = time.perf_counter()
    init_ray(address, num_cpus=None if address else max(1, slots), dashboard=False)
    ray_start_s = time.perf_counter() - started
    ends: dict[str, tuple[float, float, int]] = {}

    class Clock(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            ends[trial.trial_id] = (time.perf_counter(), 0.0, 0)

        def on_trial_complete(self, iteration, trials, trial, **info):
            start = ends[trial.trial_id][0]
            ends[trial.trial_id] = (start, time.perf_counter(), int((trial.last_result or {}).get("pid", 0)))

    (work / "sweep").mkdir()
    tracker = MlflowTracker(
        work / "sweep",
        f"sqlite:///{work / 'mlflow.db'}",
        "probe",
        "probe",
        {"method": method},
        {"method": method},
        "val/accuracy",
        "max",
        static=SweepStatic(method=method),
    )
    trials = 4 * slots
    began = time.perf_counter()
    tuner = tune.Tuner(
        tune.with_resources(_trial, {"cpu": 1}),
        param_space={
            "method": method,
            "hp": {"epochs": 1, "lr": tune.grid_search([1e-5 * (i + 1) for i in range(trials)])},
        },
        tune_config=tune.TuneConfig(
            max_concurrent_trials=slots, scheduler=LiveFIFO(), reuse_actors=True
        ),  # as a sweep of one-worker trials does (runner.tune)
        run_config=tune.RunConfig(
            storage_path=str(work / "tune"), name="probe", callbacks=[tracker, Clock()], verbose=0
        ),
    )
    grid = tuner.fit()
    end_s = time.perf_counter() - max(e for _, e, _ in ends.values())  # the tracker's and Tune's end
    if grid.errors:
        raise RuntimeError(f"a probe trial failed: {grid.errors[0]}")
    if not address:
        ray.shutdown()
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for start, end, pid in ends.values():
        by_pid.setdefault(pid, []).append((start, end))
    later, firsts = [], []
    for spans in by_pid.values():
        spans.sort()
        firsts.append(spans[0][1] - began)
        later += [b[0] - a[0] for a, b in zip(spans[1:], spans[2:])]  # the first span holds the imports
    trial_s = statistics.median(later) if later else statistics.median(e - s for s, e, _ in ends.values())
    return {
        "imports_s": imports_s,
        "ray_start_s": ray_start_s,
        "worker_start_s": max(0.0, statistics.mean(firsts) - trial_s),
        "trial_s": trial_s,
        "end_s": end_s,
        "trials": trials,
        "slots": slots,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--method", required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--address")
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    found = _run_probe(args.method, args.slots, args.address, Path(args.work))
    found["inner_s"] = time.perf_counter() - began
    Path(args.out).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
