"""What a sweep concludes at paper scale (issue 69): a no-op grid of ``trials / 10`` learning
rates × 10 seeds through the real driver, *with* what ``paper_scale.py`` leaves out: the test
phase (selection on the sweep run, kept models, the registry) and ``report``; then checked
against every trial run the store holds.

The trials train nothing (``paper_scale.noop_trial``: one epoch, made-up metrics that depend on
the learning rate and seed, a ``test/accuracy`` of its own); the spec is ``paper_scale``'s grid
kind (CE, group ASHA, ``evaluation.test: all``, 2 trials at a time). Timed apart: Tune's run, the
test phase (``runner.test_phase.after_tune``), and the report (``dashboards.report.build``, no t-SNE).

Checked against the store, read with ``mlflow.search_runs`` (MLflow's own paging, not the
project's ``search_all``):

- the sweep run's ``best_config/n_repeats`` is the seeds' count (10);
- its ``best_config/mean/best/val/accuracy`` equals the best configuration mean computed from
  every trial run (the mean of ``best/val/accuracy`` over each configuration's repeats);
- the report's configurations table (its CSV) lists every configuration, each complete with
  all its repeats; ``sweep.json`` counts every trial.

On 90ffea8 a 5,100-trial grid exited 0 and ``report`` said ``no sweep … in MLflow`` (every read
stopped at the newest 5,000 runs). Not a test (it starts Ray)::

    flock /tmp/contrasweep-ray.lock python benchmarks/result_at_scale.py --trials 5100
    flock /tmp/contrasweep-ray.lock python benchmarks/result_at_scale.py --trials 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paper_scale import noop_trial, spec_dict, swap_driver  # benchmarks/paper_scale.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "result_at_scale.json"
SEEDS = 10


def child(trials: int, model: str, work: Path) -> dict:
    import yaml

    from contrasweep.folder import sweeps
    from contrasweep.folder.record import read as read_record
    from contrasweep.runner import ray_start, test_phase
    from contrasweep.runner import tune as run_tune
    from contrasweep.search.registry import load_spec

    work.mkdir(parents=True, exist_ok=True)
    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict("grid", trials, model), sort_keys=False))
    timed: dict[str, float] = {}
    after_tune = test_phase.after_tune

    def timed_after(*args, **kwargs):
        phase = after_tune(*args, **kwargs)

        def run():
            timed["tune_s"] = time.perf_counter() - began
            start = time.perf_counter()
            phase()
            timed["test_phase_s"] = time.perf_counter() - start
        return run

    test_phase.after_tune = timed_after
    swap_driver(noop_trial)
    ray_start.init_ray(None, dashboard=False)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(work / "sweeps"))
    began = time.perf_counter()
    run_tune.run(load_spec(path), "scale", root, uri, None)

    from dashboards.report import build

    parent_id = read_record(root / "scale" / "tracking.json")["parent_run_id"]
    start = time.perf_counter()
    built = build(uri, "scale", work / "report", tsne=False, run_ids={"scale": parent_id})
    timed["report_s"] = time.perf_counter() - start
    found = {**timed, **check(uri, parent_id, trials, built.sections[1].files[0])}
    found["sweep_json_trials"] = json.loads((root / "scale" / "sweep.json").read_text()).get("trials")
    found["ok"] = found["ok"] and found["sweep_json_trials"] == trials
    return found


def check(uri: str, parent_id: str, trials: int, configurations_csv: str) -> dict:
    """The sweep run's selection and the report's configurations table (its CSV) against every trial run."""
    import csv

    import mlflow
    import numpy as np

    client = mlflow.tracking.MlflowClient(uri)
    parent = client.get_run(parent_id)
    mlflow.set_tracking_uri(uri)
    frame = mlflow.search_runs(experiment_ids=[parent.info.experiment_id], max_results=10 * trials,
                               filter_string=f"tags.`contrasweep.sweep_run` = '{parent_id}'")
    by_config = frame.groupby("params.hp.lr")["metrics.best/val/accuracy"].agg(["mean", "count"])
    best = by_config.sort_values("mean", ascending=False).iloc[0]
    with open(configurations_csv, encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["outcome"] != "chance level"]
    sizes = sorted({(int(r["repeats"]), r["outcome"]) for r in rows})
    found = {
        "trial_runs_in_store": len(frame), "configurations_in_store": len(by_config),
        "sweep_run_n_repeats": parent.data.metrics.get("best_config/n_repeats"),
        "sweep_run_mean": parent.data.metrics.get("best_config/mean/best/val/accuracy"),
        "best_mean_from_store": float(best["mean"]), "best_count_from_store": int(best["count"]),
        "report_configurations": len(rows), "report_repeats_and_outcomes": sizes,
    }
    found["ok"] = bool(
        found["trial_runs_in_store"] == trials and found["configurations_in_store"] == trials // SEEDS
        and found["sweep_run_n_repeats"] == SEEDS and found["sweep_run_mean"] is not None
        and np.isclose(found["sweep_run_mean"], found["best_mean_from_store"])
        and found["report_configurations"] == trials // SEEDS and sizes == [(SEEDS, "complete")])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5100)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trials % SEEDS:
        parser.error(f"--trials {args.trials}: allowed: a multiple of {SEEDS} (configurations × {SEEDS} seeds)")
    if args.child:
        found = child(args.trials, args.model, Path(args.work))
        (Path(args.work) / "found.json").write_text(json.dumps(found))
        return

    sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
    from conftest import build_tiny_bert

    base = Path(tempfile.mkdtemp(prefix="result-at-scale-"))
    model = str(build_tiny_bert(base / "tiny-bert"))
    work = base / "work"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT), str(Path(__file__).parent)]),
           "CONTRASWEEP_CACHE": str(base / "cache"), "PYTHONWARNINGS": "ignore"}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--trials", str(args.trials),
                           "--model", model, "--work", str(work)], env=env, cwd=base, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the sweep of {args.trials} trials failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    found = json.loads((work / "found.json").read_text())
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    found.update(commit=commit, trials=args.trials, wall_s=time.perf_counter() - began, when=time.strftime("%Y-%m-%d %H:%M"))
    print(json.dumps(found, indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text()) if out.exists() else []
    out.write_text(json.dumps([*previous, found], indent=1))
    if not found["ok"]:
        raise SystemExit("the sweep's selection or report does not match the store (above)")


if __name__ == "__main__":
    main()
