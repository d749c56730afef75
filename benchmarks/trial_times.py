"""Where each trial of a finished sweep spent its time, read back from MLflow: the trial run's
wall time (run start to end), its optimisation seconds (``cost/train_s``), the sums of the
loop's per-epoch phases (``time/<phase>_s``: evaluation, second stage, checkpoints, the test
split once at the end) and the test metric. Not a test:

    python benchmarks/trial_times.py NAME [--experiment E] [--tracking-uri URI] [--metric test/accuracy]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

PHASES = ("setup", "train", "stage2", "eval", "checkpoint", "test")


def trial_rows(uri: str, experiment: str, name: str, metric: str) -> list[dict]:
    from dashboards.trials import history, parent_runs, trial_runs

    parents = parent_runs(uri, experiment, name)
    if not parents:
        raise SystemExit(f"no sweep {name!r} in experiment {experiment!r} at {uri}")
    rows = []
    for run in trial_runs(uri, parents[0].info.run_id):
        row = {"trial": run.info.run_name, "wall_s": (run.info.end_time - run.info.start_time) / 1000,
               "train_s": run.data.metrics.get("cost/train_s"), metric: run.data.metrics.get(metric)}
        for phase in PHASES:
            row[f"{phase}_s"] = sum(v for _, v in history(uri, run.info.run_id, f"time/{phase}_s"))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--experiment", default="contrasweep")
    parser.add_argument("--tracking-uri", default=f"sqlite:///{Path.cwd() / 'mlflow.db'}")
    parser.add_argument("--metric", default="test/accuracy")
    parser.add_argument("--out", default=None, help="JSON file for the rows")
    args = parser.parse_args()
    rows = trial_rows(args.tracking_uri, args.experiment, args.name, args.metric)
    print("| trial | wall s | train s | " + " | ".join(f"{p} s" for p in PHASES) + f" | {args.metric} |")
    print("|---|" + "---|" * (len(PHASES) + 3))
    for r in rows:
        print(f"| {r['trial']} | {r['wall_s']:.1f} | {r['train_s'] or 0:.1f} | "
              + " | ".join(f"{r[p + '_s']:.1f}" for p in PHASES) + f" | {r[args.metric] or float('nan'):.4f} |")
    walls, values = [r["wall_s"] for r in rows], [r[args.metric] for r in rows if r[args.metric] is not None]
    if values:
        spread = statistics.pstdev(values) if len(values) > 1 else 0.0
        print(f"{args.metric}: {statistics.mean(values):.3f} ± {spread:.3f} over {len(values)} trials")
    print(f"trial wall times: {min(walls):.0f}–{max(walls):.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
