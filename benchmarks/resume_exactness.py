"""The searcher-resume table of issue 25, measured: a searcher sweep's driver SIGKILLed after a
number of trials ended, then `contrasweep resume NAME`, as a new user would run them; what
MLflow, the Optuna study and the console hold afterwards.

Set-up (the issue's): the tiny random BERT of the tests, BBC News few-shot k = 2, 3 epochs,
`sweep.max_concurrent: 2`, `scheduler: none`, real `contrasweep` processes, a real local Ray
and MLflow sqlite store. Rows: optuna (TPE) with seeds [0, 1] and 6 suggestions, killed once 6
trials ended; optuna with seed [0] and 8 suggestions, killed after 4; random with seeds [0, 1]
and 6 suggestions, killed after 7. Prints one Markdown row per case:

    python benchmarks/resume_exactness.py [--work DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]

CASES = [("optuna", [0, 1], 6, 6), ("optuna", [0], 8, 4), ("random", [0, 1], 6, 7)]  # searcher, seeds, suggestions, kill after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=None, help="folder for the sweeps and stores (default: a temporary one)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from conftest import build_tiny_bert

    work = Path(args.work or tempfile.mkdtemp(prefix="resume-exactness-"))
    model = str(build_tiny_bert(work / "tiny"))
    print("| searcher, seeds | killed after | trial runs | configuration runs | study trials | resume exit | progress |")
    print("|---|---|---|---|---|---|---|")
    for searcher, seeds, suggestions, kill_after in CASES:
        print(row(work / f"{searcher}-{len(seeds)}", model, searcher, seeds, suggestions, kill_after), flush=True)


def row(folder: Path, model: str, searcher: str, seeds: list[int], suggestions: int, kill_after: int) -> str:
    from conftest import write_spec

    folder.mkdir(parents=True)
    spec = write_spec(folder / "spec.yaml", model, data={"k": 2}, grid=None, search={"lr": {"loguniform": [1.0e-5, 1.0e-2]}},
                      fixed={"epochs": 3}, sweep={"searcher": searcher, "seeds": seeds, "num_samples": suggestions,
                                                  "max_concurrent": 2, "scheduler": "none"})
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(folder / "sweeps")
    command = [sys.executable, "-m", "contrasweep"]
    proc = subprocess.Popen([*command, "run", str(spec), "--name", "s"], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    from contrasweep.folder.record import read as read_record

    record = folder / "sweeps" / "s" / "tracking.json"
    ended = 0
    while proc.poll() is None and ended < kill_after:
        time.sleep(0.05)
        try:
            ended = sum("status" in e for e in read_record(record)["trials"].values())
        except (OSError, ValueError, KeyError):
            pass
    os.killpg(proc.pid, signal.SIGKILL)
    first, _ = proc.communicate()
    resumed = subprocess.run([*command, "resume", "s"], cwd=folder, env=env, capture_output=True, text=True)
    counts = [(int(a), int(b)) for a, b in re.findall(r"\[contrasweep\] (\d+)/(\d+) ", first + resumed.stdout + resumed.stderr)]
    progress = max(counts, default=(0, 0))
    return (f"| {searcher}, seeds {seeds}, {suggestions} suggestions | {ended} trials ended | {runs(folder, 'trial')} "
            f"| {runs(folder, 'configuration')} | {study(folder)} | {resumed.returncode} | at most {progress[0]}/{progress[1]} |")


def runs(folder: Path, kind: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    found = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=5000)
             if r.data.tags.get("contrasweep.kind") == kind]
    states = collections.Counter(r.info.status for r in found)
    return f"{len(found)} ({', '.join(f'{n} {s}' for s, n in sorted(states.items()))})"


def study(folder: Path) -> str:
    import optuna

    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{folder / 'sweeps' / 's' / 'optuna.db'}").trials
    states = collections.Counter(t.state.name for t in trials)
    return f"{len(trials)}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))


if __name__ == "__main__":
    main()
