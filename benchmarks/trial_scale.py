"""What a sweep costs per trial as it grows: the tiny random sweep at 100, 500 and 1,000 trials.

Issue 41. The same sweep (CE on a 2-layer, 32-wide BERT with random weights and the MiniLM
tokenizer, BBC News few-shot k = 4, 1 epoch of ~0.06 s of training, one seed, ``searcher:
random`` over a log-uniform learning rate, ``scheduler: none``, 2 trials at a time on 1 CPU
each) runs at each size in a fresh Python process: ``init_ray`` and ``contrasweep.runner.tune.run``
as ``contrasweep run`` calls them (the report ``run`` writes afterwards is left out: it is timed
by ``contrasweep report`` and not per trial), into a fresh MLflow SQLite store and sweep folder.
The data cache is written once, by a 2-trial warm-up sweep, so that every measured sweep is a
cache hit.

Per size: the sweep's wall (Ray start to ``tune.run``'s return), the driver's seconds inside
the MLflow tracker's Tune callbacks (``MlflowTracker`` hooks, timed by wrapping them in the
child process) per trial, the driver process's CPU seconds per trial (its loop and every thread
it runs), the runs FINISHED, the MLflow store's size (database + artifact folder), the models
logged in it (``MLmodel`` files), the sweep folder's size and how many trial processes ran the
trials (Tune hands a finished trial's process the next trial: the imports are paid once per
process, not per trial). From the
walls: the marginal wall per trial over 100–500 and 500–1,000, their ratio (flat = 1), and the
fixed cost per sweep (wall at 100 − 100 × the 100–500 marginal).

``--baseline REF`` runs the same sizes on a git worktree of REF, interleaved with this checkout
(REF then this checkout at each size: drift and other load hit both), and prints this
checkout's marginal over REF's: the issue's "≤ 0.35× the commit before your change".

Not a test (it starts Ray; one Ray instance at a time on this machine)::

    flock /tmp/contrasweep-ray.lock python benchmarks/trial_scale.py                      # 100, 500, 1000
    flock /tmp/contrasweep-ray.lock python benchmarks/trial_scale.py --baseline 3ee990c --sizes 100 500 1000
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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "trial_scale.json"
HOOKS = ("setup", "on_step_begin", "on_trial_start", "on_trial_result", "on_trial_complete", "on_trial_error",
         "on_experiment_end")
GOALS = {"marginal_s": 0.10, "flatness": 1.15, "fixed_s": 10.0, "vs_baseline": 0.35}


def spec_dict(model: str, trials: int) -> dict:
    return {
        "method": "ce",
        "paper": {"title": "benchmarks/trial_scale.py", "where": "per-trial cost as a sweep grows"},
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4, "seed": 0, "test_fraction": 0.05},
        "encoder": {"name": model, "pooling": "mean", "max_length": 32},
        "search": {"lr": {"loguniform": [1.0e-5, 1.0e-3]}},
        "fixed": {"epochs": 1, "batch_size": 8, "warmup_ratio": 0.0},
        "sweep": {"searcher": "random", "num_samples": trials, "metric": "val/accuracy", "mode": "max",
                  "scheduler": "none", "seeds": [0], "max_concurrent": 2, "resources": {"cpu": 1}},
        "tracking": {"experiment": "trial-scale"},
    }


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


# -- the child: one sweep in a process of its own --------------------------------------------------
def child(trials: int, model: str, work: Path) -> dict:
    from contrasweep.runner.ray_env import local_ray_environment

    local_ray_environment()  # before Ray's import: init_ray's loopback and token mode
    import functools

    import yaml

    from contrasweep.folder import sweeps
    from contrasweep.runner import ray_start, tune
    from contrasweep.spec import load as spec
    from contrasweep.tracking import tracker

    spent = dict.fromkeys(HOOKS, 0.0)

    def timed(name, hook):
        @functools.wraps(hook)
        def wrapper(self, *args, **kwargs):
            began = time.perf_counter()
            try:
                return hook(self, *args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - began
        return wrapper

    for name in HOOKS:
        setattr(tracker.MlflowTracker, name, timed(name, getattr(tracker.MlflowTracker, name)))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(model, trials), sort_keys=False))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    began, cpu = time.perf_counter(), time.process_time()
    sweep = spec.load_spec(path)
    ray_start.init_ray(None, dashboard=False)
    ray_s = time.perf_counter() - began
    results = tune.run(sweep, "scale", sweeps.sweeps_root(str(work / "sweeps")), uri, None)
    wall, driver_cpu = time.perf_counter() - began, time.process_time() - cpu

    from mlflow.tracking import MlflowClient

    from contrasweep.tracking.store import trial_runs
    from dashboards.trials import parent_runs

    client = MlflowClient(uri)
    runs = trial_runs(client, parent_runs(uri, "trial-scale", "scale")[0].info.run_id)
    artifacts = work / "mlartifacts"
    pids = {(r.metrics or {}).get("pid") for r in results} - {None}  # Tune reuses a trial process for the next trial
    return {"trials": trials, "wall_s": wall, "ray_start_s": ray_s, "errors": sum(r.error is not None for r in results),
            "trial_processes": len(pids),
            "runs": len(runs), "finished": sum(r.info.status == "FINISHED" for r in runs),
            "tracker_s": spent, "tracker_total_s": sum(spent.values()),
            "driver_cpu_s": driver_cpu,
            "store_bytes": (work / "mlflow.db").stat().st_size + folder_bytes(artifacts),
            "db_bytes": (work / "mlflow.db").stat().st_size, "artifact_bytes": folder_bytes(artifacts),
            "models": sum(1 for _ in artifacts.rglob("MLmodel")) if artifacts.exists() else 0,
            "sweep_folder_bytes": folder_bytes(work / "sweeps")}


# -- the parent ----------------------------------------------------------------------------------
def run_child(checkout: Path, trials: int, model: str, work: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "platform"), str(checkout)]),
           "CONTRASWEEP_CACHE": str(cache), "PYTHONWARNINGS": "ignore"}
    out = work / "child.json"
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(trials), "--model", model,
                           "--work", str(work), "--out", str(out)], env=env, cwd=work.parent,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the {trials}-trial sweep of {checkout} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    result["process_s"] = time.perf_counter() - began
    return result


def summary(rows: list[dict]) -> dict:
    by = {r["trials"]: r for r in rows}
    sizes = sorted(by)
    out = {"sizes": sizes}
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[1]
        m1 = (by[b]["wall_s"] - by[a]["wall_s"]) / (b - a)
        out.update(marginal_s=m1, fixed_s=by[a]["wall_s"] - a * m1)
        out[f"marginal_{a}_{b}_s"] = m1
    if len(sizes) >= 3:
        b, c = sizes[1], sizes[2]
        m2 = (by[c]["wall_s"] - by[b]["wall_s"]) / (c - b)
        out[f"marginal_{b}_{c}_s"] = m2
        out["flatness"] = m2 / out["marginal_s"]
        out["marginal_s"] = (by[c]["wall_s"] - by[sizes[0]]["wall_s"]) / (c - sizes[0])
    out["tracker_per_trial_s"] = {n: by[n]["tracker_total_s"] / n for n in sizes}
    out["driver_cpu_per_trial_s"] = {n: by[n]["driver_cpu_s"] / n for n in sizes}
    out["store_bytes"] = {n: by[n]["store_bytes"] for n in sizes}
    out["models"] = {n: by[n]["models"] for n in sizes}
    out["all_finished"] = all(by[n]["finished"] == by[n]["runs"] == n and not by[n]["errors"] for n in sizes)
    return out


def worktree(ref: str, base: Path) -> Path:
    path = base / f"baseline-{ref}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), ref], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--baseline", metavar="REF", help="also run a git worktree of REF, interleaved")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.out).write_text(json.dumps(child(args.child, args.model, Path(args.work))))
        return

    sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
    from conftest import build_tiny_bert

    base = Path(tempfile.mkdtemp(prefix="trial-scale-"))
    model = str(build_tiny_bert(base / "tiny-bert"))
    cache = base / "cache"
    sides = {"this": ROOT}
    if args.baseline:
        sides = {"baseline": worktree(args.baseline, base), "this": ROOT}
    run_child(ROOT, 2, model, base / "warm-up", cache)  # writes the data cache: every measured sweep hits it
    rows: dict[str, list[dict]] = {side: [] for side in sides}
    partial = Path(args.out).with_suffix(".partial.json")  # each row as it comes: a long run stopped early keeps them
    partial.parent.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        for side, checkout in sides.items():
            row = run_child(checkout, n, model, base / f"{side}-{n}", cache)
            rows[side].append(row)
            partial.write_text(json.dumps(rows, indent=1))
            print(f"{side:8s} {n:5d} trials: wall {row['wall_s']:7.1f} s (Ray start {row['ray_start_s']:.1f} s), tracker "
                  f"{row['tracker_total_s'] / n * 1000:6.1f} ms/trial on Tune's loop, driver CPU "
                  f"{row['driver_cpu_s'] / n * 1000:6.1f} ms/trial, "
                  f"{row['finished']}/{n} FINISHED, store "
                  f"{row['store_bytes'] / 1e6:8.1f} MB, {row['models']} models, sweep folder "
                  f"{row['sweep_folder_bytes'] / 1e6:.1f} MB, {row['trial_processes']} trial processes", flush=True)
    result = {"commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True).stdout.strip(), "baseline": args.baseline, "when": time.strftime("%Y-%m-%d %H:%M"),
              "goals": GOALS, "rows": rows, "summary": {side: summary(r) for side, r in rows.items()}}
    if args.baseline:
        result["vs_baseline"] = result["summary"]["this"]["marginal_s"] / result["summary"]["baseline"]["marginal_s"]
    for side, s in result["summary"].items():
        print(f"{side}: marginal {s.get('marginal_s', float('nan')):.3f} s/trial (goal <= {GOALS['marginal_s']}), "
              f"flatness {s.get('flatness', float('nan')):.2f} (goal <= {GOALS['flatness']}), fixed "
              f"{s.get('fixed_s', float('nan')):.1f} s (goal <= {GOALS['fixed_s']}), all FINISHED {s['all_finished']}")
    if args.baseline:
        print(f"this / baseline marginal per trial: {result['vs_baseline']:.2f} (goal <= {GOALS['vs_baseline']})")
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(sides["baseline"])], check=False)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
