"""Every GPU goal of the project in one command: the trainables alone, side by side in one run.

For a machine with a GPU and without Ray, MLflow or Optuna (torch, transformers, ``trainables/``;
the epochs part prepares its data with ``contrasweep.data``, which needs ``datasets``, and reads
the bundled MiniLM and BBC News: ``benchmarks/gpu_machine.sh`` packs what a lent machine lacks):

1. ``step``: the loop's training step (``trainables.step.TrainStep``) against a hand-written
   bf16 PyTorch step, BERT-base, batch 32 × 128 (``step_throughput.py --model base``);
   goal >= 0.95 of its examples/s, per method.
2. ``packing``: 4 trial processes packed on one GPU (``resources: {gpu: 0.25}``) against one
   (``gpu_packing.py``); goal >= 3× the aggregate examples/s, eager and compiled.
3. ``epochs``: one epoch of every method (every arm of ``epoch_costs.py``: SCL-MOO with both
   solvers, ABALONE with L_MSC and BCE) on the GPU, few-shot BBC News, with its cost split
   (training, second stage, evaluation, checkpoint; the test pass once). No goal: what a trial's
   time goes to on a GPU.
4. ``compile``: ``compile: true`` against eager for the same TrainStep at batch 32 (the compiled
   run of ``step_throughput.py``, which times an eager TrainStep in the same rotation of blocks:
   the ratio is paired, not against part 1 minutes earlier); goal >= 1.5× examples/s.
5. ``slot``: one few-shot MiniLM trial (CE, 10 epochs) in a fresh process, twice, its slot split
   into process start, data, set-up, training, evaluation, checkpoints, test, bookkeeping and
   exit (``trial_slot.py``; issue 41). No goal: what a GPU trial's slot goes to.

Each part runs in this process and writes its own JSON next to the suite's; a part that fails is
recorded with its error and the others go on. The suite writes ``gpu_suite.json`` (every part's
record and one row per goal) and ``gpu_suite.md`` (the rows as docs/performance.md's table
takes them). Not a test; run it as

    python benchmarks/gpu_suite.py                          # a GPU machine: BERT-base, bf16, 100 steps
    python benchmarks/gpu_suite.py --device cpu --steps 2   # a dry run of the mechanics (tiny BERT; the numbers mean nothing)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT / "benchmarks"), str(ROOT), str(ROOT / "platform")):
    if path not in sys.path:
        sys.path.insert(0, path)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "gpu_suite"
STEP_METHODS = "ce,ce_scl"
PARTS = ("step", "packing", "epochs", "compile", "slot")
GOALS = {"step": 0.95, "packing": 3.0, "compile": 1.5}


def step_part(args, out: Path, compile_: bool) -> dict:
    import step_throughput

    argv = ["--model", args.model, "--device", args.device, "--methods", STEP_METHODS, "--batch-size", "32",
            "--steps", str(args.steps), "--out", str(out / f"step_throughput{'_compiled' if compile_ else ''}.json")]
    if args.device == "cpu":
        argv += ["--warmup", "1", "--repeats", "1"]
    return step_throughput.main(argv + (["--compile"] if compile_ else []))


def packing_part(args, out: Path) -> dict:
    import gpu_packing

    # a CPU dry run checks the mechanics on 2 cores, eager only (the compile part compiles)
    dry = [] if args.device == "cuda" else ["--no-compile"]
    return gpu_packing.main(["--model", args.model, "--device", args.device, "--steps", str(args.steps),
                             "--warmup", str(min(10, args.steps)), "--counts", "1,4" if args.device == "cuda" else "1,2",
                             "--out", str(out / "gpu_packing.json"), *dry])


def epochs_part(args, out: Path) -> dict:
    import epoch_costs

    model = "tiny" if args.model == "tiny" else "default"  # epoch_costs' models: the bundled MiniLM or the tiny BERT
    dry = [] if args.device == "cuda" else ["--k", "4", "--max-length", "32"]  # the mechanics, on fewer rows
    return epoch_costs.main(["--model", model, "--device", args.device, "--epochs", "1", "--sizes", "few_shot",
                             "--out", str(out / "epoch_costs.json"), *dry])


def slot_part(args, out: Path) -> dict:
    import trial_slot

    model = "tiny" if args.model == "tiny" else "default"
    dry = [] if args.device == "cuda" else ["--k", "4", "--max-length", "32", "--epochs", "1", "--runs", "1"]
    return trial_slot.main(["--model", model, "--device", args.device, "--out", str(out / "trial_slot.json"), *dry])


def run_part(name: str, fn, *fn_args) -> dict:
    started = time.perf_counter()
    print(f"\n== gpu_suite: {name} ==", flush=True)
    try:
        record = fn(*fn_args)
    except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
        traceback.print_exc()
        record = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    record["suite_seconds"] = time.perf_counter() - started
    return record


def goal_rows(parts: dict) -> list[dict]:
    """One row per goal: what was measured, the goal, PASS/MISS (or why nothing was measured)."""
    rows = []
    step, compiled = parts["step"], parts["compile"]
    for result in step.get("results", []):
        rows.append(_row(f"TrainStep / hand-written step ({result['method']}, {result['train_step_mode']})",
                         result["ratio"], GOALS["step"]))
    if "error" in step:
        rows.append(_row("TrainStep / hand-written step", None, GOALS["step"], step["error"]))
    for result in compiled.get("results", []):
        note = "paired blocks in one run" if result["train_step_compiled"] else "TrainStep fell back to eager"
        rows.append(_row(f"compile / eager TrainStep, batch 32 ({result['method']})",
                         result.get("compile_ratio"), GOALS["compile"], note))
    if "error" in compiled:
        rows.append(_row("compile / eager TrainStep, batch 32", None, GOALS["compile"], compiled["error"]))
    packing = parts["packing"]
    for compile_ in (False, True):
        runs = {r["trials"]: r for r in packing.get("runs", []) if r["compile_requested"] == compile_}
        if 1 in runs and max(runs) > 1:
            top = max(runs)
            rows.append(_row(f"{top} packed trials / 1 ({'compiled' if compile_ else 'eager'})",
                             runs[top]["examples_per_s"] / runs[1]["examples_per_s"], GOALS["packing"],
                             "" if top == 4 else f"the goal is for 4 trials; {top} here"))
    if "runs" not in packing:
        rows.append(_row("4 packed trials / 1", None, GOALS["packing"], packing.get("error") or packing.get("skipped", "")))
    return rows


def _row(what: str, value: float | None, goal: float, note: str = "") -> dict:
    verdict = "not measured" if value is None else ("PASS" if value >= goal else "MISS")
    return {"what": what, "value": value, "goal": goal, "verdict": verdict, "note": note}


def markdown(record: dict) -> str:
    lines = [f"GPU suite on {record['device']} (torch {record['torch']}, model {record['model']}, "
             f"{record['steps']} timed steps per side)", "",
             "| goal | measured | goal | verdict |", "|---|---|---|---|"]
    for row in record["goals"]:
        value = "–" if row["value"] is None else f"{row['value']:.2f}"
        note = f" ({row['note']})" if row["note"] else ""
        lines.append(f"| {row['what']} | {value} | ≥ {row['goal']:g} | {row['verdict']}{note} |")
    epochs = record["parts"]["epochs"]
    if epochs.get("results"):
        lines += ["", "One epoch per method (few-shot BBC News; seconds):", "",
                  "| method | epoch | train | stage 2 | eval | checkpoint | test (once) |", "|---|---|---|---|---|---|---|"]
        for r in epochs["results"]:
            a = r["all"]
            lines.append(f"| {r['arm']} | {a['epoch_s']:.2f} | {a['train_s']:.2f} | {a['stage2_s']:.2f} | "
                         f"{a['eval_s']:.2f} | {a['checkpoint_s']:.2f} | {r['test_s']:.2f} |")
    elif "error" in epochs:
        lines += ["", f"One epoch per method: not measured ({epochs['error']})"]
    slot = record["parts"]["slot"]
    if slot.get("runs"):
        parts = list(slot["runs"][0]["split_s"])
        lines += ["", f"One trial's slot ({slot['method']}, {slot['epochs']} epochs, few-shot BBC News; seconds, "
                  "each run a fresh process):", "",
                  "| run | slot | " + " | ".join(parts) + " |", "|---|---|" + "---|" * len(parts)]
        for run in slot["runs"]:
            lines.append(f"| {run['run']} | {run['slot_s']:.2f} | " + " | ".join(f"{run['split_s'][p]:.2f}" for p in parts) + " |")
    elif "error" in slot:
        lines += ["", f"One trial's slot: not measured ({slot['error']})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="cuda (default where there is one) or cpu: a dry run of the mechanics")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per side and part (GPU 100)")
    parser.add_argument("--model", choices=("base", "default", "tiny"), default=None,
                        help="the step, packing and compile parts' encoder (default: base on a GPU, tiny on CPU)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="which parts, comma-separated (default: all five: step, packing, epochs, compile, slot)")
    parser.add_argument("--out-dir", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)

    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU on this machine; allowed: --device cpu (a dry run)")
    args.steps = args.steps or (100 if args.device == "cuda" else 2)
    args.model = args.model or ("base" if args.device == "cuda" else "tiny")
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown:
        parser.error(f"--parts: {unknown[0]!r}; allowed: {', '.join(PARTS)}")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    builders = {"step": lambda: step_part(args, out, False), "packing": lambda: packing_part(args, out),
                "epochs": lambda: epochs_part(args, out), "compile": lambda: step_part(args, out, True),
                "slot": lambda: slot_part(args, out)}
    parts = {name: (run_part(name, builders[name]) if name in wanted else {"error": "not run (--parts)"})
             for name in PARTS}
    imported = sorted({m.split(".")[0] for m in sys.modules} & {"ray", "mlflow", "optuna"})
    record = {
        "benchmark": "gpu_suite",
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu (dry run: the numbers mean nothing)",
        "torch": torch.__version__, "model": args.model, "steps": args.steps, "parts": parts,
        "imported_orchestration": imported,
    }
    record["goals"] = goal_rows(parts)
    (out / "gpu_suite.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    table = markdown(record)
    (out / "gpu_suite.md").write_text(table)
    print("\n" + table)
    print(f"results: {out / 'gpu_suite.json'}, {out / 'gpu_suite.md'}")
    return record


if __name__ == "__main__":
    main()
