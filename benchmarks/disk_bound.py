"""What the sweep folder holds at once while a grid with repeats runs, against its bound.

Issue 54, part 1 (disk). A tiny-BERT grid (CE on a 2-layer, 32-wide BERT with random weights,
BBC News few-shot k = 4, 100 learning rates × 3 seeds = 300 trials, 3 epochs, group ASHA with a
rung at epoch 1, the paper's reported point first, ``keep_models: 2``, 2 trials at a time) runs
through ``contrasweep run`` in a fresh process, into a fresh MLflow store and sweep folder. Every
second the parent counts the sweep folder's best-weight folders (``best-eNNNN``) and resume
states (``resume-eNNNN``) under the trials' state folders, and keeps the peaks. The bound
(``contrasweep.tracking.pruning``; ``plan``'s disk line) is

* best weights: 3 × the live trials (running or paused at a rung: ``max(max_concurrent,
  repeats)``) + the repeats of (keep_models + 1) configurations per setting + the reported
  point's repeats;
* resume states: 2 × the live trials + 1.

It also checks what the sweep selected and tested with what it kept: the run ends ``finished``,
each trial run FINISHED, and the selected configuration's repeats tested.

``--baseline REF`` runs the same sweep on a git worktree of REF first (the commit before the
change: it keeps every trial's weights and a resume state until the end).

Not a test (it starts Ray; one Ray instance at a time on this machine)::

    flock /tmp/contrasweep-ray.lock python benchmarks/disk_bound.py --baseline ac4113d
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "disk_bound.json"
BEST, RESUME = re.compile(r"^best-e\d+$"), re.compile(r"^resume-e\d+$")


def spec_dict(model: str, configurations: int, seeds: int, concurrent: int) -> dict:
    lrs = [round(1.0e-5 * (1.05 ** i), 9) for i in range(configurations)]
    return {
        "method": "ce",
        "paper": {"title": "benchmarks/disk_bound.py", "where": "the sweep folder's peak against its bound"},
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4, "seed": 0, "test_fraction": 0.05},
        "encoder": {"name": model, "pooling": "mean", "max_length": 32},
        "reported": {"lr": lrs[0]},
        "grid": {"lr": lrs},
        "fixed": {"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0},
        "sweep": {"searcher": "grid", "metric": "val/accuracy", "mode": "max", "scheduler": "asha",
                  "asha": {"grace_period": 1, "reduction_factor": 3}, "seeds": list(range(seeds)),
                  "max_concurrent": concurrent, "resources": {"cpu": 1}},
        "tracking": {"experiment": "disk-bound", "keep_models": 2},
    }


def count(folder: Path) -> tuple[int, int]:
    """(best-weight folders, resume states) under the sweep folder's trial state folders now."""
    best = resume = 0
    for state in folder.glob("tune*/*/state"):
        try:
            names = os.listdir(state)
        except OSError:  # removed meanwhile
            continue
        best += sum(1 for n in names if BEST.match(n))
        resume += sum(1 for n in names if RESUME.match(n))
    return best, resume


def run_side(checkout: Path, model: str, work: Path, cache: Path, args) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "spec.yaml"
    spec.write_text(yaml.safe_dump(spec_dict(model, args.configurations, args.seeds, args.concurrent), sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "platform"), str(checkout)]),
           "CONTRASWEEP_CACHE": str(cache), "CONTRASWEEP_HOME": str(work / "sweeps"), "PYTHONWARNINGS": "ignore"}
    uri = f"sqlite:///{work / 'mlflow.db'}"
    folder = work / "sweeps" / "disk"
    peaks = {"best": 0, "resume": 0, "samples": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            best, resume = count(folder)
            peaks.update(best=max(peaks["best"], best), resume=max(peaks["resume"], resume),
                         samples=peaks["samples"] + 1)
            done.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    began = time.perf_counter()
    sampler.start()
    proc = subprocess.run([sys.executable, "-m", "contrasweep", "run", str(spec), "--name", "disk", "--tracking-uri", uri,
                           "--no-tsne"], env=env, cwd=work, capture_output=True, text=True)
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"the sweep of {checkout} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    record = json.loads((folder / "tracking.json").read_text())
    trials = record["trials"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    parent = client.get_run(record["parent_run_id"])
    return {"wall_s": time.perf_counter() - began, "peak_best": peaks["best"], "peak_resume": peaks["resume"],
            "samples": peaks["samples"], "trials": len(trials),
            "complete": sum(1 for e in trials.values() if e.get("outcome") == "complete"),
            "stopped": sum(1 for e in trials.values() if e.get("outcome") == "stopped"),
            "pruned": sum(1 for e in trials.values() if e.get("weights") == "pruned"),
            "status": json.loads((folder / "sweep.json").read_text())["status"],
            "selected_test": parent.data.metrics.get("best_config/mean/test/accuracy"),
            "tests": {k: v for k, v in (record.get("tests") or {}).items() if k in ("evaluated", "pruned")},
            "summary": [line for line in proc.stderr.splitlines() + proc.stdout.splitlines()
                        if "test split" in line or "MLflow models" in line or "disk" in line][-6:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configurations", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--baseline", metavar="REF", help="also run a git worktree of REF, first")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]
    from conftest import build_tiny_bert
    from trial_scale import worktree

    base = Path(tempfile.mkdtemp(prefix="disk-bound-"))
    model = str(build_tiny_bert(base / "tiny-bert"))
    cache = base / "cache"
    live = max(args.concurrent, args.seeds)
    bound = {"best": 3 * live + (2 + 1) * args.seeds + args.seeds, "resume": 2 * live + 1}
    sides = {"this": ROOT}
    if args.baseline:
        sides = {"baseline": worktree(args.baseline, base), "this": ROOT}
    rows = {}
    for side, checkout in sides.items():
        rows[side] = row = run_side(checkout, model, base / side, cache, args)
        print(f"{side:8s} {row['trials']} trials ({row['complete']} complete, {row['stopped']} stopped by group ASHA) "
              f"in {row['wall_s']:.0f} s, {row['samples']} samples: peak {row['peak_best']} best-weight folders "
              f"(bound {bound['best']}), {row['peak_resume']} resume states (bound {bound['resume']}); "
              f"{row['pruned']} pruned; status {row['status']}; selected test {row['selected_test']}", flush=True)
    result = {"commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True).stdout.strip(), "baseline": args.baseline,
              "when": time.strftime("%Y-%m-%d %H:%M"), "configurations": args.configurations, "seeds": args.seeds,
              "concurrent": args.concurrent, "live": live, "bound": bound, "rows": rows,
              "within_bound": rows["this"]["peak_best"] <= bound["best"] and rows["this"]["peak_resume"] <= bound["resume"]}
    if args.baseline:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(sides["baseline"])], check=False)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"within the bound: {result['within_bound']}; written: {args.out}")


if __name__ == "__main__":
    main()
