"""Where one trial's slot goes: process start, training, evaluation, checkpoints, bookkeeping.

Issue 41 asks, where a GPU is available, for one few-shot MiniLM trial's slot time split into
process start, training, evaluation, checkpoints and bookkeeping: the trainables alone, as a lent
GPU machine has no Ray, MLflow or Optuna. This runs that trial (CE by default, LaCon's few-shot
protocol on bundled BBC News, k = 20 per class, 10 epochs, batch 16: ``epoch_costs.py``'s few-shot
arm) in a fresh Python process, ``--runs`` times in a row, and splits each run's wall time, read
from this (the parent) process, into

* ``start``: interpreter start and the trial's import chain (``trainables.loop``, its session,
  the method's module; what a fresh Ray worker pays before the trainable runs);
* ``data``: reading the prepared Arrow splits (the sweep's driver prepares them once; done here
  beforehand, so tokenisation is not in the slot);
* ``setup``: the loop's ``time/setup_s`` (building the method from the encoder's weights, moving it
  to the device, the optimiser);
* ``train``, ``stage2``, ``eval``, ``checkpoint``, ``test``: the loop's own ``time/<phase>_s``
  summed over the epochs;
* ``bookkeeping``: the rest of ``train()`` (reports, metric assembly, the resume state's
  bookkeeping between phases);
* ``exit``: from ``train()``'s return to the process's exit, as the parent sees it.

The first run pays a cold file cache and, on a GPU, the driver's first context; later runs are
what a sweep's later trials pay. Not a test (the GPU suite's CPU dry run runs it); run it as

    python benchmarks/trial_slot.py --device cuda              # MiniLM, CE, 10 epochs, 2 runs
    python benchmarks/trial_slot.py --model tiny --epochs 2    # a quick check on CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "trial_slot.json"
PARTS = ("start", "data", "setup", "train", "stage2", "eval", "checkpoint", "test", "bookkeeping", "exit")
LOOP_PHASES = ("setup", "train", "stage2", "eval", "checkpoint", "test")


def child(job_path: str) -> None:
    """The trial process: import the chain, read the splits, train, write the loop's phase times."""
    job = json.loads(Path(job_path).read_text())
    sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "benchmarks")]
    from trainables.loop import train
    from trainables.registry import get_method

    get_method(job["config"]["method"])  # the method's module, as the trial's first call imports it
    imported = time.time()
    from contrasweep.data import load_splits

    data = {"tables": load_splits(job["data_path"]), "num_labels": job["num_labels"], "label_names": job["label_names"]}
    loaded = time.time()
    from epoch_costs import PruningSession  # Tune's pruning of superseded states (after the timed imports)

    session = PruningSession(job["folder"], use_gpu=job["device"] == "cuda")
    started = time.perf_counter()
    final = train(job["config"], data, session)
    wall = time.perf_counter() - started
    sums = {p: sum(float(r.get(f"time/{p}_s", 0.0)) for r in session.reports) for p in LOOP_PHASES}
    Path(job["result"]).write_text(json.dumps({
        "imported": imported, "loaded": loaded, "train_wall_s": wall, "phases": sums, "epochs": len(session.reports),
        "best": final.get(f"best/{job['config']['metric']}"), "device": str(session.device), "done": time.time()}))


def one_run(job: dict, work: Path, index: int) -> dict:
    folder = work / f"run-{index}"
    job = {**job, "folder": str(folder), "result": str(work / f"result-{index}.json")}
    (work / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    launched = time.time()
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(work / "job.json")], check=True, env=env)
    ended = time.time()
    shutil.rmtree(folder, ignore_errors=True)
    got = json.loads(Path(job["result"]).read_text())
    phases = got["phases"]
    split = {"start": got["imported"] - launched, "data": got["loaded"] - got["imported"], **phases,
             "bookkeeping": got["train_wall_s"] - sum(phases.values()), "exit": ended - got["done"]}
    slot = ended - launched
    print(f"run {index}: slot {slot:6.2f} s = " + " + ".join(f"{p} {split[p]:.2f}" for p in PARTS)
          + f"  (best {got['best']})", flush=True)
    return {"run": index, "slot_s": slot, "split_s": split, "epochs": got["epochs"], "best": got["best"],
            "device": got["device"], "unaccounted_s": slot - sum(split.values())}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda where there is one")
    parser.add_argument("--model", choices=("default", "tiny"), default="default")
    parser.add_argument("--method", default="ce", help="an arm of epoch_costs.py (default ce)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--k", type=int, default=20, help="few-shot examples per class")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--runs", type=int, default=2, help="trial processes in a row (the first is cold)")
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 4), help="torch threads per trial")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return {}
    if args.runs < 1 or args.epochs < 1:
        parser.error("--runs and --epochs: at least 1")

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
    import torch

    import epoch_costs

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.method not in epoch_costs.ARMS:
        parser.error(f"--method: {args.method!r}; allowed: {', '.join(epoch_costs.ARMS)}")
    work = Path(tempfile.mkdtemp(prefix="contrasweep-trial-slot-"))
    try:
        if args.model == "tiny":
            from conftest import build_tiny_bert

            model = str(build_tiny_bert(work / "tiny-bert"))
        else:
            model = "default"
        costs = argparse.Namespace(k=args.k, full_rows=1000, batch_few=16, batch_full=32, eval_batch_size=128,
                                   max_length=args.max_length, threads=args.threads, seed=0, epochs=args.epochs)
        datasets: dict = {}
        config, _, rows = epoch_costs.build_trial(args.method, "few_shot", costs, model,
                                                  epoch_costs.hidden_size(model), datasets)
        prepared = next(iter(datasets.values()))[1]
        job = {"config": config, "data_path": str(prepared.path), "num_labels": prepared.num_labels,
               "label_names": list(prepared.label_names), "device": args.device}
        runs = [one_run(job, work, i) for i in range(args.runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    later = runs[1:] or runs
    median = {p: statistics.median(r["split_s"][p] for r in later) for p in PARTS}
    slot = statistics.median(r["slot_s"] for r in later)
    record = {"benchmark": "trial_slot", "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
              "torch": torch.__version__, "model": args.model, "method": args.method, "epochs": args.epochs,
              "rows": rows, "runs": runs, "warm_median": {"slot_s": slot, "split_s": median,
                                                          "shares": {p: median[p] / slot for p in PARTS}}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"one trial's slot ({args.method}, {args.epochs} epochs, {rows['train']} training rows, {record['device']}), "
          f"runs after the first (median): {slot:.2f} s")
    print("| " + " | ".join(PARTS) + " |\n|" + "---|" * len(PARTS))
    print("| " + " | ".join(f"{median[p]:.2f} s ({100 * median[p] / slot:.0f} %)" for p in PARTS) + " |")
    print(f"results: {out}")
    return record


if __name__ == "__main__":
    main()
