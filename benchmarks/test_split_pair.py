"""The test split where results are reported against the test split in every trial: one sweep
spec run with ``evaluation.test: reported`` and with ``evaluation.test: all``, side by side in one
run (issue 29).

Both sweeps run in this process through ``contrasweep.runner.tune.run`` (what ``contrasweep run``
does, without the report it builds afterwards), on the same local Ray (started once, before
either is timed), the same tokenised data (the cache, filled before either is timed) and a fresh
MLflow store each. ``reported`` runs first.

Per sweep: its wall time (``tune.run``: Tune, the trials, tracking, selection, the registry and,
for ``reported``, the test phase), the test passes it ran, the selected configuration, its test
metric mean ± std over its repeats (the configuration run's ``mean/``/``std/``), and the trials'
time split (mean per trial of the MLflow run's wall time and of the loop's phases,
``benchmarks/trial_times.py``). Then the ratio ``reported / all`` (goal ≤ 0.6) and whether the
selected configuration and its test numbers are the same under both. Not a test; run it as

    flock /tmp/contrasweep-ray.lock python benchmarks/test_split_pair.py                # tweet sentiment, MiniLM
    flock /tmp/contrasweep-ray.lock python benchmarks/test_split_pair.py --spec S --set fixed.epochs=1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODES = ("reported", "all")


def one_sweep(spec: str, overrides: list[str], mode: str, work: Path) -> dict:
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec.load import load_spec
    from trial_times import PHASES, trial_rows

    sweep = load_spec(spec, [*overrides, f"evaluation.test={mode}"])
    uri = f"sqlite:///{work / mode / 'mlflow.db'}"
    (work / mode).mkdir(parents=True)
    root = sweeps.sweeps_root(str(work / mode / "sweeps"))
    started = time.perf_counter()
    tune.run(sweep, mode, root, uri, None)
    wall = time.perf_counter() - started
    from contrasweep.folder.record import read

    state = read(root / mode / "tracking.json")
    from contrasweep.tracking.store import get_client

    client = get_client(uri)
    parent = client.get_run(state["parent_run_id"])
    chosen = client.get_run(parent.data.tags["contrasweep.best_config"])
    metric = "test/" + sweep.objective.metric.removeprefix("val/")
    rows = trial_rows(uri, sweep.experiment, mode, metric)
    split = {"wall_s": statistics.mean(r["wall_s"] for r in rows),
             **{f"{p}_s": statistics.mean(r[f"{p}_s"] for r in rows) for p in PHASES}}
    tested = sum(1 for r in rows if r[metric] is not None)
    return {"mode": mode, "wall_s": wall, "trials": len(rows), "test_passes": tested,
            "selected": {k[3:]: v for k, v in chosen.data.params.items() if k.startswith("hp.") and k[3:] in sweep.varied},
            "test_mean": chosen.data.metrics.get(f"mean/{metric}"), "test_std": chosen.data.metrics.get(f"std/{metric}"),
            "metric": metric, "trial_split": split}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "benchmarks" / "tweet_sentiment_ce.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default="test_split_pair.json")
    args = parser.parse_args()

    from contrasweep.runner.ray_env import local_ray_environment

    local_ray_environment()  # before Ray's import: init_ray's loopback and token mode
    from contrasweep.runner.inputs import prepare_data
    from contrasweep.runner.ray_start import init_ray
    from contrasweep.spec.load import load_spec

    prepare_data(load_spec(args.spec, args.overrides))  # the cache both sweeps hit
    init_ray(None, num_cpus=os.cpu_count())
    work = Path(tempfile.mkdtemp(prefix="test-split-pair-"))
    try:
        results = {mode: one_sweep(args.spec, args.overrides, mode, work) for mode in MODES}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    reported, every = results["reported"], results["all"]
    out = {"spec": args.spec, "overrides": args.overrides, "results": results,
           "ratio": reported["wall_s"] / every["wall_s"],
           "same_selection": reported["selected"] == every["selected"],
           "same_test": reported["test_mean"] == every["test_mean"] and reported["test_std"] == every["test_std"]}
    Path(args.out).write_text(json.dumps(out, indent=1))
    for r in results.values():
        split = ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in r["trial_split"].items() if v)
        print(f"{r['mode']:8}: {r['wall_s']:.0f} s, {r['trials']} trials, {r['test_passes']} test passes; selected "
              f"{r['selected']}: {r['metric']} {r['test_mean']:.4f} ± {r['test_std']:.4f}; per trial: {split}")
    print(f"reported / all wall time: {out['ratio']:.3f} (goal <= 0.6); same selection: {out['same_selection']}, "
          f"same test numbers: {out['same_test']}")


if __name__ == "__main__":
    main()
